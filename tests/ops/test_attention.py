"""nn.fused_attention's rules: shapes (broadcast batch dims, extras that may not grow the running
value, how many extras its chains read), dtypes, chain codes; the op against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import DTypeError, ParamValueError, ShapeError
from lazyarray.ops.attention import chain_extras, code, decode

RNG = np.random.default_rng(2)


def _numpy(q, k, v, scale, mask):
    s = q @ k * scale + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def test_values_against_numpy():
    q, k, v = (RNG.standard_normal(s).astype("float32") for s in [(2, 3, 5, 8), (2, 3, 8, 6), (2, 3, 6, 4)])
    scale, mask = np.array(0.3, "float32"), RNG.standard_normal((2, 1, 1, 6)).astype("float32")
    y = la.nn.fused_attention(q, k, v, [scale, mask], score_ops=[code("multiply", 0), code("add", 0)])
    np.testing.assert_allclose(y.asnumpy(), _numpy(q, k, v, scale, mask), rtol=1e-5, atol=1e-6)


def test_symbolic_shapes():
    q, k, v = la.sym.var("q", shape=(1, 4, 7, 8)), la.sym.var("k", shape=(3, 1, 8, 9)), la.sym.var("v", shape=(9, 2))
    y = la.sym.nn.fused_attention(q, k, v, [])
    assert y.outputs[0].aval.shape == (3, 4, 7, 2)


def test_an_extra_may_not_grow_the_scores():
    q, k, v = (np.ones(s, "float32") for s in [(1, 2, 3, 4), (1, 2, 4, 3), (1, 2, 3, 4)])
    with pytest.raises(ShapeError, match="would change its shape"):
        la.nn.fused_attention(q, k, v, [np.ones((5, 2, 3, 3), "float32")], score_ops=[code("add", 0)])


def test_the_chains_say_how_many_extras():
    q, k, v = (np.ones(s, "float32") for s in [(1, 2, 3, 4), (1, 2, 4, 3), (1, 2, 3, 4)])
    with pytest.raises(ShapeError, match="read 2 extra inputs, got 1"):
        la.nn.fused_attention(q, k, v, [np.ones((3, 3), bool)], score_ops=[code("where", 2)])
    assert chain_extras([code("where", 1), code("add", 0)]) == 3


def test_dtypes_and_codes_are_checked():
    q, k, v = (np.ones(s, "float32") for s in [(1, 2, 3, 4), (1, 2, 4, 3), (1, 2, 3, 4)])
    with pytest.raises(DTypeError, match="one floating dtype"):
        la.nn.fused_attention(q, k, v.astype("float64"), [])
    with pytest.raises(ParamValueError, match="chain code 40"):
        la.nn.fused_attention(q, k, v, [q], score_ops=[40])  # where's running value at its mask
    with pytest.raises(ParamValueError, match="chain code 93"):
        la.nn.fused_attention(q, k, v, [q], q_ops=[93])
    assert decode(code("where", 2)) == ("where", 2, 2)


def test_no_gradient():
    q, k, v = (la.array(np.ones(s, "float32")) for s in [(1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2)])
    for x in (q, k, v):
        x.attach_grad()
    with pytest.raises(la.errors.LazyArrayError), la.autograd.record():
        la.nn.fused_attention(q, k, v, []).backward()


def test_out_axes_and_shape_lay_out_the_result():
    q, k, v = (la.sym.var(n, shape=s) for n, s in [("q", (2, 3, 7, 8)), ("k", (2, 3, 8, 5)), ("v", (2, 3, 5, 4))])
    y = la.sym.nn.fused_attention(q, k, v, [], out_axes=(0, 2, 1, 3), out_shape=(2, 7, 12))
    assert y.outputs[0].aval.shape == (2, 7, 12)
    with pytest.raises(ShapeError, match="do not lay out"):
        la.sym.nn.fused_attention(q, k, v, [], out_axes=(0, 2, 1, 3), out_shape=(2, 7, 13))
    with pytest.raises(ShapeError, match="do not lay out"):
        la.sym.nn.fused_attention(q, k, v, [], out_axes=(0, 1, 1, 3), out_shape=(2, 7, 12))
