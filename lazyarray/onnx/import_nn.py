"""ONNX neural-network operators -> registry ops: MatMul, Gemm, Softmax, Conv, ConvTranspose, pooling,
normalizations, losses (Resize: ``import_resize.py``; training-mode BatchNormalization and Dropout:
``import_train.py``).

Convolution and pooling are 2-D (NCHW) in our registry; 1-D models run through them with a unit
height. Asymmetric pads, ``auto_pad``, ``ceil_mode`` and dilations become explicit padding and
strided slices; grouped and dilated convolutions reuse the MXNet importer's per-tap compositions.
``ConvTranspose`` is our convolution's input gradient (``nn.conv2d_input_grad``) per group.
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .. import sym as S
from ..dim import dim_min, floordiv
from .import_conv3d import conv3d, conv_transpose3d_full
from .import_ops import Converter, OnnxNode, constant, dtype_of, np_dtype, shape_of
from .import_resize import resize
from .import_train import batch_norm_training, dropout_training


# -- dense -----------------------------------------------------------------------------------------
def matmul(n: OnnxNode) -> list:
    n.arity(2)
    return [S.matmul(n.inputs[0], n.inputs[1])]


def gemm(n: OnnxNode) -> list:
    n.arity(2, 3)
    a, b, c = n.inputs[0], n.inputs[1], n.input(2)
    if n.attr("transA", 0):
        a = S.transpose(a)
    if n.attr("transB", 0):
        b = S.transpose(b)
    y = S.matmul(a, b)
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if alpha != 1.0:
        y = S.multiply(y, alpha)
    if c is not None and beta != 0.0:
        y = S.add(y, c if beta == 1.0 else S.multiply(c, beta))
    return [y]


def _softmax(fn):
    def convert(n: OnnxNode) -> list:
        n.arity(1)
        return [fn(n.inputs[0], axis=int(n.attr("axis", -1)))]
    return convert


# -- convolution and pooling -----------------------------------------------------------------------
def _spatial(n: OnnxNode, kernel: tuple, in_hw: tuple | None, strides, dilations) -> tuple[list, list]:
    """``(begin, end)`` pads per spatial axis from ``pads`` or ``auto_pad``."""
    k = len(kernel)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        if in_hw is None or None in in_hw:
            n.fail(f"auto_pad={auto} needs the input's spatial shape; give the model's input shapes")
        begin, end = [], []
        for size, kk, s, d in zip(in_hw, kernel, strides, dilations):
            total = max((-(-size // s) - 1) * s + (kk - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin, end
    if auto == "VALID":
        return [0] * k, [0] * k
    if auto != "NOTSET":
        n.fail(f"auto_pad={auto!r}: expected NOTSET, SAME_UPPER, SAME_LOWER or VALID")
    pads = list(n.attr("pads", [0] * 2 * k))
    if len(pads) != 2 * k:
        n.fail(f"pads={pads} needs {2 * k} entries")
    return pads[:k], pads[k:]


def _to_2d(n: OnnxNode, x, rank: int, what: str):
    """1-D inputs get a unit height (axis 2); 3-D and higher are refused."""
    if rank == 3:
        return S.expand_dims(x, axis=2), True
    if rank != 4:
        n.fail(f"{what} of a rank-{rank} input: only 1-D and 2-D (N, C, L) / (N, C, H, W) are supported")
    return x, False


def _pair(v: list, one: bool, fill: int) -> tuple:
    return (fill,) + tuple(v) if one else tuple(v)


def _pad_hw(x, begin, end, value=0.0):
    if not any(begin) and not any(end):
        return x
    widths = ((0, 0), (0, 0)) + tuple(zip(begin, end))
    return S.pad(x, pad_width=widths, constant_values=value)


def conv(n: OnnxNode) -> list:
    n.arity(2, 3)
    x, w, bias = n.inputs[0], n.inputs[1], n.input(2)
    wshape = shape_of(w)
    if wshape is None or None in wshape:
        n.fail(f"the weight's shape must be known, got {wshape}")
    rank = len(wshape)
    kernel = tuple(n.attr("kernel_shape", wshape[2:]))
    if tuple(kernel) != tuple(wshape[2:]):
        n.fail(f"kernel_shape={kernel} differs from the weight's {wshape[2:]}")
    k = rank - 2
    strides = list(n.attr("strides", [1] * k))
    dil = list(n.attr("dilations", [1] * k))
    groups = int(n.attr("group", 1))
    xs = shape_of(x)
    begin, end = _spatial(n, kernel, None if xs is None else xs[2:], strides, dil)
    if rank == 5:  # 3-D: a sum of 2-D convolutions over the depth taps
        if groups < 1 or wshape[0] % groups:
            n.fail(f"group={groups} must divide the {wshape[0]} output channels")
        return [conv3d(n, x, w, bias, strides, dil, begin, end, groups)]
    x, one = _to_2d(n, x, rank, "Conv")
    if one:
        w = S.expand_dims(w, axis=2)
        wshape = wshape[:2] + (1,) + wshape[2:]
    strides, dil = _pair(strides, one, 1), _pair(dil, one, 1)
    begin, end = _pair(begin, one, 0), _pair(end, one, 0)
    if begin != end:
        x, pad = _pad_hw(x, begin, end), (0, 0)
    else:
        pad = tuple(begin)
    if groups < 1 or wshape[0] % groups:
        n.fail(f"group={groups} must divide the {wshape[0]} output channels")
    y = S.conv2d(x, w, bias, stride=strides, padding=pad, dilation=dil, groups=groups) if bias is not None else \
        S.conv2d(x, w, stride=strides, padding=pad, dilation=dil, groups=groups)
    bias = None
    if bias is not None:
        y = S.add(y, S.reshape(bias, shape=(1, -1, 1, 1)))
    return [S.squeeze(y, axis=2) if one else y]


def conv_transpose(n: OnnxNode) -> list:
    """The gradient of a convolution with respect to its input (``nn.conv2d_input_grad``), per group,
    on the full output ``(in - 1) * stride + kernel (+ output_padding)``, then cropped by the pads."""
    n.arity(2, 3)
    x, w, bias = n.inputs[0], n.inputs[1], n.input(2)
    xs, ws = n.known_shape(0, "ConvTranspose"), n.known_shape(1, "ConvTranspose")
    k = len(ws) - 2
    strides = list(n.attr("strides", [1] * k))
    dil = list(n.attr("dilations", [1] * k))
    if dil != [1] * k:  # a dilated kernel is the kernel with zeros between its taps
        if k != 2:
            n.fail(f"dilations={dil}: supported for 2-D kernels only")
        (kh, kw), (dh, dw) = ws[2:], dil
        wd = S.pad(S.expand_dims(w, axis=(3, 5)), pad_width=((0, 0),) * 3 + ((0, dh - 1), (0, 0), (0, dw - 1)))
        ws = tuple(ws[:2]) + ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
        w = S.getitem(S.reshape(wd, shape=(ws[0], ws[1], kh * dh, kw * dw)),
                      key=(slice(None), slice(None), slice(0, ws[2]), slice(0, ws[3])))
    groups = int(n.attr("group", 1))
    op = list(n.attr("output_padding", [0] * k))
    full = [(size - 1) * s + kk for size, s, kk in zip(xs[2:], strides, ws[2:])]
    auto = n.attr("auto_pad", "NOTSET")
    want = n.attr("output_shape")
    if want is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [size * s for size, s in zip(xs[2:], strides)]
    if want is not None:
        want = list(want)[-k:]
        total = [f + o - t for f, o, t in zip(full, op, want)]
        upper = auto == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        end = [t - t // 2 if upper else t // 2 for t in total]
    else:
        pads = list(n.attr("pads", [0] * 2 * k))
        begin, end = pads[:k], pads[k:]
    if k == 3:  # 3-D: 2-D transposed convolutions per depth tap, placed along the depth
        if dil != [1] * k:
            n.fail(f"dilations={dil}: supported for 2-D kernels only")
        cin = ws[0] // groups
        parts = []
        for g in range(groups):
            xg = x if groups == 1 else S.getitem(x, key=(slice(None), slice(g * cin, (g + 1) * cin)))
            wg = w if groups == 1 else S.getitem(w, key=(slice(g * cin, (g + 1) * cin),))
            parts.append(conv_transpose3d_full(n, xg, wg, (xs[0], cin) + tuple(xs[2:]), ws, strides, op))
        return [_crop_bias(parts[0] if groups == 1 else S.concatenate(parts, axis=1), begin, end, full, op, bias)]
    x, one = _to_2d(n, x, len(xs), "ConvTranspose")
    if one:
        w = S.expand_dims(w, axis=2)
        strides, full, op, begin, end = [1] + strides, [1] + full, [0] + op, [0] + begin, [0] + end
    cin, cout = ws[0] // groups, ws[1]
    like = S.broadcast_to(constant(np.zeros((), dtype_of(x))),
                          shape=(xs[0], cout) + tuple(f + o for f, o in zip(full, op)))
    parts = []
    for g in range(groups):
        xg = x if groups == 1 else S.getitem(x, key=(slice(None), slice(g * cin, (g + 1) * cin)))
        wg = w if groups == 1 else S.getitem(w, key=(slice(g * cin, (g + 1) * cin),))
        parts.append(S.nn.conv2d_input_grad(xg, wg, like, stride=tuple(strides)))
    y = _crop_bias(parts[0] if groups == 1 else S.concatenate(parts, axis=1), begin, end, full, op, bias)
    return [S.squeeze(y, axis=2) if one else y]


def _crop_bias(y, begin, end, full, op, bias):
    # positive pads crop the full output; negative ones (an output_shape past it) extend it with zeros
    key = (slice(None), slice(None)) + tuple(slice(max(b, 0), f + o - max(e, 0))
                                             for b, e, f, o in zip(begin, end, full, op))
    y = _pad_hw(S.getitem(y, key=key), [max(-b, 0) for b in begin], [max(-e, 0) for e in end])
    if bias is not None:
        y = S.add(y, S.reshape(bias, shape=(1, -1) + (1,) * len(full)))
    return y


class _Window(NamedTuple):
    """A pooling node's window on its 2-D (or higher) input ``x``: explicit pads ``begin``/``end``,
    ``extra`` end padding for ceil mode, ``keep`` (ceil mode on a dynamic size: the output lengths
    to keep, see ``_ceil_lengths``) and ``one`` (a 1-D input run at unit height)."""
    x: object
    one: bool
    kernel: tuple
    strides: tuple
    dil: tuple
    begin: tuple
    end: tuple
    extra: tuple
    keep: object

    def ends(self) -> tuple:
        """The end padding ceil mode included."""
        return tuple(e + x_ for e, x_ in zip(self.end, self.extra))


def _pool(kind: str):
    pool = {"MaxPool": _max_pool, "LpPool": _lp_pool, "AveragePool": _average_pool}[kind]

    def convert(n: OnnxNode) -> list:
        n.arity(1)
        w = _pool_window(n, kind)
        if kind == "MaxPool" and n.n_outputs > 1:
            return _kept(w.keep, _max_pool_indices(n, w), w.one)
        if kind == "AveragePool" and _avg_pool_fits(n, w):  # (its windows are ONNX's: none to cut)
            return _out([_avg_pool2d(n, w)], w.one)
        return _kept(w.keep, [pool(n, w)], w.one)
    return convert


def _pool_window(n: OnnxNode, kind: str) -> _Window:
    """The checked window of a pooling node, its pads made explicit (``auto_pad``, ceil mode)."""
    if n.attr("kernel_shape") is None:
        n.fail("needs the attribute kernel_shape")
    kernel = list(n.attr("kernel_shape"))
    k = len(kernel)
    rank = n.rank(0, kind)
    if rank != k + 2:
        n.fail(f"kernel_shape={kernel} does not fit an input of rank {rank}")
    strides = list(n.attr("strides", [1] * k))
    dil = list(n.attr("dilations", [1] * k))
    _check_window(n, kernel, strides, dil)
    xs = n.shape(0)
    begin, end = _spatial(n, kernel, xs[2:], strides, dil)
    _check_pads(n, kernel, dil, begin, end, xs[2:], bool(n.attr("ceil_mode", 0)))
    # 3-D and higher windows: reduced over their taps like the 2-D windows max_pool2d does not cover
    x, one = (n.inputs[0], False) if rank > 4 else _to_2d(n, n.inputs[0], rank, kind)
    hw = (1,) + tuple(xs[2:]) if one else tuple(xs[2:])
    kernel, strides, dil = _pair(kernel, one, 1), _pair(strides, one, 1), _pair(dil, one, 1)
    begin, end = _pair(begin, one, 0), _pair(end, one, 0)
    extra = (0,) * len(kernel)
    keep = None
    if n.attr("ceil_mode", 0):
        if None in hw:
            n.fail("ceil_mode=1 needs the input's spatial shape; give the model's input shapes")
        if all(isinstance(h, int) for h in hw):
            extra = tuple(_ceil_extra(hw[a], kernel[a], strides[a], dil[a], begin[a], end[a])
                          for a in range(len(kernel)))
        else:  # pad by the most ceil mode can add, then keep the windows ceil mode has
            extra = tuple(st - 1 for st in strides)
            keep = _ceil_lengths(hw, kernel, strides, dil, begin, end)
    return _Window(x, one, kernel, strides, dil, begin, end, extra, keep)


def _lowest(dt):
    """The padding value a max over windows never picks."""
    return -math.inf if np.dtype(dt).kind == "f" else np.iinfo(dt).min


def _max_pool_indices(n: OnnxNode, w: _Window) -> list:
    """MaxPool with its Indices output: the max and the flat index of where it was."""
    low = _lowest(dtype_of(w.x))
    index = _flat_index(n.known_shape(0, "MaxPool's Indices output"), int(n.attr("storage_order", 0)))
    index = constant(index[:, :, None] if w.one else index)
    return _max_and_argmax(_pad_hw(w.x, w.begin, w.ends(), low), _pad_hw(index, w.begin, w.ends(), -1),
                           w.kernel, w.strides, w.dil)


def _max_pool(n: OnnxNode, w: _Window):
    """max_pool2d when it covers the window (symmetric pads within half the kernel), else a max
    over the window's taps."""
    none = (0,) * len(w.kernel)
    if len(w.kernel) == 2 and w.dil == (1, 1) and w.begin == w.end and w.extra == none and \
            all(2 * p <= q for p, q in zip(w.begin, w.kernel)):
        return S.nn.max_pool2d(w.x, kernel=w.kernel, stride=w.strides, padding=tuple(w.begin))
    xp = _pad_hw(w.x, w.begin, w.ends(), _lowest(dtype_of(w.x)))
    y = None
    for _, win in _taps(xp, w.kernel, w.strides, w.dil):
        y = win if y is None else S.maximum(y, win)
    return y


