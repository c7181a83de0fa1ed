"""Convolution-family ops the layers need: ``nn.conv2d`` (NCHW, im2col + matmul),
``nn.max_pool2d``, ``nn.batch_norm`` (normalize with given statistics) and ``nn.flatten``.

The gradients of ``conv2d`` and ``max_pool2d`` cannot be written with other ops (col2im,
scattering into window maxima), so they are registered ops of their own:
``nn.conv2d_input_grad``, ``nn.conv2d_weight_grad`` and ``nn.max_pool2d_grad``. They read
their input's shape from a ``like`` input, so graphs stay generic over the batch size.

``batch_norm`` takes the mean and variance as inputs: the layer passes batch statistics
in training mode (their gradients flow back through the ops that computed them) and the
running statistics in inference mode. Its gradient is written with elementwise ops.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ParamValueError, ShapeError, fmt_shape
from .params import FLOAT, INT, INTS, Param
from .registry import OpDef, normalize_axis, register


# -- helpers -------------------------------------------------------------------------------------
def _pair(v, name, op, minimum):
    if len(v) == 2 and v[0] >= minimum and v[1] >= minimum:  # the common case, on every kernel call
        return v
    if len(v) == 1:
        v = (v[0], v[0])
    if len(v) != 2 or any(d < minimum for d in v):
        raise ParamValueError(f"{op}: {name} must be one int or two ints >= {minimum}, got {v}")
    return v


def _check_pair(minimum):
    def check(v, op):
        _pair(v, "this parameter", op, minimum)
    return check


def _out_dim(size, k, s, p):
    if size is None:
        return None
    return (size + 2 * p - k) // s + 1


def _windows(xp, x, kernel, stride, padding, fill=0.0):
    """Sliding windows (N, C, Ho, Wo, kh, kw) over x padded with ``fill``: a strided view.

    Built directly from strides (``np.pad`` and ``sliding_window_view`` cost more than the
    arithmetic for the small images this library trains on).
    """
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    if ph or pw:
        padded = xp.full((n, c, h + 2 * ph, w + 2 * pw), fill, dtype=x.dtype)
        padded[:, :, ph:ph + h, pw:pw + w] = x
        x, h, w = padded, h + 2 * ph, w + 2 * pw
    else:
        x = xp.ascontiguousarray(x)
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    s0, s1, s2, s3 = x.strides
    shape, strides = (n, c, ho, wo, kh, kw), (s0, s1, s2 * sh, s3 * sw, s2, s3)
    if xp is np:
        return np.ndarray(shape, x.dtype, buffer=x, strides=strides)
    return xp.lib.stride_tricks.as_strided(x, shape, strides)


def _float_inputs(op):
    def rule(dtypes, **params):
        for d in dtypes:
            if d.kind != "f":
                raise DTypeError(f"needs floating-point inputs, got {', '.join(map(str, dtypes))}; "
                                 "cast with .astype('float32')")
        return np.result_type(*dtypes)
    return rule


def _padded(x, padding):
    """The shape of ``x`` (NCHW) padded by ``padding`` on both sides (``None`` dims stay unknown)."""
    ph, pw = padding
    n, c, h, w = x
    return (n, c, None if h is None else h + 2 * ph, None if w is None else w + 2 * pw)


def _conv_workspace(x_at, kernel_of):
    """conv2d-family temporaries: the zero-padded input and the im2col columns
    (N * Ho * Wo, C * kh * kw). ``x_at``: which input is the NCHW image; ``kernel_of(avals, params)``."""
    def workspace(avals, stride=(1, 1), padding=(0, 0), **params):
        x = avals[x_at]
        if len(x.shape) != 4:
            return []
        (sh, sw), (ph, pw) = _pair(stride, "stride", "", 1), _pair(padding, "padding", "", 0)
        kh, kw = kernel_of(avals, params)
        out = [("padded input", _padded(x.shape, (ph, pw)), x.dtype)] if ph or pw else []
        n, c, h, w = x.shape
        ho, wo = _out_dim(h, kh, sh, ph), _out_dim(w, kw, sw, pw)
        if None not in (n, c, ho, wo, kh, kw) and ho > 0 and wo > 0:
            out.append(("im2col columns", (n * ho * wo, c * kh * kw), x.dtype))
        return out
    return workspace


def _nchw(shape, what, op):
    if len(shape) != 4:
        raise ShapeError(f"{what} must be 4-D (N, C, H, W), got {fmt_shape(shape)}; "
                         "add dims with expand_dims or reshape")


# -- conv2d --------------------------------------------------------------------------------------
_CONV_PARAMS = (Param("stride", INTS, (1, 1), check=_check_pair(1)),
                Param("padding", INTS, (0, 0), check=_check_pair(0)))


def _conv2d(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), out=None):
    stride, padding = _pair(stride, "stride", "conv2d", 1), _pair(padding, "padding", "conv2d", 0)
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    win = _windows(xp, x, (kh, kw), stride, padding)
    ho, wo = win.shape[2], win.shape[3]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * kh * kw)  # im2col (one copy)
    y = cols @ weight.reshape(o, c * kh * kw).T
    if bias is not None:
        y += bias
    return xp.ascontiguousarray(y.reshape(n, ho, wo, o).transpose(0, 3, 1, 2))


def _conv2d_shape(shapes, stride=(1, 1), padding=(0, 0)):
    x, w = shapes[0], shapes[1]
    _nchw(x, "input", "conv2d")
    if len(w) != 4:
        raise ShapeError(f"weight must be 4-D (out_channels, in_channels, kh, kw), got {fmt_shape(w)}")
    if None not in (x[1], w[1]) and x[1] != w[1]:
        raise ShapeError(f"input {fmt_shape(x)} has {x[1]} channels but weight {fmt_shape(w)} expects "
                         f"{w[1]}; the weight is (out_channels, in_channels, kh, kw)")
    out_channels = w[0]
    if len(shapes) == 3:
        b = shapes[2]
        if len(b) != 1 or (None not in (b[0], w[0]) and b[0] != w[0]):
            raise ShapeError(f"bias {fmt_shape(b)} must be ({w[0]},) to match weight {fmt_shape(w)}")
        out_channels = w[0] if w[0] is not None else b[0]
    (sh, sw), (ph, pw) = _pair(stride, "stride", "conv2d", 1), _pair(padding, "padding", "conv2d", 0)
    ho, wo = _out_dim(x[2], w[2], sh, ph), _out_dim(x[3], w[3], sw, pw)
    if (ho is not None and ho < 1) or (wo is not None and wo < 1):
        raise ShapeError(f"kernel {w[2]}x{w[3]} does not fit input {fmt_shape(x)} with padding "
                         f"{(ph, pw)}; pad more or use a smaller kernel")
    return (x[0], out_channels, ho, wo)


def _conv2d_grad(F, ins, y, g, stride=(1, 1), padding=(0, 0)):
    x, w = ins[0], ins[1]
    kernel = tuple(w.aval.shape[2:])
    grads = [F.conv2d_input_grad(g, w, x, stride=stride, padding=padding),
             F.conv2d_weight_grad(g, x, kernel=kernel, stride=stride, padding=padding)]
    if len(ins) == 3:
        grads.append(F.sum(g, axis=(0, 2, 3)))
    return grads


register(OpDef("conv2d", ("x", "weight", "bias?"), _conv2d, params=_CONV_PARAMS, shape=_conv2d_shape,
               dtype=_float_inputs("conv2d"), grad=_conv2d_grad, namespace="nn",
               workspace=_conv_workspace(0, lambda avals, p: tuple(avals[1].shape[2:4])
                                         if len(avals[1].shape) == 4 else (None, None)),
               doc="2-D convolution (cross-correlation) of NCHW input with (O, C, kh, kw) weight"))


def _conv2d_input_grad(xp, g, weight, like, stride=(1, 1), padding=(0, 0), out=None):
    """col2im: every window's share of g @ W added back to the input pixels it read."""
    (sh, sw), (ph, pw) = _pair(stride, "stride", "", 1), _pair(padding, "padding", "", 0)
    n, c, h, w = like.shape
    o, _, kh, kw = weight.shape
    ho, wo = g.shape[2], g.shape[3]
    dcols = (g.transpose(0, 2, 3, 1).reshape(-1, o) @ weight.reshape(o, -1)).reshape(n, ho, wo, c, kh, kw)
    dcols = dcols.transpose(0, 3, 1, 2, 4, 5)  # (N, C, Ho, Wo, kh, kw)
    dx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=g.dtype)
    for i in range(kh):
        for j in range(kw):
            dx[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw] += dcols[..., i, j]
    return xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


