"""expand_dims's and squeeze's ``reshape`` (``kernels/shape_views.py``): the same view as the reference
(``numpy.expand_dims`` / ``numpy.squeeze``: same values, same memory, no copy) over axes given every
way, strided views and empty dims, float32 and float64; the chooser takes it for NumPy arrays unless
``shape_views`` is off; a bound step computes the shape once and returns the same view. reshape's ``method``:
numpy.reshape's values (view or copy), run, bound and switched off."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.ops import registry

RNG = np.random.default_rng(3)
EXPAND = [((2, 3, 5), 2), ((2, 3, 5), -1), ((2, 3, 5), (0, 4)), ((0, 3), 1), ((), 0)]
SQUEEZE = [((2, 1, 5), 1), ((2, 1, 5, 1), None), ((1, 3, 1), (0, -1)), ((0, 1, 4), 1), ((1,), 0)]


def _views(shape, dtype):
    """A C-ordered array and a strided view of the same shape."""
    x = np.array(RNG.standard_normal(shape), dtype)
    big = np.array(RNG.standard_normal(tuple(2 * d for d in shape)), dtype)
    return x, (big[tuple(slice(None, None, 2) for _ in shape)] if shape else big)


def _same_view(got, want, x):
    assert got.shape == want.shape and got.dtype == want.dtype and got.strides == want.strides or got.size <= 1
    np.testing.assert_array_equal(got, want)
    assert x.size == 0 or np.shares_memory(got, x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,cases", [("expand_dims", EXPAND), ("squeeze", SQUEEZE)])
def test_reshape_is_the_references_view(dtype, name, cases):
    op = registry.get(name)
    for shape, axis in cases:
        for x in _views(shape, dtype):
            want = op.kernel(np, x, axis)
            assert kernels.choose(op, np, x, axis=axis).impl.name == "reshape"
            _same_view(op.runner(np, x, axis), want, x)
            bound = kernels.bind(op, np, x, axis=axis)
            assert bound.choice == kernels.choose(op, np, x, axis=axis)
            _same_view(bound.fn(x), want, x)


def test_switched_off_the_reference_runs():
    x = np.ones((2, 1, 3), np.float32)
    with la.tuning(shape_views=False):
        assert kernels.choose("squeeze", np, x, axis=1).impl.name == "reference"
        bound = kernels.bind("squeeze", np, x, axis=1)
        assert bound.choice.impl.name == "reference" and bound.fn(x).shape == (2, 3)


def test_a_compiled_program_binds_it():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    v = la.sym.var("x")
    op = la.CachedOp(la.sym.squeeze(la.sym.relu(la.sym.expand_dims(v, axis=1)), axis=1))
    for _ in range(3):  # (the steps bind at the second run)
        got = op(la.array(x))
    np.testing.assert_array_equal(got.asnumpy(), np.maximum(x, 0))
    labels = [str(b.choice) for p, _ in op.explain(la.array(x)).programs for b in p.bindings.chosen().values()]
    assert {"expand_dims[reshape]", "squeeze[reshape]"} <= set(labels)


RESHAPE = [((1, 32, 1, 1), (-1,)), ((1, 32, 1, 1), (-1, 32)), ((2, 3, 4), (6, 4)), ((2, 3, 4), (4, -1, 2)),
           ((0, 3, 4), (-1, 12)), ((3, 0), (0, 5)), ((), (1, 1))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reshape_method_is_numpy_reshape(dtype):
    """reshape[method]: numpy.reshape's values (its view of a C-ordered array, its copy of a strided view),
    run, bound and switched off."""
    op = registry.get("reshape")
    for shape, to in RESHAPE:
        for x in _views(shape, dtype):
            want = np.reshape(x, to)
            assert kernels.choose(op, np, x, shape=to).impl.name == "method"
            for got in (op.runner(np, x, to), kernels.bind(op, np, x, shape=to).fn(x)):
                assert got.shape == want.shape and got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
                assert np.shares_memory(got, x) == np.shares_memory(want, x) or x.size == 0
            with la.tuning(shape_views=False):
                bound = kernels.bind(op, np, x, shape=to)
                assert bound.choice.impl.name == "reference"
                np.testing.assert_array_equal(bound.fn(x), want)
