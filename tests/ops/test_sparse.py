"""Sparse kernels against the dense computation.

Every op with a sparse kernel runs on random csr / row_sparse inputs (with empty rows, empty
matrices and all-zero matrices) and must give the dense result, the storage type its rule
promises, no fallback warning, and never build a dense copy of a sparse input (``todense``
is made to raise while the kernel runs). Deferred compute gives the same values and stypes.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import lazyarray as la
from lazyarray.storage import CSR, RowSparse

from .cases import rng_for


def sparse_dense(rng, shape, dtype="float32", density=0.3, empty_rows=True):
    """A random dense matrix with ~density non-zeros and (if it has rows) some empty rows."""
    x = rng.standard_normal(shape) * (rng.random(shape) < density)
    if empty_rows and shape and shape[0] > 2:
        x[rng.choice(shape[0], size=shape[0] // 3, replace=False)] = 0
    if np.dtype(dtype).kind in "iu":
        x = np.round(x * 3)
    return x.astype(dtype)


# Shapes every case is run on: random with empty rows, one row/column, empty, all zero.
SHAPES = [("random", (7, 5), 0.35), ("wide", (3, 11), 0.3), ("one", (1, 1), 1.0),
          ("no-rows", (0, 5), 0.3), ("no-cols", (4, 0), 0.3), ("all-zero", (5, 4), 0.0)]


@dataclass(frozen=True)
class SparseCase:
    """``make(rng, x_dense, dtype) -> (args, params)``: args hold "csr"/"rsp" markers replaced by
    the sparse input; ``ref`` is the NumPy result on dense values; ``stype`` the expected storage."""

    fn: Callable
    make: Callable
    ref: Callable
    stype: str
    dtypes: tuple = ("float32", "float64")


def _x(marker="s"):
    return lambda rng, x, dt: ((marker,), {})


def _unary(fn, npfn, stype):
    return SparseCase(fn, _x(), lambda x: npfn(x), stype)


def _with_dense(shape_of, first=True, **params):
    def make(rng, x, dt):
        d = rng.standard_normal(shape_of(x.shape)).astype(dt) + 0.5
        return (("s", d) if first else (d, "s")), dict(params)

    return make


def _with_scalar(v):
    return lambda rng, x, dt: (("s", v), {})


def _same_sparse(rng, x, dt):
    return ("s", ("sparse", sparse_dense(rng, x.shape, dt))), {}


def _params(**p):
    return lambda rng, x, dt: (("s",), dict(p))


UNARY = {
    "relu": (la.relu, lambda x: np.maximum(x, 0)),
    "abs": (la.abs, np.abs),
    "sign": (la.sign, np.sign),
    "negative": (la.negative, np.negative),
    "square": (la.square, np.square),
    "sin": (la.sin, np.sin),
    "tanh": (la.tanh, np.tanh),
}

CSR_CASES = {
    **{f"{k}": _unary(f, g, "csr") for k, (f, g) in UNARY.items()},
    "sqrt": SparseCase(lambda x: la.sqrt(la.abs(x)), _x(), lambda x: np.sqrt(np.abs(x)), "csr"),
    "quadratic-c0": SparseCase(la.quadratic, _params(a=2.0, b=-1.0), lambda x, a, b: a * x * x + b * x, "csr"),
    "cast": SparseCase(la.cast, _params(dtype="float64"), lambda x, dtype: x.astype(dtype), "csr"),
    "multiply-scalar": SparseCase(la.multiply, _with_scalar(2.5), lambda x, s: x * s, "csr",
                                  ("float32", "float64", "int64")),
    "scalar-multiply": SparseCase(lambda s, x: la.multiply(x, s) if isinstance(s, float) else la.multiply(s, x),
                                  lambda rng, x, dt: ((-1.5, "s"), {}), lambda s, x: s * x, "csr"),
    "multiply-row": SparseCase(la.multiply, _with_dense(lambda s: (1, s[1])), np.multiply, "csr"),
    "multiply-col-first": SparseCase(la.multiply, _with_dense(lambda s: (s[0], 1), first=False),
                                     np.multiply, "csr"),
    "multiply-same": SparseCase(la.multiply, _with_dense(lambda s: s), np.multiply, "csr"),
    "add-csr": SparseCase(la.add, _same_sparse, np.add, "csr", ("float32", "float64", "int64")),
    "subtract-csr": SparseCase(la.subtract, _same_sparse, np.subtract, "csr"),
    "add-dense": SparseCase(la.add, _with_dense(lambda s: s), np.add, "default"),
    "subtract-dense-first": SparseCase(la.subtract, _with_dense(lambda s: s, first=False), np.subtract, "default"),
    "dot-dense": SparseCase(la.dot, _with_dense(lambda s: (s[1], 3)), np.dot, "default"),
    "dot-vector": SparseCase(la.dot, _with_dense(lambda s: (s[1],)), np.dot, "default"),
    "dot-transpose_a": SparseCase(la.dot, _with_dense(lambda s: (s[0], 3), transpose_a=True),
                                  lambda a, b, transpose_a: a.T @ b, "row_sparse"),
    **{f"sum-axis={ax}-keepdims={kd}": SparseCase(la.sum, _params(axis=ax, keepdims=kd),
                                                  lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
                                                  "default", ("float32", "float64", "int32"))
       for ax in (None, 0, 1, -1, (0, 1)) for kd in (False, True)},
    "rows-1:4": SparseCase(lambda x: x[1:4], _x(), lambda x: x[1:4], "csr"),
    "rows-2:": SparseCase(lambda x: x[2:, :], _x(), lambda x: x[2:, :], "csr"),
    "rows-empty": SparseCase(lambda x: x[5:2], _x(), lambda x: x[5:2], "csr"),
    "rows--2:": SparseCase(lambda x: x[-2:, ...], _x(), lambda x: x[-2:, ...], "csr"),
    "transpose": SparseCase(lambda x: x.T, _x(), lambda x: x.T, "csr"),
    "to-row_sparse": SparseCase(lambda x: x.tostype("row_sparse"), _x(), lambda x: x, "row_sparse"),
    "to-csr": SparseCase(lambda x: x.tostype("csr"), _x(), lambda x: x, "csr"),
}

RSP_CASES = {
    **{f"{k}": _unary(f, g, "row_sparse") for k, (f, g) in UNARY.items()},
    "quadratic-c0": SparseCase(la.quadratic, _params(a=1.0, b=3.0), lambda x, a, b: a * x * x + b * x, "row_sparse"),
    "multiply-scalar": SparseCase(la.multiply, _with_scalar(3.0), lambda x, s: x * s, "row_sparse"),
    "multiply-row": SparseCase(la.multiply, _with_dense(lambda s: (s[1],)), np.multiply, "row_sparse"),
    "add-rsp": SparseCase(la.add, _same_sparse, np.add, "row_sparse", ("float32", "float64", "int64")),
    "subtract-rsp": SparseCase(la.subtract, _same_sparse, np.subtract, "row_sparse"),
    "add-dense": SparseCase(la.add, _with_dense(lambda s: s, first=False), np.add, "default"),
    "subtract-dense": SparseCase(la.subtract, _with_dense(lambda s: s), np.subtract, "default"),
    "to-csr": SparseCase(lambda x: x.tostype("csr"), _x(), lambda x: x, "csr"),
}


@pytest.fixture
def no_densify(monkeypatch):
    """Inside ``with no_densify():`` any dense copy of a sparse value raises."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        def boom(self, xp=np):
            raise AssertionError(f"a sparse kernel densified its {self.stype} input")

        with monkeypatch.context() as m:
            m.setattr(CSR, "todense", boom)
            m.setattr(RowSparse, "todense", boom)
            yield

    return guard


