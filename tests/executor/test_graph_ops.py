"""Registry-driven checks of the ops that run sub-graphs (``call``, ``fused``): NumPy values and
dtypes, deferred recording, finite-difference gradients."""
from __future__ import annotations

from ops.checks import family_tests

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("graph",))
