"""Winograd's minimal filtering F(4x4, 3x3) for ``conv2d``: 3x3 kernels at stride 1.

Each 4 x 4 output tile comes from a 6 x 6 input tile with 36 multiplies per (input, output)
channel pair where the direct convolution does 144 and F(2x2, 3x3) (``winograd2.py``) does 64 per
16 outputs: the products, which dominate a deep layer, shrink by 1.78x against F(2, 3). The price
is a larger kernel transform (36 values per kernel instead of 16) and more float32 rounding (see
below). Output sizes that 4 does not divide run on padded tiles whose extra rows and columns are
dropped.

The transform matrices are derived here from their interpolation points (``toom_cook``), not
typed in. The float32 error relative to the output's largest value, on ResNet-18's layers
(``benchmarks/winograd.py`` prints the table), is 0.8-1.4e-5 with the usual points
(0, 1, -1, 2, -2, inf), 20-30x F(2, 3)'s, and 2.7-5.3e-6 with (0, 1, -1, 1/2, -2, inf), 6-11x
im2col's: a rounding in the products reaches an output scaled by at most
sum_j |A^T_ij| * sum|G_j| * sum|B^T_j| per axis, 48 (2304 for the tile) with the usual points and
29.6 (876) with these, whose 1/2 has powers that shrink. Both sets have B^T and A^T entries exact
in binary (dyadic); only G's round. On unit-scale
layers 3-9% of F(4, 3)'s float32 outputs fall outside rtol 1e-5 / atol 1e-6 of the exact result
(im2col's: 0.02-0.04%); the project's models (ResNet-18 against onnxruntime, tests/onnx) stay
within that.

All three transforms are BLAS products with a 6 x 6 (or 4 x 6) constant matrix over strided
views of whole tile rows, in the (H, W, N, C) layout of ``winograd2.padded_hwnc``: one product per
tile row along the rows, one per tile along the columns (each a (6, 6) @ (6, N * C) product), so
no transform costs more than one pass over its values whatever its constants. The bias is added
to the products at the position of the points (1, 1), whose output-transform column is all ones:
one pass over 1/36 of the products.

``conv2d`` takes F(4, 3) where ``winograd_tile`` says it measured faster than F(2, 3) and im2col;
``la.tuning(winograd_max_tile=2)`` (or ``LAZYARRAY_WINOGRAD=2`` in the environment at import) keeps
every layer on F(2, 3) or im2col, as before F(4, 3) existed (for results closer to a direct sum).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..caches import NamedCache
from ..ops import conv
from ..ops.scratch import scratch
from ..tuning_table import current
from . import contention, winograd2

POINTS = (0, 1, -1, Fraction(1, 2), -2, None)  # None: the point at infinity


def toom_cook(points, m: int, r: int):
    """Exact (A^T (m, a), G (a, r), B^T (a, a)) for F(m, r) over ``a = m + r - 1`` points (the
    last may be ``None``, infinity), such that a correlation of ``a`` inputs ``d`` with ``r`` taps
    ``g`` is ``A^T ((G g) * (B^T d))``. Row j of B^T holds the coefficients of the product of
    ``(x - p_k)`` over the other finite points (all of them for infinity); row j of G evaluates the
    taps' polynomial at p_j divided by that product's value at p_j (its leading coefficient for
    infinity); column j of A^T evaluates the output's powers at p_j."""
    finite = [Fraction(p) for p in points if p is not None]
    a = m + r - 1
    if len(points) != a or len(set(finite)) != len(finite) or any(p is None for p in points[:-1]):
        raise ValueError(f"toom_cook: F({m}, {r}) needs {a} distinct points, infinity (None) last; got {points}")

    def poly(roots):  # ascending coefficients of prod (x - root), padded to a
        c = [Fraction(1)]
        for q in roots:
            c = [Fraction(0)] + c  # x * c
            c = [ci - q * cj for ci, cj in zip(c, c[1:] + [Fraction(0)])]
        return c + [Fraction(0)] * (a - len(c))

    bt, g, at_cols = [], [], []
    for j, p in enumerate(finite):
        others = finite[:j] + finite[j + 1:]
        scale = math.prod((p - q for q in others), start=Fraction(1))
        bt.append(poly(others))
        g.append([p ** k / scale for k in range(r)])
        at_cols.append([p ** i for i in range(m)])
    if len(finite) < a:  # infinity: the leading coefficients
        bt.append(poly(finite))
        g.append([Fraction(int(k == r - 1)) for k in range(r)])
        at_cols.append([Fraction(int(i == m - 1)) for i in range(m)])
    at = [list(row) for row in zip(*at_cols)]
    return at, g, bt


