"""Run a graph node by node on backend arrays: the reference evaluator.

Used to materialize lazy arrays and as the ground truth the compiled executor is tested
against. It works on ``Node`` objects and backend values only (never ``NDArray``).
"""
from __future__ import annotations

import numpy as np

from ..errors import DeferredComputeError, LazyArrayError, fmt_shape
from ..graph.node import Entry, Node
from ..graph.traverse import topo_order
from ..ops import registry
from ..storage import densify, stype_of


def run_kernel(node: Node, args: list):
    """Apply ``node.op``'s kernel to backend ``args``; returns a list of outputs.

    Sparse inputs of an op without a sparse kernel are densified (with the fallback warning).
    Errors are re-raised naming the op, the input shapes and the user's source line.
    """
    op = node.op
    xp = node.avals[0].device.xp
    stypes = [stype_of(a) for a in args]
    which = registry.uses_sparse_kernel(op, stypes, node.params, [getattr(a, "shape", ()) for a in args])
    if which is None:
        registry.warn_fallback(op, stypes)
        args = [densify(a, xp) for a in args]
    try:
        out = (op.bind_sparse(xp) if which else op.bind(xp))(*args, **node.params)
    except LazyArrayError:
        raise
    except Exception as exc:
        shapes = ", ".join(fmt_shape(getattr(a, "shape", ())) for a in args)
        where = node.source_line()
        raise type(exc)(
            f"{op.name} failed on inputs [{shapes}]: {exc}" + (f" (recorded at {where})" if where else "")
        ) from exc
    outs = list(out) if op.num_outputs > 1 else [out]
    return [o if hasattr(o, "shape") and not isinstance(o, np.generic) else np.asarray(o) for o in outs]


def evaluate(outputs: list[Entry], keep=None) -> list:
    """Values of ``outputs``, computing only what is missing.

    Nodes that already hold values are leaves of the walk. ``keep(node) -> bool`` says which
    computed nodes store their values (the requested ones always do); the rest are freed
    as soon as their last reader has run.
    """
    order = topo_order(outputs, stop=lambda n: n.values is not None)
    want = {id(e.node) for e in outputs}
    readers: dict[int, int] = {}
    for node in order:
        for e in node.inputs:
            readers[id(e.node)] = readers.get(id(e.node), 0) + 1
    temp: dict[int, list] = {}
    for node in order:
        if node.values is not None:
            continue
        if node.op is None:
            raise DeferredComputeError(
                f"cannot compute: graph input {node.name!r} ({node.avals[0]}) has no value; "
                "bind it by calling the symbol through la.CachedOp(sym)(...)"
            )
        args = []
        for e in node.inputs:
            src = e.node
            vals = src.values if src.values is not None else temp[id(src)]
            args.append(vals[e.index])
            left = readers[id(src)] - 1
            readers[id(src)] = left
            if left == 0 and src.values is None:
                temp.pop(id(src), None)
        outs = run_kernel(node, args)
        if id(node) in want or (keep is not None and keep(node)):
            node.values = outs
        elif readers.get(id(node)):
            temp[id(node)] = outs
    return [e.node.values[e.index] if e.node.values is not None else temp[id(e.node)][e.index]
            for e in outputs]
