"""Autograd: ``record()``, ``pause()``, training mode, leaves and ``backward``.

Recording builds the same graph IR as deferred compute (eager nodes just also hold
their values). ``backward`` runs the gradient pass over that graph, then evaluates the
gradient graph at once (eager) or leaves it lazy (inside deferred compute).
"""
from __future__ import annotations

import contextlib
import contextvars

from .deferred import _MODE, RECORDING, is_deferred, materialize, set_mode_bit
from .errors import AutogradError, ShapeError, fmt_shape
from .graph.build import apply_node
from .graph.node import Entry, Node, const_node
from .graph.passes.gradient import gradient
from .graph.traverse import topo_order
from .ops import registry
from .ops.sparse_kernels import add_values
from .storage import SPARSE_TYPES

_TRAINING: contextvars.ContextVar[bool] = contextvars.ContextVar("lazyarray_training", default=False)


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
    t2 = _TRAINING.set(bool(train_mode))
    try:
        yield
    finally:
        _TRAINING.reset(t2)
        _MODE.reset(t1)


@contextlib.contextmanager
def pause(train_mode: bool = False):
    """Stop recording inside a ``record()`` block (e.g. for metrics or parameter updates)."""
    t1 = set_mode_bit(RECORDING, False)
    t2 = _TRAINING.set(bool(train_mode))
    try:
        yield
    finally:
        _TRAINING.reset(t2)
        _MODE.reset(t1)


@contextlib.contextmanager
def train_mode():
    """Training mode on (dropout drops) without changing whether ops are recorded."""
    t = _TRAINING.set(True)
    try:
        yield
    finally:
        _TRAINING.reset(t)


@contextlib.contextmanager
def predict_mode():
    """Training mode off (dropout is the identity) without changing recording."""
    t = _TRAINING.set(False)
    try:
        yield
    finally:
        _TRAINING.reset(t)


def is_recording() -> bool:
    """True inside ``record()`` (and not inside ``pause()``)."""
    return bool(_MODE.get() & RECORDING)


def is_training() -> bool:
    """True in training mode: inside ``record()`` by default, or ``train_mode()``."""
    return _TRAINING.get()


def mark_leaf(node: Node, grad_req: str, stype: str = "default") -> None:
    """Make ``node`` a gradient target: ``backward`` writes (or adds) its gradient, converted to
    storage ``stype`` (``"row_sparse"``: only the rows the gradient touches are stored)."""
    if grad_req not in ("write", "add", "null"):
        raise ValueError(f"attach_grad: grad_req must be 'write', 'add' or 'null', got {grad_req!r}")
    if stype not in ("default", "row_sparse", "csr"):
        raise ValueError(f"attach_grad: stype must be 'default', 'row_sparse' or 'csr', got {stype!r}")
    node.grad_req = grad_req
    node.grad_stype = stype
    node.requires_grad = grad_req != "null"
    node.grad = None


def backward(outputs: list[Entry], head_grads: list | None = None) -> None:
    """Compute gradients of ``outputs`` for every leaf they depend on.

    ``head_grads``: one entry (or None for ones) per output. Inside deferred compute or on
    lazy outputs the gradients stay lazy; otherwise they are computed now.
    """
    heads = list(head_grads) if head_grads is not None else [None] * len(outputs)
    for out, hg in zip(outputs, heads):
        if hg is not None and hg.aval.shape != out.aval.shape:
            raise ShapeError(
                f"backward: out_grad has shape {fmt_shape(hg.aval.shape)} but the output has "
                f"{fmt_shape(out.aval.shape)}; pass an out_grad shaped like the output"
            )
    order = topo_order(outputs)
    leaves = [n for n in order if n.grad_req != "null"]
    if not leaves:
        raise AutogradError(
            "backward: nothing to differentiate: no array this output depends on called "
            "attach_grad() inside autograd.record(); call x.attach_grad() and compute the "
            "output inside `with la.autograd.record():`"
        )
    grads = gradient(outputs, heads, [Entry(n, 0) for n in leaves])
    lazy = is_deferred() or any(o.node.values is None for o in outputs)
    pending = []
    for leaf, g in zip(leaves, grads):
        if g is None:
            g = apply_node(registry.get("zeros_like"), Entry(leaf, 0))
        if g.aval.stype != leaf.grad_stype:  # e.g. a row_sparse embedding gradient asked dense
            g = apply_node(registry.get("cast_storage"), g, stype=leaf.grad_stype)
        if lazy:
            prev = leaf.grad if isinstance(leaf.grad, Entry) else None
            if leaf.grad_req == "add" and leaf.grad is not None:
                prev = prev if prev is not None else _const_like(leaf, leaf.grad)
                g = apply_node(registry.get("add"), prev, g)
            leaf.grad = g
        else:
            pending.append((leaf, g))
    if pending:
        computed_now = {id(g.node) for _, g in pending if g.node.values is None}
        values = materialize([g for _, g in pending])
        adopted: set[int] = set()
        for (leaf, g), v in zip(pending, values):
            # Memory an op allocated in this backward, that no other leaf took, becomes .grad as it
            # is (no copy). Anything else (a head gradient, a value computed earlier, a view) is copied.
            fresh = (id(g.node) in computed_now and g.node.op is not None and g.node.op.fresh_outputs
                     and id(v) not in adopted)
            if fresh:
                adopted.add(id(v))
            _store_grad(leaf, v, fresh)


def _store_grad(leaf: Node, value, fresh: bool = False) -> None:
    """Store an eager gradient: added into the buffer (``grad_req="add"``), adopted as it is when
    ``fresh`` (memory nobody else holds), else copied into the existing buffer."""
    buf = leaf.grad
    if isinstance(value, SPARSE_TYPES) or isinstance(buf, SPARSE_TYPES):  # sparse: replaced, not written
        if leaf.grad_req == "add" and buf is not None and not isinstance(buf, Entry):
            value = add_values(leaf.avals[0].device.xp, buf, value)
        leaf.grad = value
    elif leaf.grad_req == "add" and buf is not None and not isinstance(buf, Entry) and buf.shape == value.shape:
        buf += value
    elif fresh and value.flags.writeable:
        # A fresh gradient array becomes the gradient: no copy (saves a parameter-sized copy per
        # backward). An NDArray taken from ``.grad`` earlier keeps the previous gradient.
        leaf.grad = value
    elif buf is None or isinstance(buf, Entry) or buf.shape != value.shape or not buf.flags.writeable:
        leaf.grad = value.copy()
    else:
        buf[...] = value


def _const_like(leaf: Node, value) -> Entry:
    return Entry(const_node(value, leaf.avals[0]))
