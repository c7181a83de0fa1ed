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
"""
from __future__ import annotations

import math

import numpy as np

from ..ops import registry
from ..ops.attention import OPS, WHERE, apply_chain
from ..ops.scratch import scratch
from . import softmax
from .impl import Choice, Impl
from .runner import keyword_binder, noted

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
    batch = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return batch + (a.shape[-2], b.shape[-1])


BATCHED_BLAS = Impl("fused_attention", "batched_blas", _batched_blas,
                    "NumPy, q, k and v of one float32 / float64 dtype: the scores in one buffer, their chain and "
                    "the softmax in place, two products")
_CHOICE = Choice(BATCHED_BLAS)
_REFERENCE = _OP.kernel


def choose_attention(xp, q, k, v, *extras, out=None, **params) -> Choice | None:
    """``batched_blas`` where it applies, else None (the reference)."""
    return _CHOICE if _fits(xp, q, k, v) else None


def run_attention(xp, q, k, v, *extras, out=None, **params):
    """fused_attention by ``batched_blas`` where it applies, else the reference kernel."""
    if not _fits(xp, q, k, v):
        return _REFERENCE(xp, q, k, v, *extras, out=out, **params)
    y = _batched_blas(xp, q, k, v, *extras, out=out, **params)
    noted(_CHOICE, q, k, v)
    return y


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"fused_attention": (BATCHED_BLAS,)}
RUNNERS = {"fused_attention": run_attention}
CHOOSERS = {"fused_attention": choose_attention}
# (its choice is fixed by a compiled step's dtypes: the reference bound where it does not apply)
BINDERS = {"fused_attention": keyword_binder(choose_attention, {}, "fused_attention", _REFERENCE)}
