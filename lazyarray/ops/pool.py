"""Pooling ops on NCHW input: ``nn.max_pool2d`` and ``nn.avg_pool2d``, with their gradients
``nn.max_pool2d_grad`` and ``nn.avg_pool2d_grad`` (registered ops: scattering into windows
cannot be written with other ops). Global pools are reductions (``mean`` / ``max`` over
axes (2, 3)); the layers compose them.

``ceil_mode=True`` is MXNet's ``pooling_convention="full"``: the output size is
``ceil((H + 2p - k) / s) + 1``, and the last windows are clipped to the padded input (they
are computed over extra padding at the bottom / right that never counts). A window lying
entirely outside the input is refused at shape inference.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shape
from .conv import (
    check_nchw,
    check_pair_param,
    conv_windows,
    float_inputs_rule,
    is_batch_last,
    pad_nchw,
    padded_shape,
    pair_param,
)
from .params import BOOL, INTS, Param
from .registry import OpDef, register

POOL_PARAMS = (Param("kernel", INTS, (2, 2), check=check_pair_param(1)),
                Param("stride", INTS, (0, 0), check=check_pair_param(0), doc="0 = the kernel size"),
                Param("padding", INTS, (0, 0), check=check_pair_param(0)),
                Param("ceil_mode", BOOL, False,
                      doc="round the output size up (MXNet's 'full' convention); windows are clipped"))
_AVG_PARAMS = POOL_PARAMS + (
    Param("count_include_pad", BOOL, True,
          doc="divide by the window size including zero padding (else by the input pixels it covers)"),)


def _pool_geometry(kernel, stride, padding, op="pool2d"):
    k = pair_param(kernel, "kernel", op, 1)
    s = pair_param(stride, "stride", op, 0)
    s = tuple(ki if si == 0 else si for ki, si in zip(k, s))  # stride 0 = the kernel size
    return k, s, pair_param(padding, "padding", op, 0)


def _pool_dim(size, k, s, p, ceil):
    if size is None:
        return None
    span = size + 2 * p - k
    return (-(-span // s) if ceil else span // s) + 1


def _extra(size, k, s, p, out):
    """Rows past the padded input that the last (ceil-mode) window reaches."""
    return max(0, (out - 1) * s + k - (size + 2 * p))


def window_layout(shape, kernel, stride, padding, ceil_mode):
    """(kernel, stride, padding, (Ho, Wo), extra) for an NCHW input of ``shape``."""
    k, s, p = _pool_geometry(kernel, stride, padding)
    out = tuple(_pool_dim(shape[2 + a], k[a], s[a], p[a], ceil_mode) for a in (0, 1))
    extra = (0, 0) if not ceil_mode else tuple(_extra(shape[2 + a], k[a], s[a], p[a], out[a]) for a in (0, 1))
    return k, s, p, out, extra


def _fill_min(dtype):
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def pool_shape(op):
    def rule(shapes, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, **_):
        x = shapes[0]
        check_nchw(x, "input", op)
        (kh, kw), (sh, sw), (ph, pw) = _pool_geometry(kernel, stride, padding, op)
        if ph * 2 > kh or pw * 2 > kw:
            raise ShapeError(f"padding {(ph, pw)} must be at most half the kernel {(kh, kw)}")
        ho, wo = _pool_dim(x[2], kh, sh, ph, ceil_mode), _pool_dim(x[3], kw, sw, pw, ceil_mode)
        if (ho is not None and ho < 1) or (wo is not None and wo < 1):
            raise ShapeError(f"kernel {(kh, kw)} does not fit input {fmt_shape(x)}; use a smaller kernel")
        for size, out, s, p, axis in ((x[2], ho, sh, ph, "height"), (x[3], wo, sw, pw, "width")):
            if ceil_mode and size is not None and (out - 1) * s >= size + p:
                raise ShapeError(f"with ceil_mode=True the last window along the {axis} starts at "
                                 f"{(out - 1) * s}, past input {fmt_shape(x)} and its padding {p}; "
                                 "use ceil_mode=False or a smaller stride")
        return (x[0], x[1], ho, wo)
    return rule


def pool_workspace(x, dtype=None, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, **_):
    """The padded copy of the pooled input (or of its gradient)."""
    if len(x.shape) != 4 or None in x.shape[2:]:
        return []
    _, _, pad, _, extra = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    if pad == (0, 0) and extra == (0, 0):
        return []
    return [("padded input", padded_shape(x.shape, pad, extra), x.dtype if dtype is None else dtype)]


def _taps(x, kernel, stride, out):
    """Tap (i, j)'s strided view of the padded input x: shaped like the output."""
    (kh, kw), (sh, sw), (ho, wo) = kernel, stride, out
    for i in range(kh):
        for j in range(kw):
            yield x[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]