def _lp_pool(n: OnnxNode, w: _Window):
    """(sum over the window of |x|^p)^(1/p); padding adds zeros."""
    p = float(n.attr("p", 2))
    xp = _pad_hw(S.power(S.abs(w.x), p), w.begin, w.ends())
    return S.power(_window_sum(xp, w.kernel, w.strides, w.dil), 1.0 / p)


def _average_pool(n: OnnxNode, w: _Window):
    """The window's sum over its count: the whole kernel with ``count_include_pad`` (ceil mode's
    extra padding never counts), else the input elements it covers: a sum over the window's taps
    (``nn.avg_pool2d`` where its windows are the same: ``_avg_pool_fits``)."""
    none = (0,) * len(w.kernel)
    xp = _pad_hw(w.x, w.begin, w.ends())
    total = None
    for _, win in _taps(xp, w.kernel, w.strides, w.dil):
        total = win if total is None else S.add(total, win)
    if n.attr("count_include_pad", 0) or not (any(w.begin) or any(w.end)):
        if w.extra == none:
            return S.multiply(total, 1.0 / math.prod(w.kernel))
        ones = _pad_hw(S.ones_like(w.x), w.begin, w.end, 1.0)
        count = _window_sum(_pad_hw(ones, none, w.extra), w.kernel, w.strides, w.dil)
    else:
        count = _window_sum(_pad_hw(S.ones_like(w.x), w.begin, w.ends()), w.kernel, w.strides, w.dil)
    return S.divide(total, count)


