"""Run a graph node by node on backend arrays: the reference evaluator.

The ground truth the compiled executor is tested against, and what the ONNX loader folds
constants with; its ``run_kernel`` (one node's kernel, errors named) is shared by every evaluator.
Materializing lazy arrays runs through ``structure.describe`` and ``recorded.run_recorded``. It
works on ``Node`` objects and backend values only (never ``NDArray``).
"""
from __future__ import annotations

import numpy as np

from ..error_context import from_node
from ..errors import ERROR_CLASSES, DeferredComputeError, LazyArrayError, OpFailed, OutOfMemoryError, fmt_shape
from ..graph.node import Entry, Node, check_capture
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
    if op.sparse_kernel is op.kernel:  # one kernel for every storage type (a sub-graph call)
        fn = op.bind(xp)
    else:
        stypes = [stype_of(a) for a in args]
        which = registry.uses_sparse_kernel(op, stypes, node.params,
                                            None if op.storage is None else [getattr(a, "shape", ()) for a in args])
        if which is None:
            registry.warn_fallback(op, stypes)
            args = [densify(a, xp) for a in args]
        fn = op.bind_sparse(xp) if which else op.bind(xp)
    try:
        out = fn(*args, **node.params)
    except LazyArrayError:
        raise
    except Exception as exc:
        raise kernel_error(node, args, exc) from exc
    outs = list(out) if len(node.avals) > 1 else [out]
    if op.owns_outputs:
        return outs
    return [o if hasattr(o, "shape") and not isinstance(o, np.generic) else np.asarray(o) for o in outs]


def kernel_error(node: Node, inputs: list, exc: Exception, where: str = "") -> LazyArrayError:
    """The error for a kernel that failed at run time: the class an eager call raises
    (``OpValueError``, ``OpTypeError``, ``OpFailed``), naming the op, the inputs and the line
    that recorded the node; the original exception becomes ``__cause__``."""
    shapes = ", ".join(f"{getattr(a, 'dtype', '')}{fmt_shape(getattr(a, 'shape', ()))}" for a in inputs)
    line = node.source_line()
    if isinstance(exc, MemoryError):
        kind = OutOfMemoryError
    else:
        kind = next((w for t, w in ERROR_CLASSES.items() if isinstance(exc, t)), OpFailed)
    return from_node(kind(f"{node.op.name} failed{' ' + where if where else ''} on inputs [{shapes}]: {exc}"
                          + (f" (recorded at {line})" if line else "")), node.block)


def interpret(outputs: list[Entry], known=None) -> list:
    """The reference evaluator: values of ``outputs``, node by node, nothing planned.

    ``known(node)`` gives values the caller already has; constants are read as they are.
    The compiled executor is tested against this.
    """
    order = topo_order(outputs, stop=lambda n: n.op is None or (known is not None and known(n) is not None))
    env: dict[int, list] = {}
    for node in order:
        vals = known(node) if known is not None else None
        if vals is None and node.op is None:
            if node.kind != "const":
                raise DeferredComputeError(
                    f"cannot compute: graph input {node.name!r} ({node.avals[0]}) has no value; "
                    "bind it by calling the symbol through la.CachedOp(sym)(...)"
                )
            check_capture(node)
            vals = [node.value]
        if vals is None:
            vals = run_kernel(node, [env[id(e.node)][e.index] for e in node.inputs])
        env[id(node)] = vals
    return [env[id(e.node)][e.index] for e in outputs]
