"""Normalization and transformer ops: ``nn.layer_norm``, ``nn.batch_norm``, ``nn.gelu`` and
``nn.masked_softmax``, with the gradient ops ``nn.layer_norm_grad`` and ``nn.gelu_grad``.

``layer_norm`` is one op rather than a composition of mean / subtract / divide: a composed
layer norm runs about ten kernels forward and twenty backward, each a pass over memory. Its
gradient is one op too (``layer_norm_grad``, three outputs: input, gamma and beta), which
recomputes the statistics from the input instead of saving them, so the forward op keeps one
output and the planner frees nothing extra for it.

``gelu`` (exact: ``x * Phi(x)`` with ``erf``; ``"tanh"``: the tanh approximation) and its
gradient are elementwise kernels that honour ``out=``, so the fusion pass of a compiled graph
can put them in a group; the kernels layer (``kernels/gelu.py``) runs large NumPy operands chunk
by chunk (each chunk through every pass while in cache). ``erf``: on NumPy float32 a rational approximation (absolute error < 5e-7, so
float32 GELU is within 1.5e-6 of the true value; 6x faster than scipy's float32 erf); otherwise
``scipy.special.erf`` (a dependency, imported on first use) or ``cupyx.scipy.special.erf``.

``gelu_with_grad`` gives ``gelu(x)`` and its derivative from one erf, and ``layer_norm_with_stats``
the normalized input and ``1 / std`` with the output: the forward of a compiled training graph runs
them so its backward multiplies (gelu) or skips the statistics (``layer_norm_grad_saved``); see
``graph/passes/forward_saves.py``.

``masked_softmax`` gives probability 0 to masked positions and a row of zeros (not NaN) where
every position of a row is masked (a padded query, say); its gradient is softmax's.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from ..errors import DTypeError, ParamValueError, ShapeError, fmt_shape
from ..tuning_table import current
from .conv import float_inputs_rule as _named_float_inputs
from .params import FLOAT, INT, Param, choice
from .registry import OpDef, broadcast_shapes, normalize_axis, register

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = math.sqrt(2.0 / math.pi)
_TANH_A = 0.044715


def _float_inputs(dtypes, **params):
    for d in dtypes:
        if d.kind != "f":
            raise DTypeError(f"needs floating-point inputs, got {', '.join(map(str, dtypes))}; "
                             "cast with .astype('float32')")
    return np.result_type(*dtypes)


# -- layer norm -----------------------------------------------------------------------------------
def check_eps(v, op):
    if not v > 0:
        raise ParamValueError(f"{op}: eps must be > 0, got {v}")


def _ln_shape(shapes, axis=-1, eps=1e-5):
    x = shapes[0]
    if not x:
        raise ShapeError("needs an input with at least one dim (the normalized axis)")
    c = x[normalize_axis(axis, len(x), "layer_norm")]
    for name, s in zip(("gamma", "beta"), shapes[1:]):
        if len(s) != 1 or (None not in (c, s[0]) and s[0] != c):
            raise ShapeError(f"{name} {fmt_shape(s)} must be ({c},): one value per element of input "
                             f"{fmt_shape(x)} along axis {axis}")
    return x


def _per_axis(v, ndim, ax):
    """A (C,) vector shaped to broadcast against an ``ndim``-d array along axis ``ax``."""
    if ax == ndim - 1:
        return v
    shape = [1] * ndim
    shape[ax] = v.shape[0]
    return v.reshape(shape)


def _normalized(xp, x, ax, eps, out=None, rstd_out=None):
    """``(x - mean) / sqrt(var + eps)`` along ``ax`` and ``1 / sqrt(var + eps)`` (kept dims), written
    into ``out`` / ``rstd_out`` when given, else fresh arrays.

    Two passes (mean, then the mean of the centered squares) rather than ``E[x^2] - E[x]^2`` in one:
    the one-pass formula loses every digit when the mean is large against the spread. The operations
    are those of ONNX's ``LayerNormalization`` written out (mean, subtract, square, mean, add,
    sqrt, divide), in that order, so a written-out graph, this op and the kernels layer's
    implementations (``kernels/layer_norm.py``) give the same values bit for bit."""
    # (C-ordered when made here, as a planned buffer is: NumPy sums a C-ordered row pairwise, a
    # transposed one value by value)
    xc = xp.subtract(x, x.mean(axis=ax, keepdims=True), out=xp.empty(x.shape, x.dtype) if out is None else out)
    if x.shape[ax]:
        var = _mean_of_squares(xp, xc, ax)
    else:  # (no values: variance 0, as the mean of nothing is not)
        var = xp.zeros(xc.shape[:ax] + (1,) + xc.shape[ax + 1:], x.dtype)
    rstd = xp.add(var, x.dtype.type(eps), out=var if rstd_out is None else rstd_out)
    xp.sqrt(rstd, out=rstd)
    xp.divide(x.dtype.type(1), rstd, out=rstd)
    xc *= rstd
    return xc, rstd


SQUARES_CHUNK_BYTES = 64 << 10  # the squares of this many bytes of rows at a time: no full-size temporary


def _mean_of_squares(xp, xc, ax):
    """``mean(square(xc), axis=ax)`` (dims kept) as a written-out graph computes it: NumPy rows of the
    last axis a chunk at a time (the squares of a chunk C-ordered, so each row is summed pairwise as
    a whole C-ordered array's would be), never a squared copy of all of ``xc``."""
    n = xc.shape[ax]
    if xp is not np or ax != xc.ndim - 1 or not xc.flags.c_contiguous:
        return xp.mean(xp.square(xc), axis=ax, keepdims=True)
    rows = xc.reshape(-1, n)
    var = np.empty((rows.shape[0], 1), xc.dtype)
    per = max(1, SQUARES_CHUNK_BYTES // (n * xc.itemsize))
    tmp = np.empty((min(per, rows.shape[0]), n), xc.dtype)
    for lo in range(0, rows.shape[0], per):
        part = tmp[:min(per, rows.shape[0] - lo)]
        np.square(rows[lo:lo + len(part)], out=part)
        np.add.reduce(part, axis=-1, keepdims=True, out=var[lo:lo + len(part)])
    np.true_divide(var, np.intp(n), out=var, casting="unsafe")  # (np.mean's division: by the count as an intp)
    return var.reshape(xc.shape[:-1] + (1,))


def _layer_norm(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    ax = axis % x.ndim
    dtype = np.result_type(x.dtype, gamma.dtype, beta.dtype)
    y, _ = _normalized(xp, x.astype(dtype, copy=False), ax, eps, out=out)
    y *= _per_axis(gamma.astype(dtype, copy=False), x.ndim, ax)
    y += _per_axis(beta.astype(dtype, copy=False), x.ndim, ax)
    return y


def _ln_grad(F, ins, y, g, axis=-1, eps=1e-5):
    x, gamma, _ = ins
    dx, dgamma, dbeta = F.layer_norm_grad(g, x, gamma, axis=axis, eps=eps)
    return [dx, dgamma, dbeta]


_LN_PARAMS = (Param("axis", INT, -1, doc="the normalized axis"),
              Param("eps", FLOAT, 1e-5, check=check_eps, doc="added to the variance"))

register(OpDef("layer_norm", ("x", "gamma", "beta"), _layer_norm, params=_LN_PARAMS, shape=_ln_shape,
               dtype=_float_inputs, grad=_ln_grad, namespace="nn", writes_out=True,
               doc="(x - mean) / sqrt(var + eps) * gamma + beta, mean and (biased) variance taken along "
                   "axis of each row; gamma and beta have one value per element of that axis"))


def _layer_norm_grad(xp, g, x, gamma, axis=-1, eps=1e-5, out=None):
    ax = axis % x.ndim
    dtype = np.result_type(g.dtype, x.dtype, gamma.dtype)
    xhat, rstd = _normalized(xp, x.astype(dtype, copy=False), ax, eps)
    return _ln_backward(xp, g.astype(dtype, copy=False), xhat, rstd, gamma.astype(dtype, copy=False), ax, True,
                        out)


def _ln_backward(xp, g, xhat, rstd, gamma, ax, own_xhat, out=None):
    """(dx, dgamma, dbeta) from the normalized input and ``1 / std``, written into ``out`` (three
    buffers) when given; ``own_xhat``: ``xhat`` may be overwritten (it was made for this call)."""
    dx, dgamma, dbeta = (None, None, None) if out is None else out
    others = tuple(i for i in range(xhat.ndim) if i != ax)
    dbeta = g.sum(axis=others, out=dbeta)
    dxhat = xp.multiply(g, _per_axis(gamma, xhat.ndim, ax), out=dx)
    gx = g * xhat
    dgamma = gx.sum(axis=others, out=dgamma)
    # dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), means along the axis
    xp.multiply(dxhat, xhat, out=gx)
    m2 = gx.mean(axis=ax, keepdims=True)
    dxhat -= dxhat.mean(axis=ax, keepdims=True)
    if own_xhat:
        xhat *= m2
    else:
        xhat = xp.multiply(xhat, m2, out=gx)
    dxhat -= xhat
    dxhat *= rstd
    return dxhat, dgamma, dbeta


def _layer_norm_with_stats(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    """``(layer_norm(x), xhat, rstd)``: also the normalized input and ``1 / sqrt(var + eps)`` (kept
    dims), which ``layer_norm_grad_saved`` reads instead of recomputing them from ``x``; written into
    ``out`` (three buffers) when given."""
    y, xhat, rstd = (None, None, None) if out is None else out
    ax = axis % x.ndim
    dtype = np.result_type(x.dtype, gamma.dtype, beta.dtype)
    xhat, rstd = _normalized(xp, x.astype(dtype, copy=False), ax, eps, xhat, rstd)
    y = xp.multiply(xhat, _per_axis(gamma.astype(dtype, copy=False), x.ndim, ax), out=y)
    y += _per_axis(beta.astype(dtype, copy=False), x.ndim, ax)
    return y, xhat, rstd


def _layer_norm_grad_saved(xp, g, xhat, rstd, gamma, axis=-1, out=None):
    ax = axis % xhat.ndim
    dtype = np.result_type(g.dtype, xhat.dtype, gamma.dtype)
    return _ln_backward(xp, g.astype(dtype, copy=False), xhat.astype(dtype, copy=False),
                        rstd.astype(dtype, copy=False), gamma.astype(dtype, copy=False), ax, False, out)


def _stats_shape(shapes, axis=-1, eps=1e-5):
    x = _ln_shape(shapes, axis)
    ax = normalize_axis(axis, len(x), "layer_norm_with_stats")
    return [x, x, tuple(1 if i == ax else d for i, d in enumerate(x))]


def _grad_saved_shape(shapes, axis=-1):
    g, xhat, rstd, gamma = shapes
    ax = normalize_axis(axis, len(xhat), "layer_norm_grad_saved")
    broadcast_shapes(g, xhat)
    if len(rstd) != len(xhat) or rstd[ax] not in (1, None):
        raise ShapeError(f"rstd {fmt_shape(rstd)} must be xhat's shape {fmt_shape(xhat)} with 1 along axis {axis}")
    return [xhat, gamma, gamma]


def _ln_grad_shape(shapes, axis=-1, eps=1e-5):
    g, x, gamma = shapes
    _ln_shape([x, gamma], axis=axis)
    broadcast_shapes(g, x)
    return [x, gamma, gamma]


register(OpDef("layer_norm_grad", ("g", "x", "gamma"), _layer_norm_grad, params=_LN_PARAMS,
               shape=_ln_grad_shape, num_outputs=3, namespace="nn", writes_out=True,
               dtype=lambda dtypes, **p: [_float_inputs(dtypes)] * 3,
               doc="layer_norm's gradients (dx, dgamma, dbeta) for head gradient g; the statistics "
                   "are recomputed from x (no gradient of its own)"))
register(OpDef("layer_norm_with_stats", ("x", "gamma", "beta"), _layer_norm_with_stats, params=_LN_PARAMS,
               shape=_stats_shape, num_outputs=3, namespace="nn", writes_out=True,
               dtype=lambda dtypes, **p: [_float_inputs(dtypes)] * 3,
               doc="(layer_norm(x), xhat, rstd): also the normalized input and 1 / sqrt(var + eps) along "
                   "axis (kept as a dim of size 1): a compiled training graph's forward saves them for "
                   "layer_norm_grad_saved (graph/passes/forward_saves.py; no gradient of its own)"))
register(OpDef("layer_norm_grad_saved", ("g", "xhat", "rstd", "gamma"), _layer_norm_grad_saved,
               params=(Param("axis", INT, -1, doc="the normalized axis"),), shape=_grad_saved_shape,
               num_outputs=3, namespace="nn", dtype=lambda dtypes, **p: [_float_inputs(dtypes)] * 3, writes_out=True,
               doc="layer_norm_grad from the statistics the forward saved (layer_norm_with_stats): "
                   "(dx, dgamma, dbeta) for head gradient g (no gradient of its own)"))


# -- gelu -----------------------------------------------------------------------------------------
_APPROX = choice("none", "tanh")


def erf_fn(xp):
    """``erf`` as a ufunc of the array module: ``scipy.special.erf`` for NumPy (imported on first use:
    ``import lazyarray`` stays light), ``cupyx.scipy.special.erf`` for CuPy."""
    name = "scipy.special" if xp is np else "cupyx.scipy.special"
    try:
        return importlib.import_module(name).erf
    except ImportError:
        if xp is not np:
            raise
    # SciPy is an extra (``lazyarray[sparse]``): without it, math.erf per element (exact, slower)
    return _math_erf


def _math_erf(x):
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), dtype=x.dtype)


# erf(x) ~= x P(x^2) / Q(x^2) on [-c, c], c = 3.832506856900711 (erf(c) rounds to 1 in float32; from c on, +-1):
# the rational approximation of Eigen and XLA for float32 (their ``kErfInvOneMinusHalfULP`` and coefficients). A
# float32 GELU through it is within 1.1e-6 of the exact one over [-8, 8] evaluated in float32, 2.9e-7 evaluated in
# float64 and rounded once (the tuning table's ``gelu_erf_float64``: about twice the time; tests/ops/test_norm.py).
# scipy's float32 erf computes in double, one element at a time, several times slower than these vectorized ops.
ERF32_CLAMP = 3.832506856900711
SQRT_HALF64 = 2 ** -0.5  # (the double nearest 1 / sqrt(2); ``_SQRT_HALF`` is one below it, the same in float32)
ERF32_P = (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861, 0.18520832239976145,
           1.128379143519084)
ERF32_Q = (-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885, 0.014070470171167667,
           0.11098505178285362, 0.49746925110067538, 1.0)


def erf_rational(c):
    """``erf`` of the float32 or float64 array ``c`` by the float32 rational approximation (``ERF32_P`` /
    ``ERF32_Q``, in c's dtype), as a fresh array: ``e``, ``c`` clipped to +-``ERF32_CLAMP`` (NaN kept), ``x2 = e *
    e``, the two Horner chains (``p = x2 * P[0] + P[1]``, then ``p * x2 + P[k]``), ``p * e / q``, then exactly +-1
    from the clamp on (as Eigen: the rational's value there is not quite 1, which a GELU of a large negative x
    would multiply by x): every operation one rounding in c's dtype, the order ``kernels/gelu.py``'s compiled
    loop follows."""
    t = c.dtype.type
    shape, c = c.shape, c.reshape(-1)  # (1-D: NumPy makes a 0-d array's results scalars)
    e = np.clip(c, t(-ERF32_CLAMP), t(ERF32_CLAMP))
    x2 = e * e
    p = x2 * t(ERF32_P[0])
    p += t(ERF32_P[1])
    for k in ERF32_P[2:]:
        p *= x2
        p += t(k)
    q = x2 * t(ERF32_Q[0])
    q += t(ERF32_Q[1])
    for k in ERF32_Q[2:]:
        q *= x2
        q += t(k)
    p *= e
    p /= q
    p[c >= t(ERF32_CLAMP)] = 1
    p[c <= t(-ERF32_CLAMP)] = -1
    return p.reshape(shape)


def erf_dtype():
    """The dtype float32 GELUs and erfs compute in: float64 where the tuning table's ``gelu_erf_float64``."""
    return np.dtype(np.float64) if current().gelu_erf_float64 else np.dtype(np.float32)


def erf(xp, x):
    """``erf(x)`` as a fresh array: on NumPy float32 values the rational approximation (``erf_rational``, in
    ``erf_dtype()``, rounded to float32), the library's erf otherwise (scipy's / CuPy's, full precision)."""
    if xp is not np or x.dtype != np.float32:
        return erf_fn(xp)(x)
    return erf_rational(x.astype(erf_dtype())).astype(np.float32, copy=False)


def _one_plus_erf32(x):
    """``1 + erf(x / sqrt(2))`` of NumPy float32 ``x`` in ``erf_dtype()`` (``erf_rational`` of ``x * SQRT_HALF64``,
    the constant in that dtype): the exact GELU's ``(1 + erf) * x * 0.5`` then rounds once to float32."""
    w = erf_dtype().type
    t = erf_rational(x.astype(w) * w(SQRT_HALF64))
    t += w(1)
    return t


def zero_d(kernel):
    """``kernel(xp, *arrays, approximation, out)`` with 0-d operands run as 1-element arrays (NumPy
    makes 0-d results scalars, which cannot be written in place): the registered kernel."""
    def run(xp, *arrays, approximation="none", out=None):
        if not arrays[-1].shape:
            flat = [a.reshape(-1) for a in arrays]
            res = kernel(xp, *flat, approximation=approximation, out=None if out is None else out.reshape(-1))
            return res.reshape(xp.broadcast_shapes(*(a.shape for a in arrays)))
        return kernel(xp, *arrays, approximation=approximation, out=out)

    return run


def _need_float(x, op):
    if x.dtype.kind != "f":  # the dtype rule then phrases the error (see dispatch._kernel_error)
        raise TypeError(f"{op} needs a floating-point input, got {x.dtype}")


def _tanh_inner(x):
    """sqrt(2/pi) * (x + 0.044715 x^3), as a fresh array."""
    u = x * x
    u *= x.dtype.type(_TANH_A * _TANH_C)
    u += x.dtype.type(_TANH_C)
    u *= x
    return u


def gelu_values(xp, x, approximation="none", out=None):
    # ``out`` may be x itself (a fused group reuses registers): x is read in full before out is written
    _need_float(x, "gelu")
    if approximation == "tanh":
        t = _tanh_inner(x)
        xp.tanh(t, out=t)
    elif xp is np and x.dtype == np.float32:  # (in ``erf_dtype()``, rounded once: ``_one_plus_erf32``)
        t = _one_plus_erf32(x)
        t *= x
        y = np.empty(x.shape, x.dtype) if out is None else out
        return np.multiply(t, t.dtype.type(0.5), out=y, casting="same_kind")
    else:
        t = erf(xp, x * x.dtype.type(_SQRT_HALF))
    t += 1
    t *= x
    return xp.multiply(t, x.dtype.type(0.5), out=out)


def gelu_grad_values(xp, g, x, approximation="none", out=None):
    _need_float(x, "gelu_grad")
    return xp.multiply(gelu_slope(xp, x, approximation), g, out=out)


def gelu_slope(xp, x, approximation, y=None, out=None):
    """d gelu(x) / dx (into ``out``, or a fresh array); with ``y``, gelu(x) is written there on the
    way (from the same erf / tanh, the same operations as ``gelu_values``: equal values)."""
    one = x.dtype.type(1)
    half = x.dtype.type(0.5)
    if approximation == "tanh":
        # d/dx 0.5 x (1 + t), t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) u'
        t = _tanh_inner(x)
        xp.tanh(t, out=t)
        du = x * x
        du *= x.dtype.type(3 * _TANH_A * _TANH_C)
        du += x.dtype.type(_TANH_C)
        du *= x
        s = t * t
        xp.subtract(one, s, out=s)
        s *= du
        t += one
        if y is not None:
            xp.multiply(t, x, out=y)
            y *= half
        t += s
        return xp.multiply(t, half, out=out)
    else:
        # Phi(x) + x phi(x)
        if xp is np and x.dtype == np.float32:  # (``gelu_values``' operations: y its values)
            t = _one_plus_erf32(x)
            if y is not None:
                np.multiply(np.multiply(t, x), t.dtype.type(0.5), out=y, casting="same_kind")
            t = t.astype(x.dtype, copy=False)
        else:
            t = erf(xp, x * x.dtype.type(_SQRT_HALF))
            t += one
            if y is not None:
                xp.multiply(t, x, out=y)
                y *= half
        t *= half
        p = x * x
        p *= x.dtype.type(-0.5)
        xp.exp(p, out=p)
        p *= x
        p *= x.dtype.type(_INV_SQRT_2PI)
        return xp.add(t, p, out=out)


def _gelu_with_grad(xp, x, approximation="none", out=None):
    """``(gelu(x), d gelu(x) / dx)`` from one erf (or tanh) pass, written into ``out`` (two
    C-contiguous buffers of x's shape) when given: the reference kernel (the kernels layer's
    ``gelu.py`` runs large NumPy arrays chunk by chunk)."""
    _need_float(x, "gelu_with_grad")
    if x.ndim == 0:  # (NumPy makes 0-d results scalars, which cannot be written in place)
        y, d = _gelu_with_grad(xp, x.reshape(1), approximation,
                               None if out is None else tuple(o.reshape(1) for o in out))
        return y.reshape(()), d.reshape(())
    # (C order, not empty_like's: the kernels layer's chunks write through reshape(-1), a view)
    y, d = (xp.empty(x.shape, x.dtype), xp.empty(x.shape, x.dtype)) if out is None else out
    gelu_slope(xp, x, approximation, y, d)
    return y, d


_GELU_PARAM = (Param("approximation", _APPROX, "none",
                     doc="'none': x * Phi(x) with erf; 'tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"),)

register(OpDef("gelu", ("x",), zero_d(gelu_values), params=_GELU_PARAM, dtype=_float_inputs, elementwise=True, writes_out=True,
               grad=lambda F, ins, y, g, approximation="none": [F.gelu_grad(g, ins[0], approximation=approximation)],
               namespace="nn",
               doc="Gaussian error linear unit x * Phi(x) (Phi: the standard normal CDF), exact or with the "
                   "tanh approximation"))
register(OpDef("gelu_grad", ("g", "x"), zero_d(gelu_grad_values), params=_GELU_PARAM, dtype=_float_inputs, elementwise=True,
               writes_out=True, namespace="nn",
               doc="gelu's gradient: g * d gelu(x) / dx (no gradient of its own)"))
register(OpDef("gelu_with_grad", ("x",), _gelu_with_grad, params=_GELU_PARAM, num_outputs=2,
               shape=lambda shapes, approximation="none": [shapes[0], shapes[0]],
               dtype=lambda dtypes, approximation="none": [_float_inputs(dtypes)] * 2, namespace="nn", writes_out=True,
               doc="(gelu(x), d gelu(x) / dx) from one pass: a compiled training graph's forward computes "
                   "gelu's derivative with its value, so the backward multiplies instead of recomputing "
                   "(graph/passes/forward_saves.py; no gradient of its own)"))


# -- masked softmax -------------------------------------------------------------------------------
def _masked_softmax_shape(shapes, axis=-1):
    x, mask = shapes
    normalize_axis(axis, len(x), "masked_softmax")
    both = broadcast_shapes(x, mask)
    if len(both) != len(x) or any(b is not None and a is not None and a != b for a, b in zip(x, both)):
        raise ShapeError(f"mask {fmt_shape(mask)} must broadcast to the shape of x {fmt_shape(x)} (it may "
                         "not make x larger); give the mask size-1 dims where it is the same for every row")
    return x


def _masked_softmax_dtype(dtypes, axis=-1):
    x, mask = dtypes
    if x.kind != "f":
        raise DTypeError(f"x must be floating point, got {x}; cast with .astype('float32')")
    if mask.kind != "b":
        raise DTypeError(f"mask must be bool (True = keep), got {mask}; build it with a comparison, "
                         "e.g. mask = lengths_row < valid_length, or mask.astype('bool')")
    return x


def _masked_softmax(xp, x, mask, axis=-1, out=None):
    if mask.dtype.kind != "b" or x.dtype.kind != "f":
        raise TypeError(f"masked_softmax needs float x and bool mask, got {x.dtype} and {mask.dtype}")
    e = xp.where(mask, x, x.dtype.type(-np.inf))
    m = e.max(axis=axis, keepdims=True)
    m[m == -np.inf] = 0  # a fully masked row: exp(-inf - 0) = 0 everywhere, no NaN
    e -= m
    xp.exp(e, out=e)
    s = e.sum(axis=axis, keepdims=True)
    s[s == 0] = 1  # ... and 0 / 1 = 0
    e /= s
    return e


def _masked_softmax_grad(F, ins, y, g, axis=-1):
    # softmax's: masked positions have y = 0, so their gradient is 0 too
    return [F.multiply(y, F.subtract(g, F.sum(F.multiply(g, y), axis=axis, keepdims=True))), None]


register(OpDef("masked_softmax", ("x", "mask"), _masked_softmax, params=(Param("axis", INT, -1),),
               shape=_masked_softmax_shape, dtype=_masked_softmax_dtype, grad=_masked_softmax_grad,
               namespace="nn",
               doc="softmax of x along axis over the positions where mask (bool, broadcast to x) is True; "
                   "masked positions get 0, and a row with every position masked is all zeros (not NaN)"))


# -- batch norm ----------------------------------------------------------------------------------
# ``batch_norm`` takes the mean and variance as inputs: the layer passes batch statistics in
# training mode (their gradients flow back through the ops that computed them) and the running
# statistics in inference mode. Its gradient is written with elementwise ops.
def bn_view(v, ndim, axis):
    """A per-channel vector shaped to broadcast against the input along ``axis``."""
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def batch_norm_kernel(xp, x, gamma, beta, mean, var, eps=1e-5, axis=1, out=None):
    axis %= x.ndim
    scale = gamma / xp.sqrt(var + x.dtype.type(eps))
    shift = beta - mean * scale
    y = xp.multiply(x, bn_view(scale.astype(x.dtype, copy=False), x.ndim, axis), out=out)
    y += bn_view(shift.astype(x.dtype, copy=False), x.ndim, axis)  # in place: one pass less
    return y


def batch_norm_shape(shapes, eps=1e-5, axis=1):
    x = shapes[0]
    ax = normalize_axis(axis, len(x), "batch_norm")
    c = x[ax]
    for name, s in zip(("gamma", "beta", "mean", "var"), shapes[1:]):
        if len(s) != 1 or (None not in (c, s[0]) and s[0] != c):
            raise ShapeError(f"{name} {fmt_shape(s)} must be ({c},): one value per channel of input "
                             f"{fmt_shape(x)} along axis {axis}")
    return x


def _batch_norm_grad(F, ins, y, g, eps=1e-5, axis=1):
    x, gamma, _, mean, var = ins
    nd = x.aval.ndim
    axis %= nd
    others = tuple(i for i in range(nd) if i != axis)
    trailing = tuple(range(1, nd - axis))  # dims after the channel axis, for broadcasting

    def bc(v):  # (C,) -> broadcastable against x
        return F.expand_dims(v, axis=trailing) if trailing else v

    inv = F.power(F.add(var, eps), -0.5)  # 1 / sqrt(var + eps), shape (C,)
    centered = F.subtract(x, bc(mean))
    g_sum = F.sum(g, axis=others)
    gc_sum = F.sum(F.multiply(g, centered), axis=others)
    scale = F.multiply(gamma, inv)
    dx = F.multiply(g, bc(scale))
    dgamma = F.multiply(gc_sum, inv)
    dmean = F.negative(F.multiply(g_sum, scale))
    dvar = F.multiply(F.multiply(gc_sum, scale), F.multiply(F.multiply(inv, inv), -0.5))
    return [dx, dgamma, g_sum, dmean, dvar]


register(OpDef("batch_norm", ("x", "gamma", "beta", "mean", "var"), batch_norm_kernel,
               params=(Param("eps", FLOAT, 1e-5, check=check_eps), Param("axis", INT, 1)),
               shape=batch_norm_shape, dtype=_named_float_inputs("batch_norm"), grad=_batch_norm_grad,
               namespace="nn", writes_out=True,
               doc="(x - mean) / sqrt(var + eps) * gamma + beta, per channel along axis"))
