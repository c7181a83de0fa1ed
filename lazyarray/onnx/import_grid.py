"""ONNX spatial sampling -> registry ops: AffineGrid and GridSample (any spatial rank).

AffineGrid multiplies a constant base grid of normalized coordinates ``(x, y[, z], 1)`` by each
batch entry's ``theta``. GridSample maps normalized grid coordinates (last axis ordered x, y, z:
the *last* spatial axis first) to pixel coordinates (``align_corners``), handles coordinates past
the borders (``padding_mode`` zeros / border / reflection), then sums taps: 1 (nearest, rounding
half to even), 2 per axis (linear) or 4 per axis (cubic, Keys' kernel with a = -0.75). Each tap is a
``take_along_axis`` into the flattened image, its index mapped by the padding mode (zeros: the tap
is masked out), times its weight.
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of


def _text(n: OnnxNode, name: str, default: str) -> str:
    v = n.attr(name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def _base_coords(size: int, align: bool) -> np.ndarray:
    if size == 1:  # linspace(-1, 1, 1) is [-1]; the centre of one cell is 0
        return np.full(1, -1.0 if align else 0.0)
    ends = np.linspace(-1.0, 1.0, size)
    return ends if align else ends * (size - 1) / size


def affine_grid(n: OnnxNode) -> list:
    n.arity(2)
    theta = n.inputs[0]
    size = n.ints(1, "AffineGrid size")
    r = len(size) - 2
    if r not in (2, 3) or n.known_shape(0, "AffineGrid") != (size[0], r, r + 1):
        n.fail(f"AffineGrid takes theta [N, {r}, {r + 1}] for size {size} (2-D or 3-D), got {n.shape(0)}")
    align = bool(int(n.attr("align_corners", 0)))
    spatial = size[2:]
    axes = [_base_coords(s, align) for s in spatial]  # per spatial axis (outermost first)
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([m for m in reversed(mesh)] + [np.ones(spatial)], axis=-1)  # (x, y[, z], 1)
    base = constant(base.reshape(1, -1, r + 1).astype(dtype_of(theta)), owned=True)
    grid = S.matmul(base, S.transpose(theta, axes=(0, 2, 1)))  # [N, prod(spatial), r]
    return [S.reshape(grid, shape=(size[0],) + tuple(spatial) + (r,))]


# -- GridSample ------------------------------------------------------------------------------------
def _reflect(v, lo: float, hi: float):
    """v folded back into [lo, hi] by reflecting at the borders, as many times as it takes."""
    span = hi - lo
    if span <= 0:
        return S.full_like(v, fill_value=lo)
    below, above = S.less(v, lo), S.greater(v, hi)
    dist = S.where(below, S.subtract(lo, v), S.subtract(v, hi))
    turns = S.trunc(S.divide(dist, span))
    rest = S.subtract(dist, S.multiply(turns, span))
    even = S.equal(S.remainder(turns, 2.0), 0.0)
    low_side, high_side = S.add(rest, lo), S.subtract(hi, rest)
    folded = S.where(below, S.where(even, low_side, high_side), S.where(even, high_side, low_side))
    return S.where(S.logical_or(below, above), folded, v)


def _cubic_weights(t):
    """Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 for a fraction t."""
    a = -0.75

    def near(d):  # |d| <= 1
        return S.add(S.multiply(S.multiply(S.subtract(S.multiply(d, a + 2), a + 3), d), d), 1.0)

    def far(d):  # 1 < |d| < 2
        return S.subtract(S.multiply(S.add(S.multiply(S.subtract(S.multiply(d, a), 5 * a), d), 8 * a), d), 4 * a)
    return [far(S.add(t, 1.0)), near(t), near(S.subtract(1.0, t)), far(S.subtract(2.0, t))]


def grid_sample(n: OnnxNode) -> list:
    n.arity(2)
    x, grid = n.inputs
    xs, gs = n.known_shape(0, "GridSample"), n.known_shape(1, "GridSample")
    r = len(xs) - 2
    if len(gs) != r + 2 or gs[-1] != r or gs[0] != xs[0]:
        n.fail(f"GridSample grid {gs} does not fit an input of shape {xs} (want [N, ..., {r}])")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(_text(n, "mode", "linear"), _text(n, "mode", "linear"))
    pad = _text(n, "padding_mode", "zeros")
    if mode not in ("nearest", "linear", "cubic") or pad not in ("zeros", "border", "reflection"):
        n.fail(f"GridSample mode={mode!r} padding_mode={pad!r} is not supported; supported: nearest/linear/cubic "
               "and zeros/border/reflection")
    align = bool(int(n.attr("align_corners", 0)))
    dims = xs[2:]
    batch, chans, points = xs[0], xs[1], int(np.prod(gs[1:-1]))
    g = S.reshape(grid, shape=(batch, 1, points, r))
    lo = [0.0 if align else -0.5 for _ in dims]
    hi = [d - 1.0 if align else d - 0.5 for d in dims]
    coords = [_pixel_coords(g, i, d, r, mode, pad, align, lo[i], hi[i]) for i, d in enumerate(dims)]
    per_axis = [_axis_taps(c, mode) for c in coords]  # per axis: [(tap position, weight or None)]
    flat = S.reshape(x, shape=(batch, chans, -1))
    strides = [int(np.prod(dims[i + 1:])) for i in range(r)]
    out = None
    for taps in itertools.product(*per_axis):
        index, weight, mask = None, None, None
        for i, (t, w) in enumerate(taps):
            idx, ok = _tap_index(t, dims[i], pad, lo[i], hi[i])
            part = S.multiply(idx, strides[i]) if strides[i] != 1 else idx
            index = part if index is None else S.add(index, part)
            weight = w if weight is None else (weight if w is None else S.multiply(weight, w))
            mask = ok if mask is None else (mask if ok is None else S.logical_and(mask, ok))
        if mask is not None:
            weight = S.cast(mask, dtype=dtype_of(x)) if weight is None else S.where(mask, weight,
                                                                                    S.zeros_like(weight))
        v = S.take_along_axis(flat, index, axis=2)
        if weight is not None:
            v = S.multiply(v, S.cast(weight, dtype=dtype_of(x)))
        out = v if out is None else S.add(out, v)
    return [S.reshape(out, shape=(batch, chans) + tuple(gs[1:-1]))]


def _pixel_coords(g, i: int, d: int, r: int, mode: str, pad: str, align: bool, lo: float, hi: float):
    """Pixel coordinates ``[N, 1, points]`` on spatial axis ``i`` (outermost first, of length ``d``)
    of the normalized grid ``g``, rounded (nearest) and padded (border, reflection)."""
    c = S.getitem(g, key=(Ellipsis, r - 1 - i))
    c = S.multiply(S.add(c, 1.0), (d - 1) / 2.0) if align else S.divide(S.subtract(S.multiply(S.add(c, 1.0), d),
                                                                                   1.0), 2.0)
    if mode == "nearest":
        c = S.round(c)  # half to even
    if pad == "border":  # only coordinates past [lo, hi] move (without align_corners, hi is d - 0.5)
        c = S.where(S.logical_or(S.less(c, lo), S.greater(c, hi)), S.clip(c, 0.0, d - 1.0), c)
    elif pad == "reflection":
        c = _reflect(c, lo, hi)
    return c


def _axis_taps(c, mode: str) -> list:
    """The taps of coordinates ``c`` on one axis: ``[(tap position, weight or None)]``."""
    if mode == "nearest":
        return [(S.trunc(c), None)]
    base = S.floor(c)
    frac = S.subtract(c, base)
    if mode == "linear":
        return [(base, S.subtract(1.0, frac)), (S.add(base, 1.0), frac)]
    w = _cubic_weights(frac)
    return [(S.add(base, float(k - 1)), w[k]) for k in range(4)]


def _tap_index(t, d: int, pad: str, lo: float, hi: float) -> tuple:
    """Tap positions t (float, integral) on an axis of length d -> (int64 index, validity mask or None)."""
    if pad == "zeros":
        ok = S.logical_and(S.greater_equal(t, 0.0), S.less_equal(t, d - 1.0))
        return S.cast(S.clip(t, 0.0, d - 1.0), dtype="int64"), ok
    if pad == "border":
        t = S.clip(t, 0.0, d - 1.0)
    else:
        t = S.trunc(_reflect(t, lo, hi))
    return S.cast(t, dtype="int64"), None


GRID_CONVERTERS: dict[str, Converter] = {"GridSample": grid_sample, "AffineGrid": affine_grid}
