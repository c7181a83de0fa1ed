"""``la`` as an Array API (2024.12) namespace: dtype objects, constants, dtype functions, array
protocols and operators, the standard's spellings and the namespace's coverage of the standard."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np
import pytest

import lazyarray as la


def test_dtype_objects_are_numpy_dtypes_and_do_not_shadow_builtins_in_the_package():
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float32", "float64"):
        assert getattr(la, name) == np.dtype(name)
    assert la.asarray([1, 2], dtype=la.int8).dtype == la.int8
    import lazyarray.array_api as mod
    import lazyarray.ndarray as nd
    assert "bool" not in vars(nd) and mod.builtins.bool is builtins.bool


def test_array_namespace_version_and_info():
    x = la.ones((2,))
    assert x.__array_namespace__() is la and x.__array_namespace__(api_version="2024.12") is la
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")
    assert la.__array_api_version__ == "2024.12"
    info = la.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == la.float32 == la.asarray([1.5]).dtype
    assert info.default_dtypes()["integral"] == la.asarray([1]).dtype
    assert set(info.dtypes(kind="integral").values()) == {la.int8, la.int16, la.int32, la.int64, la.uint8,
                                                          la.uint16, la.uint32, la.uint64}
    assert la.cpu(0) in info.devices() and info.default_device() == la.cpu(0)


def test_constants():
    assert (la.e, la.pi, la.inf, la.newaxis) == (math.e, math.pi, math.inf, None)
    assert math.isnan(la.nan)
    assert la.ones((2, 3))[la.newaxis].shape == (1, 2, 3)


@pytest.mark.parametrize("a,b", [("int8", "uint8"), ("int32", "float32"), ("uint16", "int64"), ("bool", "bool"),
                                 ("float32", "float64"), ("uint64", "uint8")])
def test_result_type_follows_numpy_promotion(a, b):
    assert la.result_type(np.dtype(a), la.asarray(np.zeros(1, b))) == np.result_type(a, b)


def test_result_type_with_python_scalars_is_weak():
    assert la.result_type(la.int8, 1) == la.int8 and la.result_type(la.float32, 1.0) == la.float32
    with pytest.raises(TypeError):
        la.result_type(1, 2.0)


@pytest.mark.parametrize("src,dst,want", [("int8", "int16", True), ("int16", "int8", False),
                                          ("uint8", "int16", True), ("int8", "uint8", False),
                                          ("int64", "float64", False), ("float32", "float64", True),
                                          ("bool", "int8", False), ("float64", "float64", True)])
def test_can_cast_follows_the_standard_not_numpy(src, dst, want):
    assert la.can_cast(np.dtype(src), np.dtype(dst)) is want


def test_isdtype_kinds():
    assert la.isdtype(la.int8, "signed integer") and not la.isdtype(la.uint8, "signed integer")
    assert la.isdtype(la.uint8, ("bool", "integral")) and la.isdtype(la.float64, "numeric")
    assert not la.isdtype(la.bool, "numeric") and la.isdtype(la.float32, la.float32)
    with pytest.raises(ValueError, match="unknown kind"):
        la.isdtype(la.float32, "floating")


def test_iinfo_finfo_match_numpy():
    assert la.iinfo(la.int16).max == np.iinfo(np.int16).max and la.iinfo(la.asarray([1])).bits == 64
    assert la.finfo(la.float32).eps == np.finfo(np.float32).eps
    with pytest.raises(la.DTypeError):
        la.iinfo(la.float32)


def test_format_tolist_and_scalar_protocols():
    loss = la.asarray(0.123456)
    assert f"{loss:.3f}" == "0.123" and f"{la.asarray([2.5]):.1f}" == "2.5"
    assert format(la.asarray([1, 2])) == repr(la.asarray([1, 2]))
    with pytest.raises(TypeError, match="one element"):
        f"{la.asarray([1.0, 2.0]):.2f}"
    assert la.asarray([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]] and la.asarray(3).tolist() == 3
    assert complex(la.asarray(2.0)) == 2 + 0j and int(la.asarray(7)) == 7 and operator.index(la.asarray(3)) == 3


_OPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift, operator.floordiv,
        operator.mod]


@pytest.mark.parametrize("op", _OPS, ids=lambda f: f.__name__)
def test_integer_operators_match_numpy(op):
    a, b = np.array([[5, -6, 7], [0, 3, 12]]), np.array([1, 2, 3])
    for x, y in ((la.asarray(a), la.asarray(b)), (la.asarray(a), 2), (7, la.asarray(b))):
        want = op(np.asarray(x) if isinstance(x, la.NDArray) else x, np.asarray(y) if isinstance(y, la.NDArray) else y)
        got = op(x, y)
        np.testing.assert_array_equal(got.asnumpy(), want)
        assert got.dtype == want.dtype
    z = la.asarray(a)
    z2 = op(z, la.asarray(b)).asnumpy()
    getattr(z, f"__i{op.__name__.strip('_')}__")(la.asarray(b))
    np.testing.assert_array_equal(z.asnumpy(), z2)


def test_invert_and_bool_operators_and_float_floordiv_mod():
    m = la.asarray([True, False])
    np.testing.assert_array_equal((~m).asnumpy(), [False, True])
    np.testing.assert_array_equal((m & la.asarray([True, True])).asnumpy(), [True, False])
    np.testing.assert_array_equal((~la.asarray([0, 5])).asnumpy(), [-1, -6])
    x = la.asarray(np.array([-3.5, 2.25]))
    np.testing.assert_array_equal((x // 2).asnumpy(), np.array([-3.5, 2.25]) // 2)
    np.testing.assert_array_equal((x % 2).asnumpy(), np.array([-3.5, 2.25]) % 2)
    np.testing.assert_array_equal((+x).asnumpy(), x.asnumpy())


def test_operators_record_under_deferred_compute():
    x = la.asarray([6, 7, 8])
    with la.deferred():
        y = (x & 3) | (x >> 1) ^ (x % 5) // 2
    assert y.is_lazy
    v = np.array([6, 7, 8])
    np.testing.assert_array_equal(y.asnumpy(), (v & 3) | (v >> 1) ^ (v % 5) // 2)


def test_mT_to_device_and_device():
    x = la.asarray(np.arange(24.0).reshape(2, 3, 4))
    np.testing.assert_array_equal(x.mT.asnumpy(), np.swapaxes(np.arange(24.0).reshape(2, 3, 4), -1, -2))
    np.testing.assert_array_equal(la.matrix_transpose(x).asnumpy(), x.mT.asnumpy())
    y = x.to_device(la.cpu(1))
    assert y.device == la.cpu(1) and x.device == la.cpu(0)
    with pytest.raises(la.ShapeError):
        _ = la.asarray([1.0]).mT


def test_standard_spellings_are_the_numpy_functions():
    assert la.permute_dims is la.transpose and la.pow is la.power
    # la.concat is written out (it takes the standard's axis=None); la.concatenate is the registry op's
    np.testing.assert_array_equal(la.concat([la.ones((2, 2)), la.zeros(3)], axis=None).asnumpy(),
                                  np.concat([np.ones(4), np.zeros(3)]))
    with pytest.raises(la.ParamError, match="axis"):
        la.concatenate([la.ones((2, 2)), la.zeros(3)], axis=None)
    a, b = np.ones((2, 3)), np.zeros((1, 3))
    np.testing.assert_array_equal(la.concat([la.asarray(a), la.asarray(b)], axis=0).asnumpy(), np.concat([a, b]))
    np.testing.assert_array_equal(la.permute_dims(la.asarray(np.ones((2, 3, 4))), (2, 0, 1)).shape, (4, 2, 3))
    # la.tile is numpy.tile (the tiling op, PyTorch's Tensor.repeat); la.repeat is numpy.repeat
    np.testing.assert_array_equal(la.tile(la.asarray(a), (2, 1)).asnumpy(), np.tile(a, (2, 1)))
    c = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(la.repeat(la.asarray(c), 2).asnumpy(), np.repeat(c, 2))
    np.testing.assert_array_equal(la.repeat(la.asarray(c), la.asarray([1, 0, 2]), axis=1).asnumpy(),
                                  np.repeat(c, [1, 0, 2], axis=1))
    np.testing.assert_array_equal(la.asarray(c).repeat(2, 1).asnumpy(), np.tile(c, (2, 1)))  # the method tiles
    with pytest.raises(TypeError, match="la.tile"):
        la.repeat(la.asarray(c), 2, 2)  # the old (PyTorch) spelling names the fix
    with la.deferred():
        lazy = la.repeat(la.asarray(c), 3, axis=0)
    assert lazy.is_lazy and lazy.shape == (6, 3)
    np.testing.assert_array_equal(lazy.asnumpy(), np.repeat(c, 3, axis=0))
    assert callable(la.sym.variance) and la.sym.var("x").list_inputs() == ["x"]


def test_asarray_and_astype_copy_semantics():
    x = la.asarray([1.0, 2.0])
    assert la.asarray(x) is x and la.asarray(x, copy=True) is not x
    assert la.asarray(x, dtype=la.float64).dtype == la.float64
    with pytest.raises(ValueError, match="copy=False"):
        la.asarray(x, dtype=la.float64, copy=False)
    assert la.astype(x, la.float32, copy=False) is x and la.astype(x, la.int32).dtype == la.int32


def test_creation_functions_match_numpy():
    np.testing.assert_array_equal(la.eye(3, 4, k=-1, dtype=la.int32).asnumpy(), np.eye(3, 4, k=-1, dtype=np.int32))
    np.testing.assert_allclose(la.linspace(-1, 2, 7).asnumpy(), np.linspace(-1, 2, 7).astype(np.float32))
    np.testing.assert_allclose(la.linspace(0, 1, 4, endpoint=False, dtype=la.float64).asnumpy(),
                               np.linspace(0, 1, 4, endpoint=False))
    e = la.empty((2, 3), dtype=la.int8)
    assert e.shape == (2, 3) and e.dtype == la.int8
    assert la.empty_like(e).dtype == la.int8 and la.empty_like(e, dtype=la.float64).dtype == la.float64
    src = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(la.from_dlpack(src).asnumpy(), src)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_and_broadcast_arrays_match_numpy(indexing):
    a, b, c = np.arange(3.0), np.arange(4.0), np.arange(2.0)
    got = la.meshgrid(la.asarray(a), la.asarray(b), la.asarray(c), indexing=indexing)
    for g, w in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
        np.testing.assert_array_equal(g.asnumpy(), w)
    got = la.broadcast_arrays(la.asarray(np.ones((3, 1))), la.asarray(np.arange(4.0)))
    for g, w in zip(got, np.broadcast_arrays(np.ones((3, 1)), np.arange(4.0))):
        np.testing.assert_array_equal(g.asnumpy(), w)


def test_moveaxis_unstack_vecdot_match_numpy():
    x = np.arange(24.0).reshape(2, 3, 4)
    for src, dst in ((0, -1), ((0, 1), (2, 0)), (-1, 1)):
        np.testing.assert_array_equal(la.moveaxis(la.asarray(x), src, dst).asnumpy(), np.moveaxis(x, src, dst))
    for axis in (0, 1, -1):
        parts = la.unstack(la.asarray(x), axis=axis)
        for p, w in zip(parts, np.unstack(x, axis=axis)):
            np.testing.assert_array_equal(p.asnumpy(), w)
    np.testing.assert_array_equal(la.vecdot(la.asarray(x), la.asarray(x)).asnumpy(), np.vecdot(x, x))


def test_new_functions_record_lazily_and_compile():
    x = la.asarray(np.array([[3.0, -1.0, 2.0], [0.5, 5.0, -4.0]]))
    with la.deferred():
        y = la.sort(la.abs(la.floor(x * 2)), axis=1, descending=True)
        z = la.cumulative_sum(la.flip(y, axis=0), axis=1)
    assert z.is_lazy and z.static_shape == (2, 3)
    v = np.sort(np.abs(np.floor(x.asnumpy() * 2)), axis=1)[:, ::-1]
    np.testing.assert_array_equal(z.asnumpy(), np.cumsum(v[::-1], axis=1))
    sym = la.get_symbol(z, inputs={"x": x})
    out = la.CachedOp(la.Symbol.from_json(sym.to_json()))(x)
    np.testing.assert_array_equal(out.asnumpy(), z.asnumpy())


def test_unique_values_has_a_data_dependent_length():
    x = la.asarray([3, 1, 3, 2, 1])
    with la.deferred():
        u = la.unique_values(x)
    assert u.static_shape == (None,)
    np.testing.assert_array_equal(u.asnumpy(), [1, 2, 3])


def test_namespace_covers_the_standards_core_names():
    from benchmarks.array_api_conformance import _strict_names

    pytest.importorskip("array_api_strict")
    names = _strict_names()["core (array_api_strict)"]
    missing = sorted(n for n in names if not hasattr(la, n))
    assert missing == []
    linalg = _strict_names()["linalg"]
    assert sorted(n for n in linalg if not hasattr(la.linalg, n.split(".", 1)[1])) == []


# -- second slice: clip, diff, tensordot, nonzero, unique_*, complex ----------------------------------------
def test_clip_bounds_may_be_missing_scalars_or_arrays_and_keep_x_dtype():
    x = np.array([-3, 0, 2, 9], np.int16)
    np.testing.assert_array_equal(la.clip(la.asarray(x), max=4).asnumpy(), np.clip(x, None, 4))
    np.testing.assert_array_equal(la.clip(la.asarray(x), min=-1).asnumpy(), np.clip(x, -1, None))
    assert la.clip(la.asarray(x)).dtype == np.int16 and la.clip(la.asarray(x), 0, 1).dtype == np.int16
    f = np.array([[-1.0, 0.5, 2.0, np.nan]], np.float32)
    lo = la.asarray(np.array([0.0, 0.0, 0.0, 0.0], np.float32))
    np.testing.assert_array_equal(la.clip(la.asarray(f), lo, 1.0).asnumpy(), np.clip(f, 0.0, 1.0))


def test_clip_gradient_goes_to_whichever_bound_is_active():
    x = la.asarray([-2.0, 0.5, 3.0])
    lo, hi = la.asarray([0.0, 0.0, 0.0]), la.asarray([1.0, 1.0, 1.0])
    for a in (x, lo, hi):
        a.attach_grad()
    with la.autograd.record():
        y = la.clip(x, lo, hi)
    y.backward()
    assert x.grad.asnumpy().tolist() == [0.0, 1.0, 0.0]
    assert lo.grad.asnumpy().tolist() == [1.0, 0.0, 0.0] and hi.grad.asnumpy().tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("kw", [{}, {"n": 2}, {"axis": 0}, {"n": 0}, {"prepend": True, "append": True}])
def test_diff_matches_numpy_and_records_lazily(kw):
    x = np.arange(12.0).reshape(3, 4) ** 2
    kw = dict(kw)
    ref_kw = dict(kw)
    if kw.pop("prepend", None):
        kw["prepend"], ref_kw["prepend"] = la.asarray(x[:, :1]), x[:, :1]
    if kw.pop("append", None):
        kw["append"], ref_kw["append"] = la.asarray(x[:, :2]), x[:, :2]
    with la.deferred():
        y = la.diff(la.asarray(x), **kw)
    assert y.is_lazy or kw.get("n") == 0  # (n=0 without prepend / append is x itself, as in NumPy)
    np.testing.assert_array_equal(y.asnumpy(), np.diff(x, **ref_kw))


@pytest.mark.parametrize("axes,b_shape", [(0, (5,)), (1, (4, 5)), (2, (3, 4, 5)), (([1, 0], [0, 1]), (3, 2, 5)),
                                           (([2], [0]), (4, 5))])
def test_tensordot_matches_numpy(axes, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal(b_shape)
    got = la.tensordot(la.asarray(a), la.asarray(b), axes=axes).asnumpy()
    np.testing.assert_allclose(got, np.tensordot(a, b, axes=axes), rtol=1e-12)


def test_nonzero_is_the_standards_tuple_and_argwhere_keeps_the_old_rows():
    x = np.array([[0, 3, 0], [4, 0, 5]])
    got = la.nonzero(la.asarray(x))
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, np.nonzero(x)):
        np.testing.assert_array_equal(g.asnumpy(), w)
    np.testing.assert_array_equal(la.argwhere(la.asarray(x)).asnumpy(), np.argwhere(x))
    with la.deferred():
        rows, cols = la.nonzero(la.asarray(x))
    assert rows.static_shape == (None,) and cols.asnumpy().tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="0-d"):
        la.nonzero(la.asarray(1))


def test_unique_functions_return_named_tuples_like_numpy():
    x = np.array([[3, 1], [3, 2]])
    res = la.unique_all(la.asarray(x))
    want = np.unique_all(x)
    for name in ("values", "indices", "inverse_indices", "counts"):
        np.testing.assert_array_equal(getattr(res, name).asnumpy(), getattr(want, name))
    np.testing.assert_array_equal(la.unique_counts(la.asarray(x)).counts.asnumpy(), [1, 1, 2])
    inv = la.unique_inverse(la.asarray(x)).inverse_indices
    assert inv.shape == x.shape


def test_complex_arrays_compute_like_numpy():
    z = np.array([1 + 2j, -3 + 0.5j], np.complex64)
    x = la.asarray(z)
    assert x.dtype == la.complex64 and la.isdtype(x.dtype, "complex floating")
    np.testing.assert_allclose(la.abs(x).asnumpy(), np.abs(z))
    assert la.abs(x).dtype == np.float32 and la.real(x).dtype == np.float32
    np.testing.assert_array_equal(la.conj(x).asnumpy(), np.conj(z))
    np.testing.assert_allclose((x * 1j + 1).asnumpy(), z * 1j + 1)
    with la.deferred():
        y = la.exp(x) * la.conj(x)
    np.testing.assert_allclose(y.asnumpy(), np.exp(z) * np.conj(z), rtol=1e-6)
    sym = la.get_symbol(y)
    back = la.Symbol.from_json(sym.to_json())
    np.testing.assert_allclose(la.CachedOp(back)().asnumpy(), y.asnumpy(), rtol=1e-6)