register(OpDef("conv2d_input_grad", ("g", "weight", "like"), _conv2d_input_grad, params=_CONV_PARAMS,
               shape=lambda shapes, stride=(1, 1), padding=(0, 0): shapes[2],
               dtype=lambda dtypes, **p: np.result_type(dtypes[0], dtypes[1]), namespace="nn",
               workspace=lambda avals, stride=(1, 1), padding=(0, 0): [
                   ("padded input gradient", _padded(avals[2].shape, _pair(padding, "padding", "", 0)),
                    avals[0].dtype)] if len(avals[2].shape) == 4 else [],
               doc="conv2d's gradient w.r.t. its input (col2im); only like's shape is read"))


def _conv2d_weight_grad(xp, g, x, kernel, stride=(1, 1), padding=(0, 0), out=None):
    kh, kw = _pair(kernel, "kernel", "", 1)
    _n, c = x.shape[:2]
    o = g.shape[1]
    win = _windows(xp, x, (kh, kw), _pair(stride, "stride", "", 1), _pair(padding, "padding", "", 0))
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(-1, c * kh * kw)
    dw = g.transpose(1, 0, 2, 3).reshape(o, -1) @ cols
    return dw.reshape(o, c, kh, kw)


register(OpDef("conv2d_weight_grad", ("g", "x"), _conv2d_weight_grad,
               params=(Param("kernel", INTS, check=_check_pair(1)),) + _CONV_PARAMS,
               shape=lambda shapes, kernel, stride=(1, 1), padding=(0, 0):
                   (shapes[0][1], shapes[1][1]) + _pair(kernel, "kernel", "conv2d_weight_grad", 1),
               dtype=lambda dtypes, **p: np.result_type(*dtypes), namespace="nn",
               workspace=_conv_workspace(1, lambda avals, p: _pair(p["kernel"], "kernel", "", 1)),
               doc="conv2d's gradient w.r.t. its (O, C, kh, kw) weight"))


