"""The notebook (HTML) face of a graph drawing: the drawing with ``<details>`` controls that expand
each block (pure HTML: no script, no server).

``to_html`` draws the graph with one box per top-level block (``draw.to_svg``), then one
``<details>`` per block holding that block's own drawing (its child blocks collapsed, expandable
in turn below it; nodes outside the block drawn as "from outside" leaves), and one holding the
drawing of every node.

>>> import lazyarray as la
>>> x = la.sym.var("x", shape=(2, 3))
>>> html = to_html(la.sym.relu(x).outputs, summary="relu")
>>> html.startswith('<div class="la-graph">') and "<details" not in html  # no blocks, no controls
True
"""
from __future__ import annotations

from . import svg as S
from .draw import (
    DEFAULT_MAX_NODES,
    block_prefix,
    display_names,
    inline_scalar,
    is_data_input,
    leaf_size,
    to_svg,
)
from .node import Entry, Node
from .traverse import topo_order

MAX_INPUTS_LISTED = 6  # a symbol with more inputs (a model's parameters) lists the rest in a <details>


def symbol_html(outputs: list[Entry], names: dict[int, str], inputs: list[str], output_names: list[str],
                max_nodes: int | None = DEFAULT_MAX_NODES) -> str:
    """``Symbol._repr_html_``: a one-line summary (inputs, outputs) above the drawing. A model's
    parameter inputs (ResNet-18 has ~100) are collapsed into a ``<details>`` under that line."""
    data = {n.name for n in topo_order(list(outputs)) if n.op is None and is_data_input(n)}
    shown, rest = _split_inputs(inputs, data)
    more = f" (+ {len(rest):,} more)" if rest else ""
    summary = (f"Symbol · inputs: {', '.join(shown) or 'none'}{more} · "
               f"outputs: {', '.join(output_names)}")
    listed = ""
    if rest:
        what = " (parameters)" if data & set(shown) else ""
        listed = (f'<details class="la-inputs"><summary>{len(rest):,} more inputs{what}</summary>'
                  f'<div class="la-names">{S.esc(", ".join(rest))}</div></details>')
    return to_html(outputs, names=names, max_nodes=max_nodes, summary=summary, under_summary=listed)


def _split_inputs(inputs: list[str], data: set[str]) -> tuple[list[str], list[str]]:
    """The inputs named in the summary line (the data inputs, else the first few) and the others."""
    if len(inputs) <= MAX_INPUTS_LISTED:
        return list(inputs), []
    shown = [n for n in inputs if n in data][:MAX_INPUTS_LISTED] or inputs[:3]
    named = set(shown)
    return shown, [n for n in inputs if n not in named]


_DETAILS_CSS = (".la-graph details{margin:4px 0 4px 2px}"
                ".la-graph summary{cursor:pointer;font:12px sans-serif;color:#374151}"
                ".la-graph details details{margin-left:14px}"
                ".la-graph .la-leaf{font:12px sans-serif;color:#6b7280;margin:3px 0 3px 16px}")
# Every card: notebook front ends shrink SVGs to the cell's width (JupyterLab's `svg {max-width:100%}`),
# which makes a big graph unreadable; ours keep their size and the frame around them scrolls.
_GRAPH_CSS = (".la-graph svg{max-width:none!important}"
              ".la-graph .la-names{font:11.5px ui-monospace,monospace;color:#4b5563;margin:2px 0 4px 16px;"
              "max-height:160px;overflow:auto}"
              ".la-graph .la-inputs summary{cursor:pointer;font:12px sans-serif;color:#374151}")


def to_html(outputs: list[Entry], *, names: dict[int, str] | None = None, stop=None,
            max_nodes: int | None = DEFAULT_MAX_NODES, title: str | None = None,
            summary: str = "", under_summary: str = "") -> str:
    """The drawing inside a scrollable ``<div>`` (well-formed XHTML) with a one-line ``summary``.

    When nodes were recorded inside blocks, the drawing shows one box per top-level block and
    ``<details>`` elements below it expand each block (its inner drawing, its own child blocks
    expandable in turn) or the whole graph: pure HTML, no script or server.
    """
    svg = to_svg(outputs, names=names, stop=stop, max_nodes=max_nodes, title=title)
    head = (f'<div class="la-sum" style="font:12px sans-serif;color:#374151;margin:2px 0 6px">{S.esc(summary)}</div>'
            if summary else "") + under_summary  # under_summary: markup, such as a collapsed list
    body = f'<div style="overflow:auto;max-height:640px">{svg}</div>'
    order = topo_order(list(outputs), stop=stop)
    css = _GRAPH_CSS
    if any(n.block for n in order if n.op is not None):
        names = display_names(order, names)
        inner = _block_details(order, (), names, max_nodes, stop)
        full = to_svg(outputs, names=names, stop=stop, max_nodes=max_nodes, title=title, blocks="expanded")
        body += (f'<details class="la-expand"><summary>expand blocks ({len(inner)})</summary>{"".join(inner)}'
                 f'</details><details class="la-expand"><summary>every node</summary>'
                 f'<div style="overflow:auto;max-height:640px">{full}</div></details>')
        css += _DETAILS_CSS
    return f'<div class="la-graph"><style>{css}</style>{head}{shared_stylesheets(body)}</div>'


