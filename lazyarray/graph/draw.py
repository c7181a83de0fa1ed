"""Draw a graph as SVG, in pure Python (no Graphviz or other system binary).

Layered layout: each node sits one row below its deepest input; graph inputs and
constants sit just above their first user; three barycenter sweeps order each row so
edges stay short. Boxes show the op, the node's name and ``dtype[shape]``; the device is the
colour; inputs, constants, copies between devices, already computed values and outputs each
have their own shape or stroke (see the legend drawn on top).

Large graphs stay readable: beyond ``max_nodes`` boxes, long linear chains are collapsed to
one box (``⋯ 996 nodes``) and, if that is not enough, the earliest nodes are gathered into one
box; the caption says how many nodes are shown.

>>> import lazyarray as la
>>> x = la.sym.var("x", shape=(2, 3))
>>> svg = to_svg(la.sym.relu(x * 2).outputs)
>>> svg.startswith("<svg") and "relu" in svg
True
"""
from __future__ import annotations

import os
import re
from collections import Counter

from ..device import Device
from ..errors import fmt_shape
from ..fileio import write_atomic
from . import svg as S
from .node import Entry, Node, unique_names
from .traverse import topo_order

DEFAULT_MAX_NODES = 200
MIN_CHAIN = 4  # chains shorter than this are drawn in full
MAX_VIA_SPAN = 8  # edges skipping more rows are drawn straight (no waypoints: keeps size linear)

_H = 38  # box height
_VGAP = 30  # between rows
_HGAP = 18  # between boxes of a row
_MARGIN = 16
_FONT = 12.5
_SUB_FONT = 10.5
_MAX_LABEL = 30  # characters per line before clipping

# (stroke, fill) per device, in the order devices are met (cpu before gpu, by id).
PALETTE = S.DEVICE_PALETTE

_SHAPES = ".la-n rect,.la-n polygon"
CSS = "".join([
    f"svg.la-g{{font-family:{S.SANS};font-size:{_FONT}px;background:#fff}}",
    ".la-g text{text-anchor:middle;fill:#111827}",
    f".la-g .la-s{{font-family:{S.MONO};font-size:{_SUB_FONT}px;fill:#4b5563}}",
    ".la-g .la-b{font-weight:600}",
    ".la-g .la-m{fill:#6b7280}",
    ".la-g .la-cap{text-anchor:start;fill:#374151}",
    ".la-g .la-lg text{text-anchor:start;fill:#4b5563;font-size:11px}",
    ".la-g .la-n rect,.la-g .la-n polygon{stroke-width:1.4}",
    *(f".la-g .la-d{i} rect,.la-g .la-d{i} polygon{{stroke:{s};fill:{f}}}" for i, (s, f) in enumerate(PALETTE)),
    ".la-g .la-var rect{fill:#fff;stroke-width:2.2}",
    ".la-g .la-const rect{fill:#f8fafc;stroke-dasharray:5 3}",
    ".la-g .la-done rect{fill:#f8fafc;stroke-dasharray:1.5 2.5}",
    ".la-g .la-more rect{fill:#f3f4f6;stroke:#9ca3af;stroke-dasharray:6 3}",
    ".la-g .la-more text{font-style:italic}",
    ".la-g .la-out rect,.la-g .la-out polygon{stroke-width:3}",
    ".la-g .la-frame>rect{fill:none;stroke:#64748b;stroke-width:1.2;stroke-dasharray:4 3}",
    ".la-g .la-e path{fill:none;stroke:#94a3b8;stroke-width:1.3;marker-end:url(#la-arw)}",
    ".la-g .la-n:hover rect,.la-g .la-n:hover polygon{filter:brightness(0.95)}",
])
DEFS = ('<marker id="la-arw" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0 1L9 5L0 9z" fill="#94a3b8"/></marker>')

_KIND_TEXT = {"var": "input", "const": "constant", "done": "computed value", "copy": "copy between devices / SBP boxing",
              "more": "collapsed nodes", "out": "output"}


class _Item:
    """One box: a single node, or a group of collapsed nodes (``nodes`` has more than one)."""

    __slots__ = ("collapsed", "key", "kind", "layer", "nodes", "preds", "succs", "w", "x")

    def __init__(self, nodes: list[Node], kind: str, key: int):
        self.nodes = nodes
        self.kind = kind  # "op" | "var" | "const" | "done" | "copy" | "more"
        self.preds: list[int] = []
        self.succs: list[int] = []
        self.layer = 0
        self.x = 0.0
        self.w = 0.0
        self.key = key  # position of its last node in topological order
        self.collapsed = False


