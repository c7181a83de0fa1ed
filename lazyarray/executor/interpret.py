"""Run a graph node by node on backend arrays: the reference evaluator, and the ownership rule.

``interpret`` is the ground truth the compiled executor is tested against, what the ONNX loader
folds constants with, and (``owned=True``) how ``program.evaluate`` runs a graph of a few nodes,
where planning would cost more than it saves. Its ``run_kernel`` (one node's kernel, errors named)
is shared by every evaluator, and so is the **ownership rule** (``fresh``, ``owns_memory``,
``hand_out``): every value handed to a caller is a buffer of its own; a result that shares memory
with an input, a constant, a known value or another output is copied. It works on ``Node``
objects and backend values only (never ``NDArray``).
"""
from __future__ import annotations

import numpy as np

from ..buffer import root
from ..error_context import from_node
from ..errors import ERROR_CLASSES, DeferredComputeError, LazyArrayError, OpFailed, OutOfMemoryError, fmt_shape
from ..graph.node import Entry, Node, check_capture
from ..graph.traverse import topo_order
from ..kernels.profile import timed
from ..mode import MODE, PROFILING
from ..ops import registry
from ..storage import copy_value, densify, stype_of


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


def interpret(outputs: list[Entry], known=None, owned: bool = False) -> list:
    """The reference evaluator: values of ``outputs``, node by node, nothing planned.

    ``known(node)`` gives values the caller already has; constants are read as they are.
    ``owned``: every value returned is a buffer of its own (``hand_out``), as a compiled program's
    outputs are; else a value may be an input or a view of one. Kernels are timed inside
    ``la.profile()``. The compiled executor is tested against this.
    """
    order = topo_order(outputs, stop=lambda n: n.op is None or (known is not None and known(n) is not None))
    env: dict[int, list] = {}
    own: set[int] = set()  # ids of values that are buffers of their own (``owned``)
    profiled = MODE.get() & PROFILING
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
            args = [env[id(e.node)][e.index] for e in node.inputs]
            if profiled:
                vals = timed(node.op, lambda *a, node=node: run_kernel(node, list(a)), "interpreted")(*args)
            else:
                vals = run_kernel(node, args)
            if owned:
                own.update(id(v) for v, ok in zip(vals, owns_memory(node.op, vals, args)) if ok)
        env[id(node)] = vals
    values = [env[id(e.node)][e.index] for e in outputs]
    return hand_out(values, own) if owned else values


def fresh(outs, args) -> list[bool]:
    """Per output: True when it shares no memory with ``args`` (the roots of ``args`` are found once)."""
    arg_ids = {id(a) for a in args}
    arg_roots = None
    result = []
    for r in outs:
        if id(r) in arg_ids:
            result.append(False)
        elif getattr(r, "base", None) is None:  # owns its memory and is none of the inputs
            result.append(True)
        else:
            if arg_roots is None:
                arg_roots = {id(root(a)) for a in args if a is not None}
            result.append(id(root(r)) not in arg_roots)
    return result


def owns_memory(op, outs, args) -> list[bool]:
    """Per output of ``op`` run on ``args``: True when it is a buffer of its own (an op that hands
    over what it made: always; a view op: never; else ``fresh``)."""
    if op.owns_outputs:
        return [True] * len(outs)
    if op.view:
        return [False] * len(outs)
    return fresh(outs, args)


def hand_out(values: list, own) -> list:
    """``values`` as the caller gets them: each a buffer of its own, nobody else's. ``own``: the
    ids of the values that already are; the rest, and a value handed out twice, are copied."""
    result = []
    handed: set[int] = set()
    for v in values:
        if id(v) not in own or id(v) in handed:
            v = copy_value(v)
        handed.add(id(v))
        result.append(v)
    return result
