"""Image transforms on NumPy arrays, as Gluon's ``gluon.data.vision.transforms``.

Images are HWC (height, width, channels), ``uint8`` or float, as decoders give them; ``ToTensor``
makes the CHW ``float32`` layout the layers take. Sizes follow Gluon: an int is a square side, a
pair is ``(width, height)``. Resizing is bilinear with half-pixel centres (OpenCV's
``INTER_LINEAR``, which MXNet uses), written in NumPy. Random transforms take a ``seed``; inside a
seeded ``DataLoader`` they draw from the generator of the sample being read instead, so batches do
not depend on the number of workers.

>>> import numpy as np
>>> from lazyarray.data import transforms as T
>>> img = np.full((4, 6, 3), 255, np.uint8)
>>> t = T.Compose([T.Resize((3, 2)), T.ToTensor(), T.Normalize(0.5, 0.5)])
>>> out = t(img)
>>> out.shape, out.dtype, float(out.max())
((3, 2, 3), dtype('float32'), 1.0)
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ParamError, ParamValueError, ShapeError
from ..ndarray import NDArray
from .seeding import sample_rng


def _image(x, where: str, ndims=(3,)) -> np.ndarray:
    img = x.asnumpy() if isinstance(x, NDArray) else np.asarray(x)
    if img.ndim not in ndims:
        raise ShapeError(f"{where}: expects an image of {' or '.join(map(str, ndims))} dims (HWC), got shape "
                         f"{img.shape}; decode images to (height, width, channels) arrays")
    return img


def _size(size, where: str) -> tuple[int, int]:
    """Gluon's size argument -> ``(width, height)``."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        pair = (int(size), int(size))
    elif isinstance(size, Sequence) and len(size) == 2 and all(isinstance(s, numbers.Integral) for s in size):
        pair = (int(size[0]), int(size[1]))
    else:
        raise ParamError(f"{where}: size must be an int or a (width, height) pair of ints, got {size!r}")
    if min(pair) < 1:
        raise ParamValueError(f"{where}: size={size!r} has a side below 1; pass positive sizes")
    return pair


def _range(value, where: str, name: str) -> tuple[float, float]:
    if not (isinstance(value, Sequence) and len(value) == 2) or not 0 < value[0] <= value[1]:
        raise ParamValueError(f"{where}: {name}={value!r} must be a pair (low, high) with 0 < low <= high")
    return float(value[0]), float(value[1])


def _rng(own: np.random.Generator) -> np.random.Generator:
    """The sample's generator inside a seeded loader, else the transform's own."""
    rng = sample_rng()
    return own if rng is None else rng


