"""``nn.layer_norm``'s implementations ``compiled``, ``strided_rows`` and ``in_place``, ``nn.rms_norm``'s
``compiled``, and their choosers.

``ops/norm.py`` holds the reference kernel. ``in_place`` is the layer norm as ONNX's
``LayerNormalization`` is written out in ops (``graph/passes/layer_norm.py`` makes the op from
them), in their order: the row means (``np.mean``'s sum and division), ``x - mean`` into the
output, the mean of its squares, ``+ eps``, ``sqrt``, ``1 / s``, then ``* inv``, ``* gamma``, ``+ beta``
in place. The same values as those ops and as the reference bit for bit (``ops/norm.py`` computes
the statistics in this order too), in twelve NumPy calls on preallocated memory: the output, one column
of row statistics and the squares (the thread's scratch from 64 KiB on), where the written-out form ran six to nine program
steps, each with its own buffer. For the last axis of NumPy float32 / float64 values whose
parameters share their dtype, up to ``layer_norm_in_place_max_bytes`` (larger ones: the
reference, which makes no squared copy; the compiled implementations make none either and take any size).

``compiled`` runs the same operations row by row in one numba call, for rows of adjacent values of any
length: each row sum is NumPy's ``add.reduce`` of such a row (its pairwise summation: one block up to
``BLOCK`` values, halves recursively past that, ``pairwise_sum.py``), the rest one IEEE operation each, so its
values are ``in_place``'s bit for bit (``tests/kernels/test_layer_norm.py`` checks every row length to 272 and
some to 4100). Rows past ``BLOCK`` values take a kernel of their own (``with_row_sum(..., long=True)``): the
short rows' kernel keeps no call it never makes. A (1, 197, 768) float32 input: 382 -> 325 us, (8, 197, 768)
4.5 -> 2.8 ms (one thread, CPU time, shared machine). Measured
on a (1, 7, 32) float32 input (one thread, CPU time, shared machine): 2.3-2.4 us a call against
``in_place``'s 9.7-10.1 us and the reference's 11.9-12.7 us.

``strided_rows`` is ``compiled`` for the rows of a channels-last view (``channels_last``: NCHW seen as NHWC,
ConvNeXt's layer norm), which NumPy sums value by value from ``+0.0`` rather than pairwise: so does its
kernel (``tests/kernels/test_layer_norm_strided.py``, row lengths 1 to 1100): at any row length, as NumPy's
reduction order does not change with it (the squares' sums: ``pairwise_sum.py``'s past ``BLOCK``). ConvNeXt-T's
widths, float32: (1, 768, 7, 7) 205 -> 141 us, (8, 384, 14, 14) 2.7 -> 2.0 ms against ``in_place``. Its kernels read the
view's memory as (outer, n, inner), sums over adjacent values (``_short_strided_make``'s for rows of at most ``BLOCK``
values: every pass but the output's across the rows at once; (1, 768, 7, 7) 128 -> 89 us, (8, 16, 8, 8) 32 -> 22 us).
convnext_mini, one thread, CPU time per call: 216 -> 157
us at batch 1, 595 -> 487 us at batch 8 (the five layer norms' twelve NumPy calls each become one call).

``nn.rms_norm``'s ``compiled`` is its reference's operations the same way (the squares' row sums by
``pairwise_sum.py``), for rows of any length.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops import registry
from ..ops.scratch import scratch
from ..tuning_table import current
from .impl import Choice, Impl
from .pairwise_sum import BLOCK, with_row_sum
from .runner import Bound, keyword_binder, noted

SCRATCH_FROM_BYTES = 64 << 10  # (as kernels/attention.py: smaller squares are a plain allocation)
_REFERENCE = registry.get("layer_norm").kernel
_RMS_REFERENCE = registry.get("rms_norm").kernel


def _fits(xp, x, gamma, beta, axis) -> bool:
    """The implementations' common ground (the compiled ones take any size: they make no squared copy)."""
    return (xp is np and x.ndim > 0 and x.size > 0 and axis % x.ndim == x.ndim - 1
            and x.dtype in (np.float32, np.float64) and gamma.dtype == x.dtype == beta.dtype)


def _small(x) -> bool:
    """Whether ``in_place`` takes ``x``: up to ``layer_norm_in_place_max_bytes`` (larger: the reference)."""
    return x.nbytes <= current().layer_norm_in_place_max_bytes


