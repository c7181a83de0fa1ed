"""Registry-driven checks of the core ops: NumPy values and dtypes, deferred recording,
finite-difference gradients."""
from __future__ import annotations

from .checks import family_tests

FAMILY = ("core",)


test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(FAMILY)
