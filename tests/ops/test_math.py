"""Registry-driven checks of the math ops (Array API functions): NumPy values and dtypes,
deferred recording, finite-difference gradients."""
from __future__ import annotations

from .checks import family_tests

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("math",))