def _avg_pool2d(n: OnnxNode, w: _Window):
    """AveragePool as ``nn.avg_pool2d`` (ceil mode where ONNX's windows pass the input's end). In
    ceil mode a count that includes the pads is the count of the explicitly padded input's
    elements (the same divisors, ceil mode's extra never counted): so written, the graph exports
    back to ONNX (``export_nn`` refuses ceil mode with ``count_include_pad``)."""
    ceil = w.keep is not None or w.extra != (0, 0)
    x, pad, include = w.x, tuple(w.begin), bool(n.attr("count_include_pad", 0))
    if ceil and include:
        x, pad, include = _pad_hw(x, pad, pad), (0, 0), False
    return S.nn.avg_pool2d(x, kernel=w.kernel, stride=w.strides, padding=pad, ceil_mode=ceil, count_include_pad=include)


def _avg_pool_fits(n: OnnxNode, w: _Window) -> bool:
    """True when ``nn.avg_pool2d`` pools ``w``'s windows with ONNX's divisors: a 1-D or 2-D window,
    no dilation, symmetric pads within half the kernel, and in ceil mode no window that ONNX drops
    for starting in the end padding (avg_pool2d's ceil mode keeps every window): never where
    pad + stride <= kernel on each axis (any size), else checked on the known sizes."""
    if len(w.kernel) != 2 or w.dil != (1, 1) or w.begin != w.end \
            or any(2 * p > k for p, k in zip(w.begin, w.kernel)):
        return False
    if (w.extra == (0, 0) and w.keep is None) or all(p + s <= k for p, s, k in zip(w.begin, w.strides, w.kernel)):
        return True
    hw = (1,) + tuple(n.shape(0)[2:]) if w.one else tuple(n.shape(0)[2:])
    for size, k, s, p in zip(hw, w.kernel, w.strides, w.begin):
        if not isinstance(size, int) or (-(-(size + 2 * p - k) // s)) * s >= size + p:
            return False
    return True


# The most taps (kernel elements) a pooling window may have: each tap is a strided slice in the
# graph, so a kernel_shape of [10**6, 10**6] in a few bytes of model would build 10**12 nodes.
MAX_POOL_TAPS = 1 << 16


def _check_window(n: OnnxNode, kernel: list, strides: list, dil: list) -> None:
    """Pooling windows: kernel, strides and dilations of one entry per spatial axis, each >= 1, and
    at most ``MAX_POOL_TAPS`` taps."""
    for name, v in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
        if len(v) != len(kernel):
            n.fail(f"{name}={v} needs {len(kernel)} entries (kernel_shape={kernel})")
        if any(not isinstance(t, int) or t < 1 for t in v):
            n.fail(f"{name}={v}: every entry must be an integer >= 1")
    if math.prod(kernel) > MAX_POOL_TAPS:
        n.fail(f"kernel_shape={kernel} has {math.prod(kernel)} taps, more than the {MAX_POOL_TAPS} lazyarray "
               "builds a pooling window of (import_nn.MAX_POOL_TAPS); use a global pooling operator for "
               "windows over the whole input")


def _check_pads(n: OnnxNode, kernel: list, dil: list, begin: list, end: list, hw, ceil: bool) -> None:
    """Pads >= 0 and, outside ceil mode, the dilated window within the padded input where its size
    is known (else no window fits: the output would have no positions)."""
    if any(isinstance(p, int) and p < 0 for p in list(begin) + list(end)):  # (SAME over a dynamic size: symbolic)
        n.fail(f"pads={list(begin) + list(end)}: every entry must be an integer >= 0")
    for a, (size, k, d, pb, pe) in enumerate(zip(hw, kernel, dil, begin, end)):
        if not ceil and isinstance(size, int) and (k - 1) * d + 1 > size + pb + pe:
            n.fail(f"kernel_shape={kernel} with dilations={dil} spans {(k - 1) * d + 1} on spatial axis {a}, "
                   f"more than its {size} input positions plus pads {pb} + {pe}")


def _flat_index(shape: tuple, storage_order: int) -> np.ndarray:
    """MaxPool's Indices: each input element's offset in the flattened input, the spatial part in
    row-major (``storage_order=0``) or column-major (``1``) order within each (batch, channel) plane."""
    spatial = math.prod(shape[2:])
    plane = np.arange(spatial, dtype=np.int64).reshape(shape[2:], order="F" if storage_order else "C")
    return (np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[:2] + (1,) * (len(shape) - 2)) * spatial
            + plane)


def _max_and_argmax(xp, ip, kernel, strides, dil) -> list:
    """The window maxima of the padded ``xp`` and the ``ip`` entry (flat index; -1 in the padding)
    at each: the first maximum in the window's row-major order, a padded tap never chosen over a
    real one."""
    y = idx = None
    for (_, win), (_, iwin) in zip(_taps(xp, kernel, strides, dil), _taps(ip, kernel, strides, dil)):
        if y is None:
            y, idx = win, iwin
            continue
        better = S.logical_or(S.greater(win, y), S.logical_and(S.less(idx, 0), S.greater_equal(iwin, 0)))
        y, idx = S.where(better, win, y), S.where(better, iwin, idx)
    return [y, idx]


def _taps(x, kshape, stride, dilate):
    """``(tap, window)`` per kernel tap (``tap`` a tuple, one index per spatial axis): the strided
    slice of the (already padded) input that tap reads, each shaped like the output (shape-generic:
    the stop is counted from the end). Pooling windows the registry's pools do not cover (dilated,
    asymmetric padding, 3-D) are reduced over these."""
    for tap in itertools.product(*(range(k) for k in kshape)):
        key = tuple(slice(i * d, -((k - 1 - i) * d) or None, s) for i, k, s, d in zip(tap, kshape, stride, dilate))
        yield tap, S.getitem(x, key=(slice(None), slice(None)) + key)


def _kept(keep, ys: list, one: bool) -> list:
    """``_out`` of ``ys`` cut to ``keep`` windows per spatial axis (ceil mode over a dynamic size)."""
    if keep is not None:
        key = (slice(None), slice(None)) + tuple(slice(0, k) for k in keep)
        ys = [S.getitem(y, key=key) for y in ys]
    return _out(ys, one)


def _ceil_lengths(hw, kernel, strides, dil, begin, end) -> tuple:
    """Ceil mode's output length per spatial axis as size expressions: ceil((size + pads - span) /
    stride) + 1 windows, less one where the last would start in the end padding."""
    out = []
    for size, k, st, d, pb, pe in zip(hw, kernel, strides, dil, begin, end):
        span = (k - 1) * d + 1
        n = floordiv(size + pb + pe - span + st - 1, st) + 1
        out.append(dim_min(n, floordiv(size + pb - 1, st) + 1))
    return tuple(out)


def _out(ys: list, one: bool) -> list:
    return [S.squeeze(y, axis=2) if one else y for y in ys]


def _window_sum(x, kernel, strides, dil):
    y = None
    for _, win in _taps(x, kernel, strides, dil):
        y = win if y is None else S.add(y, win)
    return y


def _ceil_extra(size: int, k: int, s: int, d: int, pb: int, pe: int) -> int:
    span = (k - 1) * d + 1
    out = -(-(size + pb + pe - span) // s) + 1
    if (out - 1) * s >= size + pb:  # a window may not start in the end padding
        out -= 1
    return max(0, (out - 1) * s + span - (size + pb + pe))


def _global(fn):
    def convert(n: OnnxNode) -> list:
        n.arity(1)
        rank = n.rank(0, n.op)
        return [fn(n.inputs[0], axis=tuple(range(2, rank)), keepdims=True)]
    return convert


# -- normalization ---------------------------------------------------------------------------------
def _per_channel(v, rank: int):
    return S.reshape(v, shape=(1, -1) + (1,) * (rank - 2))


def batch_norm(n: OnnxNode) -> list:
    n.arity(5)
    if n.attr("training_mode", 0):
        return batch_norm_training(n)
    x, scale, b, mean, var = n.inputs
    rank = n.rank(0, "BatchNormalization")
    eps = float(n.attr("epsilon", 1e-5))
    dt = dtype_of(x)
    if rank >= 2 and dt is not None and dt.kind == "f" and all(dtype_of(v) == dt for v in (scale, b, mean, var)) and \
            all(len(shape_of(v) or ()) == 1 for v in (scale, b, mean, var)):
        # the registry op: the inference pass folds it into a convolution or Gemm before it
        return [S.nn.batch_norm(x, scale, b, mean, var, eps=eps, axis=1)]
    inv = S.divide(_per_channel(scale, rank), S.sqrt(S.add(_per_channel(var, rank), eps)))
    return [S.add(S.multiply(S.subtract(x, _per_channel(mean, rank)), inv), _per_channel(b, rank))]


def layer_norm(n: OnnxNode) -> list:
    n.arity(2, 3)
    x, scale, b = n.inputs[0], n.inputs[1], n.input(2)
    rank = n.rank(0, "LayerNormalization")
    axis = int(n.attr("axis", -1)) % rank
    eps = float(n.attr("epsilon", 1e-5))
    dt = dtype_of(x)
    xf = S.cast(x, dtype="float32") if n.attr("stash_type", 1) == 1 and dt != np.float32 and dt != np.float64 \
        else x
    axes = tuple(range(axis, rank))
    mean = S.mean(xf, axis=axes, keepdims=True)
    centered = S.subtract(xf, mean)
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(centered), axis=axes, keepdims=True), eps)))
    y = S.multiply(centered, inv)
    if dtype_of(y) != dt:
        y = S.cast(y, dtype=dt)
    y = S.multiply(y, scale)
    if b is not None:
        y = S.add(y, b)
    return [y, mean, inv]


