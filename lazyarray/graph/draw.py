"""Draw a graph as SVG, in pure Python (no Graphviz or other system binary).

Layered layout: each node sits one row below its deepest input; graph inputs and
constants sit just above their first user; three barycenter sweeps order each row so
edges stay short. Boxes show the op (and the node's name when it was given one), ``dtype[shape]``,
the op's attributes and scalar operands (``× 0.5``), and the parameters it reads (Netron style:
a variable or constant used once, as an op's non-first input, is folded into that op's box as
``weight (8,3,3,3)``); the device is the colour; inputs, constants, copies between devices,
already computed values and outputs each have their own shape or stroke (see the legend).

Nodes recorded inside blocks (``Node.block``) are drawn one box per top-level block by default
(``blocks="collapsed"``): its type, path, output shape and parameter count; ``to_html`` adds
``<details>`` controls that expand each block (pure HTML, no script), and ``blocks="expanded"``
draws every node.

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
    ".la-g .la-block rect{fill:#fff7ed;stroke:#c2410c;stroke-width:1.6}",
    ".la-g .la-ext rect{fill:#f8fafc;stroke:#9ca3af;stroke-dasharray:2 2}",
    f".la-g .la-a{{font-family:{S.MONO};font-size:{_SUB_FONT}px;fill:#7c2d12}}",
    f".la-g .la-p{{font-family:{S.MONO};font-size:{_SUB_FONT}px;fill:#1e3a8a}}",
    ".la-g .la-out rect,.la-g .la-out polygon{stroke-width:3}",
    ".la-g .la-frame>rect{fill:none;stroke:#64748b;stroke-width:1.2;stroke-dasharray:4 3}",
    ".la-g .la-e path{fill:none;stroke:#94a3b8;stroke-width:1.3;marker-end:url(#la-arw)}",
    ".la-g .la-n:hover rect,.la-g .la-n:hover polygon{filter:brightness(0.95)}",
])
DEFS = ('<marker id="la-arw" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0 1L9 5L0 9z" fill="#94a3b8"/></marker>')

_KIND_TEXT = {"var": "input", "const": "constant", "done": "computed value", "copy": "copy between devices / SBP boxing",
              "more": "collapsed nodes", "block": "block (collapsed)", "ext": "from outside the block",
              "out": "output"}
_LINE = 13  # height of each extra text line in a box (attributes, folded parameters)
MAX_FOLDED_LINES = 4  # folded parameters listed in a box; more are counted
# Scalar operands of these ops are shown as ``× 0.5`` (slot 1) or ``1.0 −`` (slot 0).
_SYMBOLS = {"multiply": "×", "add": "+", "subtract": "−", "divide": "÷", "power": "^", "maximum": "max",
            "minimum": "min", "mod": "%", "floor_divide": "//"}


class _Item:
    """One box: a single node, or a group of collapsed nodes (``nodes`` has more than one)."""

    __slots__ = ("block", "collapsed", "folded", "h", "key", "kind", "layer", "nodes", "outs", "preds", "succs", "w",
                 "x")

    def __init__(self, nodes: list[Node], kind: str, key: int):
        self.nodes = nodes
        self.kind = kind  # "op" | "var" | "const" | "done" | "copy" | "more" | "block" | "ext"
        self.block: tuple | None = None  # the block path of a "block" box
        self.folded: list[tuple[str, Node]] = []  # (input name, leaf) folded into this box
        self.outs: list[Entry] = []  # a block box's entries that other boxes read or the graph returns
        self.h = float(_H)
        self.preds: list[int] = []
        self.succs: list[int] = []
        self.layer = 0
        self.x = 0.0
        self.w = 0.0
        self.key = key  # position of its last node in topological order
        self.collapsed = False


# -- public API ---------------------------------------------------------------------------------
def to_svg(outputs: list[Entry], *, names: dict[int, str] | None = None, stop=None,
           max_nodes: int | None = DEFAULT_MAX_NODES, title: str | None = None,
           blocks: str = "collapsed", prefix: tuple = ()) -> str:
    """The SVG drawing of the graph that reaches ``outputs``.

    ``names`` maps ``id(node)`` to the name to show (``Symbol.names()``); missing names are
    generated as in the text IR. ``stop(node)`` cuts the walk like ``topo_order`` (stopped nodes
    are drawn as computed values); ``max_nodes=None`` draws every node. ``blocks="collapsed"``
    draws the nodes of each block directly below ``prefix`` (a ``Node.block`` path; ``()`` is the
    root) as one box; ``"expanded"`` draws every node.
    """
    if blocks not in ("collapsed", "expanded"):
        raise ValueError(f"draw: blocks must be 'collapsed' or 'expanded', got {blocks!r}")
    order = topo_order(list(outputs), stop=stop)
    names = display_names(order, names)
    stopped = {id(n) for n in order if n.op is not None and stop is not None and stop(n)}
    out_ids = {id(e.node) for e in outputs}
    folded = _fold_leaves(order, stopped, out_ids)
    shown = [n for n in order if (not inline_scalar(n) or id(n) in out_ids) and id(n) not in folded]
    depth = len(prefix) if blocks == "collapsed" else None
    items, total = _select(shown, outputs, stopped, max_nodes, depth, folded, ext=bool(prefix))
    return _render(items, shown, outputs, names, stopped, total, title)


def block_prefix(node: Node, depth: int | None) -> tuple | None:
    """The block path one level below ``depth`` that ``node`` belongs to (None: not in such a block)."""
    if depth is None or node.op is None or not node.block or len(node.block) <= depth:
        return None
    return node.block[:depth + 1]


def leaf_size(node: Node) -> int:
    shape = node.avals[0].shape
    if shape is None or None in shape:
        return 0
    out = 1
    for d in shape:
        out *= d
    return out


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
def inline_scalar(node: Node) -> bool:
    """Scalar constants are shown inside their user (as the text IR prints them), not as boxes."""
    return node.kind == "const" and node.avals[0].shape == () and node.value is not None


def _arg(e: Entry, names: dict[int, str]) -> str:
    if e.node.op is None and inline_scalar(e.node):
        v = e.node.value
        return repr(v.item() if hasattr(v, "item") else v)
    return f"%{names.get(id(e.node), '?')}"


def is_data_input(node: Node) -> bool:
    """A block's data input (``data``, ``data0``, ...): never folded into the box of its user."""
    return node.kind == "var" and bool(node.name) and re.fullmatch(r"data\d*", node.name) is not None


