"""max's and min's ``ufunc`` (``kernels/extrema.py``): ``np.maximum.reduce`` / ``np.minimum.reduce``, the
values of the reference (``numpy.max`` / ``numpy.min``) bit for bit: NaNs, signed zeros, axes given
every way, keepdims, strided views, empty dims (and the error of an empty reduction), float32 and
float64 and integers; the chooser takes it for NumPy arrays unless ``extremum_ufunc`` is off; a bound
step normalizes the axes once."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import extrema_rows
from lazyarray.ops import registry
from lazyarray.ops.reduce import reduce_axes

RNG = np.random.default_rng(4)
CASES = [((1, 16, 6), -1, False), ((2, 3, 5), (0, 2), True), ((2, 3, 5), None, False), ((4,), 0, True),
         ((0, 3), 1, False), ((3, 0, 2), (0, 2), True)]


def _arrays(shape, dtype):
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    if x.dtype.kind == "f" and x.size > 2:
        x.flat[0], x.flat[1], x.flat[-1] = np.nan, -0.0, 0.0
    big = np.zeros(tuple(2 * d for d in shape), dtype)
    view = big[tuple(slice(None, None, 2) for _ in shape)]
    view[...] = x
    return x, view


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_ufunc_equals_the_reference_bit_for_bit(dtype, name, case):
    op = registry.get(name)
    shape, axis, keepdims = case
    for x in _arrays(shape, dtype):
        assert kernels.choose(op, np, x, axis=axis, keepdims=keepdims).impl.name == "ufunc"
        bound = kernels.bind(op, np, x, axis=axis, keepdims=keepdims)
        rows = extrema_rows.applies(x, reduce_axes(axis, x.ndim, name), True)  # (kernels/extrema_rows.py's loop)
        assert bound.choice.impl.name == ("rows" if rows else "ufunc")
        try:
            want = op.kernel(np, x, axis=axis, keepdims=keepdims)
        except ValueError:  # an empty reduction: the same error
            with pytest.raises(ValueError):
                op.runner(np, x, axis, keepdims)
            with pytest.raises(ValueError):
                bound.fn(x)
            continue
        for got in (op.runner(np, x, axis, keepdims), bound.fn(x)):
            assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
            np.testing.assert_array_equal(got, want)


def test_switched_off_the_reference_runs():
    x = np.arange(6.0).reshape(2, 3)
    with la.tuning(extremum_ufunc=False):
        assert kernels.choose("max", np, x, axis=1).impl.name == "reference"
        bound = kernels.bind("max", np, x, axis=1)
        assert bound.choice.impl.name == "reference"
        np.testing.assert_array_equal(bound.fn(x), [2.0, 5.0])


def test_an_eager_call_names_it():
    x = RNG.standard_normal((2, 7)).astype(np.float32)
    with la.profile() as prof:
        y = la.max(la.array(x), axis=1)
    np.testing.assert_array_equal(y.asnumpy(), x.max(axis=1))
    assert {e.impl for e in prof.events if e.name.endswith("max")} == {"ufunc"}