_AT, _G, _BT = (np.array(mat, dtype=np.float64) for mat in toom_cook(POINTS, 4, 3))
_GG = np.kron(_G, _G)  # (36, 9): a flattened 3x3 kernel to its 36 transformed values
# The product position whose output-transform column is all ones (the points (1, 1)): a value
# added there reaches each of the tile's 16 outputs once.
BIAS_POSITION = 6 * POINTS.index(1) + POINTS.index(1)
CONSTANTS = NamedCache("F(4, 3) transform matrices", 16)  # (id(matrix), dtype) -> the matrix in that dtype

# Where F(4, 3) measured faster than F(2, 3) and im2col (``benchmarks/winograd.py``, ResNet-18's
# layers at batch 64 and 1, 1 and 2 threads; F(2, 3) / F(4, 3) time at batch 64, 1 thread: 64
# channels 1.55x, 128 1.61x, 256 1.25x, 512 0.88x; at batch 1: 64 x 32 x 32 1.45x, 128 x 16 x 16
# 0.95x). The products shrink by 1.78x but the kernel transform grows by 2.25x (36 * O * C values
# per call, weights being graph inputs) and the products get 4x fewer rows per image: it pays with
# enough output pixels per kernel value, and not for 512 x 512 kernels (a 512-channel layer's
# transform alone took 10 ms at batch 64, a third of the layer).
# (The tuning table's ``winograd4_min_channels`` 64, ``winograd4_min_pixels`` 1024 output pixels in
# the batch (N * Ho * Wo), ``winograd4_max_channels`` 256.)
# With the transformed kernels kept (inference: ``winograd2.kernels``), measured the same way
# (F(2, 3) kept / F(4, 3) kept, 1 and 2 threads): 512 x 4x4 at batch 64 1.43x / 1.38x (im2col /
# F(4, 3) kept 2.7x / 2.2x), at batch 16 (256 pixels) 1.27x / 1.17x; 256 x 8x8 at batch 4 (256
# pixels) 1.41x / 1.96x; 128 x 16x16 at batch 1 (256 pixels) 1.85x / 1.67x, im2col / F(4, 3) kept
# 2.06x / 1.50x. So every layer ``winograd2.use_winograd`` takes (256+ pixels) runs F(4, 3), up to
# the 512 channels measured. (Below 256 pixels im2col stays: 256 x 8x8 at batch 1 was 1.19x / 0.88x
# im2col's time, 512 x 4x4 at batch 4 0.81x / 0.57x.)
# (``winograd4_cached_min_pixels`` 256, ``winograd4_cached_max_channels`` 512.)
# Chunks of images (measured at batch 64 in alternating rounds): F(4, 3)'s copies and transforms
# want half F(2, 3)'s input bytes per chunk (128 x 16 x 16, 1 thread, in chunks of 2 images: 26-30
# ms, of 4: 31-37 ms) but at least 2 images (64 x 32 x 32 on 2 threads: 1 image 31-36 ms, 2
# images 24-30 ms; on 1 thread within the noise), except where the transformed kernels
# (36 * C * O values) outgrow the cache: each chunk's products then read them from memory again,
# and 256 tile rows per chunk pay for that (256 x 8 x 8, 1 thread: 64 images 27-31 ms, 16
# images 30-35 ms).
CHUNK_BYTES = 256 << 10
MIN_CHUNK_IMAGES = 2
KERNEL_CACHE_BYTES = 4 << 20
MIN_CHUNK_TILES = 256