def _slot_name(op, pos: int) -> str:
    """The declared name of input ``pos`` of ``op`` (``weight`` for ``bias?``-style names too)."""
    names = op.inputs
    if pos < len(names) and not any(n.startswith("*") for n in names[:pos + 1]):
        return names[pos].rstrip("?")
    return f"input {pos}"


def _fold_leaves(order: list[Node], stopped: set[int], out_ids: set[int]) -> dict[int, tuple[Node, str]]:
    """Leaves drawn inside their user's box, as Netron folds weights into their op:
    ``id(leaf) -> (user, input name)`` for each variable or non-scalar constant that one op reads
    once, at an input other than its first, and that is not a data input or an output."""
    uses: dict[int, list[tuple[Node, int]]] = {}
    for n in order:
        if n.op is None or id(n) in stopped:
            continue
        for pos, e in enumerate(n.inputs):
            if e.node.op is None:
                uses.setdefault(id(e.node), []).append((n, pos))
    out = {}
    for n in order:
        if n.op is not None or inline_scalar(n) or id(n) in out_ids or is_data_input(n):
            continue
        u = uses.get(id(n), [])
        if len(u) == 1 and u[0][1] > 0:
            out[id(n)] = (u[0][0], _slot_name(u[0][0].op, u[0][1]))
    return out


def _kind(node: Node, stopped: set[int], ext: bool = False) -> str:
    if node.op is None:
        return "var" if node.kind == "var" else "const"
    if id(node) in stopped:
        return "ext" if ext else "done"
    return "copy" if node.op.name in ("copy_to", "boxing") else "op"