def instance_norm(n: OnnxNode) -> list:
    n.arity(3)
    x, scale, b = n.inputs
    rank = n.rank(0, "InstanceNormalization")
    axes = tuple(range(2, rank))
    eps = float(n.attr("epsilon", 1e-5))
    mean = S.mean(x, axis=axes, keepdims=True)
    centered = S.subtract(x, mean)
    var = S.mean(S.square(centered), axis=axes, keepdims=True)
    y = S.divide(centered, S.sqrt(S.add(var, eps)))
    return [S.add(S.multiply(y, _per_channel(scale, rank)), _per_channel(b, rank))]


def rms_norm(n: OnnxNode) -> list:
    n.arity(2)
    x, scale = n.inputs
    rank = n.rank(0, "RMSNormalization")
    axes = tuple(range(int(n.attr("axis", -1)) % rank, rank))
    dt = dtype_of(x)
    xf = S.cast(x, dtype="float32") if n.attr("stash_type", 1) == 1 and np.dtype(dt).itemsize < 4 else x
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(xf), axis=axes, keepdims=True), float(n.attr("epsilon", 1e-5)))))
    y = S.multiply(xf, inv)
    if dtype_of(y) != dt:
        y = S.cast(y, dtype=dt)
    return [S.multiply(y, scale)]