# -- public API ---------------------------------------------------------------------------------
def to_svg(outputs: list[Entry], *, names: dict[int, str] | None = None, stop=None,
           max_nodes: int | None = DEFAULT_MAX_NODES, title: str | None = None) -> str:
    """The SVG drawing of the graph that reaches ``outputs``.

    ``names`` maps ``id(node)`` to the name to show (``Symbol.names()``); missing names are
    generated as in the text IR. ``stop(node)`` cuts the walk like ``topo_order`` (stopped nodes
    are drawn as computed values); ``max_nodes=None`` draws every node.
    """
    order = topo_order(list(outputs), stop=stop)
    names = display_names(order, names)
    stopped = {id(n) for n in order if n.op is not None and stop is not None and stop(n)}
    shown = [n for n in order if not _inline(n) or id(n) in {id(e.node) for e in outputs}]
    items, total = _select(shown, outputs, stopped, max_nodes)
    return _render(items, shown, outputs, names, stopped, total, title)


def symbol_html(outputs: list[Entry], names: dict[int, str], inputs: list[str], output_names: list[str],
                max_nodes: int | None = DEFAULT_MAX_NODES) -> str:
    """``Symbol._repr_html_``: a one-line summary (inputs, outputs) above the drawing."""
    summary = (f"Symbol · inputs: {', '.join(inputs) or 'none'} · "
               f"outputs: {', '.join(output_names)}")
    return to_html(outputs, names=names, max_nodes=max_nodes, summary=summary)


def to_html(outputs: list[Entry], *, names: dict[int, str] | None = None, stop=None,
            max_nodes: int | None = DEFAULT_MAX_NODES, title: str | None = None,
            summary: str = "") -> str:
    """The drawing inside a scrollable ``<div>`` (well-formed XHTML) with a one-line ``summary``."""
    svg = to_svg(outputs, names=names, stop=stop, max_nodes=max_nodes, title=title)
    head = f'<div style="font:12px sans-serif;color:#374151;margin:2px 0 6px">{S.esc(summary)}</div>' \
        if summary else ""
    return f'<div class="la-graph">{head}<div style="overflow:auto;max-height:640px">{svg}</div></div>'


def write_svg(path: str | os.PathLike, svg: str) -> str:
    """Write ``svg`` to ``path`` atomically (a temporary file in the same folder, then rename).

    Readers never see a half-written file, and a failed write leaves the old file in place.
    """
    path = os.fspath(path)
    root, ext = os.path.splitext(path)
    if ext.lower() != ".svg":
        raise ValueError(f"draw: {path!r} is not an .svg path; lazyarray writes SVG only (no "
                         f"system binary needed), e.g. draw({root + '.svg'!r})")
    write_atomic(path, ('<?xml version="1.0" encoding="UTF-8"?>\n' + svg).encode("utf-8"))
    return path


def display_names(order: list[Node], given: dict[int, str] | None = None) -> dict[int, str]:
    """A unique name per node (given names first, else ``op`` + counter, as the text IR does)."""
    return unique_names(order, given)


def device_classes(devices) -> dict[Device, int]:
    """Palette index per device: CPUs before GPUs, by id (so ``cpu(0)`` is blue when present)."""
    ordered = sorted(set(devices), key=lambda d: (d.kind != "cpu", d.kind, d.id))
    return {d: i % len(PALETTE) for i, d in enumerate(ordered)}


# -- choosing what to show ----------------------------------------------------------------------
def _inline(node: Node) -> bool:
    """Scalar constants are shown inside their user (as the text IR prints them), not as boxes."""
    return node.kind == "const" and node.avals[0].shape == () and node.value is not None


def _arg(e: Entry, names: dict[int, str]) -> str:
    if e.node.op is None and _inline(e.node):
        v = e.node.value
        return repr(v.item() if hasattr(v, "item") else v)
    return f"%{names.get(id(e.node), '?')}"


def _kind(node: Node, stopped: set[int]) -> str:
    if node.op is None:
        return "var" if node.kind == "var" else "const"
    if id(node) in stopped:
        return "done"
    return "copy" if node.op.name in ("copy_to", "boxing") else "op"


