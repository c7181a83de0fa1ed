"""``nn.channel_shuffle``'s implementations (``ops/channel_shuffle.py``: ShuffleNet's concatenation and
channel shuffle, one op made by the inference pass ``graph/passes/channel_shuffle.py``) and its chooser.

``copies`` (issue #35: ShuffleNet's units spent four steps and two copies on it): each input copied once,
by ``np.copyto``, straight into the output's shuffled places (the output seen as (N, groups, C / groups,
rest), ``ops.channel_shuffle.grouped``): one copy per group an input covers (ShuffleNet's two halves of
two groups: one each), no concatenation made first. NumPy arrays of the output's dtype, a C-ordered
output (the planned buffer; its parts then views of it). Data movement only: the values are the
reference's bit for bit. ``compiled``: the same copies by numba, one call per input; a compiled step of
two inputs (ShuffleNet's halves) makes one call for both (``_shuffle_pair``: a call's dispatch, ~1.5 us,
was a third of the step at batch 1). ``reference``, the op's kernel (the recorded ops: concatenate, reshape,
transpose, reshape), elsewhere.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops.channel_shuffle import channel_shuffle_kernel, grouped
from .impl import Choice, Impl
from .runner import Bound, ran


@jit.tiered
def _shuffle_into(x, out, c0, groups):  # pragma: no cover  (compiled by numba)
    """x (N, Ck, H, W), channels c0 .. c0 + Ck of the concatenation, each copied to its place in ``out``
    (N, C, H, W): channel ``i * C / groups + j`` to ``j * groups + i``."""
    m = out.shape[1] // groups
    for n in range(x.shape[0]):
        for ch in range(x.shape[1]):
            c = c0 + ch
            dst, src = out[n, (c % m) * groups + c // m], x[n, ch]
            for h in range(x.shape[2]):
                for w in range(x.shape[3]):
                    dst[h, w] = src[h, w]


@jit.tiered
def _shuffle_pair(x0, x1, out, groups):  # pragma: no cover  (compiled by numba)
    """``_shuffle_into`` of both inputs of a two-input concatenation (ShuffleNet's halves) in one call:
    x0's channels, then x1's (one numba call where two cost their dispatch twice)."""
    m = out.shape[1] // groups
    c1 = x0.shape[1]
    for n in range(out.shape[0]):
        for ch in range(c1):
            dst, src = out[n, (ch % m) * groups + ch // m], x0[n, ch]
            for h in range(src.shape[0]):
                for w in range(src.shape[1]):
                    dst[h, w] = src[h, w]
        for ch in range(x1.shape[1]):
            c = c1 + ch
            dst, src = out[n, (c % m) * groups + c // m], x1[n, ch]
            for h in range(src.shape[0]):
                for w in range(src.shape[1]):
                    dst[h, w] = src[h, w]


def _fits(xp, xs) -> bool:
    """Whether every input is a NumPy array of one dtype, at least 2-D."""
    if xp is not np or not xs:
        return False
    d = xs[0].dtype
    return all(x.__class__ is np.ndarray and x.dtype == d and x.ndim >= 2 for x in xs)


def _copies(xp, xs, groups, out):
    """Each input's channels copied to their shuffled places in ``out`` (made where None); None where
    that does not apply (the caller runs ``reference``)."""
    if not _fits(xp, xs):
        return None
    n, rest = xs[0].shape[0], xs[0].shape[2:]
    c = sum(x.shape[1] for x in xs)
    shape = (n, c) + rest
    if out is None:
        out = np.empty(shape, xs[0].dtype)
    elif out.__class__ is not np.ndarray or out.dtype != xs[0].dtype or out.shape != shape \
            or not out.flags.c_contiguous or any(np.may_share_memory(out, x) for x in xs):
        return None
    if out.size == 0:
        return out
    view, m, start = grouped(out, groups), c // groups, 0
    for x in xs:
        flat = x.reshape(n, x.shape[1], -1)
        lo, hi = start, start + x.shape[1]
        for i in range(lo // m, (hi - 1) // m + 1):  # (the groups this input's channels fall in)
            a, b = max(lo, i * m), min(hi, (i + 1) * m)
            np.copyto(view[:, i, a - i * m:b - i * m], flat[:, a - lo:b - lo])
        start = hi
    return out


def _compiled(xp, xs, groups, out):
    """One compiled copy per input (4-D inputs, a C-ordered output, numba on); None where that does not
    apply (the caller runs ``copies``)."""
    if not _fits(xp, xs) or xs[0].ndim != 4 or (out is not None and not out.flags.c_contiguous):
        return None
    kern = jit.compiled(_shuffle_into)
    if kern is None:
        return None
    x0 = xs[0]
    c = sum(x.shape[1] for x in xs)
    if out is None:
        out = np.empty((x0.shape[0], c) + x0.shape[2:], x0.dtype)
    elif out.dtype != x0.dtype or out.shape != (x0.shape[0], c) + x0.shape[2:] \
            or any(np.may_share_memory(out, x) for x in xs):
        return None
    start = 0
    for x in xs:
        kern(x, out, start, groups)
        start += x.shape[1]
    return out


def _reference(xp, xs, groups, out):
    return channel_shuffle_kernel(xp, *xs, groups=groups, out=out)


REFERENCE = Impl("channel_shuffle", "reference", _reference, "any: the recorded ops (concatenate, reshape, "
                 "transpose, reshape), then a copy into the output")
COPIES = Impl("channel_shuffle", "copies", _copies, "NumPy arrays of one dtype, a C-ordered output: each input "
              "copied once to its shuffled places (one np.copyto per group it covers)", fallback=REFERENCE)
COMPILED = Impl("channel_shuffle", "compiled", _compiled, "copies' case with 4-D inputs (N, C, H, W), numba on: "
                "one compiled copy per input (a bound step of two inputs: one call for both), each channel to its "
                "shuffled place", fallback=COPIES)
_CHOICES = {impl: Choice(impl) for impl in (COMPILED, COPIES, REFERENCE)}


def choose_channel_shuffle(xp, *xs, groups=2, out=None) -> Choice:
    """What runs channel_shuffle of these arrays."""
    if not _fits(xp, xs):
        return _CHOICES[REFERENCE]
    return _CHOICES[COMPILED if xs[0].ndim == 4 and jit.enabled() else COPIES]


def run_channel_shuffle(xp, *xs, groups=2, out=None):
    """channel_shuffle by the implementation ``choose_channel_shuffle`` picks (``reference`` where
    ``copies`` declines); the op's kernel in every call."""
    choice = choose_channel_shuffle(xp, *xs, groups=groups)
    args = (xp, xs, groups, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, xs[:1])


def _lean(xs, groups, out, chain):
    """The compiled step's run of ``compiled``, its conditions checked once at binding (the step's avals and
    memory orders are fixed, and its planned output shares no memory with its inputs): only numba looked
    up per call (``jit.tiered``: None in a program's first run), and the chain of fallbacks run there."""
    starts = [0]
    for x in xs[:-1]:
        starts.append(starts[-1] + x.shape[1])
    shape, dtype = (xs[0].shape[0], starts[-1] + xs[-1].shape[1]) + xs[0].shape[2:], xs[0].dtype

    def fn(*arrays, out=None):
        kern = jit.compiled(_shuffle_into)
        if kern is None or (out is not None and not out.flags.c_contiguous):
            return _fallen(chain, arrays, groups, out)
        if out is None:
            out = np.empty(shape, dtype)
        for x, c0 in zip(arrays, starts):
            kern(x, out, c0, groups)
        return out

    def pair(x0, x1, out=None):
        kern = jit.compiled(_shuffle_pair)
        if kern is None or out is None or not out.flags.c_contiguous:
            return fn(x0, x1, out=out)
        kern(x0, x1, out, groups)
        return out

    return pair if len(xs) == 2 else fn


def _fallen(chain, arrays, groups, out):
    for run in chain:
        y = run(np, arrays, groups, out)
        if y is not None:
            return y
    return None


def bind_channel_shuffle(xp, *xs, out=None, groups=2):
    """The compiled step's binding: the choice made once, and a function of the arrays running it (the
    fallbacks in turn where it declines at run time)."""
    choice = choose_channel_shuffle(xp, *xs, groups=groups)
    chain = [choice.impl]
    while chain[-1].fallback is not None:
        chain.append(chain[-1].fallback)
    runs = [impl.run for impl in chain]
    if choice.impl is COMPILED:
        return Bound(choice, _lean(xs, groups, out, runs[1:]))
    return Bound(choice, lambda *arrays, out=None: _fallen(runs, arrays, groups, out))


# op name -> its implementations, runner, chooser and binder (``kernels.choose``, ``kernels.bind``)
IMPLS = {"channel_shuffle": (COMPILED, COPIES, REFERENCE)}
RUNNERS = {"channel_shuffle": run_channel_shuffle}
CHOOSERS = {"channel_shuffle": choose_channel_shuffle}
BINDERS = {"channel_shuffle": bind_channel_shuffle}
