"""Winograd's minimal filtering F(2x2, 3x3) for ``conv2d``: 3x3 kernels at stride 1.

Each 2 x 2 output tile comes from a 4 x 4 input tile with 16 multiplies per (input, output)
channel pair instead of 36: the input tiles and the kernels are transformed (``B^T d B``,
``G g G^T``), multiplied as 16 independent matrix products over the channels, and transformed
back (``A^T m A``). The products dominate, so a deep 3x3 layer does 4/9 of im2col's multiply-adds;
the transforms are adds over whole arrays. Values agree with the direct convolution within float
rounding (the transform constants are 0, +-1 and 1/2, exact in binary).

Layout: the padded input is put in (H, W, N, C) order once, so every tile transform reads and
writes runs of N * C contiguous values, and the products are (tiles * N, C) @ (C, O) per tile
position, BLAS's fast orientation. ``conv2d`` uses it only where it measured faster
(``use_winograd``): deep layers (many channels) with enough output pixels to pay for the kernel
transform, which is redone every call while the weights change (training) and kept while they
do not (inference: ``kernels``, ``derived.py``; ``cached`` thresholds); of those, the ones where
F(4x4, 3x3) measured faster still run that (``winograd4.winograd_tile``; ``LAZYARRAY_WINOGRAD=2``
keeps them here). The padded copy (``padded_hwnc``) and the driver over chunks of images and
threads (``run_tiled``) serve both.
"""
from __future__ import annotations

import numpy as np

from .. import threads as thread_pool  # (the module, looked up at each call: tests replace its functions)
from ..ops.derived import derived
from ..ops.scratch import scratch
from ..tuning_table import current
from . import contention

# G (4 x 3): the kernel transform of F(2, 3); kron(G, G) maps a flattened 3x3 kernel to its 16
# transformed values in one product over all (O, C) pairs.
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_GG = np.kron(_G, _G)  # (16, 9)

# Thresholds (the tuning table, ``lazyarray/tuning_table.py``; ResNet-18's layers, benchmarks/onnx.py, 1
# thread): the tile transforms are passes over memory, the savings grow with the channels. Run over
# chunks of images that stay in cache (``chunk_images``), 64 input channels
# (``winograd_min_channels``) pay at any batch size (ResNet's first stage at batch 64: 1.5x faster
# than im2col; unchunked it was 1.25x slower, its 16 MB of transforms falling out of cache). Below
# 256 output pixels in the batch (``winograd_min_pixels``) the kernel transform (16 * O * C values
# per call) outweighs the savings (late layers at batch 1). With the transformed kernels kept
# (inference), the same (``winograd_cached_min_pixels``; ``winograd4``'s table: below 256 pixels
# im2col stayed as fast or faster, 256 x 8x8 and 512 x 4x4 at batch 1 and 4).
# A chunk's input bytes (its transforms and products take about 2.5x that) and the fewest tile
# rows a chunk's products may have (measured at batch 64: 64 channels at 32 x 32 best in chunks
# of 2-4 images, 512 channels at 4 x 4 in one chunk of all 64).
CHUNK_BYTES = 512 << 10
MIN_CHUNK_TILES = 256
# The input's copy into (H, W, N, C) order reads channels a plane apart; planes of a multiple of
# 4 KB put those reads in the same L1 cache sets, which hold 8 lines each, so the copy goes 8
# channels at a time there (ResNet's 64 x 32 x 32 layers at batch 64: 12.3 -> 5.6 ms per call;
# smaller planes gain nothing from blocks).
ALIASING_BYTES = 4096
CHANNEL_BLOCK = 8


def use_winograd(x_shape, weight_shape, stride, padding, dilation, groups, ho, wo, cached=False, t=None) -> bool:
    """True when conv2d of these shapes runs faster as F(2x2, 3x3) (see the thresholds of the
    tuning table ``t``, the one in force when None); ``cached``: the transformed kernels are kept
    (``kernels``, the weight unchanged since its last call)."""
    t = current() if t is None else t
    n, c = x_shape[0], x_shape[1]
    if not (t.winograd and groups == 1 and tuple(weight_shape[2:]) == (3, 3) and tuple(stride) == (1, 1)
            and tuple(dilation) == (1, 1) and ho % 2 == 0 and wo % 2 == 0
            and n * ho * wo >= (t.winograd_cached_min_pixels if cached else t.winograd_min_pixels)):
        return False
    return c >= t.winograd_min_channels