def _select(order: list[Node], outputs, stopped: set[int], max_nodes: int | None):
    """Boxes to draw (in topological order, edges filled in) and the number of graph nodes."""
    total = len(order)
    pos = {id(n): i for i, n in enumerate(order)}
    group = list(range(total))  # box of each node, by topological position
    if max_nodes is not None and total > max_nodes:
        _collapse_chains(order, pos, outputs, stopped, group)
        _collapse_earliest(order, pos, group, max(max_nodes, 2))
    # Build one item per distinct group, ordered by the position of its last node.
    members: dict[int, list[Node]] = {}
    for i, node in enumerate(order):
        members.setdefault(group[i], []).append(node)
    gids = sorted(members, key=lambda g: pos[id(members[g][-1])])
    index = {g: k for k, g in enumerate(gids)}
    items = []
    for g in gids:
        nodes = members[g]
        kind = "more" if len(nodes) > 1 else _kind(nodes[0], stopped)
        items.append(_Item(nodes, kind, pos[id(nodes[-1])]))
    seen: set[tuple[int, int]] = set()
    for i, node in enumerate(order):
        if id(node) in stopped:
            continue
        q = index[group[i]]
        for e in node.inputs:
            if id(e.node) not in pos:
                continue
            p = index[group[pos[id(e.node)]]]
            if p != q and (p, q) not in seen:
                seen.add((p, q))
                items[p].succs.append(q)
                items[q].preds.append(p)
    return items, total


def _collapse_chains(order, pos, outputs, stopped, group) -> None:
    """Merge the middle of every linear chain of ``MIN_CHAIN`` or more op nodes into one group.

    A link ``a -> b`` is part of a chain when ``a`` (an op, not an output) has ``b`` as its only
    user and ``a`` is the only op input of ``b``. Leaves (inputs, constants) whose users all lie
    in one collapsed middle join it, so a chain of 1,000 dense layers is one box, not 2,000
    parameter boxes around one.
    """
    n = len(order)
    is_out = {id(e.node) for e in outputs}
    users: list[list[int]] = [[] for _ in range(n)]
    op_preds: list[int] = [0] * n
    for i, node in enumerate(order):
        if id(node) in stopped:
            continue
        preds = {pos[id(e.node)] for e in node.inputs if id(e.node) in pos}
        for p in preds:
            users[p].append(i)
            if order[p].op is not None:
                op_preds[i] += 1
    nxt = [-1] * n
    has_prev = [False] * n
    for i, node in enumerate(order):
        if node.op is None or id(node) in is_out or id(node) in stopped or len(users[i]) != 1:
            continue
        j = users[i][0]
        if op_preds[j] == 1:
            nxt[i] = j
            has_prev[j] = True
    merged: set[int] = set()
    for i in range(n):
        if has_prev[i] or nxt[i] < 0:
            continue
        chain = [i]
        while nxt[chain[-1]] >= 0:
            chain.append(nxt[chain[-1]])
        if len(chain) < MIN_CHAIN:
            continue
        gid = chain[1]
        merged.add(gid)
        for k in chain[1:-1]:
            group[k] = gid
    # Leaves used only inside one collapsed middle join it.
    for i, node in enumerate(order):
        if node.op is None and users[i]:
            g = group[users[i][0]]
            if g in merged and all(group[u] == g for u in users[i]):
                group[i] = g


def _collapse_earliest(order, pos, group, max_nodes: int) -> None:
    """Gather the earliest boxes into one so that at most ``max_nodes`` remain.

    Keeping a suffix of the topological order keeps the drawing acyclic: every kept box's
    users are kept too, so edges only run from the gathered box into kept ones.
    """
    last: dict[int, int] = {}
    for i in range(len(order)):
        last[group[i]] = i
    if len(last) <= max_nodes:
        return
    ends = sorted(last.values())
    cut = ends[len(ends) - (max_nodes - 1)]  # boxes whose last node is before ``cut`` go
    gone = {g for g, i in last.items() if i < cut}
    gid = min(gone)
    for i in range(len(order)):
        if group[i] in gone:
            group[i] = gid


