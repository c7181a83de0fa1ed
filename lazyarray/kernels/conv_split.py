"""conv2d split over threads: chunks of a batch's images on ``la.set_num_threads``'s threads,
each padded, im2col'd and multiplied on one BLAS thread (``kernels/conv2d.py``'s ``split``).
"""
from __future__ import annotations

from .. import threads as thread_pool  # (the module, looked up at each call: tests replace its functions)
from ..ops import conv
from ..ops.scratch import SCRATCH_MAX_BYTES, scratch
from ..tuning_table import current
from . import contention
from .conv_batch_last import batch_last_conv

# Under ``la.set_num_threads(n > 1)`` a batch of at least ``threads.MIN_SPLIT_MACS`` multiply-adds
# runs as chunks of images spread over the threads (``split_conv``): each pads and im2cols its own
# images and multiplies them on one BLAS thread, where otherwise only the products would use the
# threads and the padding and im2col copies would run on one (and a product left on BLAS's threads
# stalls when another process holds a core: OpenBLAS's threads spin).
# Columns per chunk: a few images' worth, so the copy and the product meet in cache.
SPLIT_CHUNK_BYTES = 1 << 20


def balanced_chunks(n: int, per_image: int, limit: int, threads: int) -> int:
    """Images per chunk: chunks of at most ``limit`` bytes (at least one image each), their count
    a multiple of ``threads`` where the batch allows, so every thread gets the same share."""
    count = max(1, -(-n * per_image // max(1, limit)))
    count = min(n, -(-count // threads) * threads)
    return -(-n // count)


def split_conv(xp, x, weight, bias, stride, padding, dilation, out, threads):
    """conv2d with groups == 1 of a batch of images as chunks of images over ``threads`` threads
    (``threads.split``), each written into its slice of the output with the one-thread kernel:
    images of at least ``per_image_min_pixels`` output pixels im2col + per-image products
    (``gemm_conv``), each chunk padded in its thread's scratch (no padded copy of the whole
    batch); smaller ones ``batch_last_conv`` per chunk, in as few chunks as keep its columns in
    scratch. Values equal the one-thread path's: every image is the same product."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    (ph, pw) = padding
    ho, wo = (conv.out_dim((h, w)[a], (kh, kw)[a], stride[a], padding[a], dilation[a]) for a in (0, 1))
    dtype = xp.result_type(x.dtype, weight.dtype)
    y = conv.into(xp, out, (n, o, ho, wo), dtype)
    y = xp.empty((n, o, ho, wo), dtype=dtype) if y is None else y
    cols = c * kh * kw * ho * wo * x.itemsize  # one image's im2col columns
    small = ho * wo < current().per_image_min_pixels
    per = balanced_chunks(n, cols, SCRATCH_MAX_BYTES if small else SPLIT_CHUNK_BYTES, threads)

    def work(lo):
        hi = min(lo + per, n)
        if small:
            batch_last_conv(xp, x[lo:hi], weight, bias, stride, padding, dilation, y[lo:hi])
            return
        xc = x[lo:hi]
        if ph or pw:  # padded in this thread's scratch: zero border, the images inside
            xc = scratch(xp, 0, (hi - lo, c, h + 2 * ph, w + 2 * pw), x.dtype)
            xc[:, :, :ph] = 0
            xc[:, :, ph + h:] = 0
            xc[:, :, ph:ph + h, :pw] = 0
            xc[:, :, ph:ph + h, pw + w:] = 0
            xc[:, :, ph:ph + h, pw:pw + w] = x[lo:hi]
        conv.gemm_conv(xp, conv.conv_windows(xp, xc, (kh, kw), stride, (0, 0), dilation=dilation), weight, bias, y[lo:hi])

    contention.split(list(range(0, n, per)), work)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


def conv2d_split(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """Chunks of images over ``la.set_num_threads``'s threads (``split_conv``)."""
    return split_conv(xp, x, weight, bias, stride, padding, dilation, out, thread_pool.num_threads())