def _select(order: list[Node], outputs, stopped: set[int], max_nodes: int | None, depth: int | None,
            folded: dict, ext: bool = False):
    """Boxes to draw (in topological order, edges filled in) and the number of graph nodes."""
    total = len(order) + len(folded)
    pos = {id(n): i for i, n in enumerate(order)}
    group = list(range(len(order)))  # box of each node, by topological position
    block_key: dict[int, tuple] = {}  # group id of a block box -> its block path
    if depth is not None:
        _group_blocks(order, pos, stopped, depth, group, block_key)
    block_size = Counter(group[i] for i in range(len(order)) if group[i] in block_key)
    if max_nodes is not None and len(set(group)) > max_nodes:
        _collapse_chains(order, pos, outputs, stopped, group, blocked=set(block_key))
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
        if g in block_key and len(nodes) == block_size[g]:
            kind = "block"
        else:
            kind = "more" if len(nodes) > 1 else _kind(nodes[0], stopped, ext)
        it = _Item(nodes, kind, pos[id(nodes[-1])])
        if kind == "block":
            it.block = block_key[g]
        items.append(it)
    for leaf_id, (user, slot) in folded.items():
        if id(user) in pos:
            leaf = next(e.node for e in user.inputs if id(e.node) == leaf_id)
            items[index[group[pos[id(user)]]]].folded.append((slot, leaf))
    for e in outputs:
        if id(e.node) in pos:
            it = items[index[group[pos[id(e.node)]]]]
            if it.kind == "block" and e not in it.outs:
                it.outs.append(e)
    seen: set[tuple[int, int]] = set()
    for i, node in enumerate(order):
        if id(node) in stopped:
            continue
        q = index[group[i]]
        for e in node.inputs:
            if id(e.node) not in pos:
                continue
            p = index[group[pos[id(e.node)]]]
            if p != q and items[p].kind == "block" and e not in items[p].outs:
                items[p].outs.append(e)
            if p != q and (p, q) not in seen:
                seen.add((p, q))
                items[p].succs.append(q)
                items[q].preds.append(p)
    return items, total


def _group_blocks(order, pos, stopped, depth: int, group, block_key) -> None:
    """One group per run of consecutive op nodes of the same block one level below ``depth``
    (creation order, so a run never has an outside node between two of its nodes: no cycles).
    Leaves (other than data inputs) that only one block reads join it."""
    last = None
    gid = -1
    for i, node in enumerate(order):
        if node.op is None:
            continue
        key = None if id(node) in stopped else block_prefix(node, depth)
        if key is None:
            last = None
            continue
        if key != last:
            gid, last = i, key
            block_key[gid] = key
        group[i] = gid
    if not block_key:
        return
    readers: dict[int, set[int]] = {}
    for i, node in enumerate(order):
        if id(node) in stopped:
            continue
        for e in node.inputs:
            if id(e.node) in pos:
                readers.setdefault(pos[id(e.node)], set()).add(group[i])
    for i, node in enumerate(order):
        gs = readers.get(i)
        if node.op is None and not is_data_input(node) and gs and len(gs) == 1:
            g = next(iter(gs))
            if g in block_key:
                group[i] = g


def _collapse_chains(order, pos, outputs, stopped, group, blocked=frozenset()) -> None:
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
        if node.op is None or id(node) in is_out or id(node) in stopped or len(users[i]) != 1 \
                or group[i] in blocked:
            continue
        j = users[i][0]
        if op_preds[j] == 1 and group[j] not in blocked:
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
        if node.op is None and users[i] and group[i] not in blocked:
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


def _auto_name(name: str, node: Node) -> bool:
    """Is ``name`` the generated ``<op><counter>`` name (then the box shows the op only)?"""
    return node.name is None and re.fullmatch(re.escape(node.op.name) + r"\d*", name) is not None


def _labels(it: _Item, names: dict[int, str]) -> tuple[str, str, str]:
    """(bold part, plain part, second line) of a box."""
    if it.kind == "more":
        ops = Counter(n.op.name if n.op is not None else n.kind for n in it.nodes)
        top = ", ".join(f"{op} ×{c}" for op, c in ops.most_common(2))
        more = "…" if len(ops) > 2 else ""
        return f"⋯ {len(it.nodes):,} nodes", "", top + more
    if it.kind == "block":
        ends = _block_outputs(it)
        sub = " ".join(_shape_text(e.aval) for e in ends[:2]) + (" …" if len(ends) > 2 else "")
        return it.block[-1][1], ".".join(k for k, _ in it.block), sub
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
    return node.op.qualname, "" if _auto_name(name, node) else name, sub


