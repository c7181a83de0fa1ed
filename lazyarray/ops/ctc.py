"""Connectionist temporal classification: ``nn.ctc_loss`` and its gradient ``nn.ctc_loss_grad``.

Gluon's ``CTCLoss`` convention (MXNet's ``ctc_loss`` with ``blank_label="last"``): ``logits`` are
unnormalized scores laid out ``(T, N, C)``; the last class ``C - 1`` is the blank; ``labels``
``(N, L)`` are zero-based class indices in ``[0, C - 1)``, a sequence ``label_lengths[n]`` long
(the places after it are padding, ``-1`` by convention, and are not read); ``data_lengths[n]``
time steps of sample ``n`` are read. The loss of a sample is ``-log p(labels | logits)``, the sum
over every alignment, computed by the forward (alpha) dynamic program in log space; the gradient
with respect to the logits is ``softmax - occupancy`` (Graves et al. 2006, eq. 16), the occupancy
from alpha and the backward (beta) program, zero past a sample's ``data_lengths``. A labelling that
no alignment fits in the time steps given has probability 0: its loss is ``inf`` and its gradient
zero (nothing to learn from it).

The programs run in float64 over the whole batch at once (a Python loop over time steps only) and
the results are cast to the logits' dtype. Labels and lengths may be integers or whole-number
floats; anything else, a label outside ``[0, C - 1)`` (the blank included) or a length outside its
axis is a named error naming ``CTCLoss``, the value and its index.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError, fmt_shape
from .nn import check_label_values
from .registry import OpDef, register


def _lengths(values, n: int, limit: int, what: str):
    """``values`` as int64 lengths in ``[0, limit]`` (the sizes of the axis they count)."""
    v = np.asarray(values)
    whole = np.isfinite(v) & (v == np.trunc(v)) if v.dtype.kind == "f" else np.ones(v.shape, bool)
    bad = ~whole | (v < 0) | (v > limit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"CTCLoss: {what} {v[i]} at index {i} is not a whole number in [0, {limit}]: "
                         f"{what} count the places of an axis of size {limit}")
    return v.astype(np.int64)


class _Lattice:
    """The extended label sequences (a blank between and around the labels) of a batch, with the
    per-time-step log-probabilities of their places and the forward / backward programs."""

    def __init__(self, logits, labels, data_lengths, label_lengths):
        T, N, C = logits.shape
        L = labels.shape[1]
        self.blank = C - 1
        self.tl = _lengths(data_lengths, N, T, "data_lengths")
        self.ul = _lengths(label_lengths, N, L, "label_lengths")
        padding = np.arange(L)[None, :] >= self.ul[:, None]
        check_label_values(labels, C - 1, "CTCLoss", ignore=padding)  # (class C - 1 is the blank)
        lab = np.where(padding, 0, labels).astype(np.int64)
        S = 2 * L + 1
        self.ext = np.full((N, S), self.blank, np.int64)
        self.ext[:, 1::2] = lab
        self.valid = np.arange(S)[None, :] < (2 * self.ul + 1)[:, None]
        # s - 2 -> s is allowed between two different labels (not into a blank, not a repeat)
        self.skip = np.zeros((N, S), bool)
        self.skip[:, 2:] = (self.ext[:, 2:] != self.blank) & (self.ext[:, 2:] != self.ext[:, :-2])
        x = np.asarray(logits, np.float64)
        shifted = x - x.max(axis=-1, keepdims=True)
        self.logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        self.emit = np.take_along_axis(self.logp, np.broadcast_to(self.ext[None], (T, N, S)), axis=-1)

    def alpha(self):
        T, N, S = self.emit.shape
        a = np.full((T, N, S), -np.inf)
        a[0, :, 0] = self.emit[0, :, 0]
        if S > 1:
            a[0, :, 1] = np.where(self.ul > 0, self.emit[0, :, 1], -np.inf)
        a[0][~self.valid] = -np.inf
        for t in range(1, T):
            prev = a[t - 1]
            one, two = np.full_like(prev, -np.inf), np.full_like(prev, -np.inf)
            one[:, 1:] = prev[:, :-1]
            two[:, 2:] = np.where(self.skip[:, 2:], prev[:, :-2], -np.inf)
            a[t] = np.logaddexp(np.logaddexp(prev, one), two) + self.emit[t]
            a[t][~self.valid] = -np.inf
        return a

    def beta(self):
        T, N, S = self.emit.shape
        b = np.full((T, N, S), -np.inf)
        rows = np.arange(N)
        last, before = 2 * self.ul, np.maximum(2 * self.ul - 1, 0)
        for t in range(T - 1, -1, -1):
            if t + 1 < T:
                nxt = b[t + 1]
                one, two = np.full_like(nxt, -np.inf), np.full_like(nxt, -np.inf)
                one[:, :-1] = nxt[:, 1:]
                two[:, :-2] = np.where(self.skip[:, 2:], nxt[:, 2:], -np.inf)
                b[t] = np.logaddexp(np.logaddexp(nxt, one), two) + self.emit[t]
                b[t][~self.valid] = -np.inf
            ends = self.tl - 1 == t  # the samples whose last time step is t start here
            if ends.any():
                b[t, ends] = -np.inf
                b[t, rows[ends], last[ends]] = self.emit[t, rows[ends], last[ends]]
                has = ends & (self.ul > 0)
                b[t, rows[has], before[has]] = self.emit[t, rows[has], before[has]]
            b[t, self.tl - 1 < t] = -np.inf  # past a sample's end nothing is read
        return b

    def log_likelihood(self, a):
        """``log p(labels | logits)`` per sample from the forward program ``a``."""
        N = a.shape[1]
        rows = np.arange(N)
        t_end = np.maximum(self.tl - 1, 0)
        end = a[t_end, rows, 2 * self.ul]
        before = np.where(self.ul > 0, a[t_end, rows, np.maximum(2 * self.ul - 1, 0)], -np.inf)
        ll = np.logaddexp(end, before)
        # no time step: the empty labelling has probability 1, any other 0
        return np.where(self.tl == 0, np.where(self.ul == 0, 0.0, -np.inf), ll)


def _ctc(xp, logits, labels, data_lengths, label_lengths, out=None):
    lat = _Lattice(logits, labels, data_lengths, label_lengths)
    return (-lat.log_likelihood(lat.alpha())).astype(logits.dtype)


def _ctc_grad(xp, logits, labels, data_lengths, label_lengths, g, out=None):
    lat = _Lattice(logits, labels, data_lengths, label_lengths)
    a, b = lat.alpha(), lat.beta()
    ll = lat.log_likelihood(a)
    feasible = np.isfinite(ll)
    with np.errstate(invalid="ignore"):
        occ = np.exp(a + b - lat.emit - np.where(feasible, ll, 0.0)[None, :, None])  # (T, N, S)
    T, N, C = logits.shape
    onehot = lat.ext[..., None] == np.arange(C)  # (N, S, C)
    occupancy = np.einsum("tns,nsc->tnc", np.nan_to_num(occ, nan=0.0), onehot)
    grad = np.exp(lat.logp) - occupancy
    read = (np.arange(T)[:, None] < lat.tl[None, :]) & feasible[None, :]
    grad *= read[..., None] * np.asarray(g, np.float64)[None, :, None]
    return grad.astype(logits.dtype)


def _ctc_shape(shapes):
    lg, lb, dl, ll = shapes[:4]
    if len(lg) != 3:
        raise ShapeError(f"CTCLoss: logits must be (T, N, C) (time, batch, classes with the blank last), "
                         f"got {fmt_shape(lg)}")
    if len(lb) != 2:
        raise ShapeError(f"CTCLoss: labels must be (N, L), one padded label sequence per sample, got {fmt_shape(lb)}")
    for what, s in (("labels", lb[:1]), ("data_lengths", dl), ("label_lengths", ll)):
        if len(s) != 1 or (s[0] is not None and lg[1] is not None and s[0] != lg[1]):
            raise ShapeError(f"CTCLoss: {what} {fmt_shape(s if what != 'labels' else lb)} must give one "
                             f"entry per sample of logits {fmt_shape(lg)} (N = {lg[1]})")
    if lg[2] is not None and lg[2] < 1:
        raise ShapeError(f"CTCLoss: logits {fmt_shape(lg)} need a class axis holding at least the blank")
    return (lg[1],)


def _ctc_dtype(dtypes):
    if dtypes[0].kind != "f":
        raise DTypeError(f"CTCLoss: logits must be floating point, got {dtypes[0]}")
    for what, d in zip(("labels", "data_lengths", "label_lengths"), dtypes[1:4]):
        if d.kind not in "iuf":
            raise DTypeError(f"CTCLoss: {what} must be integers or whole-number floats, got {d}")
    return dtypes[0]


register(OpDef(
    "ctc_loss", ("logits", "labels", "data_lengths", "label_lengths"), _ctc, shape=_ctc_shape, dtype=_ctc_dtype,
    grad=lambda F, ins, y, g: [F.ctc_loss_grad(*ins, g), None, None, None], namespace="nn",
    doc="per sample -log p(labels | logits): CTC over (T, N, C) logits (softmax inside), blank = class C - 1, "
        "labels (N, L) read up to label_lengths, data_lengths time steps read"))
register(OpDef(
    "ctc_loss_grad", ("logits", "labels", "data_lengths", "label_lengths", "g"), _ctc_grad,
    shape=lambda shapes: (_ctc_shape(shapes[:4]), tuple(shapes[0]))[1], dtype=lambda dtypes: _ctc_dtype(dtypes[:4]),
    namespace="nn",
    doc="ctc_loss' gradient with respect to the logits: (softmax - occupancy) * g, zero past data_lengths"))
