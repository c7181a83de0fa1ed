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
from .draw import DEFAULT_MAX_NODES, block_prefix, display_names, inline_scalar, is_data_input, leaf_size, to_svg
from .node import Entry, Node
from .traverse import topo_order


def symbol_html(outputs: list[Entry], names: dict[int, str], inputs: list[str], output_names: list[str],
                max_nodes: int | None = DEFAULT_MAX_NODES) -> str:
    """``Symbol._repr_html_``: a one-line summary (inputs, outputs) above the drawing."""
    summary = (f"Symbol · inputs: {', '.join(inputs) or 'none'} · "
               f"outputs: {', '.join(output_names)}")
    return to_html(outputs, names=names, max_nodes=max_nodes, summary=summary)


_DETAILS_CSS = (".la-graph details{margin:4px 0 4px 2px}"
                ".la-graph summary{cursor:pointer;font:12px sans-serif;color:#374151}"
                ".la-graph details details{margin-left:14px}")


def to_html(outputs: list[Entry], *, names: dict[int, str] | None = None, stop=None,
            max_nodes: int | None = DEFAULT_MAX_NODES, title: str | None = None,
            summary: str = "") -> str:
    """The drawing inside a scrollable ``<div>`` (well-formed XHTML) with a one-line ``summary``.

    When nodes were recorded inside blocks, the drawing shows one box per top-level block and
    ``<details>`` elements below it expand each block (its inner drawing, its own child blocks
    expandable in turn) or the whole graph: pure HTML, no script or server.
    """
    svg = to_svg(outputs, names=names, stop=stop, max_nodes=max_nodes, title=title)
    head = f'<div style="font:12px sans-serif;color:#374151;margin:2px 0 6px">{S.esc(summary)}</div>' \
        if summary else ""
    body = f'<div style="overflow:auto;max-height:640px">{svg}</div>'
    order = topo_order(list(outputs), stop=stop)
    if any(n.block for n in order if n.op is not None):
        names = display_names(order, names)
        inner = _block_details(order, (), names, max_nodes, stop)
        full = to_svg(outputs, names=names, stop=stop, max_nodes=max_nodes, title=title, blocks="expanded")
        body += (f'<details class="la-expand"><summary>expand blocks ({len(inner)})</summary>{"".join(inner)}'
                 f'</details><details class="la-expand"><summary>every node</summary>'
                 f'<div style="overflow:auto;max-height:640px">{full}</div></details>')
        head = f"<style>{_DETAILS_CSS}</style>" + head
    return f'<div class="la-graph">{head}{body}</div>'


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

        svg = to_svg(ends, names=names, stop=outside, max_nodes=max_nodes, prefix=key,
                     title=f"{path} · {key[-1][1]}")
        nested = _block_details(order, key, names, max_nodes, stop, users, nodes)
        label = (f"{path} · {key[-1][1]} — {len(nodes):,} op{'s' if len(nodes) != 1 else ''}, "
                 f"{_param_count(nodes, users, order):,} parameters")
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
