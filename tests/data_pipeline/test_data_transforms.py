"""Image transforms (``lazyarray/data/transforms.py``) against NumPy references."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lazyarray.data import transforms as T
from lazyarray.data.seeding import sample_seed
from lazyarray.errors import ParamValueError, ShapeError

IMG = np.random.default_rng(3).integers(0, 256, (7, 9, 3), dtype=np.uint8)


def reference_bilinear(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """OpenCV INTER_LINEAR, one output pixel at a time (float64)."""
    h, w = img.shape[:2]
    out = np.zeros((height, width) + img.shape[2:])
    for oy in range(height):
        sy = min(max((oy + 0.5) * h / height - 0.5, 0.0), h - 1)
        y0 = math.floor(sy)
        y1, fy = min(y0 + 1, h - 1), sy - y0
        for ox in range(width):
            sx = min(max((ox + 0.5) * w / width - 0.5, 0.0), w - 1)
            x0 = math.floor(sx)
            x1, fx = min(x0 + 1, w - 1), sx - x0
            p = img.astype(np.float64)
            out[oy, ox] = ((1 - fy) * ((1 - fx) * p[y0, x0] + fx * p[y0, x1]) +
                           fy * ((1 - fx) * p[y1, x0] + fx * p[y1, x1]))
    return out


def test_to_tensor_and_normalize_exact():
    t = T.ToTensor()(IMG)
    assert t.shape == (3, 7, 9) and t.dtype == np.float32
    np.testing.assert_array_equal(t, IMG.transpose(2, 0, 1).astype(np.float32) / np.float32(255))
    assert T.ToTensor()(IMG[:, :, 0]).shape == (1, 7, 9)
    assert T.ToTensor()(np.stack([IMG, IMG])).shape == (2, 3, 7, 9)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    n = T.Normalize(mean, std)(t)
    want = (t - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
    np.testing.assert_array_equal(n, want)
    assert n.dtype == np.float32
    with pytest.raises(ShapeError, match="Normalize: mean has 2 values for an image of 3 channels"):
        T.Normalize((0.0, 0.0))(t)
    with pytest.raises(ParamValueError, match="std"):
        T.Normalize(0.0, 0.0)


def test_flips_exact():
    np.testing.assert_array_equal(T.RandomFlipLeftRight(p=1.0)(IMG), IMG[:, ::-1])
    np.testing.assert_array_equal(T.RandomFlipTopBottom(p=1.0)(IMG), IMG[::-1])
    assert T.RandomFlipLeftRight(p=0.0)(IMG) is IMG
    flip, rng = T.RandomFlipLeftRight(seed=4), np.random.default_rng(4)
    for _ in range(10):
        np.testing.assert_array_equal(flip(IMG), IMG[:, ::-1] if rng.random() < 0.5 else IMG)


@pytest.mark.parametrize("size", [(4, 3), (13, 11), (9, 7), (1, 1)])
def test_resize_against_a_reference_bilinear(size):
    w, h = size
    f = IMG.astype(np.float32)
    np.testing.assert_allclose(T.Resize(size)(f), reference_bilinear(IMG, w, h), rtol=1e-5, atol=1e-4)
    got = T.Resize(size)(IMG)
    assert got.dtype == np.uint8 and got.shape == (h, w, 3)
    assert np.abs(got.astype(np.int64) - np.rint(reference_bilinear(IMG, w, h))).max() <= 1


def test_resize_keep_ratio_and_center_crop():
    assert T.Resize(14, keep_ratio=True)(IMG).shape == (14, 18, 3)
    np.testing.assert_array_equal(T.CenterCrop((5, 3))(IMG), IMG[2:5, 2:7])
    with pytest.raises(ShapeError, match="CenterCrop: crop .* larger than the image"):
        T.CenterCrop(10)(IMG)


def test_random_resized_crop_shape_determinism_and_sample_seed():
    crop = T.RandomResizedCrop((5, 4), scale=(0.2, 1.0))
    assert crop(IMG).shape == (4, 5, 3) and crop(IMG).dtype == np.uint8
    a = [T.RandomResizedCrop(6, seed=9)(IMG) for _ in range(2)]
    np.testing.assert_array_equal(a[0], a[1])
    c = T.RandomResizedCrop(6, seed=9)
    outs = [c(IMG) for _ in range(5)]
    assert any(not np.array_equal(outs[0], o) for o in outs[1:])  # draws advance
    with sample_seed((1, 2, 3)):
        x = T.RandomResizedCrop(6, seed=0)(IMG)
    with sample_seed((1, 2, 3)):
        y = T.RandomResizedCrop(6, seed=123)(IMG)  # the sample's generator wins over the transform's own
    np.testing.assert_array_equal(x, y)
    top, left, h, w = T.RandomResizedCrop(6, seed=1).crop_box(7, 9, np.random.default_rng(0))
    assert 0 <= top <= 7 - h and 0 <= left <= 9 - w
    with pytest.raises(ParamValueError, match="RandomResizedCrop: scale"):
        T.RandomResizedCrop(4, scale=(0.5, 0.1))
