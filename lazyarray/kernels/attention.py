"""``nn.fused_attention``'s implementation ``batched_blas`` and its chooser.

``ops/attention.py`` holds the reference kernel: the replaced ops' kernels one after the other, each
making a fresh array. ``batched_blas`` makes the same calls into one buffer: the scores' product
(``matmul``'s kernel, one BLAS product per batch and head) written where the softmax will be, the
score chain's ufuncs in place (``where`` as a ``copyto`` of the fill under the mask: a selection,
no arithmetic), the softmax in place (``softmax.in_place``: max / subtract and sum / divide as two
compiled passes around NumPy's ``exp``; NumPy's calls where it does not apply), then the product
with ``v`` into the output, through a view in the merged layout when ``out_axes`` asks for one.
The reference's operations in its order: its values bit for bit (and so the replaced graph's),
one program step instead of five to nine. Scores of ``SCRATCH_FROM_BYTES`` or more live in the
thread's scratch (``ops/scratch.py``), smaller ones in a plain allocation.

Measured on BERT-mini's (1, 2, 7, 16) heads (one thread, CPU time per call, the shared machine
under load, alternating): 16.5-16.9 us against the reference kernel's 17.4-18.1 us, and with the
merged layout 22.0-22.5 us against 22.5-23.1 us (where the graph ran the five to nine steps it
replaces, each with its own buffer and step cost).

``compiled`` (numba on; issue #35: the attention was a quarter of hf_bert's step time at batch 1)
makes the same calls but the score chain's ufuncs and the softmax's first pass (row maxima
subtracted), which it runs as one compiled pass over the scores' rows (``attention_jit.py``: the
same operations in the same order), and a compiled step finds its parameters once (the scores'
shape, the chain's extras sorted into the pass's slots, the result's view, the compiled kernels):
the same values bit for bit as ``batched_blas``. Measured on BERT-mini's (1, 2, 7, 16) heads (one
thread, CPU time per call, the shared machine under load, same process): 22 us against
``batched_blas``'s 56 us. A program's first run takes ``batched_blas`` (``jit.tiered``).

``head_loop`` (numba on, at most ``attention_head_loop_max_macs`` multiply-adds: small heads, where the
calls above cost more than their arithmetic) runs the whole attention as one compiled call
(``attention_jit.heads_pass``): per head, the scores as dot products summed over the features in order,
the chain and the row maxima as ``compiled``'s pass does them, the C library's ``exp``, NumPy's row
sums, the weighted sum of ``v`` summed over the keys in order, written through the result's view. Not
the reference's bits (BLAS may sum its products in another order; NumPy's SIMD ``exp`` may differ by an
ulp): each score within ``D * eps * sum(|q_d k_d|)`` of the reference's (``D`` features, ``eps`` the
dtype's), each probability within a relative ``|score error| + 2 eps``, each output within ``T * eps``
of ``sum(p_j |v_j|)`` (``T`` keys) of the product of those probabilities: a few ulps of the result's
scale at a small transformer's sizes (``tests/kernels/test_attention.py`` checks ``64 eps`` of
``|p| @ |v|``). Tiered, as the recurrent cells' compiled loop is: a program's first run loads no numba
and takes ``batched_blas`` (so a first call's outputs are within that bound of the later calls', not
their bits). Measured on
BERT-mini's (1, 2, 7, 16) heads (one thread, CPU time per call, the shared machine under load, same
process, a bound step): 15 us against ``compiled``'s 32 us (9.5 of them the compiled call, 2.3 of those
numba's dispatch of its 12 arguments); ViT-mini's (1, 2, 17, 16): 31 against 41; (8, 2, 7, 16): 59 against
72; a prototype at (1, 4, 65, 16), 540K multiply-adds: 357 against 236 (hence the limit).
"""
from __future__ import annotations

import math

import numpy as np

