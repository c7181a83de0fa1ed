"""conv2d batch last: a batch of small images as one product for the whole batch
(``batch_last_conv``), and the same as one compiled parallel region (``conv2d_region``, in
``conv_regions.py``) where the output is stored batch last. ``kernels/conv2d.py``'s ``batch_last``
and ``region`` implementations; ``conv2d_weight_grad``'s batch-last kernel (``conv2d_grad.py``)
shares the im2col views.
"""
from __future__ import annotations

import numpy as np

from .. import threads as thread_pool  # (the module, looked up at each call: tests replace its functions)
from ..ops import conv
from ..ops.scratch import SCRATCH_MAX_BYTES, scratch, slot_buffers, thread_memo
from ..tuning_table import current
from . import conv_jit, conv_regions
from .blas_threads import SMALL_PRODUCT, one_thread


def batch_last_conv(xp, x, weight, bias, stride, padding, dilation, out):
    """conv2d with groups == 1 of a batch of small images (fewer than ``per_image_min_pixels``
    output pixels): one matmul ``W (O, C*kh*kw) @ cols (C*kh*kw, Ho*Wo*N)`` for the whole batch.

    The padded input is laid out (C, H, W, N) once, so each tap's im2col rows are copied in runs
    of ``Wo * N`` contiguous values; windows of the NCHW image would copy runs of ``Wo`` (a 6 x 6
    image: 6 values), 2.5x slower on the demo CNN's second conv (benchmarks/onnx.py). All taps are
    one strided view of that copy, so im2col is a single copy (a copy per tap cost about 1 us of
    Python each), and the views come from ``im2col_views`` (made once per geometry). The product
    is small: it runs on one BLAS thread (``blas_threads``), in column blocks that take OpenBLAS's
    unpacked kernel (``_column_blocks_matmul``). It comes out (O, Ho, Wo, N): straight into a
    batch-last ``out``, else one transposing copy into NCHW, with the bias added before it.
    """
    n = x.shape[0]
    o = weight.shape[0]
    padded, interior, taps, cols = im2col_views(xp, x.shape, x.dtype, weight.shape[2], weight.shape[3],
                                                 stride, padding, dilation)
    if xp is not np or not conv_jit.im2col(x, cols, stride, padding, dilation):  # (one compiled pass)
        if padded is not None:
            padded[...] = 0
        interior[...] = x.transpose(1, 2, 3, 0)
        cols[...] = taps
    k, m = cols.shape[0] * cols.shape[1] * cols.shape[2], cols.shape[3] * cols.shape[4] * n
    wmat = weight.reshape(o, k)
    cols = cols.reshape(k, m)
    with one_thread(2.0 * o * k * m, _largest_block(xp, wmat, cols)):
        if out is not None and out.dtype == x.dtype == weight.dtype and conv.is_batch_last(out):  # the product is out
            t = _column_blocks_matmul(xp, wmat, cols, out.transpose(1, 2, 3, 0).reshape(o, m))
            if bias is not None:
                t += bias.reshape(o, 1)
            return out
        t = _column_blocks_matmul(xp, wmat, cols, xp.empty((o, m), xp.result_type(wmat.dtype, cols.dtype)))
    if bias is not None:
        t += bias.reshape(o, 1)
    ho, wo = taps.shape[3], taps.shape[4]
    y = xp.empty((n, o, ho, wo), dtype=t.dtype) if out is None else out
    y[...] = t.reshape(o, ho, wo, n).transpose(3, 0, 1, 2)
    return y


def region_fits(x, out, x_last=None, out_last=None, t=None) -> bool:
    """Whether ``conv2d_region`` may run: a batch-last ``out``, an input stored batch last or
    C-ordered, regions on in the tuning table ``t`` (the one in force when None), and not already
    on one of the pool's threads. ``x_last`` / ``out_last``: the layouts when the caller read them
    already (each read makes a view)."""
    out_last = out is not None and conv.is_batch_last(out) if out_last is None else out_last
    if not out_last or not (current() if t is None else t).conv_region or thread_pool.in_pool():
        return False
    return (conv.is_batch_last(x) if x_last is None else x_last) or x.flags.c_contiguous


def region_threads(x, weight, out, t=None) -> int:
    """Threads ``conv2d_region`` runs on: the pool's, or one for a convolution of fewer than the
    tuning table's ``conv_region_min_macs`` multiply-adds (a team's hand-off and barrier cost more
    than half of such a region saves)."""
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    macs = n * o * c * kh * kw * out.shape[2] * out.shape[3]
    return thread_pool.num_threads() if macs >= (current() if t is None else t).conv_region_min_macs else 1


