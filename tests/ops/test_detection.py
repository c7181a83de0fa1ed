"""Registry-driven checks of the detection ops (``non_max_suppression``) against a loop reference:
values, dtypes, deferred recording."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("detection",))


def test_non_max_suppression_refuses_mismatched_boxes_and_scores():
    with pytest.raises(la.ShapeError, match="boxes must be"):
        la.non_max_suppression(la.array(np.zeros((1, 5, 4))), la.array(np.zeros((1, 2, 4))))
