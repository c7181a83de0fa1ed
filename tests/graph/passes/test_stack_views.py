"""stack_views: stacks that only rearrange values (an exported bidirectional RNN's glue) written as
one concatenate, one stack or a view; values equal bit for bit; a stack read elsewhere, a transpose
that reorders other axes, a reshape that merges other axes and symbolic shapes are left alone."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.stack_views import stack_views, stacks_as_concatenates

RNG = np.random.default_rng(0)
S = la.sym
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "data", "onnx_dynamic")


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _check(sym, want_ops, run_symbol, dtype="float32", **shapes):
    out = stack_views(sym).check()
    assert _ops(out) == want_ops
    values = {k: RNG.standard_normal(s).astype(dtype) for k, s in shapes.items()}
    for got, want in zip(run_symbol(out, **values), run_symbol(sym, **values)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bidirectional_outputs_stacked_moved_and_merged_are_one_concatenate(dtype, run_symbol):
    a, b = S.var("a", shape=(7, 2, 16), dtype=dtype), S.var("b", shape=(7, 2, 16), dtype=dtype)
    y = S.reshape(S.transpose(S.stack([a, b], axis=1), axes=(0, 2, 1, 3)), shape=(7, 2, 32))
    out = _check(y, ["concatenate"], run_symbol, dtype, a=(7, 2, 16), b=(7, 2, 16))
    assert out.outputs[0].node.params["axis"] == 2


@pytest.mark.parametrize("axis,perm,shape,concat_axis", [
    (1, None, (3, 8), 1),  # no transpose: the stacked axis merged with the next
    (-2, None, (3, 8), 1),  # a negative axis
    (0, None, (6, 4), 0),
    (2, (0, 2, 1), (3, 8), None),  # stack last, moved before the last input axis: concatenate(axis=1)
    (0, (1, 0, 2), (3, 8), 1),
], ids=["no-transpose", "negative", "axis0", "moved", "moved-from-front"])
def test_other_merges(axis, perm, shape, concat_axis, run_symbol):
    a, b = S.var("a", shape=(3, 4)), S.var("b", shape=(3, 4))
    st = S.stack([a, b], axis=axis)
    y = S.reshape(S.transpose(st, axes=perm) if perm else st, shape=shape)
    out = _check(y, ["concatenate"], run_symbol, a=(3, 4), b=(3, 4))
    if concat_axis is not None:
        assert out.outputs[0].node.params["axis"] == concat_axis


def test_rearrangements_that_are_not_a_concatenate_stay(run_symbol):
    a, b = S.var("a", shape=(3, 4, 5)), S.var("b", shape=(3, 4, 5))
    st = S.stack([a, b], axis=1)  # (3, 2, 4, 5)
    for y in (S.reshape(S.transpose(st, axes=(0, 2, 1, 3)), shape=(3, 8, 5)),  # merges the stack with the axis before
              S.reshape(S.transpose(st, axes=(0, 3, 2, 1)), shape=(3, 5, 8)),  # reorders the input axes
              S.reshape(st, shape=(6, 4, 5))):  # merges two other axes
        _check(y, _ops(stacks_as_concatenates(y)), run_symbol, a=(3, 4, 5), b=(3, 4, 5))


def test_a_stack_read_elsewhere_stays(run_symbol):
    a, b = S.var("a", shape=(3, 4)), S.var("b", shape=(3, 4))
    st = S.stack([a, b], axis=1)
    y = S.add(S.sum(S.reshape(st, shape=(3, 8))), S.sum(st))
    _check(y, _ops(stacks_as_concatenates(y)), run_symbol, a=(3, 4), b=(3, 4))


def test_concatenated_stacks_are_one_stack(run_symbol):
    a, b, c, d = (S.var(k, shape=(1, 16)) for k in "abcd")
    y = S.concatenate([S.stack([a, b], axis=0), S.stack([c, d], axis=0)], axis=0)
    out = _check(y, ["expand_dims"] * 4 + ["concatenate"], run_symbol, a=(1, 16), b=(1, 16), c=(1, 16), d=(1, 16))
    assert [e.node.inputs[0].node.name for e in out.outputs[0].node.inputs] == list("abcd")  # (one stack of four)
    other = S.concatenate([S.stack([a, b], axis=0), S.stack([c, d], axis=0)], axis=1)  # not the stacked axis
    _check(other, _ops(stacks_as_concatenates(other)), run_symbol, a=(1, 16), b=(1, 16), c=(1, 16), d=(1, 16))


def test_a_one_input_stack_is_a_view_and_chains_of_views_are_one(run_symbol):
    x = S.var("x", shape=(7, 1, 16))
    _check(S.stack([x], axis=2), ["expand_dims"], run_symbol, x=(7, 1, 16))
    _check(S.squeeze(S.stack([x], axis=2), axis=2), [], run_symbol, x=(7, 1, 16))  # a GRU's one direction
    _check(S.reshape(S.expand_dims(S.stack([x], axis=0), axis=0), shape=(7, 16)), ["reshape"], run_symbol,
           x=(7, 1, 16))


def test_a_getitem_that_keeps_every_element_is_its_input(run_symbol):
    x = S.var("x", shape=(1, 16, 1, 6))
    for key in [(slice(None), slice(None), slice(0, 1), slice(0, 6)), (Ellipsis, slice(0, 99)), (slice(0, 1, 1),),
                (Ellipsis,)]:
        _check(S.exp(S.getitem(x, key=key)), ["exp"], run_symbol, x=(1, 16, 1, 6))
    for key in [(Ellipsis, slice(0, 5)), (slice(None), slice(None, None, -1)), (Ellipsis, slice(1, 6)), (0,)]:
        y = S.exp(S.getitem(x, key=key))
        _check(y, _ops(y), run_symbol, x=(1, 16, 1, 6))


def test_symbolic_shapes_are_left_for_the_specialized_graph():
    a, b = S.var("a", shape=(la.Dim("t"), 2, 16)), S.var("b", shape=(la.Dim("t"), 2, 16))
    y = S.concatenate([S.stack([a, b], axis=1), S.stack([a, b], axis=1)], axis=1)
    assert _ops(stack_views(y)) == _ops(y)


@pytest.mark.parametrize("name", ["lstm_bidir", "gru_time_major"])
def test_imported_rnns_compile_without_the_glue_and_equal_torch(name):
    pytest.importorskip("onnx")
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    op = la.CachedOp(la.onnx.load(os.path.join(FIXTURES, name + ".onnx")))
    x, want = data["b1_s7/in/x"], data["b1_s7/out/0"]
    got = op(x=la.array(x))
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-3, atol=1e-4)
    ops = _ops(op.compiled(x=x.shape))
    assert "squeeze" not in ops and "reshape" not in ops
    assert sum(o == "stack" for o in ops) <= 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis,shape", [(0, (1, 16)), (1, (3, 4)), (-2, (3, 4)), (2, (3, 4)), (1, (3, 0)),
                                         (0, (0, 4))],
                         ids=["states", "middle", "negative", "last", "empty-columns", "empty-rows"])
def test_a_stack_left_is_a_concatenate_of_views(axis, shape, dtype, run_symbol):
    a, b, c = (S.var(k, shape=shape, dtype=dtype) for k in "abc")
    y = S.stack([a, b, c], axis=axis)
    out = _check(y, ["expand_dims"] * 3 + ["concatenate"], run_symbol, dtype, a=shape, b=shape, c=shape)
    assert tuple(out.outputs[0].node.avals[0].shape) == tuple(y.outputs[0].node.avals[0].shape)

