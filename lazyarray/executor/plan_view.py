"""Show a memory plan: its numbers and a timeline of buffer lifetimes, as SVG / XHTML.

The timeline has one row per buffer and one column per step of the schedule. Each value that
owns memory is a bar on its buffer's row, from the step that writes it to the last step that
reads it (or to the ``out`` column when it is handed to the caller), labelled with its name:

* a bar's height and place within its row are the value's bytes within its buffer (offset and
  size): bars above each other at the same steps are values side by side in one buffer;
* bars that follow each other at the same height are reuse: the later value took those bytes
  once the earlier one was dead;
* bars that touch at a step (marked ``⟲``) are in-place writes: the step wrote its output over
  an input that died there;
* values the kernels allocate at run time (sparse outputs, data-dependent shapes) have no
  buffer, so they are listed under the picture instead of drawn.

Only the plan's fields are read (``values``, ``steps``, ``start``, ``end``, ``buffer_of``, ...),
never arrays or graphs, so this module sits beside ``plan.py`` and uses only the SVG writer.

>>> from lazyarray.executor.plan import Step, Value, plan_memory
>>> vals = [Value(64, external=True, name="x"), Value(64, name="y"), Value(64, escapes=True, name="z")]
>>> plan = plan_memory(vals, [Step((0,), (1,)), Step((1,), (2,), inplace=((0, 0),))])
>>> svg = plan_svg(plan)
>>> svg.startswith("<svg") and ">y<" in svg and "⟲" in svg
True
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..graph import svg as S

# A ``plan.MemoryPlan``, read field by field. plan.py imports this module (``MemoryPlan._repr_html_``),
# so this module names the type without importing it: imports point one way (plan -> plan_view).
MemoryPlan = Any

MAX_STEPS = 400  # columns drawn; longer schedules show their first MAX_STEPS steps
# Narrowest step column: a ResNet's 92 steps squeezed into 900 px left no room for a label or a
# readable axis; wider, the chart grows past the cell and its frame scrolls (HTML_CSS keeps the
# front end from shrinking it back).
MIN_COL = 24.0  # every step labelled on the axis (_tick_every)
MAX_RUNTIME_LISTED = 50

_MARGIN = 14
_FONT = 12
_BAR_FONT = 10.5
_ROW = 24  # row pitch
_BAR = 17  # bar height
_AXIS = 22  # height of the step axis under the rows
_HEAD = 44  # caption + legend above the rows

CSS = "".join([
    f"svg.la-p{{font-family:{S.SANS};font-size:{_FONT}px;background:#fff}}",
    ".la-p text{fill:#111827}",
    ".la-p .la-cap{fill:#374151}",
    f".la-p .la-lab{{font-family:{S.MONO};font-size:11px;fill:#374151}}",
    ".la-p .la-ax text{fill:#6b7280;font-size:10px;text-anchor:middle}",
    ".la-p .la-ax path{stroke:#d1d5db;stroke-width:1}",
    ".la-p .la-row{fill:#f8fafc}",
    ".la-p .la-v rect{stroke-width:1.2}",
    f".la-p .la-v text{{font-size:{_BAR_FONT}px;fill:#111827;pointer-events:none}}",
    *(f".la-p .la-d{i} rect{{stroke:{s};fill:{f}}}" for i, (s, f) in enumerate(S.DEVICE_PALETTE)),
    ".la-p .la-out rect{stroke-width:2.6}",
    ".la-p .la-ip{fill:#b91c1c;font-size:11px;font-weight:700;text-anchor:middle}",
    ".la-p .la-lg text{fill:#4b5563;font-size:11px}",
    ".la-p .la-v:hover rect{filter:brightness(0.93)}",
])

HTML_CSS = (
    f".la-plan{{font-family:{S.SANS};font-size:12.5px;color:#111827;margin:2px 0}}"
    ".la-plan .la-hd{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin-bottom:6px}"
    ".la-plan .la-tag{border-radius:9px;padding:1px 8px;background:#eef2f7;color:#374151;"
    f"font-family:{S.MONO};font-size:11.5px}}"
    ".la-plan .la-kind{background:#0f766e;color:#fff;font-weight:600}"
    ".la-plan .la-note{color:#4b5563;margin:4px 0}"
    ".la-plan svg{max-width:none!important}"  # JupyterLab shrinks SVGs to the cell (svg {max-width:100%}): scroll
    ".la-plan ul{margin:2px 0 6px 18px;padding:0}"
    f".la-plan code{{font-family:{S.MONO};font-size:11.5px;background:#f1f5f9;border-radius:3px;padding:0 3px}}"
)


def values_text(items: list[str], width: int = 160) -> str:
    """``items`` joined by commas, cut to about ``width`` characters: the first values and a count
    of the rest (``MemoryPlan.table``'s values column: a buffer reused by a ResNet's 92 steps held a
    5,000-character line; the timeline, ``plan._repr_html_()``, shows every value).

    >>> values_text([f"v{i}[{i}..{i + 1}]" for i in range(100)], width=40)
    'v0[0..1], v1[1..2], v2[2..3], v3[3..4], … 96 more'
    """
    shown: list[str] = []
    used = 0
    for i, item in enumerate(items):
        if shown and used + len(item) + 2 > width and i < len(items) - 1:
            return ", ".join(shown) + f", … {len(items) - i} more"
        shown.append(item)
        used += len(item) + 2
    return ", ".join(shown)


def fmt_bytes(n: int) -> str:
    """``1.5 MiB``, ``640 B``: sizes for people (the exact count is in the tooltips)."""
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def device_index(devices) -> dict:
    """Palette index per device: CPUs before GPUs, by id (as the graph drawing colours them)."""
    def key(d):
        return (getattr(d, "kind", str(d)) != "cpu", getattr(d, "kind", ""), getattr(d, "id", 0), str(d))
    return {d: i % len(S.DEVICE_PALETTE) for i, d in enumerate(sorted(set(devices), key=key))}


def value_name(plan: MemoryPlan, v: int) -> str:
    return plan.values[v].name or f"v{v}"


def numbers(plan: MemoryPlan) -> list[tuple[str, str, str]]:
    """``(field, value, explanation)`` rows: peak, lower bound, naive, buffers."""
    lb = plan.lower_bound_bytes
    ratio = f"{plan.peak_bytes / lb:.2f}× the lower bound" if lb else "nothing to allocate"
    saved = 1 - plan.peak_bytes / plan.naive_bytes if plan.naive_bytes else 0.0
    return [
        ("peak_bytes", f"{plan.peak_bytes:,}", f"{fmt_bytes(plan.peak_bytes)}: all planned buffers ({ratio})"),
        ("lower_bound_bytes", f"{lb:,}", f"{fmt_bytes(lb)}: the largest set of values live at once"),
        ("naive_bytes", f"{plan.naive_bytes:,}",
         f"{fmt_bytes(plan.naive_bytes)}: one buffer per value (reuse saves {saved:.0%})"),
        ("num_buffers", f"{plan.num_buffers}", (f"{len(plan.inplace)} in-place writes, {len(plan.steps)} "
                                                f"steps, {len(plan.runtime_values)} allocated at run time")),
    ] + ([("concats_in_place", f"{len(plan.concats_in_place)}", "concatenations whose parts' steps write "
           "their result's memory (concat_in_place.py): the parts are views of it")] if plan.concats_in_place else [])


# -- the timeline ---------------------------------------------------------------------------------
class _Grid(NamedTuple):
    """Where a plan timeline's cells go: step columns of width ``col`` from ``x0``, buffer rows from
    ``top``; ``shown`` steps drawn (``cut``: fewer than the plan has), ``n_cols`` columns."""
    x0: float
    top: float
    col: float
    shown: int
    cut: bool
    n_cols: int

    def x_of(self, step: float) -> float:
        return self.x0 + step * self.col


def plan_svg(plan: MemoryPlan, *, title: str | None = None, max_steps: int = MAX_STEPS) -> str:
    """The timeline of ``plan`` as an SVG document (one row per buffer, x = step index)."""
    n_steps = len(plan.steps)
    shown = min(n_steps, max_steps)
    cut = shown < n_steps
    n_cols = shown + (0 if cut else 1)  # the last column is "out": values handed to the caller
    col = max(MIN_COL, min(60.0, 900.0 / max(n_cols, 1)))
    devices = device_index(plan.buffer_device)
    labels = [f"#{b} {plan.buffer_device[b]} {fmt_bytes(size)}" for b, size in enumerate(plan.buffer_size)]
    label_w = max([S.text_width(s, 11, mono=True) for s in labels] + [60.0]) + 12
    grid = _Grid(_MARGIN + label_w, _MARGIN + _HEAD, col, shown, cut, n_cols)
    width = grid.x0 + n_cols * col + _MARGIN
    height = grid.top + max(plan.num_buffers, 1) * _ROW + _AXIS + _MARGIN
    caption = _caption(plan, title, shown, cut)
    legend, legend_w = _legend(devices)
    width = max(width, _MARGIN * 2 + S.text_width(caption, _FONT), _MARGIN * 2 + legend_w)
    doc = S.SvgDoc(width, height, css=CSS, root_cls="la-p", label=caption)
    doc.add(S.text(_MARGIN, _MARGIN + 11, caption, cls="la-cap"), legend)
    rows = []
    for b, lab in enumerate(labels):
        y = grid.top + b * _ROW
        rows.append(S.rect(grid.x0, y, n_cols * col, _BAR + 2, cls="la-row"))
        tag = " (out)" if b in plan.escaping_buffers else ""
        rows.append(S.text(_MARGIN, y + 13, lab + tag, cls="la-lab"))
    doc.add(*rows)
    doc.add(_step_axis(plan, grid))
    producer = {}  # value -> step name
    for i, st in enumerate(plan.steps):
        for o in st.outputs:
            producer[o] = (i, st.name)
    inplace_over = {o: i for _, i, o in plan.inplace}
    bars, marks = [], []
    for v in range(len(plan.values)):
        b = plan.buffer_of[v]
        if b is None or plan.base[v] != v or plan.start[v] < 0 or plan.start[v] >= shown:
            continue
        bar, left, y = _value_bar(plan, v, grid)
        bars.append(S.group(bar, cls=f"la-v la-d{devices[plan.buffer_device[b]]}" +
                            (" la-out" if plan.values[v].escapes else ""),
                            tip=_tip(plan, v, producer, inplace_over)))
        if v in inplace_over:
            marks.append(S.text(left, y - 1.5, "⟲", cls="la-ip"))
    doc.add(*bars, *marks)
    return doc.render()


def _step_axis(plan: MemoryPlan, grid: _Grid) -> str:
    """The step axis under the rows: ticks and step numbers (every few steps), then "out"."""
    y_axis = grid.top + max(plan.num_buffers, 1) * _ROW
    every = _tick_every(grid.col)
    steps = range(0, grid.shown, every)
    ticks = [f"M{S.num(grid.x_of(i + 0.5))} {S.num(grid.top - 3)}V{S.num(y_axis)}" for i in steps]
    axis = [S.path("".join(ticks)) if ticks else ""]
    axis += [S.text(grid.x_of(i + 0.5), y_axis + 12, str(i)) for i in steps]
    if not grid.cut:
        axis.append(S.text(grid.x_of(grid.shown + 0.5), y_axis + 12, "out"))
    return S.group(axis, cls="la-ax")


def _value_bar(plan: MemoryPlan, v: int, grid: _Grid) -> tuple:
    """``(svg, left, top)`` of value ``v``'s bar: from the step that makes it to its last use, its
    height and place within the row its bytes within its buffer (offset, size), named when it fits."""
    b = plan.buffer_of[v]
    col, shown = grid.col, grid.shown
    s, e = plan.start[v], max(plan.end[v], plan.start[v])
    left = grid.x_of(s + 0.5)
    right = grid.x_of(min(e, shown) + 0.5) if e > s else left + col * 0.45
    if grid.cut and e >= shown:
        right = grid.x_of(shown)
    right = max(right, left + 3)
    size = max(plan.buffer_size[b], 1)
    off = plan.offset_of[v] or 0 if plan.offset_of else 0
    h = max(_BAR * min(plan.values[v].nbytes / size, 1.0), 3.0)
    y = grid.top + b * _ROW + 1 + min(_BAR * off / size, _BAR - h)
    room = int((right - left - 6) / (_BAR_FONT * S.SANS_CHAR))
    body = S.rect(left, y, right - left, h, rx=3 if h >= 8 else 1)
    if room >= 2 and h >= 12:
        body += S.text(left + 4, y + 12.5, S.clip(value_name(plan, v), room))
    return body, left, y


def _caption(plan: MemoryPlan, title: str | None, shown: int, cut: bool) -> str:
    head = f"{title} — " if title else ""
    n = len(plan.steps)
    steps = f"steps 0–{shown - 1} of {n:,} drawn" if cut else f"{n:,} step{'s' if n != 1 else ''}"
    rt = len(plan.runtime_values)
    extra = f", {rt} allocated at run time (listed below)" if rt else ""
    return (f"{head}{plan.num_buffers} buffer{'s' if plan.num_buffers != 1 else ''}, {steps}{extra}; "
            f"peak {fmt_bytes(plan.peak_bytes)}, lower bound {fmt_bytes(plan.lower_bound_bytes)}, "
            f"no reuse {fmt_bytes(plan.naive_bytes)}")


def _legend(devices: dict) -> tuple[str, float]:
    y = _MARGIN + 21
    x = float(_MARGIN)
    parts = []
    entries = [(f"la-v la-d{i}", str(d)) for d, i in devices.items()]
    d0 = f" la-d{min(devices.values(), default=0)}"
    entries.append((f"la-v la-out{d0}", "handed to the caller"))
    for cls, label in entries:
        parts.append(S.group(S.rect(0, 0, 20, 12, rx=3), cls=cls, dx=x, dy=y))
        parts.append(S.text(x + 25, y + 10, label))
        x += 25 + S.text_width(label, 11) + 14
    parts.append(S.text(x + 5, y + 10.5, "⟲", cls="la-ip"))
    parts.append(S.text(x + 14, y + 10, "written in place over the bar before it"))
    x += 14 + S.text_width("written in place over the bar before it", 11)
    return '<g class="la-lg">' + "".join(parts) + "</g>", x - _MARGIN


def _tick_every(col: float) -> int:
    for k in (1, 2, 5, 10, 20, 50, 100, 200, 500):
        if k * col >= 24:
            return k
    return 1000


def _tip(plan: MemoryPlan, v: int, producer: dict, inplace_over: dict) -> str:
    val = plan.values[v]
    s, e = plan.start[v], plan.end[v]
    last = "handed to the caller" if val.escapes else f"last read at step {e}"
    step, op = producer.get(v, (s, ""))
    at = plan.offset_of[v] if plan.offset_of and plan.offset_of[v] else 0
    text = (f"{value_name(plan, v)}: {val.nbytes:,} bytes in buffer #{plan.buffer_of[v]} "
            f"({plan.buffer_size[plan.buffer_of[v]]:,} bytes) at offset {at:,}; written at step {step}"
            f"{' (' + op + ')' if op and op != val.name else ''}, {last}")
    if v in inplace_over:
        text += f"; in place over {value_name(plan, inplace_over[v])}"
    views = [value_name(plan, w) for w in range(len(plan.values)) if plan.base[w] == v and w != v]
    if views:
        text += f"; views: {', '.join(views[:6])}{' …' if len(views) > 6 else ''}"
    return text


# -- HTML -----------------------------------------------------------------------------------------
def plan_html(plan: MemoryPlan, *, title: str = "memory plan", max_steps: int = MAX_STEPS) -> str:
    """``MemoryPlan._repr_html_``: the numbers, the timeline, then the values allocated at run time."""
    return f'<div class="la-plan"><style>{S.esc(HTML_CSS)}</style>{plan_body(plan, title, max_steps)}</div>'


def plan_body(plan: MemoryPlan, title: str = "memory plan", max_steps: int = MAX_STEPS) -> str:
    """The inside of ``plan_html`` (no stylesheet), for pages that show several plans."""
    tags = [f'<span class="la-tag la-kind">{S.esc(title)}</span>']
    tags += [f'<span class="la-tag" title={S.attr(why)}>{S.esc(k)} = {S.esc(v)}</span>'
             for k, v, why in numbers(plan)]
    parts = [f'<div class="la-hd">{"".join(tags)}</div>']
    if plan.steps:
        parts.append(f'<div style="overflow:auto;max-height:560px">{plan_svg(plan, max_steps=max_steps)}</div>')
    else:
        parts.append('<div class="la-note">No steps: the graph only passes its inputs through.</div>')
    rt = plan.runtime_values
    if rt:
        devs = {value_name(plan, i): plan.values[i].device for i, v in enumerate(plan.values) if v.runtime}
        items = "".join(f"<li><code>{S.esc(nm)}</code> ({S.esc(why)}, {S.esc(devs.get(nm, '?'))})</li>"
                        for nm, why in rt[:MAX_RUNTIME_LISTED])
        more = f"<li>… and {len(rt) - MAX_RUNTIME_LISTED:,} more</li>" if len(rt) > MAX_RUNTIME_LISTED else ""
        parts.append(f'<div class="la-note">Allocated by their kernels at run time (their size depends '
                     f'on the data, so no buffer is planned for them):</div><ul>{items}{more}</ul>')
    return "".join(parts)