def _declined(xp, x, gamma, beta, axis, eps, out):
    """Where a compiled implementation declines: ``in_place`` (``_small``), else the reference."""
    if _small(x):
        return _in_place(xp, x, gamma, beta, axis, eps, out)
    return _REFERENCE(xp, x, gamma, beta, axis=axis, eps=eps, out=out)


def _in_place(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    n = np.intp(x.shape[-1])  # (np.mean divides by the count as an intp: the same operation)
    y = np.empty(x.shape, x.dtype) if out is None else out
    col = np.empty(x.shape[:-1] + (1,), x.dtype)
    sq = np.empty(x.shape, x.dtype) if x.nbytes < SCRATCH_FROM_BYTES else scratch(np, 0, x.shape, x.dtype)
    np.add.reduce(x, axis=-1, keepdims=True, out=col)
    np.true_divide(col, n, out=col, casting="unsafe")
    np.subtract(x, col, out=y)
    np.square(y, out=sq)
    np.add.reduce(sq, axis=-1, keepdims=True, out=col)
    np.true_divide(col, n, out=col, casting="unsafe")
    np.add(col, x.dtype.type(eps), out=col)
    np.sqrt(col, out=col)
    np.divide(x.dtype.type(1), col, out=col)
    np.multiply(y, col, out=y)
    np.multiply(y, gamma, out=y)
    np.add(y, beta, out=y)
    return y


def _rows_making():
    """The maker of ``compiled``'s kernel, calling the compiled row sums (``pairwise_sum.py``)."""
    @jit.tiered
    def make(row_sum, squares_sum):
        def rows(x, gamma, beta, out, k):
            """``in_place``'s operations row by row for ``x`` of shape (rows, n), rows of adjacent values, into
            the C-ordered (rows, n) ``out``: each row's sum NumPy's (``row_sum``, pairwise), each division by the
            count in float64 stored in ``stat`` (x's dtype), the sum of the centered row's squares
            ``squares_sum``'s (squared as read), every other operation one rounding in x's dtype, in
            ``in_place``'s order: the same values bit for bit, at any row length. ``k``: eps, 0 and 1 in
            x's dtype (``constants``: one argument, not three, and ``stat`` made here, not passed: numba's
            dispatch of each argument was most of a small call's time)."""
            eps, zero, one = k[0], k[1], k[2]
            stat = np.empty(2, x.dtype)
            n = x.shape[1]
            for r in range(x.shape[0]):
                xr, yr = x[r], out[r]
                stat[0] = row_sum(xr, zero)
                stat[0] = stat[0] / np.float64(n)
                mean = stat[0]
                for i in range(n):
                    yr[i] = xr[i] - mean
                stat[1] = squares_sum(yr, zero)
                stat[1] = stat[1] / np.float64(n)
                stat[1] = stat[1] + eps
                stat[1] = np.sqrt(stat[1])
                inv = one / stat[1]
                for i in range(n):
                    yr[i] = yr[i] * inv * gamma[i] + beta[i]

        return rows

    return make


@jit.inlined
def _column_means(xo, st, zero):  # pragma: no cover  (compiled by numba, inlined)
    """``st[:inner]`` = the means of the (n, inner) ``xo``'s columns (the rows of a channels-last view), all at
    once over adjacent values: each from ``zero`` (+0.0) with its values added in order, as NumPy's ``add.reduce``
    of the view adds them (its ``nditer`` runs the adjacent axis innermost), divided by the count in float64 and
    stored (x's dtype). Both strided kernels' first pass (``_strided_make``, ``_short_strided_make``)."""
    n, inner = xo.shape[0], xo.shape[1]
    for p in range(inner):
        st[p] = zero
    for i in range(n):
        for p in range(inner):
            st[p] += xo[i, p]
    for p in range(inner):
        st[p] = st[p] / np.float64(n)


@jit.tiered
def _strided_make(row_sum, squares_sum):
    """The kernel of ``strided_rows`` for rows past ``BLOCK`` values, ``squares_sum`` (``pairwise_sum.py``) and
    ``_column_means`` compiled into it (``with_row_sum(_strided_make, True)``)."""
    column_means = jit.compiled(_column_means, always=True)

    def rows(xt, gamma, beta, out, stat, eps, zero, one):
        """``in_place``'s operations for the rows of a channels-last view, ``xt`` its (outer, n, inner) C-ordered
        memory (the rows are its columns), into the C-ordered (outer * inner, n) ``out``. The loops interchanged
        so that the reads run over adjacent values: the ``inner`` row sums of one ``outer`` index at once
        (``stat[:inner]``, each from ``+0.0`` with its values added in order, as NumPy's ``add.reduce`` of the
        view adds them: its ``nditer`` runs the adjacent axis innermost), each divided by the count in float64
        and stored (x's dtype); then row by row the centered row into the contiguous output (written in order,
        read across the stride: faster here than writing across it), its squares' sum (``squares_sum``) and the
        rest in ``in_place``'s order
        (``stat[inner]``: each rounding stored). The same values bit for bit, at any row length."""
        n, inner = xt.shape[1], xt.shape[2]
        for o in range(xt.shape[0]):
            xo = xt[o]
            column_means(xo, stat, zero)
            for p in range(inner):
                yr, mean = out[o * inner + p], stat[p]
                for i in range(n):
                    yr[i] = xo[i, p] - mean
                stat[inner] = squares_sum(yr, zero)
                stat[inner] = stat[inner] / np.float64(n)
                stat[inner] = stat[inner] + eps
                stat[inner] = np.sqrt(stat[inner])
                inv = one / stat[inner]
                for i in range(n):
                    yr[i] = yr[i] * inv * gamma[i] + beta[i]

    return rows


_rows_with = _rows_making()  # (``compiled``: x seen as (rows, n))


def _compiled(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    """``_rows_with``'s kernel over ``x`` seen as (rows, n), or None where compiled kernels are off or ``out`` is not
    C-ordered (it is written through a (rows, n) view)."""
    kern = with_row_sum(_rows_with, x.shape[-1] > BLOCK)
    if kern is None or (out is not None and not out.flags.c_contiguous):
        return None
    n = x.shape[-1]
    y = np.empty(x.shape, x.dtype) if out is None else out
    kern(x.reshape(-1, n), gamma, beta, y.reshape(-1, n), constants(x.dtype, eps))
    return y


def constants(dtype, eps) -> np.ndarray:
    """The compiled row kernels' constants (eps, 0, 1) in ``dtype``, one read-only array (``_rows_making``)."""
    k = np.array((eps, 0, 1), dtype)
    k.flags.writeable = False
    return k


def channels_last(x) -> tuple[int, int] | None:
    """``(outer, inner)`` where ``x`` (NumPy, rows of ``n >= 2`` values along its last axis) is a C-ordered array
    with that axis moved last from an earlier position (NCHW seen as NHWC: ConvNeXt's layer norm), its
    axes of one value aside: ``x.reshape(outer, inner, n)`` is then a view, its last axis of stride
    ``inner`` values, its middle one adjacent values (``inner > 1``). Else None.

    Why only this layout: NumPy's ``add.reduce`` over the last axis iterates the axes by their strides
    (``nditer`` sorts them, the output's stride 0 along the reduced axis casting no vote), so here the
    innermost loop runs over ``inner`` adjacent values, each row's values added one by one, from
    ``+0.0``, in order: not pairwise (``pairwise_sum.py``), which it is where the reduced axis comes
    innermost. Input and output then agree on every other axis's order, so no tie in that sort
    decides it. Other strides (a sliced last axis, negative strides, axes out of C order): None."""
    n, item = x.shape[-1], x.itemsize
    if x.ndim < 2 or n < 2 or x.strides[-1] <= 0:
        return None
    dims = [(d, s) for d, s in zip(x.shape[:-1], x.strides[:-1]) if d != 1]
    inner = outer = 1
    step = item
    while dims and dims[-1][1] == step:
        d = dims.pop()[0]
        inner, step = inner * d, step * d
    if inner == 1 or x.strides[-1] != step:
        return None
    step *= n
    while dims and dims[-1][1] == step:
        d = dims.pop()[0]
        outer, step = outer * d, step * d
    return None if dims else (outer, inner)


@jit.tiered
def _short_strided_make(row_sum, squares_sum):
    """The kernel of ``strided_rows`` for rows of at most ``BLOCK`` values, ``_column_means`` compiled into it
    (``with_row_sum(_short_strided_make)``; its own squares' sums, so neither row sum is called)."""
    column_means = jit.compiled(_column_means, always=True)

    def short_rows(xt, gamma, beta, out, eps, zero, one):
        """``_strided_make``'s operations for rows of at most ``BLOCK`` values, every pass but the last over
        adjacent values, all ``inner`` rows of one ``outer`` index at once (loops LLVM vectorizes): the sums
        (``column_means``), the centered values (into ``c``, (n, inner) as ``xt``), the squares' sums as
        ``BLOCK_SQUARES_SUM`` adds each row's (eight running sums ``r``, their tree, the rest in order; below 8
        values one by one from ``-0.0``), ``zero +`` that, and the rest (``st``: each rounding stored); then each
        output row written in order. Bit for bit as ``strided_rows``."""
        n, inner = xt.shape[1], xt.shape[2]
        c = np.empty((n, inner), xt.dtype)
        r = np.empty((8, inner), xt.dtype)
        st = np.empty(inner, xt.dtype)
        m = n - n % 8
        for o in range(xt.shape[0]):
            xo = xt[o]
            column_means(xo, st, zero)
            for i in range(n):
                for p in range(inner):
                    c[i, p] = xo[i, p] - st[p]
            if n < 8:
                for p in range(inner):
                    st[p] = -zero
                for i in range(n):
                    for p in range(inner):
                        st[p] += c[i, p] * c[i, p]
            else:
                for j in range(8):
                    for p in range(inner):
                        r[j, p] = c[j, p] * c[j, p]
                for i in range(8, m, 8):
                    for j in range(8):
                        for p in range(inner):
                            r[j, p] += c[i + j, p] * c[i + j, p]
                for p in range(inner):
                    st[p] = ((r[0, p] + r[1, p]) + (r[2, p] + r[3, p])) + ((r[4, p] + r[5, p]) + (r[6, p] + r[7, p]))
                for i in range(m, n):
                    for p in range(inner):
                        st[p] += c[i, p] * c[i, p]
            for p in range(inner):
                st[p] = zero + st[p]
                st[p] = st[p] / np.float64(n)
                st[p] = st[p] + eps
                st[p] = np.sqrt(st[p])
                st[p] = one / st[p]
            base = o * inner
            for p in range(inner):
                yr, inv = out[base + p], st[p]
                for i in range(n):
                    yr[i] = c[i, p] * inv * gamma[i] + beta[i]

    return short_rows


_strided_with = _strided_make  # (``strided_rows``: x's memory seen as (outer, n, inner), ``channels_last``)


def _strided(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    """``_strided_with``'s kernel over ``x`` seen as (outer, inner, n) (``channels_last``), or None where
    compiled kernels are off (or this is a program's first run), ``x`` is not so laid out or ``out`` is
    not C-ordered."""
    n = x.shape[-1]
    kern = with_row_sum(_short_strided_make) if n <= BLOCK else with_row_sum(_strided_with, True)
    oi = channels_last(x)
    if kern is None or oi is None or (out is not None and not out.flags.c_contiguous):
        return None
    y = np.empty(x.shape, x.dtype) if out is None else out
    t = x.dtype.type
    stat = () if n <= BLOCK else (np.empty(oi[1] + 1, x.dtype),)
    kern(x.reshape(*oi, n).transpose(0, 2, 1), gamma, beta, y.reshape(-1, n), *stat, t(eps), t(0), t(1))
    return y


IN_PLACE = Impl("layer_norm", "in_place", _in_place,
                "NumPy float32 / float64, the last axis, parameters of x's dtype, up to "
                "layer_norm_in_place_max_bytes: the written-out ops' NumPy calls on preallocated memory")
COMPILED = Impl("layer_norm", "compiled", _compiled,
                "as in_place (any size), rows of adjacent values, numba on: in_place's operations row by row in "
                "one compiled call (each sum NumPy's, bit for bit)", fallback=IN_PLACE)
STRIDED_ROWS = Impl("layer_norm", "strided_rows", _strided,
                    "as in_place (any size), rows of 2 or more values along the last axis of a C-ordered array's "
                    "view that moved it last (NCHW as NHWC: channels_last), numba on, layer_norm_strided_rows: "
                    "in_place's operations row by row in one compiled call (NumPy's sums, bit for bit)",
                    fallback=IN_PLACE)
_IN_PLACE, _COMPILED, _STRIDED = Choice(IN_PLACE), Choice(COMPILED), Choice(STRIDED_ROWS)
# (the binder's other cases: ``in_place`` or the reference kernel, run directly)
_BIND_OTHERWISE = keyword_binder(lambda xp, x, gamma, beta, out, axis, eps: _choice(xp, x, gamma, beta, axis),
                                 {}, "layer_norm", _REFERENCE)


def _choice(xp, x, gamma, beta, axis) -> Choice | None:
    if not _fits(xp, x, gamma, beta, axis):
        return None
    # NumPy sums rows pairwise where they are its innermost loop: their values adjacent (a
    # transposed view's rows it sums across, one value of each row at a time: not this order)
    jitted = jit.enabled()
    if jitted and (x.strides[-1] == x.itemsize or x.shape[-1] == 1):
        return _COMPILED
    # (a channels-last view's rows NumPy sums value by value: ``strided_rows`` does the same)
    strided = jitted and current().layer_norm_strided_rows and channels_last(x) is not None
    return _STRIDED if strided else _IN_PLACE if _small(x) else None


def choose_layer_norm(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None) -> Choice | None:
    """``compiled``, ``strided_rows`` or ``in_place`` where they apply, else None (the reference)."""
    return _choice(xp, x, gamma, beta, axis)


def run_layer_norm(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    """layer_norm by the choice of ``choose_layer_norm``, else the reference kernel."""
    choice = _choice(xp, x, gamma, beta, axis)
    if choice is None:
        return _REFERENCE(xp, x, gamma, beta, axis=axis, eps=eps, out=out)
    run = _compiled if choice is _COMPILED else _strided if choice is _STRIDED else None
    y = None if run is None else run(xp, x, gamma, beta, axis, eps, out)
    if y is None:
        if not _small(x):
            return _REFERENCE(xp, x, gamma, beta, axis=axis, eps=eps, out=out)
        choice = _IN_PLACE
        y = _in_place(xp, x, gamma, beta, axis, eps, out)
    noted(choice, x)
    return y


def bind_layer_norm(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_layer_norm``'s choice, which the step's
    avals, its planned output and the tuning table fix, run directly: ``compiled`` with its kernel and
    constants found once (``in_place`` where it declines); the reference where neither applies. The
    one fact a call shows, whether its rows are adjacent values (a program's input may arrive in
    another memory order), is read per call: otherwise the runner decides. ``strided_rows`` the
    same way (``_bind_strided``)."""
    choice = _choice(xp, x, gamma, beta, axis)
    if choice is _STRIDED:
        return _bind_strided(xp, x, gamma, beta, axis, eps, out)
    if choice is not _COMPILED:
        return _BIND_OTHERWISE(xp, x, gamma, beta, out=out, axis=axis, eps=eps)
    kern = with_row_sum(_rows_with, x.shape[-1] > BLOCK)
    if kern is None or (out is not None and not out.flags.c_contiguous):
        return Bound(choice, lambda x, gamma, beta, out=None: _declined(xp, x, gamma, beta, axis, eps, out))
    n, dtype, k = x.shape[-1], x.dtype, constants(x.dtype, eps)

    def run(x, gamma, beta, out=None):
        if x.strides[-1] != x.itemsize and n != 1:
            return run_layer_norm(xp, x, gamma, beta, axis, eps, out)
        y = np.empty(x.shape, dtype) if out is None else out
        kern(x.reshape(-1, n), gamma, beta, y.reshape(-1, n), k)
        return y

    return Bound(choice, run)


def _bind_strided(xp, x, gamma, beta, axis, eps, out) -> Bound:
    """``bind_layer_norm``'s ``strided_rows``: its kernel, constants and view shape found once (``in_place``
    where it declines: compiled kernels off, a program's first run, ``out`` not C-ordered); a call whose
    ``x`` has other strides than the bound one's goes to the runner."""
    short = x.shape[-1] <= BLOCK
    kern = with_row_sum(_short_strided_make) if short else with_row_sum(_strided_with, True)
    if kern is None or (out is not None and not out.flags.c_contiguous):
        return Bound(_IN_PLACE, lambda x, gamma, beta, out=None: _declined(xp, x, gamma, beta, axis, eps, out))
    shape, strides, dtype, t = x.shape, x.strides, x.dtype, x.dtype.type
    view, consts = channels_last(x) + (shape[-1],), (t(eps), t(0), t(1))
    stat_size = 0 if short else view[1] + 1

    def run(x, gamma, beta, out=None):
        if x.strides != strides:
            return run_layer_norm(xp, x, gamma, beta, axis, eps, out)
        y = np.empty(shape, dtype) if out is None else out
        stat = (np.empty(stat_size, dtype),) if stat_size else ()
        kern(x.reshape(view).transpose(0, 2, 1), gamma, beta, y.reshape(-1, view[2]), *stat, *consts)
        return y

    return Bound(_STRIDED, run)


def _rms_rows_with(row_sum, squares_sum):
    """The kernel of rms_norm's ``compiled`` calling the compiled row sums (``pairwise_sum.py``)."""
    def rms_rows(x, gamma, out, k):
        """``nn.rms_norm``'s reference row by row for a 2-D ``x`` of rows of any length
        into ``out``: the sum of each row's squares NumPy's (``squares_sum``), the division by the count
        in float64 stored in ``stat``, every other operation one rounding in x's dtype, in the
        reference's order (``k``: eps, 0 and 1, as ``_rows_making``'s kernel takes them)."""
        eps, zero, one = k[0], k[1], k[2]
        stat = np.empty(1, x.dtype)
        n = x.shape[1]
        for r in range(x.shape[0]):
            xr, yr = x[r], out[r]
            stat[0] = squares_sum(xr, zero)
            stat[0] = stat[0] / np.float64(n)
            stat[0] = stat[0] + eps
            stat[0] = np.sqrt(stat[0])
            inv = one / stat[0]
            for i in range(n):
                yr[i] = gamma[i] * (xr[i] * inv)

    return rms_rows


def _rms_compiled(xp, x, gamma, eps=1e-6, out=None):
    """``_rms_rows_with``'s kernel over ``x`` seen as (rows, n), or None where compiled kernels are off or ``out`` is
    not C-ordered."""
    kern = with_row_sum(_rms_rows_with, x.shape[-1] > BLOCK)
    if kern is None or (out is not None and not out.flags.c_contiguous):
        return None
    n = x.shape[-1]
    y = np.empty(x.shape, x.dtype) if out is None else out
    kern(x.reshape(-1, n), gamma, y.reshape(-1, n), constants(x.dtype, eps))
    return y


RMS_COMPILED = Impl("rms_norm", "compiled", _rms_compiled,
                    "NumPy float32 / float64 x and gamma, rows of 1 or more values, numba on: the reference's "
                    "operations row by row in one compiled call (its values bit for bit)")
_RMS = Choice(RMS_COMPILED)
_BIND_RMS_OTHERWISE = keyword_binder(lambda xp, x, gamma, out, eps: None, {}, "rms_norm", _RMS_REFERENCE)


def _rms_fits(xp, x, gamma) -> bool:
    return (xp is np and x.ndim > 0 and 0 < x.shape[-1] and x.dtype in (np.float32, np.float64)
            and gamma.dtype == x.dtype and jit.enabled())


def choose_rms_norm(xp, x, gamma, eps=1e-6, out=None) -> Choice | None:
    """``compiled`` where it applies, else None (the reference)."""
    return _RMS if _rms_fits(xp, x, gamma) else None


def run_rms_norm(xp, x, gamma, eps=1e-6, out=None):
    """rms_norm by ``compiled`` where it applies, else the reference kernel."""
    y = _rms_compiled(xp, x, gamma, eps, out) if _rms_fits(xp, x, gamma) else None
    if y is None:
        return _RMS_REFERENCE(xp, x, gamma, eps=eps, out=out)
    noted(_RMS, x)
    return y


def bind_rms_norm(xp, x, gamma, eps=1e-6, out=None) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``compiled`` with its kernel and constants found
    once where it applies (``choose_rms_norm``: the avals and the tuning table decide), else the
    reference kernel."""
    kern = with_row_sum(_rms_rows_with, x.shape[-1] > BLOCK) if _rms_fits(xp, x, gamma) else None
    if kern is None or (out is not None and not out.flags.c_contiguous):
        return _BIND_RMS_OTHERWISE(xp, x, gamma, out=out, eps=eps)
    n, dtype, k = x.shape[-1], x.dtype, constants(x.dtype, eps)

    def run(x, gamma, out=None):
        y = np.empty(x.shape, dtype) if out is None else out
        kern(x.reshape(-1, n), gamma, y.reshape(-1, n), k)
        return y

    return Bound(_RMS, run)


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"layer_norm": (COMPILED, STRIDED_ROWS, IN_PLACE), "rms_norm": (RMS_COMPILED,)}
RUNNERS = {"layer_norm": run_layer_norm, "rms_norm": run_rms_norm}
CHOOSERS = {"layer_norm": choose_layer_norm, "rms_norm": choose_rms_norm}
BINDERS = {"layer_norm": bind_layer_norm, "rms_norm": bind_rms_norm}