def _materialize_args(case, stype, shape, density, dtype, rng):
    xd = sparse_dense(rng, shape, dtype, density)
    args, params = case.make(rng, xd, dtype)
    dense_args, la_args = [], []
    for a in args:
        if isinstance(a, str) and a == "s":
            dense_args.append(xd)
            la_args.append(la.array(xd).tostype(stype))
        elif isinstance(a, tuple) and a and a[0] == "sparse":
            dense_args.append(a[1])
            la_args.append(la.array(a[1]).tostype(stype))
        elif isinstance(a, np.ndarray):
            dense_args.append(a)
            la_args.append(la.array(a))
        else:
            dense_args.append(a)
            la_args.append(a)
    return dense_args, la_args, params


def _run_case(case, name, stype, no_densify):
    for dtype in case.dtypes:
        for label, shape, density in SHAPES:
            rng = rng_for("sparse", stype, name, dtype, label)
            dense_args, la_args, params = _materialize_args(case, stype, shape, density, dtype, rng)
            where = f"{stype} {name} [{label} {shape} {dtype}]"
            with warnings.catch_warnings():
                warnings.simplefilter("error", la.StorageFallbackWarning)
                with no_densify():
                    out = case.fn(*la_args, **params)
                with la.deferred():
                    lazy = case.fn(*la_args, **params)
                    lazy_stype = lazy.stype
            with np.errstate(all="ignore"):
                want = np.asarray(case.ref(*dense_args, **params))
            assert out.stype == case.stype, f"{where}: stype {out.stype}, rule promises {case.stype}"
            assert lazy_stype == case.stype, f"{where}: recorded stype {lazy_stype}"
            got = out.asnumpy()
            assert got.shape == want.shape, f"{where}: shape {got.shape} vs {want.shape}"
            assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} vs {want.dtype}"
            assert out.shape == want.shape and out.dtype == want.dtype, where
            tol = 1e-5 if got.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=where)
            with warnings.catch_warnings():
                warnings.simplefilter("error", la.StorageFallbackWarning)
                np.testing.assert_array_equal(lazy.asnumpy(), got, err_msg=f"{where}: deferred vs eager")
            _check_canonical(out, where)