# -- max pooling ---------------------------------------------------------------------------------
_POOL_PARAMS = (Param("kernel", INTS, (2, 2), check=_check_pair(1)),
                Param("stride", INTS, (0, 0), check=_check_pair(0)),
                Param("padding", INTS, (0, 0), check=_check_pair(0)))


def _pool_geometry(kernel, stride, padding):
    k = _pair(kernel, "kernel", "max_pool2d", 1)
    s = _pair(stride, "stride", "max_pool2d", 0)
    s = tuple(ki if si == 0 else si for ki, si in zip(k, s))  # stride 0 = the kernel size
    return k, s, _pair(padding, "padding", "max_pool2d", 0)


def _fill_min(dtype):
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def _max_pool2d(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), out=None):
    """An elementwise maximum over the kh * kw shifted, strided views of x: for small kernels
    this beats a reduction over a windows view several times."""
    (kh, kw), (sh, sw), (ph, pw) = _pool_geometry(kernel, stride, padding)
    n, c, h, w = x.shape
    if ph or pw:
        padded = xp.full((n, c, h + 2 * ph, w + 2 * pw), _fill_min(x.dtype), dtype=x.dtype)
        padded[:, :, ph:ph + h, pw:pw + w] = x
        x, h, w = padded, h + 2 * ph, w + 2 * pw
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    res = None
    for i in range(kh):
        for j in range(kw):
            view = x[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
            res = view.copy() if res is None else xp.maximum(res, view, out=res)
    return res


def _pool_workspace(x, dtype=None, kernel=(2, 2), stride=(0, 0), padding=(0, 0)):
    """max_pool2d's padded copy of its input (filled with the dtype's minimum)."""
    _, _, pad = _pool_geometry(kernel, stride, padding)
    if len(x.shape) != 4 or pad == (0, 0):
        return []
    return [("padded input", _padded(x.shape, pad), x.dtype if dtype is None else dtype)]


def _max_pool2d_shape(shapes, kernel=(2, 2), stride=(0, 0), padding=(0, 0)):
    x = shapes[0]
    _nchw(x, "input", "max_pool2d")
    (kh, kw), (sh, sw), (ph, pw) = _pool_geometry(kernel, stride, padding)
    if ph * 2 > kh or pw * 2 > kw:
        raise ShapeError(f"padding {(ph, pw)} must be at most half the kernel {(kh, kw)}")
    ho, wo = _out_dim(x[2], kh, sh, ph), _out_dim(x[3], kw, sw, pw)
    if (ho is not None and ho < 1) or (wo is not None and wo < 1):
        raise ShapeError(f"kernel {(kh, kw)} does not fit input {fmt_shape(x)}; use a smaller kernel")
    return (x[0], x[1], ho, wo)


register(OpDef("max_pool2d", ("x",), _max_pool2d, params=_POOL_PARAMS, shape=_max_pool2d_shape,
               grad=lambda F, ins, y, g, **p: [F.max_pool2d_grad(g, ins[0], **p)], namespace="nn",
               workspace=lambda avals, **p: _pool_workspace(avals[0], **p),
               doc="maximum over kh x kw windows of NCHW input (stride 0 = kernel size)"))


def _max_pool2d_grad(xp, g, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), out=None):
    """g routed to the first maximum of each window (ties go to the first, like argmax)."""
    (kh, kw), (sh, sw), (ph, pw) = k, s, p = _pool_geometry(kernel, stride, padding)
    n, c, h, w = x.shape
    win = _windows(xp, x, k, s, p, _fill_min(x.dtype))
    ho, wo = win.shape[2], win.shape[3]
    first = win.reshape(n, c, ho, wo, kh * kw).argmax(axis=-1)
    dx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=g.dtype)
    for i in range(kh):
        for j in range(kw):
            dx[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw] += g * (first == i * kw + j)
    return xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