# -- layout ---------------------------------------------------------------------------------------
def _layout(items: list[_Item]) -> list[tuple[int, int, list[int]]]:
    """Rows by longest path from the sources; x by barycenter sweeps (down, up, down).

    An edge that skips rows gets a thin waypoint box in every row it crosses, so the sweeps
    make room for it and it never runs under a box. Returns the edges as
    ``(source, target, waypoints)``; waypoints are appended to ``items`` (kind ``"via"``).
    """
    for it in items:  # items are in topological order
        it.layer = 1 + max((items[p].layer for p in it.preds), default=-1)
    for it in reversed(items):  # sources (inputs, constants) move down next to their first user
        if not it.preds and it.succs:
            it.layer = min(items[s].layer for s in it.succs) - 1
    n_real = len(items)
    budget = 4 * n_real + 100  # waypoints; past it, long edges are drawn straight
    edges = []
    for p in range(n_real):
        src = items[p]
        succs, src.succs = src.succs, []
        for s in succs:
            dst = items[s]
            span = dst.layer - src.layer
            vias: list[int] = []
            if 1 < span <= MAX_VIA_SPAN and span - 1 <= budget:
                budget -= span - 1
                prev = p
                for layer in range(src.layer + 1, dst.layer):
                    v = _Item([], "via", src.key)
                    v.layer, v.w = layer, 4.0
                    v.preds = [prev]
                    items[prev].succs.append(len(items))
                    prev = len(items)
                    vias.append(prev)
                    items.append(v)
                dst.preds = [prev if q == p else q for q in dst.preds]
                items[prev].succs.append(s)
            else:
                src.succs.append(s)
            edges.append((p, s, vias))
    rows: dict[int, list[int]] = {}
    for k, it in enumerate(items):
        rows.setdefault(it.layer, []).append(k)
    layers = [rows[r] for r in sorted(rows)]
    for attr_name, seq in (("preds", layers), ("succs", layers[::-1]), ("preds", layers)):
        for row in seq:
            desired = {}
            for k in row:
                nb = getattr(items[k], attr_name)
                desired[k] = sum(items[j].x for j in nb) / len(nb) if nb else items[k].x
            _pack(items, sorted(row, key=lambda k: (desired[k], items[k].x, items[k].key)), desired)
    return edges


def _pack(items: list[_Item], row: list[int], desired: dict[int, float]) -> None:
    """Place ``row`` (sorted) as close to ``desired`` as the box widths allow (no overlaps).

    The average of the push-right and push-left placements satisfies the spacing constraints
    too (they are convex), and it does not drift to one side.
    """
    n = len(row)
    sep = [0.0] + [(items[row[i - 1]].w + items[row[i]].w) / 2 + _HGAP for i in range(1, n)]
    left = [0.0] * n
    for i, k in enumerate(row):
        left[i] = desired[k] if i == 0 else max(desired[k], left[i - 1] + sep[i])
    right = [0.0] * n
    for i in range(n - 1, -1, -1):
        k = row[i]
        right[i] = desired[k] if i == n - 1 else min(desired[k], right[i + 1] - sep[i + 1])
    for i, k in enumerate(row):
        items[k].x = (left[i] + right[i]) / 2


# -- rendering ------------------------------------------------------------------------------------
def _shape_text(aval) -> str:
    if aval.shape is None:
        s = f"{aval.dtype or '?'}[?]"
    else:
        s = f"{aval.dtype}{fmt_shape(aval.shape)}"
    return s if aval.stype == "default" else f"{s}<{aval.stype}>"


def _labels(it: _Item, names: dict[int, str]) -> tuple[str, str, str]:
    """(bold part, plain part, second line) of a box."""
    if it.kind == "more":
        ops = Counter(n.op.name if n.op is not None else n.kind for n in it.nodes)
        top = ", ".join(f"{op} ×{c}" for op, c in ops.most_common(2))
        more = "…" if len(ops) > 2 else ""
        return f"⋯ {len(it.nodes):,} nodes", "", top + more
    node = it.nodes[0]
    name = names[id(node)]
    sub = " ".join(_shape_text(a) for a in node.avals)
    if node.sbp is not None and not (node.op is not None and node.op.name == "boxing"):
        sub += " " + ",".join(str(s) for s in node.sbp)
    if node.op is None:
        return name, "", sub
    if it.kind == "copy" and node.op.name == "boxing":
        sub += f" {node.params['src']}→{node.params['dst']}"
    elif it.kind == "copy":
        sub += f" → {node.avals[0].device}"
    return node.op.qualname, name, sub