def _axis_weights(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices below / above and the weight of the upper one for each output position."""
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0.0, n_in - 1)
    lo = np.floor(src).astype(np.intp)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, (src - lo).astype(np.float32)


def resize_bilinear(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """``img`` (HW or HWC) resized to ``height x width`` by bilinear interpolation with half-pixel
    centres; integer images are rounded back to their dtype.

    >>> resize_bilinear(np.array([[0.0, 1.0]], np.float32), 4, 1).tolist()
    [[0.0, 0.25, 0.75, 1.0]]
    """
    h, w = img.shape[:2]
    y0, y1, wy = _axis_weights(height, h)
    x0, x1, wx = _axis_weights(width, w)
    f = img.astype(np.float32, copy=False)
    extra = (None,) * (img.ndim - 2)
    wy, wx = wy[(slice(None), None, *extra)], wx[(slice(None), *extra)]
    rows = f[y0] * (1 - wy) + f[y1] * wy
    out = rows[:, x0] * (1 - wx) + rows[:, x1] * wx
    if np.issubdtype(img.dtype, np.integer):
        info = np.iinfo(img.dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(img.dtype)
    return out.astype(img.dtype, copy=False)


class Compose:
    """Apply ``transforms`` in order."""

    def __init__(self, transforms: Sequence[Callable]):
        for k, t in enumerate(transforms):
            if not callable(t):
                raise ParamError(f"Compose: transform {k} is a {type(t).__name__}, not callable")
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """HWC (or NHWC, or HW) image -> CHW (NCHW, 1HW) ``float32`` divided by 255, as Gluon's (which
    divides float input by 255 too): uint8 0..255 becomes 0..1.

    >>> ToTensor()(np.full((1, 2, 3), 255, np.uint8)).shape
    (3, 1, 2)
    """

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "ToTensor", (2, 3, 4))
        if img.ndim == 2:
            img = img[:, :, None]
        axes = (2, 0, 1) if img.ndim == 3 else (0, 3, 1, 2)
        return np.ascontiguousarray(img.transpose(axes), dtype=np.float32) / np.float32(255)


class Normalize:
    """``(x - mean) / std`` per channel of a CHW (or NCHW) float image; ``mean`` / ``std`` are numbers
    or one value per channel."""

    def __init__(self, mean=0.0, std=1.0):
        self._mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self._std = np.asarray(std, dtype=np.float32).reshape(-1)
        if np.any(self._std == 0):
            raise ParamValueError(f"Normalize: std={std!r} holds a zero; every channel needs a nonzero std")

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "Normalize", (3, 4))
        c = img.shape[-3]
        for name, v in (("mean", self._mean), ("std", self._std)):
            if v.size not in (1, c):
                raise ShapeError(f"Normalize: {name} has {v.size} values for an image of {c} channels (CHW shape "
                                 f"{img.shape}); give one value or one per channel, after ToTensor")
        shape = (-1, 1, 1)
        return ((img.astype(np.float32, copy=False) - self._mean.reshape(shape)) / self._std.reshape(shape)
                ).astype(np.float32, copy=False)


class Resize:
    """Resize an HWC image to ``size`` (int: square; pair: ``(width, height)``); with
    ``keep_ratio=True`` and an int size, the shorter side becomes ``size``."""

    def __init__(self, size, keep_ratio: bool = False):
        self._int_size = isinstance(size, numbers.Integral)
        self._size = _size(size, "Resize")
        self._keep_ratio = bool(keep_ratio)

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "Resize", (2, 3))
        w, h = self._size
        if self._keep_ratio and self._int_size:
            ih, iw = img.shape[:2]
            short = w
            w, h = (short, max(1, round(ih * short / iw))) if iw <= ih else (max(1, round(iw * short / ih)), short)
        return resize_bilinear(img, w, h)


class CenterCrop:
    """The centre ``size`` (int or ``(width, height)``) of an HWC image."""

    def __init__(self, size):
        self._size = _size(size, "CenterCrop")

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "CenterCrop", (2, 3))
        w, h = self._size
        ih, iw = img.shape[:2]
        if w > iw or h > ih:
            raise ShapeError(f"CenterCrop: crop (width {w}, height {h}) is larger than the image (width {iw}, "
                             f"height {ih}); Resize first or crop less")
        top, left = (ih - h) // 2, (iw - w) // 2
        return img[top:top + h, left:left + w]


class RandomFlipLeftRight:
    """Mirror an HWC image horizontally with probability ``p``."""

    def __init__(self, p: float = 0.5, seed: int | None = None):
        self._p, self._rng = float(p), np.random.default_rng(seed)

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "RandomFlipLeftRight", (2, 3))
        return img[:, ::-1] if _rng(self._rng).random() < self._p else img


class RandomFlipTopBottom:
    """Flip an HWC image vertically with probability ``p``."""

    def __init__(self, p: float = 0.5, seed: int | None = None):
        self._p, self._rng = float(p), np.random.default_rng(seed)

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "RandomFlipTopBottom", (2, 3))
        return img[::-1] if _rng(self._rng).random() < self._p else img


class RandomResizedCrop:
    """A random crop of ``scale`` times the area and aspect ``ratio`` (width / height, drawn
    log-uniformly), resized to ``size`` (int or ``(width, height)``); after 10 misses, the centre
    crop of the nearest allowed ratio (torchvision's and Gluon's rule).

    >>> RandomResizedCrop(4, seed=0)(np.zeros((10, 12, 3), np.uint8)).shape
    (4, 4, 3)
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed: int | None = None):
        self._size = _size(size, "RandomResizedCrop")
        self._scale = _range(scale, "RandomResizedCrop", "scale")
        self._ratio = _range(ratio, "RandomResizedCrop", "ratio")
        self._rng = np.random.default_rng(seed)

    def crop_box(self, height: int, width: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        """``(top, left, crop_height, crop_width)`` for an image of ``height x width``."""
        area = height * width
        log_lo, log_hi = math.log(self._ratio[0]), math.log(self._ratio[1])
        for _ in range(10):
            target = area * rng.uniform(*self._scale)
            aspect = math.exp(rng.uniform(log_lo, log_hi))
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
        in_ratio = width / height
        if in_ratio < self._ratio[0]:
            w, h = width, round(width / self._ratio[0])
        elif in_ratio > self._ratio[1]:
            h, w = height, round(height * self._ratio[1])
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, x) -> np.ndarray:
        img = _image(x, "RandomResizedCrop", (2, 3))
        top, left, h, w = self.crop_box(img.shape[0], img.shape[1], _rng(self._rng))
        return resize_bilinear(img[top:top + h, left:left + w], *self._size)
