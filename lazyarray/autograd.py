"""Autograd: ``record()``, ``pause()``, training mode, leaves and ``backward``.

Recording builds the same graph IR as deferred compute. The runtime state lives beside it
(``tape.py``), not in the graph: a ``Record`` per recorded op holds its node, the values it produced (with
their buffer versions) and the records of its inputs; a ``Leaf`` per ``attach_grad()``
array holds how its gradient is kept and the gradient. ``backward`` walks the records,
runs the gradient pass over their nodes, then evaluates the gradient graph with the saved
values (eager) or leaves it lazy (inside deferred compute).
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from . import backward_cache, jit
from .aval import Aval
from .buffer import bump, version
from .deferred import MODE, RECORDING, fix_values, is_deferred, known_values, set_mode_bit, show
from .errors import AutogradError, ParamError, ShapeError, fmt_shape
from .executor.program import evaluate
from .graph.build import apply_node
from .graph.node import Entry, Node, capture_node
from .graph.passes.gradient import gradient
from .graph.traverse import topo_order
from .ops import registry
from .ops.sparse_kernels import add_values
from .storage import SPARSE_TYPES, stype_of
from .tape import (  # noqa: F401 (Leaf, Record, tracked_nodes, parents_of: importable from autograd as before)
    Leaf,
    Record,
    captured_input_written,
    parents_of,
    recorded_at,
    saved_value_written,
    tracked_nodes,
)

TRAINING: contextvars.ContextVar[bool] = contextvars.ContextVar("lazyarray_training", default=False)


@contextlib.contextmanager
def record(train_mode: bool = True):
    """Record ops for ``backward()``; ``train_mode`` also switches training mode on (dropout).

    >>> import lazyarray as la
    >>> x = la.array([1.0, 2.0]); x.attach_grad()
    >>> with la.autograd.record():
    ...     y = (x * x).sum()
    >>> y.backward(); x.grad.asnumpy()
    array([2., 4.], dtype=float32)
    """
    t1 = set_mode_bit(RECORDING, True)
    t2 = TRAINING.set(bool(train_mode))
    try:
        yield
    finally:
        TRAINING.reset(t2)
        MODE.reset(t1)


@contextlib.contextmanager
def pause(train_mode: bool = False):
    """Stop recording inside a ``record()`` block (e.g. for metrics or parameter updates)."""
    t1 = set_mode_bit(RECORDING, False)
    t2 = TRAINING.set(bool(train_mode))
    try:
        yield
    finally:
        TRAINING.reset(t2)
        MODE.reset(t1)


@contextlib.contextmanager
def train_mode():
    """Training mode on (dropout drops) without changing whether ops are recorded."""
    t = TRAINING.set(True)
    try:
        yield
    finally:
        TRAINING.reset(t)


@contextlib.contextmanager
def predict_mode():
    """Training mode off (dropout is the identity) without changing recording."""
    t = TRAINING.set(False)
    try:
        yield
    finally:
        TRAINING.reset(t)


def is_recording() -> bool:
    """True inside ``record()`` (and not inside ``pause()``)."""
    return bool(MODE.get() & RECORDING)


def is_training() -> bool:
    """True in training mode: inside ``record()`` by default, or ``train_mode()``."""
    return TRAINING.get()


def record_call(node: Node, values: list, arrays, results) -> None:
    """Record an op whose ``values`` were just computed from ``arrays`` (tracked by autograd):
    ``results`` (the arrays showing the first outputs) get the record; the other values are
    the record's own."""
    record_result(node, values, parents_of(node.inputs, arrays), results)


def record_result(node: Node, values: list, parents: tuple, results) -> None:
    """``record_call`` for a caller that knows the record or leaf behind each input entry
    (``parents``, aligned with ``node.inputs``): ``CachedOp`` reads them off its arguments."""
    rec = Record(node, values, parents, len(results))
    for i, r in enumerate(results):
        r._entry = Entry(node, i)
        r._autograd = rec