def _tooltip(it: _Item, names: dict[int, str]) -> str:
    if it.kind == "more":
        return f"{len(it.nodes):,} collapsed nodes: " + ", ".join(
            f"{op} ×{c}" for op, c in Counter(
                n.op.name if n.op is not None else n.kind for n in it.nodes).most_common(8))
    node = it.nodes[0]
    ty = ", ".join(str(a) for a in node.avals)
    if node.op is None:
        what = {"var": "input", "const": "constant"}.get(node.kind, node.kind)
        return f"%{names[id(node)]} = {what} : {ty}"
    args = [_arg(e, names) for e in node.inputs]
    args += [f"{k}={v}" for k, v in node.params.items()]
    text = f"%{names[id(node)]} = {node.op.qualname}({', '.join(args)}) : {ty}"
    if node.sbp is not None:
        text += " sbp=" + ", ".join(str(s) for s in node.sbp)
    if it.kind == "done":
        text += "  (already computed)"
    line = node.source_line()
    return text + (f"\nrecorded at {S.clip(line, 100)}" if line else "")


def _box(kind: str, w: float) -> str:
    if kind == "copy":
        c = 9.0
        return S.polygon([(-w / 2 + c, 0), (w / 2 - c, 0), (w / 2, _H / 2), (w / 2 - c, _H),
                          (-w / 2 + c, _H), (-w / 2, _H / 2)])
    rx = {"var": _H / 2, "const": 2, "done": 2}.get(kind, 7)
    return S.rect(-w / 2, 0, w, _H, rx=rx)


def _render(items, order, outputs, names, stopped, total, title) -> str:
    out_ids = {id(e.node) for e in outputs}
    devices = device_classes(a.device for n in order for a in n.avals)
    texts = []
    for it in items:
        bold, plain, sub = _labels(it, names)
        bold, plain, sub = S.clip(bold, _MAX_LABEL), S.clip(plain, _MAX_LABEL), S.clip(sub, _MAX_LABEL + 6)
        first = S.text_width(bold, _FONT) * 1.06 + (S.text_width(" " + plain, _FONT) if plain else 0)
        it.w = max(first, S.text_width(sub, _SUB_FONT, mono=True), 56) + 22 + (14 if it.kind == "copy" else 0)
        texts.append((bold, plain, sub))
    edges = _layout(items)
    frames = _frames(items, names)
    top = _MARGIN + 46  # caption + legend
    row_y = {}
    for layer in sorted({it.layer for it in items}):
        row_y[layer] = top + len(row_y) * (_H + _VGAP)
    items_all, items = items, items[: len(texts)]
    min_x = min((it.x - it.w / 2 for it in items_all), default=0)
    max_x = max((it.x + it.w / 2 for it in items_all), default=0)
    shift = _MARGIN - min_x
    legend, legend_w = _legend(items, devices, out_ids)
    caption = _caption(items, total, title)
    width = max(max_x - min_x + 2 * _MARGIN, legend_w + 2 * _MARGIN, S.text_width(caption, _FONT) + 2 * _MARGIN)
    height = (max(row_y.values()) + _H if row_y else top) + _MARGIN
    frame_row, frames_w, frames_h = _place_frames(frames, height)
    width, height = max(width, frames_w + 2 * _MARGIN), height + frames_h
    doc = S.SvgDoc(width, height, css=CSS, defs=DEFS, root_cls="la-g", label=caption)
    doc.add(S.text(_MARGIN, _MARGIN + 12, caption, cls="la-cap"), legend)
    paths = []
    for p, s, vias in edges:
        it = items[p]
        x, y = it.x + shift, row_y[it.layer] + _H
        d = [f"M{S.num(x)} {S.num(y)}"]
        for v in vias:
            nx, ny = items_all[v].x + shift, row_y[items_all[v].layer]
            my = (y + ny) / 2
            d.append(f"C{S.num(x)} {S.num(my)} {S.num(nx)} {S.num(my)} {S.num(nx)} {S.num(ny)}V{S.num(ny + _H)}")
            x, y = nx, ny + _H
        t = items[s]
        x2, y2 = t.x + shift, row_y[t.layer] - 1.5
        my = (y + y2) / 2
        d.append(f"C{S.num(x)} {S.num(my)} {S.num(x2)} {S.num(my)} {S.num(x2)} {S.num(y2)}")
        paths.append(S.path("".join(d)))
    doc.add('<g class="la-e">' + "".join(paths) + "</g>")
    boxes = []
    for it, (bold, plain, sub) in zip(items, texts):
        cls = f"la-n la-{it.kind}"
        if it.kind != "more":
            node = it.nodes[0]
            cls += f" la-d{devices[node.avals[0].device]}"
            if id(node) in out_ids:
                cls += " la-out"
        first = f'<text y="16"><tspan class="la-b">{S.esc(bold)}</tspan>' + \
            (f'<tspan class="la-m" dx="5">{S.esc(plain)}</tspan>' if plain else "") + "</text>"
        body = _box(it.kind, it.w) + first + f'<text class="la-s" y="31">{S.esc(sub)}</text>'
        boxes.append(S.group(body, cls=cls, dx=it.x + shift, dy=row_y[it.layer], tip=_tooltip(it, names)))
    doc.add(*boxes, *frame_row)
    return doc.render()