def _block_outputs(it: _Item) -> list[Entry]:
    """The entries of a block box read by other boxes or returned (else the last node's outputs)."""
    return it.outs or [Entry(it.nodes[-1], i) for i in range(len(it.nodes[-1].avals))]


def _extra_lines(it: _Item) -> list[tuple[str, str]]:
    """``(css class, text)`` lines under the shape: attributes and scalar operands, then folded
    parameters (``weight (8,3,3,3)``); a block box gives its op and parameter counts."""
    if it.kind == "block":
        ops = sum(1 for n in it.nodes if n.op is not None)
        count = sum(leaf_size(leaf) for _, leaf in it.folded) + sum(
            leaf_size(n) for n in it.nodes if n.op is None and not inline_scalar(n))
        return [("la-a", f"{ops:,} op{'s' if ops != 1 else ''} · {count:,} params")]
    if it.kind not in ("op", "copy", "done", "ext") or len(it.nodes) != 1:
        return []
    node = it.nodes[0]
    lines = []
    attrs = _attr_text(node)
    if attrs:
        lines.append(("la-a", attrs))
    for slot, leaf in it.folded[:MAX_FOLDED_LINES]:
        shape = leaf.avals[0].shape
        lines.append(("la-p", f"{slot} " + (fmt_tuple(shape) if shape is not None else "(?)")))
    if len(it.folded) > MAX_FOLDED_LINES:
        lines.append(("la-p", f"+{len(it.folded) - MAX_FOLDED_LINES} more"))
    return lines


def fmt_tuple(shape) -> str:
    """``(8,3,3,3)``: a shape without spaces (``?`` for unknown dims)."""
    dims = ["?" if d is None else str(d) for d in shape]
    return "(" + ",".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _attr_text(node: Node) -> str:
    """Scalar operands (``× 0.5``) and the op's attributes (``stride=(2,2) padding=(1,1)``)."""
    parts = []
    sym = _SYMBOLS.get(node.op.name)
    for pos, e in enumerate(node.inputs):
        if e.node.op is None and inline_scalar(e.node):
            v = e.node.value
            v = repr(v.item() if hasattr(v, "item") else v)
            if sym is not None and len(node.inputs) == 2:
                parts.append(f"{sym} {v}" if pos == 1 else f"{v} {sym}")
            else:
                parts.append(f"{_slot_name(node.op, pos)}={v}")
    pm = node.op._param_map
    for k, v in node.params.items():
        if v is None or pm[k].type.name == "graph":
            continue
        text = fmt_tuple(v) if isinstance(v, tuple) and all(isinstance(d, int) for d in v) else str(v)
        parts.append(f"{k}={text}")
    return " ".join(parts)


def _tooltip(it: _Item, names: dict[int, str]) -> str:
    if it.kind == "more":
        return f"{len(it.nodes):,} collapsed nodes: " + ", ".join(
            f"{op} ×{c}" for op, c in Counter(
                n.op.name if n.op is not None else n.kind for n in it.nodes).most_common(8))
    if it.kind == "block":
        path = ".".join(k for k, _ in it.block)
        ops = Counter(n.op.qualname for n in it.nodes if n.op is not None)
        n_ops = sum(ops.values())
        text = (f"block {path} · {it.block[-1][1]} (collapsed: {n_ops:,} op{'s' if n_ops != 1 else ''}: "
                + ", ".join(f"{op} ×{c}" for op, c in ops.most_common(8)) + ")")
        params = [n for n in it.nodes if n.op is None] + [leaf for _, leaf in it.folded]
        if params:
            text += "\nparameters: " + ", ".join(
                f"{names.get(id(p), p.label())} {p.avals[0]}" for p in params[:16]) + (" …" if len(params) > 16 else "")
        return text
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
    if node.block:
        text += f"\nin block {node.block_path} · {node.block[-1][1]}"
    if it.folded:
        text += "\n" + "\n".join(f"{slot}: %{names.get(id(leaf), leaf.label())} : {leaf.avals[0]}"
                                   for slot, leaf in it.folded)
    if it.kind == "done":
        text += "  (already computed)"
    elif it.kind == "ext":
        text += "  (outside this block)"
    line = node.source_line()
    return text + (f"\nrecorded at {S.clip(line, 100)}" if line else "")