def mark_leaf(array, grad_req: str, stype: str = "default") -> None:
    """Make ``array`` a gradient target: ``backward`` writes (or adds) its gradient, converted to
    storage ``stype`` (``"row_sparse"``: only the rows the gradient touches are stored).
    ``grad_req="null"`` stops tracking it."""
    if grad_req not in ("write", "add", "null"):
        raise ValueError(f"attach_grad: grad_req must be 'write', 'add' or 'null', got {grad_req!r}")
    if stype not in ("default", "row_sparse", "csr"):
        raise ValueError(f"attach_grad: stype must be 'default', 'row_sparse' or 'csr', got {stype!r}")
    if grad_req == "null":
        if type(array._ag) is Leaf:
            array._ag = None
            array._entry = None if array._value is not None else array._entry
        return
    v = array._value
    if v is not None:
        entry = Entry(capture_node(v, Aval(tuple(v.shape), v.dtype, array._device, stype_of(v))))
    else:
        entry = array._entry
    array._ag = Leaf(entry, grad_req, stype)
    array._entry = entry


def _tape(outputs: list) -> tuple[list[Record], dict]:
    """The records behind ``outputs``, each after the records it reads (depth first from the
    outputs, inputs in order: a deterministic topological order, which ``backward_cache`` numbers
    records by), and, per leaf in the order the walk meets them, the entries that stood for it."""
    records: list[Record] = []
    leaves: dict[int, tuple[Leaf, dict]] = {}
    seen: set[int] = set()
    for a in outputs:
        ag = a._ag
        if type(ag) is Leaf:
            leaves.setdefault(id(ag), (ag, {}))[1][id(ag.entry.node)] = a._entry
            continue
        if ag is None or id(ag) in seen:
            continue
        seen.add(id(ag))
        stack = [[ag, 0]]
        while stack:
            top = stack[-1]
            rec, i = top
            inputs, parents = rec.node.inputs, rec.parents
            while i < len(parents):
                p = parents[i]
                i += 1
                if p is None:
                    continue
                if type(p) is Leaf:
                    e = inputs[i - 1]
                    got = leaves.get(id(p))
                    if got is None:
                        got = leaves[id(p)] = (p, {})
                    got[1][id(e.node)] = e
                elif id(p) not in seen:
                    seen.add(id(p))
                    top[1] = i
                    stack.append([p, 0])
                    break
            else:  # every parent is done: this record follows them
                stack.pop()
                records.append(rec)
    return records, leaves


def backward(heads, head_grads=None, retain_graph: bool = False) -> None:
    """Gradients of several outputs at once (Gluon's ``autograd.backward``): every leaf gets the sum
    over ``heads`` of ``head_grad_i``-weighted gradients, in one pass over the shared graph.

    ``heads``: an array or a list of arrays recorded under ``record()``; ``head_grads``: one array
    (shaped like its head), number or ``None`` (ones) per head, or ``None`` for all ones.

    >>> import lazyarray as la
    >>> x = la.array([1.0, 2.0]); x.attach_grad()
    >>> with la.autograd.record():
    ...     y1, y2 = x * x, x * 3
    >>> la.autograd.backward([y1, y2], head_grads=[la.ones(2), la.array([2.0, 2.0])])
    >>> x.grad.asnumpy()
    array([ 8., 10.], dtype=float32)
    """
    heads, head_grads = _heads_and_grads(heads, head_grads)
    # the array type sits above autograd: the heads bring its constructor (``NDArray._make``)
    make = type(heads[0])._make
    grads = [g if g is None or hasattr(g, "_ag") else _constant_like(h, g, make) for h, g in zip(heads, head_grads)]
    backward_arrays(heads, grads, make, retain_graph)


def _is_array(a) -> bool:
    """An array of the package (one autograd can track): it carries autograd state and its constructor."""
    return hasattr(a, "_ag") and hasattr(a, "_make")


def _heads_and_grads(heads, head_grads) -> tuple[list, list]:
    """``backward``'s arguments as two aligned lists, checked: recorded arrays, one gradient each."""
    single = _is_array(heads)
    if not single and not (isinstance(heads, (list, tuple)) and all(_is_array(h) for h in heads)):
        raise ParamError(f"autograd.backward: heads must be an array or a list of arrays recorded under "
                         f"la.autograd.record(), got {type(heads).__name__} {heads!r}"[:300])
    heads = [heads] if single else list(heads)
    if head_grads is None:
        head_grads = [None] * len(heads)
    elif single and not isinstance(head_grads, (list, tuple)):
        head_grads = [head_grads]
    else:
        head_grads = list(head_grads)
    if not heads or len(head_grads) != len(heads):
        raise AutogradError(f"autograd.backward: {len(heads)} heads but {len(head_grads)} head_grads; pass one "
                            "head gradient (or None) per head")
    for i, h in enumerate(heads):
        if h._ag is None:
            raise AutogradError(
                f"autograd.backward: heads[{i}] was not computed from an array with attach_grad() inside "
                "autograd.record(); call x.attach_grad() and compute the heads inside "
                "`with la.autograd.record():`")
    return heads, head_grads