def _check_canonical(out, where):
    v = out._value
    if isinstance(v, CSR):
        assert v.indptr.shape == (v.shape[0] + 1,) and v.indptr[0] == 0 and v.indptr[-1] == v.data.shape[0], where
        assert np.all(np.diff(v.indptr) >= 0), where
        for i in range(v.shape[0]):
            cols = v.indices[v.indptr[i]:v.indptr[i + 1]]
            assert np.all(np.diff(cols) > 0), f"{where}: row {i} columns not sorted/unique"
    elif isinstance(v, RowSparse):
        assert np.all(np.diff(v.indices) > 0), f"{where}: row indices not sorted/unique"
        assert v.data.shape == (v.indices.shape[0],) + v.shape[1:], where


@pytest.mark.parametrize("name", sorted(CSR_CASES))
def test_csr_kernel_matches_dense(name, no_densify):
    _run_case(CSR_CASES[name], name, "csr", no_densify)


@pytest.mark.parametrize("name", sorted(RSP_CASES))
def test_row_sparse_kernel_matches_dense(name, no_densify):
    _run_case(RSP_CASES[name], name, "row_sparse", no_densify)


def test_csr_dot_transpose_a_stores_only_the_touched_rows():
    x = np.zeros((4, 6), np.float32)
    x[0, 1], x[2, 4], x[3, 1] = 1.0, 2.0, 3.0
    g = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = la.dot(la.array(x).tostype("csr"), la.array(g), transpose_a=True)
    assert out.stype == "row_sparse"
    assert out.indices.asnumpy().tolist() == [1, 4]
    np.testing.assert_allclose(out.data.asnumpy(), (x.T @ g)[[1, 4]])


def test_csr_row_slice_shares_the_stored_values():
    x = la.array(sparse_dense(rng_for("slice"), (8, 5))).tostype("csr")
    y = x[2:6]
    assert np.shares_memory(y._value.data, x._value.data) or y._value.data.size == 0


def test_quadratic_with_c_falls_back_to_dense():
    x = la.array(sparse_dense(rng_for("q"), (4, 3))).tostype("csr")
    with pytest.warns(la.StorageFallbackWarning, match="quadratic"):
        y = la.quadratic(x, a=1.0, c=1.0)
    assert y.stype == "default"


def test_multiply_that_grows_the_shape_falls_back():
    x = la.array(sparse_dense(rng_for("grow"), (4, 3))).tostype("csr")
    with pytest.warns(la.StorageFallbackWarning, match=r"multiply: .*\(csr, default\)"):
        y = la.multiply(x, la.ones((2, 4, 3)))
    assert y.stype == "default" and y.shape == (2, 4, 3)


def test_take_sparse_grad_kernel_matches_dense_take_grad():
    rng = rng_for("take_grad")
    like = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([[4, 0], [4, -1]])
    g = rng.standard_normal((2, 2, 3)).astype(np.float32)
    dense = la.take_grad(la.array(g), la.array(like), la.array(idx))
    sparse = la.take_grad(la.array(g), la.array(like), la.array(idx), sparse=True)
    assert dense.stype == "default" and sparse.stype == "row_sparse"
    assert sparse.indices.asnumpy().tolist() == [0, 4, 5]
    np.testing.assert_allclose(sparse.asnumpy(), dense.asnumpy(), rtol=1e-6)
    with pytest.raises(la.ParamValueError, match="axis=0"):
        la.take(la.array(like), la.array(idx), axis=1, sparse_grad=True)