def padded_hwnc(xp, x, padding, hp, wp):
    """x (N, C, H, W) zero-padded by ``padding`` on top and left, and on the bottom and right up to
    (or cropped to) ``hp`` x ``wp``, in (hp, wp, N, C) order: the rows and columns a Winograd
    kernel's tiles read, in scratch slot 2 (``scratch.scratch``)."""
    n, c, h, w = x.shape
    ph, pw = padding
    xs = scratch(xp, 2, (hp, wp, n, c), x.dtype)
    rows, cols = min(h, hp - ph), min(w, wp - pw)
    xs[:ph] = 0  # the border the image leaves (a reused buffer holds the last call's values)
    xs[ph + rows:] = 0
    xs[ph:ph + rows, :pw] = 0
    xs[ph:ph + rows, pw + cols:] = 0
    step = CHANNEL_BLOCK if h * w * x.itemsize >= ALIASING_BYTES else c
    for c0 in range(0, c, step):
        xs[ph:ph + rows, pw:pw + cols, :, c0:c0 + step] = x[:, c0:c0 + step, :rows, :cols].transpose(2, 3, 0, 1)
    return xs


def _input_tiles(xp, x, padding, th, tw):
    """The transformed input tiles ``B^T d B``: (16, th * tw * N, C), in this thread's scratch."""
    n, c = x.shape[:2]
    xs = padded_hwnc(xp, x, padding, 2 * th + 2, 2 * tw + 2)  # (hp, wp, N, C)
    wp = xs.shape[1]
    r = [xs[i:i + 2 * th:2] for i in range(4)]  # tile row i of every tile: (th, wp, N, C)
    t = scratch(xp, 3, (4, th, wp, n, c), x.dtype)  # B^T d, along the rows
    xp.subtract(r[0], r[2], out=t[0])
    xp.add(r[1], r[2], out=t[1])
    xp.subtract(r[2], r[1], out=t[2])
    xp.subtract(r[1], r[3], out=t[3])
    v = scratch(xp, 4, (4, 4, th, tw, n, c), x.dtype)
    for i in range(4):
        q = [t[i][:, j:j + 2 * tw:2] for j in range(4)]  # ... then along the columns
        xp.subtract(q[0], q[2], out=v[i, 0])
        xp.add(q[1], q[2], out=v[i, 1])
        xp.subtract(q[2], q[1], out=v[i, 2])
        xp.subtract(q[1], q[3], out=v[i, 3])
    return v.reshape(16, th * tw * n, c)


