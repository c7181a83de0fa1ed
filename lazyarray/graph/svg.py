"""A tiny SVG writer: escaped text, CSS classes in one ``<style>`` block, compact numbers.

Shared by the graph drawing (``draw.py``) and, later, the memory-plan timeline: both are
boxes, lines and labels, styled by class so the markup stays small. Everything is built as
strings (no DOM), which is what keeps a 1,000-node drawing well under a second.

>>> s = SvgDoc(120, 40, css=".b{fill:#eef}")
>>> s.add(rect(10, 10, 100, 20, cls="b", rx=4), text(60, 24, "a < b"))
>>> "a &lt; b" in s.render()
True
"""
from __future__ import annotations

SANS = 'ui-sans-serif,system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif'
MONO = 'ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace'

# (stroke, fill) per device, in the order devices are met: the graph drawing and the memory-plan
# timeline colour a device alike.
DEVICE_PALETTE = (
    ("#2563eb", "#dbeafe"), ("#16a34a", "#dcfce7"), ("#9333ea", "#f3e8ff"), ("#ea580c", "#ffedd5"),
    ("#0891b2", "#cffafe"), ("#db2777", "#fce7f3"), ("#ca8a04", "#fef9c3"), ("#475569", "#e2e8f0"),
)

# Approximate advance widths (px per character) for sizing boxes without font metrics.
SANS_CHAR = 0.58
MONO_CHAR = 0.61


# esc and attr do what xml.sax.saxutils' escape and quoteattr do, character for character
# (tests/graph/test_svg_escape.py checks it): importing xml.sax.saxutils imports urllib.request,
# http.client, email and ssl, ~7 MiB and ~20 ms that every ``import lazyarray`` paid.
def esc(s) -> str:
    """Text escaped for an SVG / XHTML text node."""
    return str(s).replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def attr(s) -> str:
    """A quoted, escaped attribute value (``"..."``; ``'...'`` when the value holds ``"`` but no ``'``)."""
    v = esc(s).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in v:
        return f'"{v}"'
    if "'" not in v:
        return f"'{v}'"
    return '"' + v.replace('"', "&quot;") + '"'


def num(v: float) -> str:
    """A coordinate with at most one decimal and no trailing ``.0`` (keeps the markup short)."""
    r = round(v, 1)
    return str(int(r)) if r == int(r) else str(r)


def text_width(s: str, size: float, mono: bool = False) -> float:
    """Estimated rendered width of ``s`` at font ``size``."""
    return len(s) * size * (MONO_CHAR if mono else SANS_CHAR)


def clip(s: str, limit: int) -> str:
    """``s`` cut to ``limit`` characters with an ellipsis."""
    return s if len(s) <= limit else s[: max(limit - 1, 1)] + "…"


def _cls(cls: str | None) -> str:
    return f' class="{cls}"' if cls else ""


def rect(x: float, y: float, w: float, h: float, cls: str | None = None, rx: float = 0) -> str:
    r = f' rx="{num(rx)}"' if rx else ""
    yy = f' y="{num(y)}"' if y else ""  # 0 is the default
    return f'<rect{_cls(cls)} x="{num(x)}"{yy} width="{num(w)}" height="{num(h)}"{r}/>'


def text(x: float, y: float, s: str, cls: str | None = None) -> str:
    return f'<text{_cls(cls)} x="{num(x)}" y="{num(y)}">{esc(s)}</text>'


def path(d: str, cls: str | None = None) -> str:
    return f'<path{_cls(cls)} d="{d}"/>'


def polygon(points: list[tuple[float, float]], cls: str | None = None) -> str:
    pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    return f'<polygon{_cls(cls)} points="{pts}"/>'


def title(s: str) -> str:
    """A tooltip for the enclosing element."""
    return f"<title>{esc(s)}</title>"


def group(children: list[str] | str, cls: str | None = None, dx: float = 0, dy: float = 0,
          tip: str | None = None) -> str:
    t = f' transform="translate({num(dx)},{num(dy)})"' if dx or dy else ""
    body = children if isinstance(children, str) else "".join(children)
    return f"<g{_cls(cls)}{t}>{title(tip) if tip else ''}{body}</g>"


class SvgDoc:
    """An SVG document: size, one stylesheet, ``<defs>``, then elements in paint order.

    ``root_cls`` is put on the ``<svg>`` element so the stylesheet can scope every selector to
    it: inline SVGs in a notebook share the page's CSS, so unscoped rules would leak.
    """

    def __init__(self, width: float, height: float, css: str = "", defs: str = "",
                 root_cls: str = "la-svg", label: str | None = None):
        self.width, self.height = width, height
        self.css, self.defs, self.root_cls, self.label = css, defs, root_cls, label
        self.parts: list[str] = []

    def add(self, *elements: str) -> None:
        self.parts.extend(elements)

    def render(self) -> str:
        w, h = num(self.width), num(self.height)
        aria = f' role="img" aria-label={attr(self.label)}' if self.label else ""
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="{self.root_cls}" width="{w}" '
                f'height="{h}" viewBox="0 0 {w} {h}"{aria}>')
        style = f"<style>{esc(self.css)}</style>" if self.css else ""
        defs = f"<defs>{self.defs}</defs>" if self.defs else ""
        return head + style + defs + "".join(self.parts) + "</svg>"