def group_norm(n: OnnxNode) -> list:
    n.arity(3)
    x, scale, b = n.inputs
    shape = n.known_shape(0, "GroupNormalization")
    groups = int(n.attr("num_groups"))
    if shape[1] % groups:
        n.fail(f"num_groups={groups} must divide the {shape[1]} channels")
    eps = float(n.attr("epsilon", 1e-5))
    xg = S.reshape(x, shape=(shape[0], groups, -1))
    mean = S.mean(xg, axis=2, keepdims=True)
    centered = S.subtract(xg, mean)
    var = S.mean(S.square(centered), axis=2, keepdims=True)
    y = S.reshape(S.divide(centered, S.sqrt(S.add(var, eps))), shape=shape)
    per = shape_of(scale)
    if per is not None and per[0] == groups and groups != shape[1]:  # opset 18: one scale per group
        scale = S.reshape(S.repeat_elements(scale, repeats=shape[1] // groups), shape=(-1,))
        b = S.reshape(S.repeat_elements(b, repeats=shape[1] // groups), shape=(-1,))
    return [S.add(S.multiply(y, _per_channel(scale, len(shape))), _per_channel(b, len(shape)))]


def lp_norm(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    axis, p = int(n.attr("axis", -1)), int(n.attr("p", 2))
    if p not in (1, 2):
        n.fail(f"p={p}: expected 1 or 2")
    norm = S.sum(S.abs(x), axis=axis, keepdims=True) if p == 1 else \
        S.sqrt(S.sum(S.square(x), axis=axis, keepdims=True))
    zero = S.equal(norm, 0.0)
    return [S.where(zero, S.zeros_like(x), S.divide(x, S.where(zero, S.ones_like(norm), norm)))]


def mean_variance_norm(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    axes = tuple(n.attr("axes", [0, 2, 3]))
    mean = S.mean(x, axis=axes, keepdims=True)
    std = S.sqrt(S.subtract(S.mean(S.square(x), axis=axes, keepdims=True), S.square(mean)))
    return [S.divide(S.subtract(x, mean), S.add(std, 1e-9))]


# -- losses ----------------------------------------------------------------------------------------
def nll_loss(n: OnnxNode, log_prob=None) -> list:
    """NegativeLogLikelihoodLoss (and SoftmaxCrossEntropyLoss on ``log_prob``): per-class weights,
    ``ignore_index`` (weight 0), ``reduction`` none / sum / mean (weighted mean)."""
    n.arity(2, 3)
    x = n.inputs[0] if log_prob is None else log_prob
    t, weight = S.cast(n.inputs[1], dtype="int64"), n.input(2)
    reduction = n.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        n.fail(f"reduction={reduction!r}: expected none, sum or mean")
    ignore = n.attr("ignore_index")
    mask = None if ignore is None else S.not_equal(t, int(ignore))
    if mask is not None:
        t = S.where(mask, t, S.zeros_like(t))
    picked = S.squeeze(S.take_along_axis(x, S.expand_dims(t, axis=1), axis=1), axis=1)
    w = S.take(weight, t, axis=0) if weight is not None else S.ones_like(picked)
    if mask is not None:
        w = S.where(mask, w, S.zeros_like(w))
    loss = S.multiply(S.negative(picked), w)
    if reduction == "none":
        return [loss]
    total = S.sum(loss)
    return [total if reduction == "sum" else S.divide(total, S.sum(w))]


def softmax_cross_entropy(n: OnnxNode) -> list:
    log_prob = S.nn.log_softmax(n.inputs[0], axis=1)
    return [nll_loss(n, log_prob)[0], log_prob]


def attention(n: OnnxNode) -> list:
    """Attention (opset 23): scaled dot-product attention over heads, with a boolean or additive mask
    (shorter masks are padded as masked), a causal mask aligned after the past keys, grouped KV heads,
    softcap, the four ``qk_matmul_output_mode`` outputs, and fully masked rows giving zeros."""
    n.arity(3, 7)
    q, k, v = n.inputs[:3]
    mask, past_k, past_v, nonpad = n.input(3), n.input(4), n.input(5), n.input(6)
    if (past_k is None) != (past_v is None):
        n.fail("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        n.fail("nonpad_kv_seqlen cannot be combined with past_key / past_value")
    qs = n.known_shape(0, "Attention")
    dt = dtype_of(q)
    if len(qs) == 3:
        q, k, v = _split_heads(n, q, k, v)
    elif len(qs) != 4:
        n.fail(f"Q of rank {len(qs)}: expected 3 or 4")
    q4, k4 = shape_of(q), shape_of(k)
    past_len = 0
    if past_k is not None:
        past_len = shape_of(past_k)[2]
        k, v = S.concatenate([past_k, k], axis=2), S.concatenate([past_v, v], axis=2)
    present_k, present_v = k, v
    ql, kvl = q4[2], k4[2] + past_len
    bias = None if mask is None else _mask_bias(mask, kvl, dt)
    bias = _add_window_rules(n, bias, ql, kvl, past_len, nonpad, dt)
    qh4, kh4 = q4[1], k4[1]
    if qh4 != kh4 and qh4 % kh4 == 0:  # grouped query attention: each KV head serves several Q heads
        k = S.repeat_elements(k, repeats=qh4 // kh4, axis=1)
        v = S.repeat_elements(v, repeats=qh4 // kh4, axis=1)
    y, extra = _attend(n, q, k, v, bias, q4[3], dt)
    if len(qs) == 3:
        y = S.reshape(S.transpose(y, axes=(0, 2, 1, 3)), shape=(qs[0], qs[1], -1))
    return [y, present_k, present_v, extra]


def _split_heads(n: OnnxNode, q, k, v) -> tuple:
    """3-D Q, K, V ``(batch, time, hidden)`` as ``(batch, heads, time, hidden / heads)``."""
    qh, kh = n.attr("q_num_heads"), n.attr("kv_num_heads")
    if qh is None or kh is None:
        n.fail("3-D inputs need q_num_heads and kv_num_heads")

    def heads(x, h):
        b, t, hidden = n.known_shape(n.inputs.index(x), "Attention")
        return S.transpose(S.reshape(x, shape=(b, t, int(h), hidden // int(h))), axes=(0, 2, 1, 3))
    return heads(q, qh), heads(k, kh), heads(v, kh)


def _mask_bias(mask, kvl: int, dt):
    """The additive bias of an attention mask (boolean: 0 or -inf), padded as masked to ``kvl`` keys."""
    ms = shape_of(mask)
    is_bool = dtype_of(mask) == np.bool_
    if ms[-1] < kvl:  # a shorter mask leaves the rest masked
        widths = ((0, 0),) * (len(ms) - 1) + ((0, kvl - ms[-1]),)
        mask = S.pad(mask, pad_width=widths, constant_values=0.0 if is_bool else -math.inf)
    return S.where(mask, constant(np.zeros((), dt)), constant(np.array(-np.inf, dt))) if is_bool else mask


def _add_window_rules(n: OnnxNode, bias, ql: int, kvl: int, past_len: int, nonpad, dt):
    """``bias`` plus -inf where a rule forbids query i to see key j: causal, the left and right
    windows, keys past each batch's ``nonpad_kv_seqlen``."""
    # query i (at position offset + i) may see key j when the rules below allow; offset is the past
    # length, or per batch nonpad_kv_seqlen - ql (an external cache)
    left, right = int(n.attr("left_window_size", -1)), int(n.attr("right_window_size", -1))
    zero, ninf = constant(np.zeros((), dt)), constant(np.array(-np.inf, dt))
    if nonpad is not None:
        offset = S.reshape(S.subtract(S.cast(nonpad, dtype="int64"), ql), shape=(-1, 1, 1))
    else:
        offset = constant(np.array(past_len, np.int64))
    ahead = S.subtract(S.add(constant(np.arange(ql, dtype=np.int64).reshape(-1, 1)), offset),
                       constant(np.arange(kvl, dtype=np.int64).reshape(1, -1)))  # (q, kv) or (B, q, kv)
    rules = []
    if n.attr("is_causal", 0):
        rules.append(S.greater_equal(ahead, 0))
    if left >= 0:
        rules.append(S.less_equal(ahead, left))
    if right >= 0:
        rules.append(S.greater_equal(ahead, -right))
    if nonpad is not None:  # keys past each batch's length are padding
        rules.append(S.expand_dims(S.less(constant(np.arange(kvl, dtype=np.int64)),
                                          S.reshape(S.cast(nonpad, dtype="int64"), shape=(-1, 1))), axis=1))
    for allowed in rules:
        term = S.where(allowed, zero, ninf)
        if nonpad is not None:
            term = S.expand_dims(term, axis=1)  # (B, 1, q, kv)
        bias = term if bias is None else S.add(bias, term)
    return bias


def _attend(n: OnnxNode, q, k, v, bias, head_size: int, dt) -> tuple:
    """``(softmax(q k^T * scale + bias) v, the qk_matmul_output_mode output)``, with softcap,
    ``softmax_precision`` and fully masked rows giving zeros."""
    scale = n.attr("scale")
    scale = 1.0 / math.sqrt(head_size) if scale is None else float(scale)
    root = math.sqrt(scale)  # split over Q and K, as the spec's reference does
    qk = S.matmul(S.multiply(q, root), S.multiply(S.transpose(k, axes=(0, 1, 3, 2)), root))
    softcap = float(n.attr("softcap", 0.0))
    if softcap > 0:
        qk = S.multiply(S.tanh(S.divide(qk, softcap)), softcap)
    scores = qk if bias is None else S.add(qk, bias)
    mode = int(n.attr("qk_matmul_output_mode", 0))
    extra = scores if mode == 2 else qk
    precision = n.attr("softmax_precision")
    if precision is not None:
        scores = S.cast(scores, dtype=np_dtype(int(precision), n.where))
    probs = S.nn.softmax(scores, axis=-1)
    if bias is not None:  # a row with every key masked attends to nothing (zeros, not NaN)
        dead = S.equal(S.max(bias, axis=-1, keepdims=True), -math.inf)
        probs = S.where(dead, S.zeros_like(probs), probs)
    if dtype_of(probs) != dt:
        probs = S.cast(probs, dtype=dt)
    if mode == 3:
        extra = probs
    return S.matmul(probs, v), extra


def dropout(n: OnnxNode) -> list:
    n.arity(1, 3)
    train = n.const(2, "training_mode")
    if train is not None and bool(np.asarray(train).reshape(-1)[0]):
        return dropout_training(n)
    x = n.inputs[0]
    return [x, S.ones_like(x, dtype="bool")]


NN_CONVERTERS: dict[str, Converter] = {
    "MatMul": matmul, "Gemm": gemm, "Softmax": _softmax(S.nn.softmax), "LogSoftmax": _softmax(S.nn.log_softmax),
    "Conv": conv, "ConvTranspose": conv_transpose, "MaxPool": _pool("MaxPool"), "AveragePool": _pool("AveragePool"),
    "LpPool": _pool("LpPool"),
    "GlobalAveragePool": _global(S.mean), "GlobalMaxPool": _global(S.max), "BatchNormalization": batch_norm,
    "LayerNormalization": layer_norm, "InstanceNormalization": instance_norm, "Dropout": dropout,
    "Resize": resize, "RMSNormalization": rms_norm, "GroupNormalization": group_norm,
    "LpNormalization": lp_norm, "MeanVarianceNormalization": mean_variance_norm,
    "NegativeLogLikelihoodLoss": nll_loss, "SoftmaxCrossEntropyLoss": softmax_cross_entropy,
    "Swish": lambda n: [S.multiply(n.inputs[0], S.sigmoid(S.multiply(n.inputs[0], float(n.attr("alpha", 1.0)))))],
    "Det": lambda n: [S.linalg.det(n.inputs[0])], "Attention": attention,
}
