"""Outputs whose images are C-ordered blocks at a larger batch stride (a batch's part of a concatenation
written in place, ``executor/concat_in_place.py``): ``covering_view.covering`` and every conv2d /
conv2d_act kernel writing such an output, runner and binding, bit for bit the values written into a
C-ordered output (float32, float64; loops, products, fused pass, blocked, direct, and the
implementations that write through a copy), empty batches included."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels.conv2d import run_conv2d
from lazyarray.kernels.conv_act import run_conv2d_act
from lazyarray.kernels.covering_view import covering
from lazyarray.ops import registry

DTYPES = ("float32", "float64")


def _part(shape, dtype, before=3, after=5):
    """An (N, O, H, W) view of channels [before, before + O) of a larger C-ordered batch, NaN-filled."""
    n, o, h, w = shape
    big = np.full((n, before + o + after, h, w), np.nan, dtype)
    return big, big[:, before:before + o]


def test_covering_gives_a_c_ordered_view_whose_first_channels_are_the_output():
    big, part = _part((3, 4, 2, 5), "float32")
    assert not part.flags.c_contiguous
    cov = covering(part)
    assert cov.flags.c_contiguous and cov.shape == (3, 12, 2, 5)
    cov[:, :4] = np.arange(3 * 4 * 2 * 5, dtype=np.float32).reshape(3, 4, 2, 5)
    np.testing.assert_array_equal(part, cov[:, :4])
    assert np.isnan(big[:, :3]).all() and np.isnan(big[:, 7:]).all()
    c = np.zeros((2, 3, 4, 4))
    assert covering(c) is c
    assert covering(np.zeros((4, 4, 3, 2)).transpose(3, 2, 1, 0)) is None  # (images not C-ordered blocks)


# (x shape, weight shape, padding, tuning): the loop, fused, pointwise, blocked, direct (a batch), and
# implementations that write a strided output through a copy (im2col, batch_last)
CASES = [((3, 4, 7, 7), (8, 4, 1, 1), (0, 0), {}),
         ((3, 16, 8, 8), (32, 16, 1, 1), (0, 0), {"conv_pointwise_loop": False}),
         ((3, 4, 7, 7), (8, 4, 3, 3), (1, 1), {}),
         ((3, 8, 3, 3), (16, 8, 3, 3), (1, 1), {}),
         ((3, 4, 7, 7), (8, 4, 3, 3), (1, 1), {"conv_blocked": False, "conv_direct_batch": False}),
         ((2, 3, 9, 9), (5, 3, 3, 3), (0, 0), {"conv_blocked": False, "conv_im2col_compiled": False}),
         ((0, 4, 7, 7), (8, 4, 3, 3), (1, 1), {})]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op", ["conv2d", "conv2d_act"])
def test_a_strided_output_gets_the_c_ordered_outputs_values(op, case, dtype):
    xs, ws, pad, t = CASES[case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    shape = (xs[0], ws[0], xs[2] + 2 * pad[0] - ws[2] + 1, xs[3] + 2 * pad[1] - ws[3] + 1)
    run = run_conv2d if op == "conv2d" else run_conv2d_act
    with la.tuning(**t):
        want = np.empty(shape, dtype)
        run(np, x, w, b, padding=pad, out=want)
        big, part = _part(shape, dtype)
        assert run(np, x, w, b, padding=pad, out=part) is part
        assert np.ascontiguousarray(part).tobytes() == want.tobytes()  # (bit for bit: signed zeros too)
        big2, part2 = _part(shape, dtype)
        bound = kernels.bind(registry.get(op), np, x, w, b, padding=pad, out=part2)
        if bound is not None:
            for _ in range(2):
                bound.fn(x, w, b, out=part2)
            assert np.ascontiguousarray(part2).tobytes() == want.tobytes()
            assert np.isnan(big2[:, :3]).all() and np.isnan(big2[:, 3 + shape[1]:]).all()
        assert np.isnan(big[:, :3]).all() and np.isnan(big[:, 3 + shape[1]:]).all()