from .. import jit
from ..ops import registry
from ..ops.attention import OPS, WHERE, apply_chain, chain_extras
from ..ops.scratch import scratch
from ..tuning_table import current
from . import attention_jit, softmax
from .impl import Choice, Impl
from .pairwise_sum import BLOCK
from .runner import Bound, keyword_binder, run_choice

SCRATCH_FROM_BYTES = 64 << 10
_OP = registry.get("fused_attention")
_MATMUL = registry.get("matmul").kernel  # (the reference's product: the same call, the same values)


def _fits(xp, q, k, v) -> bool:
    """NumPy arrays of one float32 / float64 dtype."""
    return xp is np and q.dtype == k.dtype == v.dtype and q.dtype in (np.float32, np.float64)


_UFUNCS = tuple(getattr(np, name) if name != "where" else None for name in OPS)


def _score_chain(s, codes, extras) -> None:
    """The score chain's ops on ``s``, in place (each result has ``s``'s shape and dtype: the pass
    checked it)."""
    for c in codes:
        op, pos = divmod(c, 10)
        if op == WHERE:
            mask, other = next(extras), next(extras)
            # where(mask, fill, s): s takes fill where mask holds; where(mask, s, fill): where it does not
            np.copyto(s, other, where=mask if pos == 2 else np.logical_not(mask))
        elif pos == 0:
            _UFUNCS[op](s, next(extras), out=s)
        else:
            _UFUNCS[op](next(extras), s, out=s)


def _softmax_in_place(s) -> None:
    """``s`` replaced by its softmax along the last axis: the reference's max, subtract, exp, sum,
    divide, in its order (the same values): ``softmax.in_place`` (compiled passes) where it
    applies, else NumPy's with the row statistics in one column."""
    if s.size == 0 or softmax.in_place(s):
        return
    col = np.empty(s.shape[:-1] + (1,), s.dtype)
    np.maximum.reduce(s, axis=-1, keepdims=True, out=col)
    np.subtract(s, col, out=s)
    np.exp(s, out=s)
    np.add.reduce(s, axis=-1, keepdims=True, out=col)
    np.divide(s, col, out=s)


def _scores_buffer(q, k):
    """An uninitialized array for ``q @ k``: the thread's scratch from ``SCRATCH_FROM_BYTES`` on
    (reused call after call: no fresh pages), a plain allocation below (cheaper than the arena's
    look-up at a small transformer's sizes)."""
    shape = _product_shape(q, k)
    if q.itemsize * math.prod(shape) < SCRATCH_FROM_BYTES:
        return np.empty(shape, q.dtype)
    return scratch(np, 0, shape, q.dtype)


def _batched_blas(xp, q, k, v, *extras, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=(), out=None):
    it = iter(extras)
    q = apply_chain(np, q, q_ops, it)
    k = apply_chain(np, k, k_ops, it)
    s = _scores_buffer(q, k)
    _MATMUL(np, q, k, out=s)
    _score_chain(s, score_ops, it)
    _softmax_in_place(s)
    return _weighted_sum(s, v, out_axes, out_shape, out)


def _weighted_sum(s, v, out_axes, out_shape, out):
    """``s @ v`` (the softmax's rows times ``v``) into ``out`` (or a new array), laid out by ``out_axes``
    and ``out_shape`` where given."""
    if not out_axes:
        return _MATMUL(np, s, v, out=out)
    y = np.empty(out_shape, s.dtype) if out is None else out
    shape = _product_shape(s, v)
    if out_axes[-1] != len(shape) - 1:  # (features not last: no row stride BLAS takes; a copy)
        y[...] = _MATMUL(np, s, v).transpose(out_axes).reshape(out_shape)
        return y
    # the product written through a view of ``y`` in the product's axes: each (queries, features)
    # matrix is rows of y (a row stride BLAS takes), so the same product runs into its place
    back = [0] * len(out_axes)
    for i, a in enumerate(out_axes):
        back[a] = i
    _MATMUL(np, s, v, out=y.reshape(tuple([shape[a] for a in out_axes])).transpose(back))
    return y