def _constant(mat, dtype):
    """A transform matrix in ``dtype`` (cached: converting it costs more than a small product)."""
    dtype = np.dtype(dtype)
    return CONSTANTS.get_or_make((id(mat), dtype), np.ascontiguousarray, mat, dtype)


def winograd_tile(x_shape, weight_shape, stride, padding, dilation, groups, ho, wo, cached=False, t=None) -> int:
    """The Winograd output tile conv2d of these shapes runs fastest with: 4 (F(4x4, 3x3)), 2
    (F(2x2, 3x3), ``winograd2.use_winograd``) or 0 (neither: im2col), by the tuning table ``t`` (the
    one in force when None). ``cached``: the transformed kernels are kept (``winograd2.kernels``: the
    weight unchanged since its last call, inference), so their transform costs nothing.
    ``winograd_max_tile=2`` (``LAZYARRAY_WINOGRAD=2``) rules out 4."""
    t = current() if t is None else t
    if not winograd2.use_winograd(x_shape, weight_shape, stride, padding, dilation, groups, ho, wo, cached, t):
        return 0
    n, c, o = x_shape[0], x_shape[1], weight_shape[0]
    min_pixels, max_channels = (t.winograd4_cached_min_pixels, t.winograd4_cached_max_channels) if cached \
        else (t.winograd4_min_pixels, t.winograd4_max_channels)
    if (t.winograd4_min_channels <= min(c, o) and max(c, o) <= max_channels and n * ho * wo >= min_pixels
            and t.winograd_max_tile == 4):
        return 4
    return 2


def winograd4_conv2d(xp, x, weight, padding, out=None, chunk=None, bias=None):
    """conv2d of x (N, C, H, W) with a (O, C, 3, 3) kernel at stride 1 as F(4x4, 3x3): the result
    (N, O, Ho, Wo), written into ``out`` when given (C-contiguous, that shape), ``bias`` (O,)
    added to the products. Chunks of images and threads as ``winograd2.winograd_conv2d``."""
    return winograd2.run_tiled(xp, x, weight, padding, out, chunk, bias, 4, _kernel_tiles, _chunk, chunk_images)


def chunk_images(n, c, o, h, w, tiles, itemsize=4) -> int:
    """Images per chunk of F(4, 3): ``CHUNK_BYTES`` of input but ``MIN_CHUNK_IMAGES``, and
    ``MIN_CHUNK_TILES`` tile rows when the transformed kernels are over ``KERNEL_CACHE_BYTES``
    (see the measurements above)."""
    rows = MIN_CHUNK_TILES if 36 * c * o * itemsize > KERNEL_CACHE_BYTES else 1
    k = winograd2.chunk_images(n, c, h, w, tiles, itemsize, min_tiles=rows, chunk_bytes=CHUNK_BYTES)
    return min(n, max(k, MIN_CHUNK_IMAGES))