def _tiles(x, k, s, p, extra) -> bool:
    """True when the windows tile x exactly (stride = kernel, no padding, the height and width
    multiples of the kernel) and x is C-contiguous or batch last (``_fold_tiles`` then applies)."""
    return k == s and p == (0, 0) and extra == (0, 0) and x.shape[2] % k[0] == 0 and x.shape[3] % k[1] == 0 \
        and (x.flags.c_contiguous or is_batch_last(x))


def _plain_tiles(x, kernel, stride, padding, ceil_mode) -> bool:
    """``_tiles`` read straight off the parameters as the registry passes them (tuples), before
    the general geometry: the common 2 x 2 pool of a small image skips its Python."""
    return not ceil_mode and padding == (0, 0) and len(kernel) == 2 and (stride == kernel or stride == (0, 0)) \
        and kernel[0] >= 1 and kernel[1] >= 1 and _tiles(x, kernel, kernel, padding, (0, 0))


def _fold_tiles(xp, ufunc, x, kernel, out):
    """``ufunc`` folded over non-overlapping kh x kw tiles of x (``_tiles``): ``_fold_batch_last_tiles``
    for x stored batch last; for a C-contiguous x, in two
    passes whose operands are flat: first the kh rows of each tile (x as (N*C*Ho, kh, W): runs of W
    contiguous values), then the kw columns, which in that contiguous (N*C*Ho, W) result are every
    kw-th value of one flat array (a single strided loop). Folding the kh * kw tap views of the
    image instead runs kh * kw - 1 passes over 4-D views with runs of Wo values (a 6 x 6 image:
    3): 2-5x slower on the demo CNN's 2 x 2 pools (benchmarks/onnx.py)."""
    if not x.flags.c_contiguous:
        return _fold_batch_last_tiles(xp, ufunc, x, kernel, out)
    (kh, kw), (n, c, h, w) = kernel, x.shape
    shape = (n, c, h // kh, w // kw)
    target = out if out is not None and out.flags.c_contiguous else None
    rows = x.reshape(n * c * shape[2], kh, w)
    if kw == 1:  # the rows pass writes the result
        res = _fold_taps(xp, ufunc, (rows[:, i] for i in range(kh)),
                         None if target is None else target.reshape(-1, w))
    else:
        flat = _fold_taps(xp, ufunc, (rows[:, i] for i in range(kh)), None).reshape(-1) if kh > 1 \
            else x.reshape(-1)
        res = _fold_taps(xp, ufunc, (flat[j::kw] for j in range(kw)),
                         None if target is None else target.reshape(-1))
    if target is not None:
        return target
    res = res.reshape(shape)
    if out is not None:
        out[...] = res
        return out
    return res


def _fold_batch_last_tiles(xp, ufunc, x, kernel, out):
    """``_fold_tiles`` of an x stored batch last (``executor/batch_last.py``): its memory is
    (C, Ho, kh, Wo, kw, N), so tap (i, j) of every tile is one view of it with runs of N values,
    folded straight into ``out``'s memory when ``out`` is batch last too (the planned buffer).
    Made from a view of the memory rather than the general geometry and pad of strided tap views,
    it runs about half the Python of that path (the demo CNN's pools, benchmarks/onnx.py)."""
    (kh, kw), (n, c, h, w) = kernel, x.shape
    mem = x.transpose(1, 2, 3, 0).reshape(c, h // kh, kh, w // kw, kw, n)
    target = out.transpose(1, 2, 3, 0) if out is not None and is_batch_last(out) else None
    res = _fold_taps(xp, ufunc, (mem[:, :, i, :, j] for i in range(kh) for j in range(kw)), target)
    if target is not None:
        return out
    res = res.transpose(3, 0, 1, 2)
    if out is not None:
        out[...] = res
        return out
    return res


# -- max pooling ---------------------------------------------------------------------------------
def max_pool2d_kernel(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None):
    """An elementwise maximum over the kh * kw shifted, strided views of x: for small kernels
    this beats a reduction over a windows view several times. Windows that tile x exactly take
    two flat passes (``_fold_tiles``): the reference kernel (the kernels layer's ``pool.py`` runs
    one compiled pass where numba is installed)."""
    if _plain_tiles(x, kernel, stride, padding, ceil_mode):
        return _fold_tiles(xp, xp.maximum, x, kernel, out)
    k, s, p, shape, extra = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    if _tiles(x, k, s, p, extra):
        return _fold_tiles(xp, xp.maximum, x, k, out)
    x = pad_nchw(xp, x, p, extra, _fill_min(x.dtype))
    return _fold_taps(xp, xp.maximum, _taps(x, k, s, shape), out)


def jit_geometry(x, kernel, stride, padding, ceil_mode):
    """(kernel, stride, leading padding, (Ho, Wo)) of a max pool for the compiled max pools (``kernels/pool_jit.py``): a 2 x 2
    pool tiling x read off the parameters, anything else through ``window_layout``."""
    if not ceil_mode and padding == (0, 0) and kernel == (2, 2) and stride in ((0, 0), (2, 2)) \
            and x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0:
        return (2, 2), (2, 2), (0, 0), (x.shape[2] // 2, x.shape[3] // 2)
    k, s, p, shape, _ = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    return k, s, p, shape


def _fold_taps(xp, ufunc, views, out):
    """``ufunc`` folded over the tap views, into ``out`` when given (the planned buffer)."""
    first = next(views)
    second = next(views, None)
    if second is None:
        if out is None:
            return first.copy()
        out[...] = first
        return out
    res = ufunc(first, second, out=out)
    for view in views:
        ufunc(res, view, out=res)
    return res


register(OpDef("max_pool2d", ("x",), max_pool2d_kernel, params=POOL_PARAMS, shape=pool_shape("max_pool2d"), writes_out=True,
               grad=lambda F, ins, y, g, **p: [F.max_pool2d_grad(g, ins[0], **p)], namespace="nn",
               workspace=lambda avals, **p: pool_workspace(avals[0], **p),
               doc="maximum over kh x kw windows of NCHW input (stride 0 = kernel size)"))


def max_pool2d_grad_kernel(xp, g, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None):
    """g routed to the first maximum of each window (ties go to the first, like argmax): the
    reference kernel (the kernels layer's ``pool.py`` runs one compiled pass where numba is installed)."""
    k, s, p, shape, extra = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    (kh, kw), (ph, pw) = k, p
    n, c, h, w = x.shape
    win = conv_windows(xp, x, k, s, p, _fill_min(x.dtype), extra=extra)
    first = win.reshape(n, c, shape[0], shape[1], kh * kw).argmax(axis=-1)
    dx = xp.zeros((n, c, h + 2 * ph + extra[0], w + 2 * pw + extra[1]), dtype=g.dtype)
    for t, view in enumerate(_taps(dx, k, s, shape)):
        view += g * (first == t)
    if out is not None:  # (the planned buffer)
        out[...] = dx[:, :, ph:ph + h, pw:pw + w]
        return out
    return xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


register(OpDef("max_pool2d_grad", ("g", "x"), max_pool2d_grad_kernel, params=POOL_PARAMS, writes_out=True,
               shape=lambda shapes, **p: shapes[1], dtype=lambda dtypes, **p: dtypes[0], namespace="nn",
               workspace=lambda avals, **p: pool_workspace(avals[1], avals[0].dtype, **p),
               doc="max_pool2d's gradient: g scattered to each window's (first) maximum of x"))


# -- average pooling -----------------------------------------------------------------------------
def _counts(xp, size, k, s, p, out, include_pad, dtype):
    """How many pixels each window along one axis divides by: clipped to the padded input
    (``include_pad``) or to the input itself."""
    lo, hi = (0, size + 2 * p) if include_pad else (p, p + size)
    starts = xp.arange(out) * s
    return (xp.minimum(starts + k, hi) - xp.maximum(starts, lo)).astype(dtype)


def _divisor(xp, shape, k, s, p, out, extra, include_pad, dtype):
    """1 / window size: a Python float when every window counts k*k, else an (Ho, Wo) array."""
    if include_pad and extra == (0, 0):
        return 1.0 / (k[0] * k[1])
    ch = _counts(xp, shape[2], k[0], s[0], p[0], out[0], include_pad, dtype)
    cw = _counts(xp, shape[3], k[1], s[1], p[1], out[1], include_pad, dtype)
    return 1.0 / (ch[:, None] * cw[None, :])


def avg_pool2d_kernel(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, count_include_pad=True,
                out=None):
    k, s, p, shape, extra = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    scale = _divisor(xp, x.shape, k, s, p, shape, extra, count_include_pad, x.dtype)
    if _tiles(x, k, s, p, extra):
        res = _fold_tiles(xp, xp.add, x, k, out)
    else:
        res = _fold_taps(xp, xp.add, _taps(pad_nchw(xp, x, p, extra), k, s, shape), out)
    res *= scale if isinstance(scale, float) else scale.astype(res.dtype, copy=False)
    return res


register(OpDef("avg_pool2d", ("x",), avg_pool2d_kernel, params=_AVG_PARAMS, shape=pool_shape("avg_pool2d"), writes_out=True,
               dtype=float_inputs_rule("avg_pool2d"),
               grad=lambda F, ins, y, g, **p: [F.avg_pool2d_grad(g, ins[0], **p)], namespace="nn",
               workspace=lambda avals, **p: pool_workspace(avals[0], **p),
               doc="mean over kh x kw windows of NCHW input (stride 0 = kernel size; count_include_pad "
                   "as MXNet: padding zeros count)"))


def _avg_pool2d_grad(xp, g, like, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False,
                     count_include_pad=True, out=None):
    """g / window size spread evenly over each window's pixels."""
    k, s, p, shape, extra = window_layout(like.shape, kernel, stride, padding, ceil_mode)
    (ph, pw) = p
    n, c, h, w = like.shape
    scale = _divisor(xp, like.shape, k, s, p, shape, extra, count_include_pad, g.dtype)
    share = g * scale
    dx = xp.zeros((n, c, h + 2 * ph + extra[0], w + 2 * pw + extra[1]), dtype=share.dtype)
    for view in _taps(dx, k, s, shape):
        view += share
    return xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


register(OpDef("avg_pool2d_grad", ("g", "like"), _avg_pool2d_grad, params=_AVG_PARAMS,
               shape=lambda shapes, **p: shapes[1], dtype=lambda dtypes, **p: dtypes[0], namespace="nn",
               workspace=lambda avals, **p: pool_workspace(avals[1], avals[0].dtype, **p),
               doc="avg_pool2d's gradient: g divided by each window's size, spread over the window; "
                   "only like's shape is read"))