def _product_shape(a, b) -> tuple:
    return _shapes_product(a.shape, b.shape)


def _shapes_product(a: tuple, b: tuple) -> tuple:
    batch = a[:-2] if a[:-2] == b[:-2] else np.broadcast_shapes(a[:-2], b[:-2])
    return batch + (a[-2], b[-1])


BATCHED_BLAS = Impl("fused_attention", "batched_blas", _batched_blas,
                    "NumPy, q, k and v of one float32 / float64 dtype: the scores in one buffer, their chain and "
                    "the softmax in place, two products")


# the compiled pass's arguments where no extra goes: a float and a mask that broadcast against any scores
def _read_only(a):
    a.flags.writeable = False
    return a


_DUMMIES = {t: (_read_only(np.zeros((1, 1, 1, 1), t)), _read_only(np.zeros((1, 1, 1, 1), np.bool_)))
            for t in (np.float32, np.float64)}


class _Plan:
    """What ``compiled`` finds once for a call's shapes and dtypes: the scores' shape (and its 4-D view),
    where each extra goes (``slots``: per pass slot, the extra's index and the 4-D shape it is viewed
    as, or None where it is 4-D already), the result's view, the compiled kernels and their constants."""

    __slots__ = ("qk", "q_ops", "k_ops", "shape", "shape4", "scratch", "codes", "args", "takes", "view", "scores",
                 "divide", "zero")

    def __init__(self, qk, q_ops, k_ops, shape, dtype, codes, slots, view, scores, divide):
        self.qk, self.q_ops, self.k_ops, self.shape, self.codes = qk, q_ops, k_ops, shape, codes
        self.shape4 = (1,) * (4 - len(shape)) + shape
        self.scratch = dtype.itemsize * math.prod(shape) >= SCRATCH_FROM_BYTES
        fill, no_mask = _DUMMIES[dtype.type]
        # the pass's arguments after the codes: the dummies where no extra goes, and per extra
        # (its argument's position, its index among the extras, the 4-D shape it is viewed as or None)
        self.args = [fill if j < attention_jit.CHAIN_FLOATS else no_mask for j in range(len(slots))]
        self.takes = tuple((j,) + slot for j, slot in enumerate(slots) if slot is not None)
        self.view, self.scores, self.divide, self.zero = view, scores, divide, dtype.type(0)