def _kernel_tiles(xp, weight, threads=1):
    """The transformed kernels ``G g G^T`` as (36, C, O), contiguous (the products ran up to 1.5x
    faster on it than on a transposed view of (36, O, C), at 64 channels), over ``threads``
    threads by blocks of input channels (``threads.split``)."""
    o, c = weight.shape[:2]
    gg = _constant(_GG, weight.dtype)
    u = xp.empty((36, c, o), dtype=weight.dtype)
    per = -(-c // threads)

    def block(lo):  # (u[:, lo:lo + per] viewed as rows of per * O values; the taps copied C-major)
        taps = weight[:, lo:lo + per].transpose(1, 0, 2, 3).reshape(-1, 9)
        xp.matmul(gg, taps.T, out=u[:, lo:lo + per].reshape(36, -1))

    if threads > 1:
        contention.split(list(range(0, c, per)), block)
    else:
        block(0)
    return u


def _input_tiles(xp, x, padding, th, tw):
    """The transformed input tiles ``B^T d B``: (36, th * tw * N, C), in this thread's scratch
    (slots 2-4). Tile row i reads padded rows 4i .. 4i + 5 (a window view, no copy)."""
    n, c = x.shape[:2]
    xs = winograd2.padded_hwnc(xp, x, padding, 4 * th + 2, 4 * tw + 2)  # (hp, wp, N, C)
    hp, wp = xs.shape[:2]
    bt = _constant(_BT, x.dtype)
    rows = sliding_window_view(xs.reshape(hp, wp * n * c), 6, axis=0)[::4]  # (th, wp * N * C, 6)
    t = scratch(xp, 3, (6, th, wp, n * c), x.dtype)  # B^T d, along the rows
    xp.matmul(bt, rows.transpose(0, 2, 1), out=t.reshape(6, th, wp * n * c).transpose(1, 0, 2))
    cols = sliding_window_view(t, 6, axis=2)[:, :, ::4]  # (6, th, tw, N * C, 6): tile columns
    v = scratch(xp, 4, (6, 6, th, tw, n * c), x.dtype)  # ... then along the columns
    xp.matmul(bt, cols.transpose(0, 1, 2, 4, 3), out=v.transpose(0, 2, 3, 1, 4))
    return v.reshape(36, th * tw * n, c)


def _chunk(xp, x, u, padding, th, tw, y, bias=None):
    """One chunk of images: input transform, the 36 products (plus the bias), output transform
    ``A^T m A`` (two products), each output position copied to its place in every tile of ``y``
    (the last tiles cropped to ``y``'s size)."""
    n, o = x.shape[0], u.shape[2]
    rows = th * tw * n
    v = _input_tiles(xp, x, padding, th, tw)
    m = xp.matmul(v, u, out=scratch(xp, 5, (36, rows, o), xp.result_type(v, u)))
    if bias is not None:
        m[BIAS_POSITION] += bias  # (O,): the last axis
    at = _constant(_AT, m.dtype)
    s = scratch(xp, 2, (4, 6, rows * o), m.dtype)  # A^T m, along the rows (the input copy is spent)
    xp.matmul(at, m.reshape(6, 6 * rows * o), out=s.reshape(4, 6 * rows * o))
    r = scratch(xp, 3, (4, 4, rows * o), m.dtype)  # ... then along the columns
    xp.matmul(at, s, out=r)
    r = r.reshape(4, 4, th, tw, n, o)
    ho, wo = y.shape[2:]
    for a in range(4):
        for b in range(4):
            y[:, :, a::4, b::4] = r[a, b, :(ho - a + 3) // 4, :(wo - b + 3) // 4].transpose(2, 3, 0, 1)


def conv2d_winograd(tile: int):
    """conv2d's kernel running Winograd F(tile x tile, 3x3) (3x3 kernels at stride 1, groups == 1):
    ``kernels/conv2d.py``'s ``winograd2`` and ``winograd4``."""
    def winograd(xp, x, weight, bias, stride, padding, dilation, groups, out):
        # (looked up per call: tests spy on them)
        run = winograd4_conv2d if tile == 4 else winograd2.winograd_conv2d
        dtype = np.result_type(x.dtype, weight.dtype)
        shape = (x.shape[0], weight.shape[0]) + tuple(conv.out_dim(x.shape[2 + i], 3, 1, padding[i]) for i in range(2))
        target = conv.into(xp, out, shape, dtype)
        y = run(xp, x, weight, padding, target, bias=None if bias is None else bias.astype(dtype, copy=False))
        if out is not None and target is None:
            out[...] = y
            return out
        return y

    return winograd