def _kernel_tiles(xp, weight, threads=1):
    """The transformed kernels ``G g G^T`` as (16, C, O) (a transposed view of (16, O, C)), over
    ``threads`` threads by blocks of output channels (``threads.split``)."""
    o, c = weight.shape[:2]
    gg = xp.asarray(_GG, dtype=weight.dtype)
    u = xp.empty((16, o, c), dtype=weight.dtype)
    per = -(-o // threads)

    def block(lo):  # (u[:, lo:lo + per] viewed as rows of per * C values)
        xp.matmul(gg, weight[lo:lo + per].reshape(-1, 9).T, out=u[:, lo:lo + per].reshape(16, -1))

    if threads > 1:
        contention.split(list(range(0, o, per)), block)
    else:
        block(0)
    return u.transpose(0, 2, 1)


def chunk_images(n, c, h, w, tiles, itemsize=4, min_tiles=None, chunk_bytes=None) -> int:
    """Images per chunk: the transforms and products run over a few images at a time so their
    temporaries stay in cache (about 2.5x the input's bytes, ``chunk_bytes``, default
    ``CHUNK_BYTES``), yet each product still has at least ``min_tiles`` rows (default
    ``MIN_CHUNK_TILES``; late layers have few tiles per image; thin products are bound by reading
    the transformed kernels)."""
    by_bytes = (CHUNK_BYTES if chunk_bytes is None else chunk_bytes) // max(1, c * h * w * itemsize)
    by_tiles = -(-(MIN_CHUNK_TILES if min_tiles is None else min_tiles) // max(1, tiles))
    return max(1, min(n, max(by_bytes, by_tiles)))


def winograd_conv2d(xp, x, weight, padding, out=None, chunk=None, bias=None):
    """conv2d of x (N, C, H, W) with a (O, C, 3, 3) kernel at stride 1, even output size:
    the result (N, O, Ho, Wo), written into ``out`` when given (C-contiguous, that shape).
    ``bias`` (O,) is added to each output tile while it is in cache (no pass of its own).
    The batch runs ``chunk`` images at a time (default ``chunk_images``); the kernels are
    transformed once. Under ``la.set_num_threads(n > 1)`` a batch of at least
    the tuning table's ``min_split_macs`` multiply-adds (16 * tiles * C * O) spreads its chunks over the
    threads (``threads.split``), each chunk's products on one BLAS thread; a batch that would be
    one chunk is cut in n. Temporaries live in each thread's scratch (``scratch.scratch``)."""
    return run_tiled(xp, x, weight, padding, out, chunk, bias, 2, _kernel_tiles, _chunk, _images_per_chunk)


def _images_per_chunk(n, c, o, h, w, tiles, itemsize):
    return chunk_images(n, c, h, w, tiles, itemsize)


def run_tiled(xp, x, weight, padding, out, chunk, bias, size, kernel_tiles, chunk_fn, chunking):
    """The driver of a Winograd F(size x size, 3x3) (``winograd_conv2d``, ``winograd4``): the
    kernels transformed once by ``kernel_tiles(xp, weight, threads)`` into ((size + 2) ** 2, C, O),
    then ``chunk_fn(xp, x, u, padding, th, tw, y, bias)`` over chunks of images (``chunk``, by
    default ``chunking(n, c, o, h, w, tiles, itemsize)``), on one thread or split over the threads.
    ``th`` x ``tw`` tiles cover the output (the last ones cropped where ``size`` does not divide
    it)."""
    n, c, h, w = x.shape
    o = weight.shape[0]
    ph, pw = padding
    ho, wo = h + 2 * ph - 2, w + 2 * pw - 2
    th, tw = -(-ho // size), -(-wo // size)
    dtype = xp.result_type(x.dtype, weight.dtype)
    y = xp.empty((n, o, ho, wo), dtype=dtype) if out is None else out
    k = chunking(n, c, o, h, w, th * tw, x.itemsize) if chunk is None else max(1, chunk)
    threads = thread_pool.split_threads((size + 2) ** 2 * n * th * tw * c * o, n) if xp is np else 1
    if threads == 1:  # (e.g. one image: one chunk, whose products keep BLAS's threads)
        u = kernels(xp, weight, size, kernel_tiles)
        for i in range(0, n, k):
            chunk_fn(xp, x[i:i + k], u, padding, th, tw, y[i:i + k], bias)
        return y
    k = min(k, -(-n // threads))
    with thread_pool.blas_one_thread():  # both splits in one region: BLAS switched once
        # the kernel transform too (a 512-channel layer's is 4-7 ms, and a product left on BLAS's
        # threads stalls when another process holds a core)
        u = kernels(xp, weight, size, kernel_tiles, threads)
        contention.split(list(range(0, n, k)), lambda i: chunk_fn(xp, x[i:i + k], u, padding, th, tw, y[i:i + k], bias))
    return y


def kernels(xp, weight, size, kernel_tiles, threads=1):
    """The transformed kernels of F(size x size, 3x3), ``kernel_tiles(xp, weight, threads)``: kept
    (read-only) while the weight is unchanged, from its second call at a version (``derived.py``:
    inference transforms each layer's kernels once; training, whose weights change every step,
    transforms them at every call as before)."""
    if xp is np:
        nbytes = (size + 2) ** 2 * weight.shape[0] * weight.shape[1] * weight.itemsize
        u = derived(weight, kernels_name(size), lambda: kernel_tiles(xp, weight, threads), nbytes)
        if u is not None:
            return u
    return kernel_tiles(xp, weight, threads)


def kernels_name(size: int) -> str:
    """The name of F(size x size, 3x3)'s kernel transform in ``derived.py``'s table."""
    return f"winograd F({size}, 3) kernels"


def _chunk(xp, x, u, padding, th, tw, y, bias=None):
    """One chunk of images: input transform, the 16 products, output transform into ``y``."""
    n, o = x.shape[0], u.shape[2]
    v = _input_tiles(xp, x, padding, th, tw)
    m = xp.matmul(v, u, out=scratch(xp, 5, (16, th * tw * n, o), xp.result_type(v, u)))
    m = m.reshape(4, 4, th, tw, n, o)
    s = scratch(xp, 2, (2, 4, th, tw, n, o), m.dtype)  # A^T m, along the rows
    xp.add(m[0], m[1], out=s[0])
    s[0] += m[2]
    xp.subtract(m[1], m[2], out=s[1])
    s[1] -= m[3]
    tiles = y.reshape(n, o, th, 2, tw, 2).transpose(3, 5, 2, 4, 0, 1)  # (2, 2, th, tw, N, O) view
    tmp = scratch(xp, 3, (th, tw, n, o), m.dtype)
    for a in range(2):  # ... then along the columns, each written to its place in every tile
        xp.add(s[a][0], s[a][1], out=tmp)
        tmp += s[a][2]
        if bias is not None:
            tmp += bias  # (O,): the last axis
        tiles[a, 0] = tmp
        xp.subtract(s[a][1], s[a][2], out=tmp)
        tmp -= s[a][3]
        if bias is not None:
            tmp += bias
        tiles[a, 1] = tmp