def _slots(s_ndim, extras, score_ops, dtype) -> list | None:
    """Per slot of the compiled pass (``attention_jit``: the float extras, then the masks), ``(index of
    the extra, the 4-D shape it is viewed as or None)``; None where the chain does not fit the pass
    (a float extra of another dtype, a mask not boolean, more extras than slots)."""
    floats, masks, i = [], [], len(extras) - chain_extras(score_ops)
    for c in score_ops:
        for is_mask in ((True, False) if c // 10 == WHERE else (False,)):
            e = extras[i]
            if e.__class__ is not np.ndarray or e.ndim > s_ndim or e.dtype != (np.bool_ if is_mask else dtype):
                return None
            (masks if is_mask else floats).append((i, None if e.ndim == 4 else (1,) * (4 - e.ndim) + e.shape))
            i += 1
    if len(floats) > attention_jit.CHAIN_FLOATS or len(masks) > attention_jit.CHAIN_MASKS:
        return None
    return floats + [None] * (attention_jit.CHAIN_FLOATS - len(floats)) + masks \
        + [None] * (attention_jit.CHAIN_MASKS - len(masks))


def _plan(q, k, v, extras, q_ops, k_ops, score_ops, out_axes, out_shape, passes: bool = True) -> _Plan | None:
    """``compiled``'s plan for these arrays and parameters, or None where it does not apply (see the
    module; the caller has checked ``_fits``); without its compiled ``passes`` (``head_loop``'s use: the
    slots only, in a program's first run too)."""
    shape = _product_shape(q, k)
    if not 2 <= len(shape) <= 4 or not 0 < shape[-1] <= BLOCK or not current().attention_compiled:
        return None
    slots = _slots(len(shape), extras, score_ops, q.dtype)
    if slots is None:
        return None
    scores, divide = (attention_jit.scores_kernel(), softmax.divide_kernel()) if passes else (None, None)
    if passes and (scores is None or divide is None):
        return None
    view = None
    if out_axes and out_axes[-1] == len(out_axes) - 1:  # (batched_blas's product through a view of the result)
        prod = _shapes_product(shape, v.shape)
        back = [0] * len(out_axes)
        for i, a in enumerate(out_axes):
            back[a] = i
        view = (tuple([prod[a] for a in out_axes]), tuple(back))
    qk = chain_extras(q_ops) + chain_extras(k_ops)
    return _Plan(qk, q_ops, k_ops, shape, q.dtype, np.array(score_ops, np.int64), slots, view, scores, divide)


def _run_planned(p: _Plan, q, k, v, extras, out_axes, out_shape, out):
    """``batched_blas``'s calls with the score chain and the row maxima as the compiled pass."""
    if p.qk:
        it = iter(extras)
        q = apply_chain(np, q, p.q_ops, it)
        k = apply_chain(np, k, p.k_ops, it)
    s = scratch(np, 0, p.shape, q.dtype) if p.scratch else np.empty(p.shape, q.dtype)
    _MATMUL(np, q, k, out=s)
    args = list(p.args)
    for j, i, shape in p.takes:
        args[j] = extras[i] if shape is None else extras[i].reshape(shape)
    p.scores(s if len(p.shape) == 4 else s.reshape(p.shape4), p.codes, *args)
    np.exp(s, out=s)
    p.divide(s.reshape(-1, p.shape[-1]), p.zero)
    if p.view is None:
        return _weighted_sum(s, v, out_axes, out_shape, out)
    y = np.empty(out_shape, s.dtype) if out is None else out
    _MATMUL(np, s, v, out=y.reshape(p.view[0]).transpose(p.view[1]))
    return y


def _compiled(xp, q, k, v, *extras, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=(), out=None):
    p = _plan(q, k, v, extras, q_ops, k_ops, score_ops, out_axes, out_shape)
    if p is None:
        return None  # (declined: batched_blas runs)
    return _run_planned(p, q, k, v, extras, out_axes, out_shape, out)


COMPILED = Impl("fused_attention", "compiled", _compiled,
                "batched_blas's case with numba on, scores of 2-4 dims and rows of 1 to 128 values, a score chain "
                "of float extras of their dtype and boolean masks (4 and 2 at most): the chain and the softmax's "
                "row maxima in one compiled pass (the same values bit for bit)", fallback=BATCHED_BLAS)


def _pad4(shape: tuple) -> tuple:
    return (1,) * (4 - len(shape)) + tuple(shape)


class _Heads:
    """What ``head_loop`` finds once for a call's shapes and dtypes: the 4-D shapes ``q``, ``k``, ``v`` are
    viewed as, the result's (its 4-D view in the product's axes: the shape to reshape it to and the axes
    back), the chain's slots (``_Plan``'s ``args`` and ``takes``) and the compiled pass. ``last``: the views made for the
    last call's result and extras (``_heads_args``), with those arrays, so a bound step called with the same
    arrays again (its constants, its planned buffer) makes no views again (each reshape costs 0.3-0.5 us, a
    third of the per-call overhead at a small transformer's heads); one tuple, swapped whole, so threads
    running the step at once each read a consistent one."""

    __slots__ = ("qk", "q_ops", "k_ops", "codes", "q4", "k4", "v4", "shape", "view", "args", "takes", "heads", "zero",
                 "last", "few")

    def __init__(self, p: _Plan, q, k, v, out_axes, out_shape, heads):
        self.qk, self.q_ops, self.k_ops, self.codes = p.qk, p.q_ops, p.k_ops, p.codes
        self.args, self.takes = p.args, p.takes
        self.q4, self.k4, self.v4 = _pad4(q.shape), _pad4(k.shape), _pad4(v.shape)
        prod = _shapes_product(p.shape, v.shape)
        self.shape = tuple(out_shape) if out_axes else prod
        pad = 4 - len(prod)
        axes = tuple(range(pad)) + tuple(a + pad for a in out_axes) if out_axes else (0, 1, 2, 3)
        back = [0] * 4
        for i, a in enumerate(axes):
            back[a] = i
        self.view = (tuple([_pad4(prod)[a] for a in axes]), tuple(back))
        self.heads, self.zero = heads, q.dtype.type(0)
        self.last = (None, None, (None,) * len(self.takes), ())
        self.few = few_slots(p)


def few_slots(p: _Plan) -> bool:
    """Whether the chain's extras go to the first two float slots and the first mask slot alone (a chain of
    at most two ops: ``heads_few``'s case, eight arguments, not twelve)."""
    return all(j in (0, 1, attention_jit.CHAIN_FLOATS) for j, _, _ in p.takes)


def _heads_plan(q, k, v, extras, q_ops, k_ops, score_ops, out_axes, out_shape) -> _Heads | None:
    """``head_loop``'s plan, or None where it does not apply (``compiled``'s case with rows of keys, at most
    ``attention_head_loop_max_macs`` multiply-adds; the caller has checked ``_fits``)."""
    if q.ndim > 4 or k.ndim > 4 or v.ndim > 4 or v.ndim < 2:
        return None
    if not _heads_fit(q, k, v):
        return None
    p = _plan(q, k, v, extras, q_ops, k_ops, score_ops, out_axes, out_shape, passes=False)
    heads = attention_jit.heads_kernel(few_slots(p)) if p is not None else None
    return None if heads is None else _Heads(p, q, k, v, out_axes, out_shape, heads)


def _heads_args(p: _Heads, extras, y, kept: bool) -> tuple:
    """The pass's arguments after ``v``: the result's view, the codes, the slots' extras (4-D views), the zero;
    ``p.last``'s views where ``y`` and the extras viewed are the arrays the last call's were (``y`` kept there
    only where ``kept``: the caller's buffer, not a new result)."""
    y_last, y_view, viewed, views = p.last
    if y is not y_last:
        y_view = y.reshape(p.view[0]).transpose(p.view[1])
    args = list(p.args)
    hit = True
    for n, (j, i, shape) in enumerate(p.takes):
        if shape is None:
            args[j] = extras[i]
        elif extras[i] is viewed[n]:
            args[j] = views[n]
        else:
            hit, args[j] = False, extras[i].reshape(shape)
    if not hit or y is not y_last:
        p.last = (y if kept else None, y_view, tuple([extras[i] if s is not None else None for _, i, s in p.takes]),
                  tuple([args[j] if s is not None else None for j, _, s in p.takes]))
    if p.few:
        return (y_view, p.codes, args[0], args[1], args[attention_jit.CHAIN_FLOATS])
    return (y_view, p.codes, *args, p.zero)


def _run_heads(p: _Heads, q, k, v, extras, out):
    """The attention by ``heads_pass`` into ``out`` (or a new array)."""
    if p.qk:
        it = iter(extras)
        q = apply_chain(np, q, p.q_ops, it)
        k = apply_chain(np, k, p.k_ops, it)
    y = out if out is not None and out.flags.c_contiguous else np.empty(p.shape, q.dtype)
    p.heads(q if q.ndim == 4 else q.reshape(p.q4), k if k.ndim == 4 else k.reshape(p.k4),
            v if v.ndim == 4 else v.reshape(p.v4), *_heads_args(p, extras, y, y is out))
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


def _head_loop(xp, q, k, v, *extras, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=(), out=None):
    p = _heads_plan(q, k, v, extras, q_ops, k_ops, score_ops, out_axes, out_shape)
    return None if p is None else _run_heads(p, q, k, v, extras, out)  # (None: declined, compiled runs)


HEAD_LOOP = Impl("fused_attention", "head_loop", _head_loop,
                 "compiled's case with at most attention_head_loop_max_macs multiply-adds (small heads): the whole "
                 "attention as one compiled loop per head (within a few ulps: products and exp not BLAS's and "
                 "NumPy's)", fallback=COMPILED)
_CHOICE = Choice(BATCHED_BLAS)
_COMPILED = Choice(COMPILED)
_HEADS = Choice(HEAD_LOOP)
_FALLBACKS = {BATCHED_BLAS: _CHOICE, COMPILED: _COMPILED}
_REFERENCE = _OP.kernel


def _compiled_fits(q) -> bool:
    return current().attention_compiled and jit.enabled() and q.ndim <= 4


def _heads_fit(q, k, v) -> bool:
    """Whether ``head_loop`` may apply (its plan decides): ``compiled``'s case and few enough multiply-adds."""
    limit = current().attention_head_loop_max_macs
    return limit > 0 and 0 < k.shape[-1] <= BLOCK and math.prod(_product_shape(q, k)) * (q.shape[-1] + v.shape[-1]) \
        <= limit


def choose_attention(xp, q, k, v, *extras, out=None, **params) -> Choice | None:
    """``head_loop``, ``compiled`` or ``batched_blas`` where they apply, else None (the reference)."""
    if not _fits(xp, q, k, v):
        return None
    if not _compiled_fits(q):
        return _CHOICE
    return _HEADS if _heads_fit(q, k, v) else _COMPILED


def run_attention(xp, q, k, v, *extras, out=None, **params):
    """fused_attention by ``head_loop``, ``compiled`` or ``batched_blas`` where they apply, else the
    reference kernel."""
    if not _fits(xp, q, k, v):
        return _REFERENCE(xp, q, k, v, *extras, out=out, **params)
    return run_choice(choose_attention(xp, q, k, v), _FALLBACKS, (xp, q, k, v, *extras), dict(params, out=out),
                      (q, k, v))


_BIND_OTHERWISE = keyword_binder(choose_attention, _FALLBACKS, "fused_attention", _REFERENCE)


def bind_attention(xp, q, k, v, *extras, out=None, **params) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``head_loop`` or ``compiled`` with its plan made once
    (the step's avals and the tuning table fix it) where it applies, ``batched_blas`` where both decline,
    else as chosen (the reference where nothing applies)."""
    choice = choose_attention(xp, q, k, v, *extras, out=out, **params)
    if choice is not _COMPILED and choice is not _HEADS:
        return _BIND_OTHERWISE(xp, q, k, v, *extras, out=out, **params)
    planned = (q, k, v, extras, params.get("q_ops", ()), params.get("k_ops", ()), params.get("score_ops", ()),
               params.get("out_axes", ()), params.get("out_shape", ()))
    h = _heads_plan(*planned) if choice is _HEADS else None
    if h is not None:
        return Bound(_HEADS, lambda q, k, v, *extras, out=None: _run_heads(h, q, k, v, extras, out))
    p = _plan(*planned)
    if p is None:
        return Bound(_CHOICE, lambda *a, out=None: _batched_blas(xp, *a, out=out, **params))
    out_axes, out_shape = params.get("out_axes", ()), params.get("out_shape", ())
    return Bound(_COMPILED, lambda q, k, v, *extras, out=None: _run_planned(p, q, k, v, extras, out_axes, out_shape,
                                                                            out))


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"fused_attention": (HEAD_LOOP, COMPILED, BATCHED_BLAS)}
RUNNERS = {"fused_attention": run_attention}
CHOOSERS = {"fused_attention": choose_attention}
# (its choice is fixed by a compiled step's avals and the tuning table: the reference bound where nothing applies)
BINDERS = {"fused_attention": bind_attention}