# -- sub-graphs of control-flow nodes, each drawn inside a frame -------------------------------------
_FRAME_PAD = 10
_FRAME_HEAD = 20


def _frames(items, names) -> list[tuple[str, str]]:
    """``(label, svg)`` per sub-graph parameter (``SUBGRAPH``-typed: cond branches, loop bodies) of
    the drawn op nodes, each body drawn by ``to_svg`` (so bodies nested in bodies are framed too)."""
    out = []
    for it in items:
        node = it.nodes[0] if len(it.nodes) == 1 else None
        if node is None or node.op is None:
            continue
        for k, v in node.params.items():
            if v is not None and node.op._param_map[k].type.name == "graph":
                label = f"%{names[id(node)]} · {k}"
                out.append((label, to_svg(list(v.sym.outputs), names=v.sym.names(), title=label)))
    return out


def _place_frames(frames, top: float) -> tuple[list[str], float, float]:
    """The frames in one row below the graph: (elements, total width, height added)."""
    parts, x, tallest = [], float(_MARGIN), 0.0
    for label, inner in frames:
        w, h = (float(v) for v in re.match(r'<svg [^>]*?width="([\d.]+)" height="([\d.]+)"', inner).groups())
        fw, fh = w + 2 * _FRAME_PAD, h + _FRAME_HEAD + _FRAME_PAD
        nested = inner.replace("<svg ", f'<svg x="{S.num(_FRAME_PAD)}" y="{S.num(_FRAME_HEAD)}" ', 1)
        body = S.rect(0, 0, fw, fh, rx=6) + S.text(_FRAME_PAD, 14, label, cls="la-cap") + nested
        parts.append(S.group(body, cls="la-frame", dx=x, dy=top))
        x += fw + _HGAP
        tallest = max(tallest, fh)
    return parts, x - _HGAP - _MARGIN if parts else 0.0, tallest + _MARGIN if parts else 0.0


def _caption(items, total: int, title: str | None) -> str:
    shown = sum(1 for it in items if it.kind != "more")
    head = f"{title} — " if title else ""
    if shown == total:
        return f"{head}{total:,} node{'s' if total != 1 else ''}"
    return (f"{head}{total:,} nodes, {shown:,} drawn; {total - shown:,} collapsed into "
            f"{len(items) - shown:,} grey box{'es' if len(items) - shown != 1 else ''}")


def _legend(items, devices: dict[Device, int], out_ids: set[int]) -> tuple[str, float]:
    """Device colours, then the node kinds present, as a row of small swatches."""
    y = _MARGIN + 22
    parts, x = [], float(_MARGIN)
    entries: list[tuple[str, str]] = [(f"la-n la-op la-d{i}", str(d)) for d, i in devices.items()]
    kinds = {it.kind for it in items}
    d0 = f" la-d{min(devices.values(), default=0)}"
    for kind in ("var", "const", "done", "copy", "more"):
        if kind in kinds:
            entries.append((f"la-n la-{kind}" + ("" if kind == "more" else d0), _KIND_TEXT[kind]))
    if any(id(n) in out_ids for it in items for n in it.nodes[:1]):
        entries.append((f"la-n la-op la-out{d0}", _KIND_TEXT["out"]))
    for cls, label in entries:
        kind = cls.split()[1][3:]
        w = 22
        shape = S.polygon([(3, 0), (w - 3, 0), (w, 7), (w - 3, 14), (3, 14), (0, 7)]) if kind == "copy" \
            else S.rect(0, 0, w, 14, rx={"var": 7, "const": 1, "done": 1}.get(kind, 4))
        parts.append(S.group(shape, cls=cls, dx=x, dy=y))
        parts.append(S.text(x + w + 5, y + 11, label))
        x += w + 5 + S.text_width(label, 11) + 16
    return '<g class="la-lg">' + "".join(parts) + "</g>", x - _MARGIN
