"""Rich notebook display of arrays (``NDArray._repr_html_``), as well-formed XHTML fragments.

A normal array shows its values the way NumPy prints them (summarized past 1,000 elements)
under a row of chips: dtype, shape, device and size in bytes (as Dask's card does), and the
storage type only when it is not the dense default (its tooltip says what it means). A lazy array shows what is known without
computing: its static shape (``?`` for unknown dims), dtype, device, how many nodes are
pending behind it, what would compute it, and a drawing of the pending sub-graph.

Displaying never computes anything: only node avals and already computed values are read.
Functions take the array's fields (value, graph entry, device), not the ``NDArray`` type, so
this module sits below ``ndarray.py``.

>>> import lazyarray as la
>>> x = la.ones((2, 3))
>>> with la.deferred():
...     y = x * 2
>>> "lazy" in y._repr_html_() and y.is_lazy
True
"""
from __future__ import annotations

from html import escape

import numpy as np

from .device import Device, to_device
from .graph import draw
from .graph.node import Entry, Node
from .graph.traverse import topo_order
from .storage import densify, stype_of

DRAW_MAX_NODES = 40  # boxes in the pending-graph drawing of a lazy array
_PRINT = {"threshold": 1000, "edgeitems": 3, "separator": ", "}
_DENSE_LIMIT = 10_000  # sparse arrays up to this many elements are shown dense

_CSS = (
    ".la-arr{font-family:ui-sans-serif,system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,"
    "sans-serif;font-size:12.5px;color:#111827;margin:2px 0}"
    ".la-arr .la-hd{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin-bottom:4px}"
    ".la-arr .la-tag{border-radius:9px;padding:1px 8px;background:#eef2f7;color:#374151;"
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11.5px}"
    ".la-arr .la-kind{background:#2563eb;color:#fff;font-weight:600}"
    ".la-arr .la-lazy{background:#9333ea}"
    ".la-arr pre{margin:0;padding:6px 8px;background:#f8fafc;border-radius:6px;font-size:12px;"
    "line-height:1.35;overflow:auto;max-height:320px}"
    ".la-arr ul{margin:2px 0 6px 18px;padding:0}"
    ".la-arr code{font-size:11.5px;background:#f1f5f9;border-radius:3px;padding:0 3px}"
    ".la-arr .la-note{color:#4b5563;margin:4px 0 2px}"
    ".la-arr svg{max-width:none!important}"  # the pending graph keeps its size; its frame scrolls
)


def array_html(value, entry: Entry | None, device: Device, known=None) -> str:
    """HTML for an array with backend ``value`` (None while lazy), graph ``entry`` and ``device``;
    ``known(node)`` gives the values already computed (they are not pending)."""
    if value is not None:
        return _normal_html(value, device)
    return _lazy_html(entry, device, known or (lambda node: None))