register(OpDef("max_pool2d_grad", ("g", "x"), _max_pool2d_grad, params=_POOL_PARAMS,
               shape=lambda shapes, **p: shapes[1], dtype=lambda dtypes, **p: dtypes[0], namespace="nn",
               workspace=lambda avals, **p: _pool_workspace(avals[1], avals[0].dtype, **p),
               doc="max_pool2d's gradient: g scattered to each window's (first) maximum of x"))


# -- batch norm ----------------------------------------------------------------------------------
def _bn_view(v, ndim, axis):
    """A per-channel vector shaped to broadcast against the input along ``axis``."""
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def _batch_norm(xp, x, gamma, beta, mean, var, eps=1e-5, axis=1, out=None):
    axis %= x.ndim
    scale = gamma / xp.sqrt(var + x.dtype.type(eps))
    shift = beta - mean * scale
    return x * _bn_view(scale.astype(x.dtype, copy=False), x.ndim, axis) \
        + _bn_view(shift.astype(x.dtype, copy=False), x.ndim, axis)


def _batch_norm_shape(shapes, eps=1e-5, axis=1):
    x = shapes[0]
    ax = normalize_axis(axis, len(x), "batch_norm")
    c = x[ax]
    for name, s in zip(("gamma", "beta", "mean", "var"), shapes[1:]):
        if len(s) != 1 or (None not in (c, s[0]) and s[0] != c):
            raise ShapeError(f"{name} {fmt_shape(s)} must be ({c},): one value per channel of input "
                             f"{fmt_shape(x)} along axis {axis}")
    return x


def _check_eps(v, op):
    if not v > 0:
        raise ParamValueError(f"{op}: eps must be > 0, got {v}")


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


register(OpDef("batch_norm", ("x", "gamma", "beta", "mean", "var"), _batch_norm,
               params=(Param("eps", FLOAT, 1e-5, check=_check_eps), Param("axis", INT, 1)),
               shape=_batch_norm_shape, dtype=_float_inputs("batch_norm"), grad=_batch_norm_grad,
               namespace="nn",
               doc="(x - mean) / sqrt(var + eps) * gamma + beta, per channel along axis"))


# -- flatten -------------------------------------------------------------------------------------
def _flatten_shape(shapes):
    x = shapes[0]
    if not x:
        raise ShapeError("cannot flatten a 0-d array; it needs a batch dim")
    rest = x[1:]
    n = None
    if None not in rest:  # exact Python ints: np.prod(dtype=int64) wraps around (2**32 * 2**32 -> 0)
        n = 1
        for d in rest:
            n *= d
    return (x[0], n)


register(OpDef("flatten", ("x",), lambda xp, x, out=None: x.reshape(x.shape[0], -1),
               shape=_flatten_shape, view=True, namespace="nn",
               grad=lambda F, ins, y, g: [F.reshape_like(g, ins[0])],
               doc="x as (batch, everything else): generic over the batch size, unlike reshape"))
