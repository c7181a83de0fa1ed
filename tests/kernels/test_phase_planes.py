"""``phase_planes.FILL`` (the copy of an image plane into its zero-padded phase planes, inlined into
the compiled depthwise and im2col kernels): equal to the phase planes NumPy slices out of the padded
plane, for one, two (the pair loop) and three column phases, odd and even widths, every padding
parity, float32 and float64, a strided view of a plane and empty planes."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray import jit
from lazyarray.kernels.phase_planes import FILL, phase_tables

needs_numba = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")

# (h, w, stride, padding)
PLANES = [
    ((16, 16), (2, 2), (1, 1)),  # MobileNetV3's and ShuffleNet's stride-2 layers
    ((8, 8), (2, 2), (1, 1)),  # (a short row: the pair loop indexes the planes directly)
    ((5, 21), (2, 2), (1, 1)),  # (rows of 8 pairs or more: the pair loop by slices; odd width)
    ((3, 34), (2, 2), (0, 0)),
    ((9, 9), (2, 2), (1, 1)),  # odd width
    ((10, 9), (2, 2), (2, 2)),
    ((7, 6), (2, 2), (0, 0)),  # no padding: the first phase starts at column 0
    ((5, 1), (1, 2), (1, 0)),  # one column: only the odd-width tail
    ((6, 7), (1, 2), (3, 3)),
    ((13, 11), (3, 2), (1, 2)),
    ((7, 8), (4, 3), (0, 1)),  # three column phases
    ((9, 9), (1, 1), (1, 1)),  # one phase
    ((0, 5), (2, 2), (1, 1)),  # empty planes
    ((4, 0), (2, 2), (1, 1)),
]


def _want(xs, stride, padding, hq, wq):
    """The phase planes by NumPy: phase (a, b) holds the padded plane's rows a, a + sh, ... and columns
    b, b + sw, ..., zeros past the plane."""
    (sh, sw), (ph, pw) = stride, padding
    h, w = xs.shape
    padded = np.zeros((hq * sh, wq * sw), xs.dtype)
    padded[ph:ph + h, pw:pw + w] = xs
    return np.stack([padded[a::sh, b::sw] for a in range(sh) for b in range(sw)]).reshape(-1)


@needs_numba
@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("hw,stride,padding", PLANES, ids=[f"{p[0]}-s{p[1]}-p{p[2]}" for p in PLANES])
def test_fill_gives_numpys_phase_planes(hw, stride, padding, dtype):
    fill = jit.compiled(FILL, always=True)
    rng = np.random.default_rng(3)
    cols, _, hq, wq = phase_tables(*hw, 3, 3, stride, padding, (1, 1))
    big = rng.standard_normal((hw[0], 2 * hw[1] + 1)).astype(dtype)
    for xs in (np.ascontiguousarray(big[:, :hw[1]]), big[:, 1::2][:, :hw[1]]):  # (a C-ordered plane, a view)
        pad = np.zeros(stride[0] * stride[1] * hq * wq, dtype)
        fill(pad, xs, cols, stride[0], padding[0], wq)
        np.testing.assert_array_equal(pad, _want(xs, stride, padding, hq, wq))
