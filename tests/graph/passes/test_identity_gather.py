"""identity_gathers: an ``advanced_index`` whose constant index arrays read its input in order becomes a
``reshape`` (BART's ``mask[:, None, None, :]`` as exported), the values bit for bit; other gathers, captured
index arrays and the switch keep the graph (``graph/passes/identity_gather.py``)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.node import Entry, capture_node, const_node
from lazyarray.graph.passes.identity_gather import identity_gathers
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(9)
S = la.sym


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _const(a, captured=False):
    a = np.array(a)
    aval = la.Aval(a.shape, a.dtype, la.cpu())
    return Symbol([Entry(capture_node(a, aval) if captured else const_node(a, aval))])


def _mask_gather(b, s, dtype="bool", rows=None, cols=None, captured=False):
    """x (b, s) gathered to (b, 1, 1, s) by index arrays (BART's exported expand of its mask)."""
    x = S.var("x", shape=(b, s), dtype=dtype)
    rows = np.arange(b).reshape(b, 1, 1, 1) + np.zeros((1, 1, 1, s), np.int64) if rows is None else rows
    cols = np.broadcast_to(np.arange(s).reshape(1, 1, 1, s), (b, 1, 1, s)).copy() if cols is None else cols
    return S.advanced_index(x, [_const(rows, captured), _const(cols, captured)], key=(0, 0), positions=(0, 1))


def _value(b, s, dtype):
    return (RNG.random((b, s)) > 0.4) if dtype == "bool" else RNG.standard_normal((b, s)).astype(dtype)


@pytest.mark.parametrize("dtype", ["bool", "float32", "float64"])
@pytest.mark.parametrize("b, s", [(1, 7), (3, 5), (2, 1), (0, 4)])
def test_an_in_order_gather_becomes_a_reshape_bit_for_bit(b, s, dtype, run_symbol):
    sym = _mask_gather(b, s, dtype)
    out = identity_gathers(sym).check()
    assert _ops(out) == ["reshape"] and out.outputs[0].aval == sym.outputs[0].aval
    x = _value(b, s, dtype)
    got, want = run_symbol(out, x=x)[0], run_symbol(sym, x=x)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("which", ["reversed", "repeated", "rows swapped"])
def test_gathers_out_of_order_are_kept(which):
    b, s = 2, 5
    cols = np.broadcast_to(np.arange(s).reshape(1, 1, 1, s), (b, 1, 1, s)).copy()
    rows = np.arange(b).reshape(b, 1, 1, 1) + np.zeros((1, 1, 1, s), np.int64)
    if which == "reversed":
        cols = cols[..., ::-1].copy()
    elif which == "repeated":
        cols[..., 1] = 0
    else:
        rows = rows[::-1].copy()
    sym = _mask_gather(b, s, rows=rows, cols=cols)
    assert identity_gathers(sym) is sym


def test_captured_index_arrays_and_the_switch_keep_the_graph():
    captured = _mask_gather(2, 5, captured=True)  # (a user's array: it may be written before a run)
    assert identity_gathers(captured) is captured
    sym = _mask_gather(2, 5)
    with la.tuning(identity_gathers=False):
        assert identity_gathers(sym) is sym
    assert identity_gathers(sym) is not sym


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_compiled_program_reads_a_view_of_its_input_through_it(dtype):
    """Through ``CachedOp`` on inference graphs: the gather of a non-C-ordered input (a transposed
    view) and of a computed value, twice, equal to the program without the pass."""
    b, s = 3, 6
    g = _mask_gather(b, s, dtype)
    y = S.multiply(g, np.dtype(dtype).type(2))
    sym = Symbol([y.outputs[0]])
    op = la.CachedOp(sym)
    v = np.ascontiguousarray(RNG.standard_normal((s, b)).astype(dtype)).T  # (a view: not C-ordered)
    got = [op(x=la.array(v)).asnumpy() for _ in range(2)]
    with la.tuning(identity_gathers=False):
        want = la.CachedOp(sym)(x=la.array(v)).asnumpy()
    for a in got:
        np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(want, (v * 2).reshape(b, 1, 1, s))
    assert "advanced_index" not in _ops(op._cache[op._last_key].sym)