def _constant_like(head, g, make):
    """A head gradient given as a number (that value everywhere) or as nested lists / a NumPy array,
    as an array of the head's dtype on its device."""
    xp = head.device.xp
    if not hasattr(g, "__len__"):
        return make(xp.full(head.shape, g, dtype=head.dtype), None, head.device)
    return make(xp.asarray(np.array(g, dtype=head.dtype)), None, head.device)


def backward_arrays(outputs: list, head_grads: list | None, make, retain_graph: bool = False) -> None:
    """Compute gradients of the arrays ``outputs`` for every leaf (``attach_grad``) they depend on.

    ``head_grads``: one array (or None for ones) per output. Inside deferred compute or on lazy
    outputs the gradients stay lazy; otherwise they are computed now. The values autograd saved
    are freed afterwards unless ``retain_graph=True``; a value written in place after it was
    saved raises ``AutogradError`` instead of giving a wrong gradient.
    """
    heads = list(head_grads) if head_grads is not None else [None] * len(outputs)
    out_entries = [o._entry for o in outputs]
    head_entries = []
    for out, hg in zip(out_entries, heads):
        if hg is not None and hg.aval.shape != out.aval.shape:
            raise ShapeError(
                f"backward: out_grad has shape {fmt_shape(hg.aval.shape)} but the output has "
                f"{fmt_shape(out.aval.shape)}; pass an out_grad shaped like the output"
            )
        head_entries.append(None if hg is None else hg._as_entry())
    records, leaves = _tape(outputs)
    freed = [r for r in records if r.freed]
    if freed:
        raise AutogradError(
            f"backward: the values saved for {freed[0].node.label()}{recorded_at(freed[0].node)} were freed by an "
            "earlier backward; pass retain_graph=True to the first backward() to run backward through the "
            "same graph again")
    if not leaves:
        raise AutogradError(
            "backward: nothing to differentiate: no array this output depends on called "
            "attach_grad() inside autograd.record(); call x.attach_grad() and compute the "
            "output inside `with la.autograd.record():`"
        )
    lazy = is_deferred() or any(o._value is None for o in outputs)
    if not lazy and _cached_backward(records, leaves, outputs, heads, make, retain_graph):
        return
    bound = {id(r.node): r for r in records if r.values is not None}
    targets = [(leaf, list(entries.values())) for leaf, entries in leaves.values()]
    grads = _leaf_gradients(out_entries, head_entries, targets)
    if lazy:
        for r in bound.values():  # the lazy gradients read these when they are computed
            fix_values(r.node, r.values, r.versions)
        for (leaf, entries), g in zip(targets, grads):
            _store_lazy_grad(leaf, g, make)
    else:
        values = evaluate(grads, _saved_values(bound, grads, targets))
        for (leaf, entries), v in zip(targets, values):
            _store_grad(leaf, v, make, entries[0].aval.device)
    if not retain_graph:
        for r in records:
            r.values = None
            r.freed = True


def _leaf_gradients(out_entries: list[Entry], head_entries: list, targets: list) -> list[Entry]:
    """The gradient graph: per ``(leaf, entries)`` of ``targets``, the sum of the gradients of the
    entries that stood for it (zeros if none), in the leaf's storage type."""
    flat = gradient(out_entries, head_entries, [e for _, entries in targets for e in entries])
    grads = []
    k = 0
    for leaf, entries in targets:
        parts = [g for g in flat[k:k + len(entries)] if g is not None]
        k += len(entries)
        g = parts[0] if parts else apply_node(registry.get("zeros_like"), entries[0])
        for more in parts[1:]:
            g = apply_node(registry.get("add"), g, more)
        if g.aval.stype != leaf.stype:  # e.g. a row_sparse embedding gradient asked dense
            g = apply_node(registry.get("cast_storage"), g, stype=leaf.stype)
        grads.append(g)
    return grads


