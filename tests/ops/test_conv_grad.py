"""conv2d's input and weight gradients (batch last with groups 1 on NumPy: kernels/conv2d_grad.py)
against float64 references. That the compiled and NumPy paths agree bit for bit is in
tests/kernels/test_conv_jit.py; the op table's cases (tests/ops/cases.py) cover groups and dtypes."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray.kernels import conv2d_grad
from lazyarray.kernels.conv2d import run_conv2d
from lazyarray.ops import conv

GRAD_GEOMETRIES = [((3, 3), (1, 1), (1, 1), (1, 1)), ((3, 2), (2, 1), (0, 1), (1, 1)),
                   ((3, 3), (1, 1), (2, 1), (2, 1)), ((1, 1), (1, 1), (0, 0), (1, 1)), ((2, 2), (3, 3), (1, 0), (1, 1))]


@pytest.mark.parametrize("shape", [(5, 3, 9, 7), (3, 2, 12, 10), (1, 3, 9, 7)])
def test_weight_gradient_matches_a_float64_reference(shape):
    """The weight gradient against the sum over (n, i, j) of g * window, in float64."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((4, shape[1], 3, 3)).astype(np.float32)
    g = rng.standard_normal(run_conv2d(np, x, w, None, (1, 1), (1, 1), (1, 1)).shape).astype(np.float32)
    win = conv.conv_windows(np, x.astype(np.float64), (3, 3), (1, 1), (1, 1))
    want = np.einsum("noij,ncijab->ocab", g.astype(np.float64), win)
    got = conv2d_grad.run_weight_grad(np, g, x, (3, 3), (1, 1), (1, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("geometry", GRAD_GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-d{g[3]}")
@pytest.mark.parametrize("shape", [(5, 3, 9, 7), (1, 3, 9, 7)])
def test_input_gradient_matches_col2im_in_float64(shape, geometry):
    """The batch-last input gradient against the windows' adjoint (``col2im``) computed in float64."""
    kernel, stride, padding, dilation = geometry
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((4, shape[1]) + kernel).astype(np.float32)
    g = rng.standard_normal(run_conv2d(np, x, w, None, stride, padding, dilation).shape).astype(np.float32)
    want = conv.col2im(np, g.astype(np.float64), w.astype(np.float64), x.shape, stride, padding, dilation, 1)
    got = conv2d_grad.run_input_grad(np, g, w, x, stride, padding, dilation)
    assert got.dtype == np.float32 and got.shape == x.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
