"""Convolution-family ops the layers need: ``nn.conv2d`` (NCHW, im2col + matmul, with
``dilation`` and ``groups``), ``nn.conv2d_transpose`` and ``nn.flatten``. Pooling lives in
``pool.py``, ``nn.batch_norm`` with the other normalizations in ``norm.py``.

The gradients of ``conv2d`` cannot be written with other ops (col2im), so they are registered
ops of their own: ``nn.conv2d_input_grad`` and ``nn.conv2d_weight_grad``. They read their
input's shape from a ``like`` input, so graphs stay generic over the batch size.
``conv2d_transpose`` is col2im with a computed output size; its gradients are ``conv2d`` (input)
and ``conv2d_weight_grad`` with image and output gradient swapped (weight).

Groups (``groups > 1``) run as one batched matmul over a leading group axis; ``groups == 1``
is im2col + matmul (``gemm_conv`` per image), and depthwise kernels (one filter per channel) are
kh * kw strided multiply-adds over all channels at once: the reference kernel (``conv2d_im2col``,
``conv2d_depthwise``, ``conv2d_grouped``). The faster ways (one batch-last product for a batch of
small images, images split over threads, a compiled parallel region, Winograd) live in the kernels
layer: ``kernels/conv2d.py`` declares them and chooses one per call.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..errors import DTypeError, ParamValueError, ShapeError, fmt_shape
from .params import INT, INTS, Param
from .registry import OpDef, register
from .scratch import scratch


# -- helpers -------------------------------------------------------------------------------------
def pair_param(v, name, op, minimum):
    if len(v) == 2 and v[0] >= minimum and v[1] >= minimum:  # the common case, on every kernel call
        return v
    if len(v) == 1:
        v = (v[0], v[0])
    if len(v) != 2 or any(d < minimum for d in v):
        raise ParamValueError(f"{op}: {name} must be one int or two ints >= {minimum}, got {v}")
    return v


def check_pair_param(minimum):
    def check(v, op):
        pair_param(v, "this parameter", op, minimum)
    return check


def _check_groups(v, op):
    if v < 1:
        raise ParamValueError(f"{op}: groups must be >= 1, got {v}")


def _span(k, d):
    """The extent of a kernel of size ``k`` with dilation ``d``."""
    return (k - 1) * d + 1


def out_dim(size, k, s, p, d=1):
    if size is None or k is None:
        return None
    return (size + 2 * p - _span(k, d)) // s + 1


def pad_nchw(xp, x, padding, extra=(0, 0), fill=0.0):
    """x (NCHW) padded by ``padding`` on both sides of H and W, plus ``extra`` rows / columns at the
    bottom / right (ceil-mode pooling), filled with ``fill``. x itself when nothing is added."""
    (ph, pw), (eh, ew) = padding, extra
    if not (ph or pw or eh or ew):
        return x
    n, c, h, w = x.shape
    shape = (n, c, h + 2 * ph + eh, w + 2 * pw + ew)
    padded = xp.zeros(shape, dtype=x.dtype) if fill == 0 else xp.full(shape, fill, dtype=x.dtype)  # (zeros: C-level)
    padded[:, :, ph:ph + h, pw:pw + w] = x
    return padded


def conv_windows(xp, x, kernel, stride, padding, fill=0.0, dilation=(1, 1), extra=(0, 0)):
    """Sliding windows (N, C, Ho, Wo, kh, kw) over x padded with ``fill``: a strided view.

    Built directly from strides (``np.pad`` and ``sliding_window_view`` cost more than the
    arithmetic for the small images this library trains on). Dilation is a larger stride
    between the taps of a window.
    """
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    padded = pad_nchw(xp, x, padding, extra, fill)
    x = xp.ascontiguousarray(x) if padded is x else padded
    n, c, h, w = x.shape
    ho, wo = (h - _span(kh, dh)) // sh + 1, (w - _span(kw, dw)) // sw + 1
    s0, s1, s2, s3 = x.strides
    shape, strides = (n, c, ho, wo, kh, kw), (s0, s1, s2 * sh, s3 * sw, s2 * dh, s3 * dw)
    if xp is np:
        return np.ndarray(shape, x.dtype, buffer=x, strides=strides)
    return xp.lib.stride_tricks.as_strided(x, shape, strides)


def scatter_windows(dx, parts, kernel, stride, dilation=(1, 1)):
    """Add ``parts[..., i, j]`` (N, C, Ho, Wo, kh, kw) into tap (i, j)'s strided view of ``dx``
    (the padded input gradient): the adjoint of ``conv_windows``, one strided add per tap (the
    kernels layer's compiled loop, ``kernels/conv_jit.py``, adds in the same order)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    ho, wo = parts.shape[2], parts.shape[3]
    for i in range(kh):
        for j in range(kw):
            r, c = i * dh, j * dw
            dx[:, :, r:r + sh * (ho - 1) + 1:sh, c:c + sw * (wo - 1) + 1:sw] += parts[..., i, j]


def float_inputs_rule(op):
    def rule(dtypes, **params):
        for d in dtypes:
            if d.kind != "f":
                raise DTypeError(f"needs floating-point inputs, got {', '.join(map(str, dtypes))}; "
                                 "cast with .astype('float32')")
        return np.result_type(*dtypes)
    return rule


def padded_shape(x, padding, extra=(0, 0)):
    """The shape of ``x`` (NCHW) padded by ``padding`` on both sides (``None`` dims stay unknown)."""
    (ph, pw), (eh, ew) = padding, extra
    n, c, h, w = x
    return (n, c, None if h is None else h + 2 * ph + eh, None if w is None else w + 2 * pw + ew)


def geometry(stride, padding, dilation, op="conv2d"):
    """conv2d's ``(stride, padding, dilation)`` as pairs, checked (errors name ``op``)."""
    return (pair_param(stride, "stride", op, 1), pair_param(padding, "padding", op, 0),
            pair_param(dilation, "dilation", op, 1))


def conv_workspace(x_at, kernel_of):
    """conv2d-family temporaries: the zero-padded input and the im2col columns
    (N * Ho * Wo, C * kh * kw). ``x_at``: which input is the NCHW image; ``kernel_of(avals, params)``."""
    def workspace(avals, stride=(1, 1), padding=(0, 0), dilation=(1, 1), **params):
        x = avals[x_at]
        if len(x.shape) != 4:
            return []
        (sh, sw), (ph, pw), (dh, dw) = geometry(stride, padding, dilation, "")
        kh, kw = kernel_of(avals, params)
        out = [("padded input", padded_shape(x.shape, (ph, pw)), x.dtype)] if ph or pw else []
        n, c, h, w = x.shape
        ho, wo = out_dim(h, kh, sh, ph, dh), out_dim(w, kw, sw, pw, dw)
        if None not in (n, c, ho, wo, kh, kw) and ho > 0 and wo > 0:
            out.append(("im2col columns", (n * ho * wo, c * kh * kw), x.dtype))
        return out
    return workspace


def check_nchw(shape, what, op):
    if len(shape) != 4:
        raise ShapeError(f"{what} must be 4-D (N, C, H, W), got {fmt_shape(shape)}; "
                         "add dims with expand_dims or reshape")


def divides(groups, n):
    return n is None or n % groups == 0


# -- conv2d --------------------------------------------------------------------------------------
CONV_PARAMS = (Param("stride", INTS, (1, 1), check=check_pair_param(1)),
                Param("padding", INTS, (0, 0), check=check_pair_param(0)),
                Param("dilation", INTS, (1, 1), check=check_pair_param(1),
                      doc="spacing between kernel taps (1 = dense kernel)"),
                Param("groups", INT, 1, check=_check_groups,
                      doc="channel groups: input and output channels split into this many independent "
                          "convolutions (in_channels = depthwise)"))


def im2col_groups(win, groups):
    """Grouped im2col: windows (N, C, Ho, Wo, kh, kw) -> (G, N * Ho * Wo, C/G * kh * kw), one copy."""
    n, c, ho, wo, kh, kw = win.shape
    cg = c // groups
    return win.reshape(n, groups, cg, ho, wo, kh, kw).transpose(1, 0, 3, 4, 2, 5, 6) \
        .reshape(groups, n * ho * wo, cg * kh * kw)


def depthwise_shape(groups, in_channels, weight_shape):
    """One filter per channel (groups == channels == out_channels): per-tap multiply-adds over
    all channels at once beat a batched matmul of 1-wide matrices (about 3x, measured)."""
    return groups > 1 and groups == in_channels and weight_shape[0] == groups and weight_shape[1] == 1


def _tap_weights(weight):
    """(kh, kw) per-channel weights of a depthwise kernel, each shaped (1, C, 1, 1)."""
    c, _, kh, kw = weight.shape
    return [[weight[:, 0, i, j].reshape(1, c, 1, 1) for j in range(kw)] for i in range(kh)]


def _depthwise(xp, win, weight, out=None):
    """Depthwise conv2d from its windows (N, C, Ho, Wo, kh, kw): a multiply-add per tap, summed
    into ``out`` when given."""
    kh, kw = win.shape[4], win.shape[5]
    taps = _tap_weights(weight)
    res = tmp = None
    for i in range(kh):
        for j in range(kw):
            if res is None:
                res = xp.multiply(win[..., i, j], taps[i][j], out=out)
                tmp = xp.empty_like(res)
            else:
                res += xp.multiply(win[..., i, j], taps[i][j], out=tmp)
    return res


# A batch runs one matmul per image when its output has at least the tuning table's
# ``per_image_min_pixels`` (64) pixels; smaller ones one matmul for the whole batch (a 4 x 4 image
# makes (O x C*9) @ (C*9 x 16) products: too thin for BLAS). Measured: 2x2 outputs of 64 images
# 4.5x slower per image, 8x8 ones 1.3x faster, a 224x224 image 1.4-2.5x faster per image; on the
# demo CNN (benchmarks/onnx.py) per image wins from 8 x 8 up, even for its 8-filter first layer.


def into(xp, out, shape, dtype):
    """``out`` when a result of ``shape`` can be written straight into it, else None."""
    if out is not None and out.shape == shape and out.dtype == dtype and out.flags.c_contiguous:
        return out
    return None


def gemm_conv(xp, win, weight, bias, out):
    """conv2d with groups == 1 from its windows (N, C, Ho, Wo, kh, kw): im2col + one matmul per
    image (a batch of small images takes the kernels layer's ``batch_last`` instead).

    The im2col copy keeps each window row's ``Wo`` taps contiguous (reading a tap's output row is
    one strided run; an (N*Ho*Wo, C*kh*kw) column matrix instead gathers runs of ``kw`` values,
    6x slower on ResNet's 3x3 layers, benchmarks/onnx.py). Each image then multiplies
    ``W (O, C*kh*kw) @ cols (C*kh*kw, Ho*Wo)``, which lands in NCHW order with no transpose,
    into the planned output buffer. A 1x1 kernel with stride 1 and no padding needs no columns
    at all: the image is its own.
    """
    n, c, ho, wo, kh, kw = win.shape
    o, k = weight.shape[0], c * kh * kw
    wmat = weight.reshape(o, k)
    dtype = xp.result_type(win.dtype, weight.dtype)
    shape = (n, o, ho, wo)
    target = into(xp, out, shape, dtype)
    s = win.strides
    if kh == kw == 1 and s[2] == s[3] * wo and s[3] == win.itemsize and s[1] == s[2] * ho:
        cols = win.reshape(n, c, ho * wo)  # the image itself: no copy
    else:
        cols = scratch(xp, 1, (n, c, kh, kw, ho, wo), win.dtype)
        cols[...] = win.transpose(0, 1, 4, 5, 2, 3)
        cols = cols.reshape(n, k, ho * wo)
    y = xp.matmul(wmat, cols, out=None if target is None else target.reshape(n, o, ho * wo))
    y = y.reshape(shape)
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    if target is not None:
        return target
    if out is not None:
        out[...] = y
        return out
    return y


def is_batch_last(a) -> bool:
    """True for an NCHW array of several images stored batch last, (C, H, W, N) in memory (the
    planned buffers of ``executor/batch_last.py``)."""
    return a is not None and a.ndim == 4 and a.shape[0] > 1 and a.strides[0] == a.itemsize \
        and a.transpose(1, 2, 3, 0).flags.c_contiguous


def _conv2d(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """The reference kernel: im2col and one product per image (``groups == 1``), per-tap
    multiply-adds (depthwise) or one batched product over the groups; half precision accumulates
    in float32. The kernels layer (``kernels/conv2d.py``) chooses faster ways where they apply."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return half_via_float32(_conv2d, xp, x, weight, bias, stride, padding, dilation, groups, out)
    stride, padding, dilation = geometry(stride, padding, dilation)
    if groups == 1:
        return conv2d_im2col(xp, x, weight, bias, stride, padding, dilation, groups, out)
    if depthwise_shape(groups, x.shape[1], weight.shape):
        return conv2d_depthwise(xp, x, weight, bias, stride, padding, dilation, groups, out)
    return conv2d_grouped(xp, x, weight, bias, stride, padding, dilation, groups, out)


def half_via_float32(run, xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d of float16 operands by ``run`` on float32 copies, rounded to float16 once at the end."""
    y = run(xp, x.astype(np.float32), weight.astype(np.float32), None if bias is None else bias.astype(np.float32),
            stride, padding, dilation, groups)
    if out is None:
        return y.astype(np.float16)
    out[...] = y
    return out


def is_depthwise(x, weight, groups) -> bool:
    """One filter per input channel (``_depthwise``'s multiply-adds beat a batched product)."""
    return depthwise_shape(groups, x.shape[1], weight.shape)


def conv2d_im2col(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """``groups == 1``: im2col and one product per image (``gemm_conv``)."""
    win = conv_windows(xp, x, weight.shape[2:], stride, padding, dilation=dilation)
    return gemm_conv(xp, win, weight, bias, out)


def conv2d_depthwise(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """One filter per channel: a multiply-add per tap over all channels at once."""
    win = conv_windows(xp, x, weight.shape[2:], stride, padding, dilation=dilation)
    n, o, ho, wo = x.shape[0], weight.shape[0], win.shape[2], win.shape[3]
    y = _depthwise(xp, win, weight, into(xp, out, (n, o, ho, wo), xp.result_type(x.dtype, weight.dtype)))
    return _biased(y, bias, out)


def conv2d_grouped(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """One batched matmul over the groups: (G, N*Ho*Wo, C/G*kh*kw) @ (G, C/G*kh*kw, O/G)."""
    win = conv_windows(xp, x, weight.shape[2:], stride, padding, dilation=dilation)
    n, o, ho, wo = x.shape[0], weight.shape[0], win.shape[2], win.shape[3]
    o, cg, kh, kw = weight.shape
    og = o // groups
    t = im2col_groups(win, groups) @ weight.reshape(groups, og, cg * kh * kw).transpose(0, 2, 1)
    y = into(xp, out, (n, o, ho, wo), t.dtype)
    y = xp.empty((n, o, ho, wo), dtype=t.dtype) if y is None else y
    y.reshape(n, groups, og, ho, wo)[...] = t.reshape(groups, n, ho, wo, og).transpose(1, 0, 4, 2, 3)
    return _biased(y, bias, out)


def _biased(y, bias, out):
    if bias is not None:
        y += bias.reshape(1, -1, 1, 1)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


def out_size(x, weight, stride, padding, dilation) -> tuple:
    """conv2d's output (Ho, Wo) for checked pairs of geometry (concrete arrays: written out, no
    generator, since the chooser asks on every call)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    kh, kw = weight.shape[2], weight.shape[3]
    return ((x.shape[2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (x.shape[3] + 2 * pw - dw * (kw - 1) - 1) // sw + 1)


def _check_conv_channels(x, w, groups, op, what="input"):
    """x (N, C, ...) against a conv weight (O, C/groups, kh, kw)."""
    if len(w) != 4:
        raise ShapeError(f"weight must be 4-D (out_channels, in_channels/groups, kh, kw), got {fmt_shape(w)}")
    if not divides(groups, x[1]):
        raise ShapeError(f"{what} {fmt_shape(x)} has {x[1]} channels, not divisible by groups={groups}; "
                         "use a groups value that divides the channel count")
    if not divides(groups, w[0]):
        raise ShapeError(f"weight {fmt_shape(w)} has {w[0]} output channels, not divisible by "
                         f"groups={groups}; use a channel count that is a multiple of groups")
    if None not in (x[1], w[1]) and x[1] != w[1] * groups:
        detail = "" if groups == 1 else f" ({w[1]} per group x {groups} groups)"
        raise ShapeError(f"{what} {fmt_shape(x)} has {x[1]} channels but weight {fmt_shape(w)} expects "
                         f"{w[1] * groups}{detail}; the weight is (out_channels, in_channels/groups, kh, kw)")


def _check_bias(shapes, channels, w):
    if len(shapes) == 3:
        b = shapes[2]
        if len(b) != 1 or (None not in (b[0], channels) and b[0] != channels):
            raise ShapeError(f"bias {fmt_shape(b)} must be ({channels},) to match weight {fmt_shape(w)}")
        return channels if channels is not None else b[0]
    return channels


def _conv2d_shape(shapes, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    x, w = shapes[0], shapes[1]
    check_nchw(x, "input", "conv2d")
    _check_conv_channels(x, w, groups, "conv2d")
    out_channels = _check_bias(shapes, w[0], w)
    (sh, sw), (ph, pw), (dh, dw) = geometry(stride, padding, dilation)
    ho, wo = out_dim(x[2], w[2], sh, ph, dh), out_dim(x[3], w[3], sw, pw, dw)
    if (ho is not None and ho < 1) or (wo is not None and wo < 1):
        dil = "" if (dh, dw) == (1, 1) else f" dilated by {(dh, dw)}"
        raise ShapeError(f"kernel {w[2]}x{w[3]}{dil} does not fit input {fmt_shape(x)} with padding "
                         f"{(ph, pw)}; pad more or use a smaller kernel")
    return (x[0], out_channels, ho, wo)


def _conv2d_grad(F, ins, y, g, **p):
    x, w = ins[0], ins[1]
    kernel = tuple(w.aval.shape[2:])
    grads = [F.conv2d_input_grad(g, w, x, **p), F.conv2d_weight_grad(g, x, kernel=kernel, **p)]
    if len(ins) == 3:
        grads.append(F.sum(g, axis=(0, 2, 3)))
    return grads


def _weight_kernel(avals, p):
    return tuple(avals[1].shape[2:4]) if len(avals[1].shape) == 4 else (None, None)


register(OpDef("conv2d", ("x", "weight", "bias?"), _conv2d, params=CONV_PARAMS, shape=_conv2d_shape,
               dtype=float_inputs_rule("conv2d"), grad=_conv2d_grad, namespace="nn", writes_out=True,
               workspace=conv_workspace(0, _weight_kernel),
               doc="2-D convolution (cross-correlation) of NCHW input with (O, C/groups, kh, kw) weight"))


def no_switch(flops):
    """``col2im``'s ``serial`` by default: BLAS's threads left as they are."""
    return contextlib.nullcontext()


def col2im(xp, g, weight, out_shape, stride, padding, dilation, groups, scatter=scatter_windows, serial=no_switch):
    """The adjoint of conv2d in its input: every window's share of ``g @ W`` added back to the
    input pixels it read, for an input of ``out_shape`` (N, C, H, W). The kernels layer passes its
    compiled ``scatter`` (the same adds in the same order) and ``serial(flops)``, a context that
    runs a small product on one BLAS thread (``kernels/conv2d_grad.py``)."""
    (ph, pw) = padding
    n, c, h, w = out_shape
    o, cg, kh, kw = weight.shape
    ho, wo = g.shape[2], g.shape[3]
    dx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=xp.result_type(g, weight))
    if depthwise_shape(groups, c, weight.shape):  # each tap's weighted g, added where the tap read
        (sh, sw), (dh, dw), taps = stride, dilation, _tap_weights(weight)
        for i in range(kh):
            for j in range(kw):
                r, q = i * dh, j * dw
                dx[:, :, r:r + sh * (ho - 1) + 1:sh, q:q + sw * (wo - 1) + 1:sw] += g * taps[i][j]
        return xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])
    if groups == 1:
        with serial(2.0 * n * ho * wo * o * c * kh * kw):
            dcols = g.transpose(0, 2, 3, 1).reshape(-1, o) @ weight.reshape(o, -1)
        dcols = dcols.reshape(n, ho, wo, c, kh, kw)
        dcols = dcols.transpose(0, 3, 1, 2, 4, 5)  # (N, C, Ho, Wo, kh, kw)
    else:
        og = o // groups
        gg = g.reshape(n, groups, og, ho, wo).transpose(1, 0, 3, 4, 2).reshape(groups, n * ho * wo, og)
        dcols = (gg @ weight.reshape(groups, og, cg * kh * kw)).reshape(groups, n, ho, wo, cg, kh, kw)
        dcols = dcols.transpose(1, 0, 4, 2, 3, 5, 6).reshape(n, c, ho, wo, kh, kw)
    scatter(dx, dcols, (kh, kw), stride, dilation)
    return xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


# -- conv2d_transpose ----------------------------------------------------------------------------
_TRANSPOSE_PARAMS = CONV_PARAMS[:2] + (
    Param("output_padding", INTS, (0, 0), check=check_pair_param(0),
          doc="rows / columns added at the bottom / right of the output (< stride): picks one of the "
              "input sizes a strided conv2d maps to the same output size"),) + CONV_PARAMS[2:]


def _transpose_out_dim(size, k, s, p, op_, d):
    if size is None or k is None:
        return None
    return (size - 1) * s - 2 * p + _span(k, d) + op_


def _conv2d_transpose_geometry(stride, padding, output_padding, dilation):
    s, p, d = geometry(stride, padding, dilation, "conv2d_transpose")
    return s, p, pair_param(output_padding, "output_padding", "conv2d_transpose", 0), d


def _conv2d_transpose(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0),
                      dilation=(1, 1), groups=1, out=None):
    """The reference kernel: ``transpose_col2im`` with NumPy's adds (``kernels/conv2d_grad.py``
    passes its compiled ones)."""
    return transpose_col2im(xp, x, weight, bias, stride, padding, output_padding, dilation, groups)


def transpose_col2im(xp, x, weight, bias, stride, padding, output_padding, dilation, groups, scatter=scatter_windows,
                     serial=no_switch):
    """conv2d_transpose as ``col2im`` of ``x`` into the computed output size (``scatter``,
    ``serial``: as ``col2im`` takes them), plus the bias."""
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = _conv2d_transpose_geometry(stride, padding, output_padding, dilation)
    n, _, h, w = x.shape
    _, cog, kh, kw = weight.shape
    shape = (n, cog * groups, _transpose_out_dim(h, kh, sh, ph, oh, dh), _transpose_out_dim(w, kw, sw, pw, ow, dw))
    y = col2im(xp, x, weight, shape, (sh, sw), (ph, pw), (dh, dw), groups, scatter, serial)
    if bias is not None:
        y += bias.reshape(1, -1, 1, 1)
    return y


def _conv2d_transpose_shape(shapes, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1),
                            groups=1):
    x, w = shapes[0], shapes[1]
    check_nchw(x, "input", "conv2d_transpose")
    if len(w) != 4:
        raise ShapeError(f"weight must be 4-D (in_channels, out_channels/groups, kh, kw), got {fmt_shape(w)}")
    if not divides(groups, x[1]):
        raise ShapeError(f"input {fmt_shape(x)} has {x[1]} channels, not divisible by groups={groups}")
    if None not in (x[1], w[0]) and x[1] != w[0]:
        raise ShapeError(f"input {fmt_shape(x)} has {x[1]} channels but weight {fmt_shape(w)} expects "
                         f"{w[0]}; the weight is (in_channels, out_channels/groups, kh, kw)")
    out_channels = _check_bias(shapes, None if w[1] is None else w[1] * groups, w)
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = _conv2d_transpose_geometry(stride, padding, output_padding, dilation)
    if oh >= sh or ow >= sw:
        raise ShapeError(f"output_padding {(oh, ow)} must be smaller than stride {(sh, sw)}; "
                         "it only picks among the sizes a strided conv2d maps to one size")
    ho = _transpose_out_dim(x[2], w[2], sh, ph, oh, dh)
    wo = _transpose_out_dim(x[3], w[3], sw, pw, ow, dw)
    if (ho is not None and ho < 1) or (wo is not None and wo < 1):
        raise ShapeError(f"padding {(ph, pw)} leaves no output for input {fmt_shape(x)} and kernel "
                         f"{w[2]}x{w[3]}; use less padding")
    return (x[0], out_channels, ho, wo)


def _conv2d_transpose_grad(F, ins, y, g, output_padding=(0, 0), **p):
    """The transpose of conv2d's input gradient: conv2d of g, and conv2d's weight gradient with
    the roles of image and output gradient swapped."""
    x, w = ins[0], ins[1]
    kernel = tuple(w.aval.shape[2:])
    grads = [F.conv2d(g, w, **p), F.conv2d_weight_grad(x, g, kernel=kernel, **p)]
    if len(ins) == 3:
        grads.append(F.sum(g, axis=(0, 2, 3)))
    return grads


def _transpose_workspace(avals, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1),
                         groups=1):
    x, w = avals[0], avals[1]
    if len(x.shape) != 4 or len(w.shape) != 4:
        return []
    shape = _conv2d_transpose_shape([x.shape, w.shape], stride, padding, output_padding, dilation, groups)
    return [("padded output", padded_shape(shape, pair_param(padding, "padding", "", 0)), x.dtype)]


register(OpDef("conv2d_transpose", ("x", "weight", "bias?"), _conv2d_transpose, params=_TRANSPOSE_PARAMS,
               shape=_conv2d_transpose_shape, dtype=float_inputs_rule("conv2d_transpose"),
               grad=_conv2d_transpose_grad, namespace="nn", workspace=_transpose_workspace,
               doc="transposed 2-D convolution (the adjoint of conv2d in its input, 'deconvolution') of "
                   "NCHW input with (C, O/groups, kh, kw) weight"))


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