def _box(kind: str, w: float, h: float = _H) -> str:
    if kind == "copy":
        c = 9.0
        return S.polygon([(-w / 2 + c, 0), (w / 2 - c, 0), (w / 2, h / 2), (w / 2 - c, h),
                          (-w / 2 + c, h), (-w / 2, h / 2)])
    rx = {"var": _H / 2, "const": 2, "done": 2, "ext": 2, "block": 3}.get(kind, 7)
    return S.rect(-w / 2, 0, w, h, rx=rx)


def _render(items, order, outputs, names, stopped, total, title) -> str:
    out_ids = {id(e.node) for e in outputs}
    devices = device_classes(a.device for n in order for a in n.avals)
    texts = [_measure(it, names) for it in items]
    edges = _layout(items)
    frames = _frames(items, names)
    top = _MARGIN + 46  # caption + legend
    row_h, row_y, y = _rows(items, len(texts), top)
    items_all, items = items, items[: len(texts)]
    min_x = min((it.x - it.w / 2 for it in items_all), default=0)
    max_x = max((it.x + it.w / 2 for it in items_all), default=0)
    shift = _MARGIN - min_x
    legend, legend_w = _legend(items, devices, out_ids)
    caption = _caption(items, total, title)
    width = max(max_x - min_x + 2 * _MARGIN, legend_w + 2 * _MARGIN, S.text_width(caption, _FONT) + 2 * _MARGIN)
    height = (y - _VGAP if row_y else top) + _MARGIN
    frame_row, frames_w, frames_h = _place_frames(frames, height)
    width, height = max(width, frames_w + 2 * _MARGIN), height + frames_h
    doc = S.SvgDoc(width, height, css=CSS, defs=DEFS, root_cls="la-g", label=caption)
    doc.add(S.text(_MARGIN, _MARGIN + 12, caption, cls="la-cap"), legend)
    paths = [_edge_path(p, s, vias, items_all, row_y, row_h, shift) for p, s, vias in edges]
    doc.add('<g class="la-e">' + "".join(paths) + "</g>")
    boxes = []
    for it, (bold, plain, sub, extra) in zip(items, texts):
        cls = f"la-n la-{it.kind}"
        if it.kind != "more":
            node = it.nodes[0]
            cls += f" la-d{devices[node.avals[0].device]}"
            if any(id(n) in out_ids for n in it.nodes):
                cls += " la-out"
        first = f'<text y="16"><tspan class="la-b">{S.esc(bold)}</tspan>' + \
            (f'<tspan class="la-m" dx="5">{S.esc(plain)}</tspan>' if plain else "") + "</text>"
        body = _box(it.kind, it.w, it.h) + first + f'<text class="la-s" y="31">{S.esc(sub)}</text>'
        body += "".join(f'<text class="{c}" y="{S.num(31 + _LINE * (k + 1))}">{S.esc(t)}</text>'
                        for k, (c, t) in enumerate(extra))
        boxes.append(S.group(body, cls=cls, dx=it.x + shift, dy=row_y[it.layer], tip=_tooltip(it, names)))
    doc.add(*boxes, *frame_row)
    return doc.render()


def _measure(it, names) -> tuple:
    """An item's text lines ``(bold, plain, sub, extra)``, clipped; sets its width and height."""
    bold, plain, sub = _labels(it, names)
    bold, plain, sub = S.clip(bold, _MAX_LABEL), S.clip(plain, _MAX_LABEL), S.clip(sub, _MAX_LABEL + 6)
    extra = [(cls, S.clip(t, _MAX_LABEL + 14)) for cls, t in _extra_lines(it)]
    first = S.text_width(bold, _FONT) * 1.06 + (S.text_width(" " + plain, _FONT) if plain else 0)
    it.w = max(first, S.text_width(sub, _SUB_FONT, mono=True), 56,
               *(S.text_width(t, _SUB_FONT, mono=True) for _, t in extra)) + 22 + (14 if it.kind == "copy" else 0)
    it.h = float(_H + _LINE * len(extra))
    return bold, plain, sub, extra