def _cached_backward(records, leaves, outputs, heads, make, retain_graph) -> bool:
    """An eager backward through a program compiled once per tape structure (``backward_cache``);
    False when this tape takes the general path."""
    leaf_list = list(leaves.values())
    if any(r.values is None for r in records):
        return False
    key, consts = backward_cache.structure(records, leaf_list, outputs, heads)
    if key is None:
        return False
    compiled = backward_cache.lookup(key)
    if compiled is None:
        if not backward_cache.cacheable(key):
            return False
        compiled = backward_cache.build(key, records, leaf_list, heads)
        with jit.first_run():  # (NumPy kernels: compiled ones load or compile from the second run)
            values = backward_cache.run(compiled, records, leaf_list, consts, heads)
    else:
        values = backward_cache.run(compiled, records, leaf_list, consts, heads)
    for (leaf, entries), v in zip(leaf_list, values):
        _store_grad(leaf, v, make, next(iter(entries.values())).aval.device)
    if not retain_graph:
        for r in records:
            r.values = None
            r.freed = True
    return True


def _entries_read(grads: list[Entry], bound: dict) -> set:
    """``(id(node), index)`` of every saved value the gradient graph reads."""
    read = {(id(g.node), g.index) for g in grads}
    for node in topo_order(grads, stop=lambda n: id(n) in bound or n.op is None):
        if id(node) not in bound and node.op is not None:
            read.update((id(e.node), e.index) for e in node.inputs)
    return read


def _saved_values(bound: dict, grads: list[Entry], targets=()):
    """``known(node)`` for the gradient program: autograd's saved values (those it reads checked
    against their versions), the leaves' captured values (checked too), then computed lazy values.
    ``targets``: ``(leaf, entries)`` pairs, to name a parameter whose captured value was written."""
    read: list = []  # the entries the gradient graph reads: found only if a version changed

    def reads(node, i) -> bool:
        if not read:
            read.append(_entries_read(grads, bound))
        return (id(node), i) in read[0]

    def known(node):
        r = bound.get(id(node))
        if r is not None:
            for i, (v, n) in enumerate(zip(r.values, r.versions)):  # only the values users hold
                if version(v) != n and reads(node, i):
                    raise saved_value_written(r, i)
            return r.values
        if node.kind == "const" and node.version is not None and version(node.value) != node.version:
            raise captured_input_written(node, next((leaf.name for leaf, entries in targets
                                                     if any(e.node is node for e in entries)), None))
        return known_values(node)

    return known


def _store_lazy_grad(leaf: Leaf, g: Entry, make) -> None:
    prev = leaf.grad
    if leaf.grad_req == "add" and prev is not None:
        g = apply_node(registry.get("add"), prev._as_entry(), g)
    arr = make(None, g, g.aval.device)
    show(arr, g)
    leaf.grad = arr
    leaf.fresh = True


def _store_grad(leaf: Leaf, value, make, device) -> None:
    """An eager gradient: added into the existing one (``grad_req="add"``), else adopted as it is
    (the program handed out a fresh buffer nobody else holds)."""
    prev = leaf.grad
    if leaf.grad_req == "add" and prev is not None:
        old = prev._materialize()
        if isinstance(value, SPARSE_TYPES) or isinstance(old, SPARSE_TYPES) or old.shape != value.shape \
                or not old.flags.writeable:
            leaf.grad = make(add_values(device.xp, old, value), None, device)
        else:
            old += value
            bump(old)
    else:
        leaf.grad = make(value, None, device)
    leaf.fresh = True


def write_grads(arrays: list, values: list) -> None:
    """Make each backend array of ``values`` the gradient of the tracked array (``attach_grad``) at its
    place in ``arrays``, as ``backward`` writes a gradient: adopted as it is (``grad_req="write"``; the
    caller hands over a buffer nobody else writes) or added in (``"add"``), and fresh for the optimizer.
    For gradients computed elsewhere (``la.distributed``'s reduced gradients), without a backward."""
    if len(arrays) != len(values):
        raise ParamError(f"write_grads: {len(arrays)} arrays but {len(values)} gradients")
    for a, v in zip(arrays, values):
        leaf = a._ag
        if not isinstance(leaf, Leaf):
            raise AutogradError("write_grads: the array does not track a gradient; call attach_grad() first")
        if tuple(v.shape) != tuple(a.shape):
            raise ShapeError(f"write_grads: gradient of shape {fmt_shape(v.shape)} for an array of shape "
                             f"{fmt_shape(a.shape)}")
        _store_grad(leaf, v, type(a)._make, a.device)