def conv2d_region(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """``batch_last_conv`` as one compiled parallel region (``conv_regions.py``) where
    ``region_fits``: ``out``, or None where the compiled kernel declined (numba missing, another
    dtype): the caller then runs ``conv2d_batch_last``."""
    threads = region_threads(x, weight, out)
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    ho, wo = out.shape[2], out.shape[3]
    mem = None if conv.is_batch_last(x) else scratch(np, 0, (c, h, w, n), x.dtype)
    cols = scratch(np, 1, (c * kh * kw, ho * wo * n), x.dtype)
    return out if conv_regions.conv2d(x, weight, bias, stride, padding, dilation, out, cols, mem, threads) else None


_MAX_VIEW_SETS = 64  # geometries whose views a thread keeps (a model has a few)


def im2col_views(xp, shape, dtype, kh, kw, stride, padding, dilation):
    """``(padded, interior, taps, cols)`` for ``batch_last_conv`` of an NCHW input of ``shape``:
    the zero-padded (C, H, W, N) copy in scratch slot 0 (None without padding: nothing to zero),
    its interior where the image goes, every tap of it as one strided (C, kh, kw, Ho, Wo, N) view,
    and the im2col columns of that shape in scratch slot 1. Made once per geometry and thread and
    kept while the scratch buffers stay the same: building them cost more Python than the copies
    of a small batch (about 6 us of a 12 us call)."""
    key = (shape, dtype, kh, kw, tuple(stride), tuple(padding), tuple(dilation))
    memo = thread_memo("im2col")
    bufs = slot_buffers()
    hit = memo.get(key)
    if hit is not None and bufs is not None and hit[0] is bufs[0] and hit[1] is bufs[1]:
        return hit[2]
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, w = shape
    ho, wo = conv.out_dim(h, kh, sh, ph, dh), conv.out_dim(w, kw, sw, pw, dw)
    xt = scratch(xp, 0, (c, h + 2 * ph, w + 2 * pw, n), dtype)
    s0, s1, s2, s3 = xt.strides
    tap_shape, tap_strides = (c, kh, kw, ho, wo, n), (s0, s1 * dh, s2 * dw, s1 * sh, s2 * sw, s3)
    if xp is np:
        taps = np.ndarray(tap_shape, xt.dtype, buffer=xt, strides=tap_strides)
    else:
        taps = xp.lib.stride_tricks.as_strided(xt, tap_shape, tap_strides)
    views = (xt if ph or pw else None, xt[:, ph:ph + h, pw:pw + w], taps, scratch(xp, 1, tap_shape, dtype))
    bufs = slot_buffers()
    if xp is np and bufs is not None and xt.base is bufs[0] and views[3].base is bufs[1]:  # (not fresh arrays)
        if len(memo) >= _MAX_VIEW_SETS:
            memo.clear()
        memo[key] = (bufs[0], bufs[1], views)
    return views


# OpenBLAS multiplies a product of at most SMALL_PRODUCT (100**3, blas_threads.py) multiply-adds
# (m * n * k) with a kernel that skips packing its operands (its "small matrix" path); larger ones
# are packed in blocks. For the
# thin, wide products of batch-last convolutions (few filters, a whole batch of columns) the
# small kernel is faster, so they run as column blocks under that size. Measured (1 thread):
# (16 x 72) @ (72 x 2304), the demo CNN's second conv, 0.73x the time of one call; (8 x 27) @
# (27 x 9216) 0.45x; (32 x 72) @ (72 x 2304) 0.88x; a product already under the size: unchanged.
# That kernel runs on one thread, so such blocks need no switch of BLAS's threads (one_thread).
MIN_BLOCK_COLUMNS = 64  # narrower blocks cost more in calls than the kernel saves


def _block_columns(xp, a, b) -> int | None:
    """Columns per block of ``_column_blocks_matmul(a, b)``, None where it makes one call."""
    m, k = a.shape
    step = SMALL_PRODUCT // max(m * k, 1)
    if xp is not np or step >= b.shape[1] or step < MIN_BLOCK_COLUMNS or a.dtype != np.float32 \
            or b.dtype != np.float32:
        return None
    return step


def _column_blocks_matmul(xp, a, b, out):
    """``a @ b`` into the 2-D ``out``, as blocks of ``b``'s columns of at most ``SMALL_PRODUCT``
    multiply-adds each when that leaves blocks of ``MIN_BLOCK_COLUMNS`` columns or more (float32,
    the measured case; other dtypes take one call)."""
    step = _block_columns(xp, a, b)
    if step is None:
        return xp.matmul(a, b, out=out)
    for lo in range(0, b.shape[1], step):
        xp.matmul(a, b[:, lo:lo + step], out=out[:, lo:lo + step])
    return out


def _largest_block(xp, a, b) -> float | None:
    """Multiply-adds of the largest float32 BLAS call ``_column_blocks_matmul(a, b)`` makes (for
    ``one_thread``: OpenBLAS runs small ones on one thread anyway), None for other dtypes."""
    if xp is not np or a.dtype != np.float32 or b.dtype != np.float32:
        return None
    step = _block_columns(xp, a, b)
    return float(a.shape[0] * a.shape[1] * (b.shape[1] if step is None else step))


def conv2d_batch_last(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """A batch of small images as one product for the whole batch (``batch_last_conv``)."""
    return batch_last_conv(xp, x, weight, bias, stride, padding, dilation, out)


def columns_fit(avals, out) -> bool:
    """Whether a conv2d of these input avals and output aval has batch-last im2col columns that fit
    the scratch buffer (``SCRATCH_MAX_BYTES``): larger ones page-fault fresh memory every call
    (ResNet's 8 x 8, 32-channel layers at batch 64 ran 3x slower batch last than one image at a
    time), so the executor stores such a layer's values NCHW."""
    x, w, y = avals[0].shape, avals[1].shape, out.shape
    if x is None or w is None or y is None or None in x or None in w or None in y or len(w) != 4:
        return False
    return w[1] * w[2] * w[3] * y[0] * y[2] * y[3] * out.dtype.itemsize <= SCRATCH_MAX_BYTES
