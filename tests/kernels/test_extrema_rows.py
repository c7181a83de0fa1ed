"""max's and min's ``rows`` (``kernels/extrema_rows.py``): a compiled step's reduction of a C-ordered float
array over its last axis as one compiled loop, bit for bit ``np.maximum.reduce`` / ``np.minimum.reduce`` (NaNs,
infinities, signed zeros: a row with zeros of both signs hands the call to the ufunc), keepdims, C-ordered views,
empty dims; what it does not take (other axes, strided views, integers, a shape not bound) runs the ufunc; the
tuning switch ``extremum_rows`` off binds ``ufunc``."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import extrema, extrema_rows

pytest.importorskip("numba")

RNG = np.random.default_rng(12)
UFUNCS = {"max": np.maximum, "min": np.minimum}


def _want(name, x, keepdims):
    return UFUNCS[name].reduce(x, (x.ndim - 1,), None, None, keepdims)


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_rows_equal_the_ufunc_bit_for_bit(monkeypatch, dtype, name, keepdims):
    monkeypatch.setattr(la.config, "jit", True)
    big = (RNG.standard_normal((6, 16, 7)) * 3).astype(dtype)
    big[0, 0, :3] = [np.nan, 1.0, -1.0]  # NaN first
    big[0, 1, -1] = np.nan  # NaN last
    big[0, 2] = [np.inf, -np.inf] + [0.0] * 5
    big[0, 3] = -0.0  # a row of -0.0 alone
    big[0, 4] = 0.0
    big[0, 5, :2] = [-np.inf, -np.inf]
    for x in (big, big[1:4], big[:, 3:9], big[0], big[0, 0], big[:0], big[:, :0], big[..., :1]):
        want = _want(name, x, keepdims)
        bound = kernels.bind(name, np, x, keepdims=keepdims, axis=-1)
        rows = x.flags.c_contiguous
        assert str(bound.choice) == (f"{name}[rows]" if rows else f"{name}[ufunc]")
        _same(np.asarray(bound.fn(x)), want)
        _same(np.asarray(extrema.ROWS[name].run(np, x, -1, keepdims)), want)


@pytest.mark.parametrize("name", ["max", "min"])
def test_a_row_with_zeros_of_both_signs_takes_the_ufunc(monkeypatch, name):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.ones((3, 4), np.float64) * (1 if name == "min" else -1)
    x[1, 1], x[1, 2] = -0.0, 0.0  # (the extremum a zero, both signs in the row)
    assert extrema_rows.run(name, x, (1,), False) is None
    calls = []
    fn = extrema_rows.bound(name, x, False, lambda x: calls.append(x) or _want(name, x, False))
    _same(fn(x), _want(name, x, False))
    assert len(calls) == 1
    x[1, 2] = -0.0  # zeros of one sign: the loop's result
    _same(fn(x), _want(name, x, False))
    assert len(calls) == 1


def test_what_it_does_not_take_runs_the_ufunc(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    assert str(kernels.bind("max", np, x, axis=0).choice) == "max[ufunc]"  # (not the last axis)
    assert str(kernels.bind("max", np, x, axis=None).choice) == "max[ufunc]"
    assert str(kernels.bind("min", np, x.astype(np.int32), axis=1).choice) == "min[ufunc]"
    assert str(kernels.bind("min", np, np.zeros((3, 0)), axis=1).choice) == "min[ufunc]"  # (empty: the error)
    calls = []
    fn = extrema_rows.bound("max", x, False, lambda x: calls.append(x) or _want("max", x, False))
    for other in (x[:2], x.astype(np.float64), np.asfortranarray(x)):  # another shape, dtype, order
        _same(np.ascontiguousarray(fn(other)), _want("max", other, False))
    assert len(calls) == 3
    with la.tuning(extremum_rows=False):
        bound = kernels.bind("max", np, x, axis=-1)
        assert str(bound.choice) == "max[ufunc]"
        _same(bound.fn(x), _want("max", x, False))
    monkeypatch.setattr(la.config, "jit", False)
    assert str(kernels.bind("max", np, x, axis=-1).choice) == "max[ufunc]"
    _same(extrema.ROWS["max"].run(np, x, -1, False), _want("max", x, False))