def _rows(items, n_drawn: int, top: float) -> tuple:
    """``(row height, row top, bottom)`` of the layers, from ``top``: a row as tall as its tallest
    box (of the first ``n_drawn`` items, the ones drawn as boxes)."""
    row_h: dict[int, float] = {}
    for it in items[:n_drawn]:
        row_h[it.layer] = max(row_h.get(it.layer, float(_H)), it.h)
    row_y = {}
    y = float(top)
    for layer in sorted({it.layer for it in items}):
        row_h.setdefault(layer, float(_H))
        row_y[layer] = y
        y += row_h[layer] + _VGAP
    return row_h, row_y, y


def _edge_path(p: int, s: int, vias, items, row_y: dict, row_h: dict, shift: float) -> str:
    """The edge from item ``p`` to item ``s``: a curve through the dummy items ``vias`` (straight
    down through their rows)."""
    it = items[p]
    x, y = it.x + shift, row_y[it.layer] + it.h
    d = [f"M{S.num(x)} {S.num(y)}"]
    for v in vias:
        layer = items[v].layer
        nx, ny = items[v].x + shift, row_y[layer]
        my = (y + ny) / 2
        d.append(f"C{S.num(x)} {S.num(my)} {S.num(nx)} {S.num(my)} {S.num(nx)} {S.num(ny)}"
                 f"V{S.num(ny + row_h[layer])}")
        x, y = nx, ny + row_h[layer]
    t = items[s]
    x2, y2 = t.x + shift, row_y[t.layer] - 1.5
    my = (y + y2) / 2
    d.append(f"C{S.num(x)} {S.num(my)} {S.num(x2)} {S.num(my)} {S.num(x2)} {S.num(y2)}")
    return S.path("".join(d))


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
    head = f"{title} — " if title else ""
    more = [it for it in items if it.kind == "more"]
    blocks = [it for it in items if it.kind == "block"]
    text = f"{head}{total:,} node{'s' if total != 1 else ''}"
    if blocks:
        inside = sum(len(it.nodes) + len(it.folded) for it in blocks)
        text += f"; {inside:,} in {len(blocks):,} collapsed block{'s' if len(blocks) != 1 else ''}"
    if more:
        gone = sum(len(it.nodes) for it in more)
        text += (f"; {gone:,} collapsed into {len(more):,} grey box{'es' if len(more) != 1 else ''}")
    return text


def _legend(items, devices: dict[Device, int], out_ids: set[int]) -> tuple[str, float]:
    """Device colours, then the node kinds present, as a row of small swatches."""
    y = _MARGIN + 22
    parts, x = [], float(_MARGIN)
    entries: list[tuple[str, str]] = [(f"la-n la-op la-d{i}", str(d)) for d, i in devices.items()]
    kinds = {it.kind for it in items}
    d0 = f" la-d{min(devices.values(), default=0)}"
    for kind in ("var", "const", "done", "ext", "copy", "block", "more"):
        if kind in kinds:
            entries.append((f"la-n la-{kind}" + ("" if kind == "more" else d0), _KIND_TEXT[kind]))
    if any(id(n) in out_ids for it in items for n in it.nodes[:1]):
        entries.append((f"la-n la-op la-out{d0}", _KIND_TEXT["out"]))
    for cls, label in entries:
        kind = cls.split()[1][3:]
        w = 22
        shape = S.polygon([(3, 0), (w - 3, 0), (w, 7), (w - 3, 14), (3, 14), (0, 7)]) if kind == "copy" \
            else S.rect(0, 0, w, 14, rx={"var": 7, "const": 1, "done": 1, "ext": 1}.get(kind, 4))
        parts.append(S.group(shape, cls=cls, dx=x, dy=y))
        parts.append(S.text(x + w + 5, y + 11, label))
        x += w + 5 + S.text_width(label, 11) + 16
    return '<g class="la-lg">' + "".join(parts) + "</g>", x - _MARGIN