def shape_text(shape) -> str:
    """``(2, 3)``, ``(?, 3)``, ``(5,)``; ``?`` marks dims unknown before computing."""
    dims = ["?" if d is None else str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def pending_nodes(entry: Entry, known) -> list[Node]:
    """Op nodes without values in the sub-graph behind ``entry`` (what computing it would run)."""
    order = topo_order([entry], stop=lambda n: n.op is None or known(n) is not None)
    return [n for n in order if n.op is not None and known(n) is None]


_STYPE_TIPS = {
    "csr": "storage type csr: compressed sparse rows (la.sparse); only the non-zero values are stored",
    "row_sparse": "storage type row_sparse: only the non-zero rows are stored (la.sparse)",
}


def bytes_text(n: int) -> str:
    """A byte count for people: ``24 B``, ``1.5 KiB``, ``3.0 MiB``, ``2.0 GiB``.

    >>> bytes_text(24), bytes_text(1536), bytes_text(3 * 2**20)
    ('24 B', '1.5 KiB', '3.0 MiB')
    """
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def _size_fields(shape, dtype, stype: str, stored: int | None = None) -> list[tuple[str, str]]:
    """The bytes chip (dense size, or what a sparse array stores) and a storage chip when not dense."""
    fields = []
    if shape is not None and None not in shape and dtype is not None:
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if stored is None:
            fields.append((f"{n:,} bytes ({int(np.prod(shape, dtype=np.int64)):,} elements x "
                           f"{np.dtype(dtype).itemsize} bytes)", bytes_text(n)))
        else:
            fields.append((f"{stored:,} bytes stored ({n:,} bytes if dense)", bytes_text(stored) + " stored"))
    if stype != "default":
        fields.append((_STYPE_TIPS.get(stype, f"storage type {stype}"), stype))
    return fields


def _tags(kind: str, extra_cls: str, fields: list[tuple[str, str]]) -> str:
    tags = [f'<span class="la-tag la-kind{extra_cls}">{escape(kind)}</span>']
    tags += [f'<span class="la-tag" title="{escape(k)}">{escape(v)}</span>' for k, v in fields]
    return f'<div class="la-hd">{"".join(tags)}</div>'


def _wrap(body: str) -> str:
    return f'<div class="la-arr"><style>{_CSS}</style>{body}</div>'


def _normal_html(value, device: Device) -> str:
    stype = stype_of(value)
    shape = tuple(int(d) for d in value.shape)
    stored = None if stype == "default" else sum(
        int(getattr(value, k).nbytes) for k in ("data", "indices", "indptr") if hasattr(value, k))
    fields = [("dtype", str(value.dtype)), ("shape", shape_text(shape)), ("device", str(device)),
              *_size_fields(shape, value.dtype, stype, stored)]
    if stype == "default":
        text = np.array2string(_host(value, device), **_PRINT)
    elif int(np.prod(shape)) <= _DENSE_LIMIT:
        text = np.array2string(_host(densify(value, device.xp), device), **_PRINT)
    else:
        data = _host(value.data, device)
        text = f"{stype} storage, {data.size:,} stored values:\n" + np.array2string(data, **_PRINT)
    return _wrap(_tags("array", "", fields) + f"<pre>{escape(text)}</pre>")


def _host(v, device: Device) -> np.ndarray:
    return to_device(v, device, Device("cpu", 0)) if device.kind == "gpu" else np.asarray(v)


def _lazy_html(entry: Entry, device: Device, known) -> str:
    aval = entry.aval
    shape = aval.shape
    fields = [("dtype", str(aval.dtype)), ("shape (static; ? = unknown)", shape_text(shape)),
              ("device", str(device)),
              *((f"{tip} once computed", text) for tip, text in _size_fields(shape, aval.dtype, aval.stype))]
    pending = pending_nodes(entry, known)
    n = len(pending)
    head = (f'<div class="la-note">{n:,} pending node{"s" if n != 1 else ""} behind this array '
            "(nothing has been computed for it yet).</div>")
    unknown = [i for i, d in enumerate(shape) if d is None]
    if unknown:
        dims = ", ".join(str(i) for i in unknown)
        shape_item = (f"<li><code>x.shape</code>: dim{'s' if len(unknown) > 1 else ''} {dims} "
                      "depend on the data (<code>x.static_shape</code> never computes)</li>")
    else:
        shape_item = ""
    computes = (
        '<div class="la-note">Computed by:</div><ul>'
        "<li><code>x.asnumpy()</code>, <code>x.item()</code>, <code>numpy.asarray(x)</code></li>"
        "<li><code>bool(x)</code>, <code>float(x)</code>, <code>int(x)</code></li>"
        f"{shape_item}"
        "<li>use as an input to an op outside <code>la.deferred()</code></li></ul>"
    )
    svg = draw.to_svg([entry], stop=lambda node: node.op is not None and known(node) is not None, max_nodes=DRAW_MAX_NODES,
                      title="pending graph")
    graph = f'<div style="overflow:auto;max-height:520px">{svg}</div>'
    return _wrap(_tags("lazy", " la-lazy", fields) + head + computes + graph)