def shared_stylesheets(html: str) -> str:
    """``html`` with each SVG stylesheet kept at its first appearance only. The drawings of one card
    share their stylesheet (its selectors are scoped to the drawing's class, ``svg.la-g``), and a
    ResNet's card holds dozens of drawings: one copy each was a third of its size."""
    seen: set[str] = set()
    out, at = [], 0
    while (start := html.find("<style>", at)) >= 0:
        end = html.index("</style>", start) + len("</style>")
        sheet = html[start:end]
        out.append(html[at:start] if sheet in seen else html[at:end])
        seen.add(sheet)
        at = end
    out.append(html[at:])
    return "".join(out)


def _block_details(order: list[Node], prefix: tuple, names, max_nodes, stop, users=None,
                   scope: list[Node] | None = None) -> list[str]:
    """One ``<details>`` per block directly below ``prefix``: its drawing (nodes outside it drawn as
    plain leaves) and, inside, the same for its own child blocks."""
    if users is None:  # (producer id, output index) -> ids of the nodes reading it
        users = {}
        for n in order:
            for e in n.inputs:
                users.setdefault((id(e.node), e.index), set()).add(id(n))
    out = []
    for key, nodes in _block_runs(order if scope is None else scope, prefix):
        ids = {id(n) for n in nodes}
        ends = [Entry(n, i) for n in nodes for i in range(len(n.avals))
                if users.get((id(n), i), set()) - ids]
        ends = ends or [Entry(nodes[-1], 0)]
        path = ".".join(k for k, _ in key)

        def outside(n, ids=ids, stop=stop):
            return n.op is not None and (id(n) not in ids or (stop is not None and stop(n)))

        nested = _block_details(order, key, names, max_nodes, stop, users, nodes)
        label = (f"{path} · {key[-1][1]} — {len(nodes):,} op{'s' if len(nodes) != 1 else ''}, "
                 f"{_param_count(nodes, users, order):,} parameters")
        if prefix and len(nodes) == 1 and not nested:
            # a one-op layer inside a block (a ResNet's Conv2D, BatchNorm, ...): its parent's drawing
            # and "every node" show it; a line here, not a drawing per layer, keeps the card small
            out.append(f'<div class="la-leaf">{S.esc(label)}: {S.esc(nodes[0].op.name)}</div>')
            continue
        svg = to_svg(ends, names=names, stop=outside, max_nodes=max_nodes, prefix=key,
                     title=f"{path} · {key[-1][1]}")
        out.append(f"<details><summary>{S.esc(label)}</summary>"
                   f'<div style="overflow:auto;max-height:520px">{svg}</div>{"".join(nested)}</details>')
    return out


def _block_runs(order: list[Node], prefix: tuple) -> list[tuple[tuple, list[Node]]]:
    """Runs of consecutive op nodes (creation order) in the same block directly below ``prefix``:
    ``(block path, nodes)``. A block called twice gives two runs (one box per call)."""
    runs: list[tuple[tuple, list[Node]]] = []
    last = None
    for n in order:
        if n.op is None:
            continue
        key = block_prefix(n, len(prefix))
        if key is None or key[:len(prefix)] != prefix:
            last = None
            continue
        if key != last:
            runs.append((key, []))
            last = key
        runs[-1][1].append(n)
    return runs


def _param_count(nodes: list[Node], users: dict, order: list[Node]) -> int:
    """Elements of the parameters (leaves other than data inputs) that only ``nodes`` read."""
    ids = {id(n) for n in nodes}
    seen: set[int] = set()
    total = 0
    for n in nodes:
        for e in n.inputs:
            leaf = e.node
            if leaf.op is None and id(leaf) not in seen and not inline_scalar(leaf) and not is_data_input(leaf) \
                    and users.get((id(leaf), 0), set()) <= ids:
                seen.add(id(leaf))
                total += leaf_size(leaf)
    return total
