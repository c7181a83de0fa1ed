"""Registry-driven checks of the scatter ops against loop references: NumPy values and dtypes,
deferred recording (the ops have no gradient)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("scatter",))


def test_scatter_leaves_its_input_unchanged():
    x = np.zeros((2, 3), np.float32)
    y = la.scatter_along_axis(la.array(x), la.array(np.array([[2], [0]])), la.array(np.ones((2, 1), np.float32)),
                              axis=1)
    np.testing.assert_array_equal(y.asnumpy(), [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(x, 0)


def test_scatter_nd_refuses_mismatched_updates():
    with pytest.raises(la.ShapeError, match="indices.shape"):
        la.scatter_nd(la.array(np.zeros((4, 3))), la.array(np.array([[0], [1]])), la.array(np.zeros((2, 4))))
