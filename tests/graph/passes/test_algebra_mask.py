"""The algebra pass's copy-free rewrites of attention-mask chains: same-dtype casts, takes of a whole
axis in order, ands with an all-true constant (``passes/algebra.py``)."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.node import Entry, capture_node, const_node
from lazyarray.graph.passes.algebra import simplify
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _const(value):
    value = np.asarray(value)
    return Symbol([Entry(const_node(value, la.Aval(value.shape, value.dtype, la.cpu())))])


def _same_values(sym, run_symbol, **feeds):
    out = simplify(sym).check()
    before, after = run_symbol(sym, **feeds)[0], run_symbol(out, **feeds)[0]
    assert after.dtype == before.dtype and after.shape == before.shape
    np.testing.assert_array_equal(after, before)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "bool", "int64"])
def test_a_cast_to_the_dtype_it_has_is_dropped(dtype, run_symbol):
    x = la.sym.var("x", shape=(2, 3), dtype=dtype)
    v = (RNG.standard_normal((2, 3)) > 0).astype(dtype)
    out = _same_values(la.sym.cast(x, dtype=dtype), run_symbol, x=v)
    assert _ops(out) == []
    assert _ops(simplify(la.sym.cast(x, dtype="float16" if dtype != "float16" else "float32"))) == ["cast"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bool"])
@pytest.mark.parametrize("shape, axis, index_shape", [
    ((7, 1), 0, (1, 1, 1, 7)),       # hf_bert's mask: rows 0..6 in order, split into (1, 1, 1, 7)
    ((56, 1), 0, (8, 1, 1, 7)),      # the same at batch 8
    ((3, 4, 5), 1, (2, 2)),          # the middle axis
    ((3, 4, 5), -1, (5,)),           # the whole last axis as it is
    ((3, 0, 5), 0, (3,)),            # an empty dim elsewhere
])
def test_a_take_of_a_whole_axis_in_order_is_a_reshape(dtype, shape, axis, index_shape, run_symbol):
    x = la.sym.var("x", shape=shape, dtype=dtype)
    n = shape[axis]
    idx = _const(np.arange(n, dtype="int64").reshape(index_shape))
    v = (RNG.standard_normal(shape) * 3).astype(dtype)
    out = _same_values(la.sym.take(x, idx, axis=axis), run_symbol, x=v)
    assert "take" not in _ops(out)
    assert set(_ops(out)) <= {"reshape"}


@pytest.mark.parametrize("index", [
    [0, 1, 2, 2],        # a repeat
    [1, 0, 2, 3],        # out of order
    [0, 1, 2],           # not the whole axis
    [-4, -3, -2, -1],    # the whole axis, but written negative: kept (only 0..n-1 is matched)
])
def test_other_takes_stay(index, run_symbol):
    x = la.sym.var("x", shape=(4, 3), dtype="float32")
    sym = la.sym.take(x, _const(np.array(index, dtype="int64")), axis=0)
    out = _same_values(sym, run_symbol, x=RNG.standard_normal((4, 3)).astype("float32"))
    assert _ops(out) == ["take"]


def test_a_take_by_a_captured_user_array_stays():
    idx = np.arange(4, dtype="int64")  # a user's buffer: it may change before the graph runs
    x = la.sym.var("x", shape=(4, 3), dtype="float32")
    sym = la.sym.take(x, Symbol([Entry(capture_node(idx, la.Aval((4,), idx.dtype, la.cpu())))]), axis=0)
    assert _ops(simplify(sym)) == ["take"]


@pytest.mark.parametrize("shape, const_shape", [((1, 1, 1, 7), (1, 1, 7, 1)), ((2, 3), (2, 3)), ((2, 3), ()),
                                                ((8, 1, 1, 7), (1, 1, 7, 1)), ((0, 1, 1, 7), (1, 1, 7, 1))])
@pytest.mark.parametrize("const_first", [True, False])
def test_an_and_with_all_true_is_the_other_operand_broadcast(shape, const_shape, const_first, run_symbol):
    x = la.sym.var("x", shape=shape, dtype="bool")
    c = _const(np.ones(const_shape, dtype=bool))
    sym = la.sym.logical_and(c, x) if const_first else la.sym.logical_and(x, c)
    out = _same_values(sym, run_symbol, x=RNG.standard_normal(shape) > 0)
    assert "logical_and" not in _ops(out)
    assert set(_ops(out)) <= {"broadcast_to"}


def test_an_and_with_a_false_or_a_non_bool_operand_stays(run_symbol):
    x = la.sym.var("x", shape=(2, 3), dtype="bool")
    causal = np.tril(np.ones((3, 3), dtype=bool))[:2]
    out = _same_values(la.sym.logical_and(x, _const(causal)), run_symbol, x=RNG.standard_normal((2, 3)) > 0)
    assert _ops(out) == ["logical_and"]
    y = la.sym.var("y", shape=(2, 3), dtype="int64")  # (an and of ints gives bools: not the operand)
    assert _ops(simplify(la.sym.logical_and(y, _const(np.ones((2, 3), dtype=bool))))) == ["logical_and"]


def test_broadcast_chains_are_one_broadcast(run_symbol):
    x = la.sym.var("x", shape=(1, 1, 7), dtype="float32")
    sym = la.sym.broadcast_to(la.sym.broadcast_to(x, shape=(1, 7, 7)), shape=(2, 7, 7))
    out = _same_values(sym, run_symbol, x=RNG.standard_normal((1, 1, 7)).astype("float32"))
    assert _ops(out) == ["broadcast_to"]


def test_an_exported_mask_chain_is_a_cast_a_view_and_the_where(run_symbol):
    """hf_bert's mask as its export writes it: cast, reshape, take of every row, reshape, cast to bool
    again, and with an all-true constant, where. What is left: the cast, views, the where."""
    b, s = 2, 5
    m = la.sym.var("m", shape=(b, s), dtype="int64")
    rows = la.sym.reshape(la.sym.cast(m, dtype="bool"), shape=(b * s, 1))
    taken = la.sym.take(rows, _const(np.arange(b * s, dtype="int64").reshape(b, 1, 1, s)), axis=0)
    mask = la.sym.cast(la.sym.reshape(taken, shape=(b, 1, 1, s)), dtype="bool")
    both = la.sym.logical_and(_const(np.ones((1, 1, s, 1), dtype=bool)), mask)
    sym = la.sym.where(both, _const(np.float32(0)), _const(np.float32(np.finfo(np.float32).min)))
    v = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype="int64")
    out = _same_values(sym, run_symbol, m=v)
    assert _ops(out) == ["cast", "reshape", "broadcast_to", "where"]
