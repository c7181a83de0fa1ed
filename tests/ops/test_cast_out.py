"""``cast`` writes into a compiled step's planned buffer (``out=``): the values ``astype`` gives, bit
for bit, for contiguous inputs, views and empty dims; views of its result are then made once."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.program import StepKind
from lazyarray.ops import registry

RNG = np.random.default_rng(0)


def _values(dtype, shape):
    v = RNG.standard_normal(shape) * 4
    if np.dtype(dtype).kind == "b":
        return v > 0
    return v.astype(dtype)


def _program(op):
    return op._cache[op._last_key].program


@pytest.mark.parametrize("src, dst", [("float32", "float64"), ("float64", "float32"), ("float32", "int32"),
                                      ("int64", "bool"), ("bool", "float32"), ("float64", "float64"),
                                      ("int64", "float32")])
@pytest.mark.parametrize("shape, view", [((3, 5), None), ((4, 6), "transpose"), ((4, 6), "slice"),
                                         ((0, 5), None), ((3, 0), "transpose")])
def test_a_compiled_cast_equals_astype(src, dst, shape, view):
    x = la.sym.var("x", shape=shape, dtype=src)
    y = x
    if view == "transpose":
        y = la.sym.transpose(x)
    elif view == "slice":
        y = la.sym.getitem(x, key=(slice(None), slice(None, None, 2)))
    c = la.sym.cast(y, dtype=dst)
    y = la.sym.maximum(c, c)  # (the cast not an output itself: a planned step)
    op = la.CachedOp(y)
    v = _values(src, shape)
    ref = v.T if view == "transpose" else v[:, ::2] if view == "slice" else v
    want = ref.astype(dst)
    for _ in range(2):  # (a second run reuses the buffers)
        got = op(la.array(v)).asnumpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_compiled_cast_runs_into_its_planned_buffer_and_its_views_are_made_once():
    m = la.sym.var("m", shape=(2, 7), dtype="int64")
    mask = la.sym.broadcast_to(la.sym.reshape(la.sym.cast(m, dtype="bool"), shape=(2, 1, 1, 7)), shape=(2, 1, 7, 7))
    y = la.sym.where(mask, la.sym.var("a", shape=(), dtype="float32"), la.sym.var("b", shape=(), dtype="float32"))
    op = la.CachedOp(y)
    v = np.array([[1, 1, 1, 0, 0, 0, 0], [1] * 7], dtype="int64")
    a, b = np.float32(0), np.float32(-3e38)
    want = np.where(np.broadcast_to(v.astype(bool).reshape(2, 1, 1, 7), (2, 1, 7, 7)), a, b)
    for _ in range(2):
        np.testing.assert_array_equal(op(la.array(v), la.array(a), la.array(b)).asnumpy(), want)
    kinds = {spec.node.op.name: spec.kind for group in _program(op).step_specs for spec in group}
    assert kinds == {"cast": StepKind.OUT, "where": kinds["where"]}  # (reshape and broadcast_to: made once)


def test_the_eager_cast_still_allocates():
    v = np.arange(6, dtype="int64").reshape(2, 3)
    out = registry.get("cast").bind(np)(v, dtype=np.dtype("float32"))
    assert out.dtype == np.float32 and not np.shares_memory(out, v)
    np.testing.assert_array_equal(out, v.astype("float32"))
