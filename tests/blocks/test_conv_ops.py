"""Registry-driven checks of the conv-family ops (lazyarray/ops/conv.py): NumPy values and
dtypes, deferred recording, finite-difference gradients in float64."""
from __future__ import annotations

import numpy as np
import pytest
from ops.checks import family_tests

import lazyarray as la

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("conv",))


@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
@pytest.mark.parametrize("call,fragments", [
    (lambda: la.nn.conv2d(la.ones((1, 3, 5, 5)), la.ones((2, 4, 3, 3))), ["conv2d:", "3 channels", "expects 4"]),
    (lambda: la.nn.conv2d(la.ones((3, 5, 5)), la.ones((2, 3, 3, 3))), ["conv2d:", "4-D", "[3,5,5]"]),
    (lambda: la.nn.conv2d(la.ones((1, 3, 2, 2)), la.ones((2, 3, 3, 3))), ["conv2d:", "does not fit"]),
    (lambda: la.nn.max_pool2d(la.ones((1, 1, 1, 1)), kernel=(2, 2)), ["max_pool2d:", "does not fit"]),
    (lambda: la.nn.batch_norm(la.ones((2, 3)), *[la.ones((4,))] * 4), ["batch_norm:", "gamma [4]", "(3,)"]),
], ids=["channels", "rank", "kernel-too-big", "pool-too-big", "bn-channels"])
def test_shape_errors_name_the_op_and_the_fix(call, fragments, deferred):
    with la.deferred(deferred), pytest.raises(la.ShapeError) as info:
        call()
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))


def test_flatten_is_generic_over_the_batch_size():
    x = la.sym.var("x", shape=(None, 3, 4))
    y = la.sym.nn.flatten(x) if hasattr(la.sym, "nn") else None
    if y is None:
        pytest.skip("la.sym has no nn namespace")
    assert y.infer_shape(x=(7, 3, 4))[1] == [(7, 12)]


def test_max_pool_gradient_goes_to_the_first_maximum_on_ties():
    x = la.array(np.ones((1, 1, 2, 2), np.float32))
    x.attach_grad()
    with la.autograd.record():
        y = la.nn.max_pool2d(x, kernel=(2, 2))
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy()[0, 0], [[1, 0], [0, 0]])
