"""Registry-driven checks of the shape ops: NumPy values and dtypes, deferred recording,
finite-difference gradients."""
from __future__ import annotations

import pytest

from .cases import case_params, grad_params
from .checks import check_deferred, check_forward, check_gradient

FAMILY = ("shape",)


@pytest.mark.parametrize("name,dtype", case_params(FAMILY))
def test_forward_matches_numpy(name, dtype):
    check_forward(name, dtype)


@pytest.mark.parametrize("name,dtype", case_params(FAMILY))
def test_deferred_matches_eager(name, dtype):
    check_deferred(name, dtype)


@pytest.mark.parametrize("name", grad_params(FAMILY))
def test_gradient_matches_finite_differences(name):
    check_gradient(name)
