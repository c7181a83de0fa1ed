"""patch_embeddings: a conv2d whose windows tile its input (a ViT's patch embedding) becomes views, one copy
and a ``dense``, within float rounding of the convolution (``graph/passes/patch_embedding.py``); other
convolutions and the switch keep the graph."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.patch_embedding import patch_embeddings

RNG = np.random.default_rng(11)
S = la.sym
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12)}


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _conv(dtype, x_shape, w_shape, bias=True, **params):
    x = S.var("x", shape=x_shape, dtype=dtype)
    w = S.var("w", shape=w_shape, dtype=dtype)
    ins = [x, w] + ([S.var("b", shape=(w_shape[0],), dtype=dtype)] if bias else [])
    params.setdefault("stride", tuple(w_shape[2:]))
    return S.nn.conv2d(*ins, **params)


def _values(dtype, x_shape, w_shape):
    return {"x": RNG.standard_normal(x_shape).astype(dtype), "w": RNG.standard_normal(w_shape).astype(dtype),
            "b": RNG.standard_normal(w_shape[0]).astype(dtype)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape, w_shape", [((1, 3, 32, 32), (32, 3, 8, 8)), ((2, 3, 32, 48), (16, 3, 16, 16)),
                                              ((3, 5, 12, 6), (4, 5, 6, 6))])
def test_a_tiling_convolution_becomes_a_dense_within_rounding(x_shape, w_shape, bias, dtype, run_symbol):
    sym = _conv(dtype, x_shape, w_shape, bias)
    out = patch_embeddings(sym).check()
    assert "conv2d" not in _ops(out) and _ops(out).count("dense") == 1
    assert out.outputs[0].aval == sym.outputs[0].aval
    values = _values(dtype, x_shape, w_shape)
    if not bias:
        del values["b"]
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("why, x_shape, w_shape, params", [
    ("padding", (1, 3, 32, 32), (8, 3, 8, 8), {"padding": (1, 1)}),
    ("dilation", (1, 3, 32, 32), (8, 3, 8, 8), {"dilation": (2, 2)}),
    ("groups", (1, 4, 32, 32), (8, 2, 8, 8), {"groups": 2}),
    ("overlapping", (1, 3, 32, 32), (8, 3, 8, 8), {"stride": (4, 4)}),
    ("a remainder", (1, 3, 30, 32), (8, 3, 8, 8), {}),
    ("pointwise", (1, 16, 8, 8), (8, 16, 1, 1), {}),
    ("convnext's stem", (1, 3, 32, 32), (8, 3, 4, 4), {}),
    ("an empty batch", (0, 3, 32, 32), (8, 3, 8, 8), {}),
])
def test_other_convolutions_are_kept(why, x_shape, w_shape, params):
    sym = _conv("float32", x_shape, w_shape, **params)
    assert patch_embeddings(sym) is sym, why


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_compiled_program_with_it_agrees_with_the_convolution(dtype):
    """Through ``CachedOp`` (the copy and the dense's kernels), a view (not C-ordered) as the image, twice;
    the switch off runs the convolution's kernels; an empty batch keeps the convolution and runs."""
    x_shape, w_shape = (2, 3, 16, 16), (8, 3, 8, 8)
    sym = _conv(dtype, x_shape, w_shape)
    values = _values(dtype, x_shape, w_shape)
    values["x"] = np.ascontiguousarray(values["x"].transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    feeds = {k: la.array(v) for k, v in values.items()}
    op = la.CachedOp(sym)
    got = [op(**feeds).asnumpy() for _ in range(2)]
    assert "conv2d" not in _ops(op._cache[op._last_key].sym)
    with la.tuning(patch_embedding_dense=False):
        off = la.CachedOp(sym)
        want = off(**feeds).asnumpy()
        assert "conv2d" in _ops(off._cache[off._last_key].sym)
    for g in got:
        np.testing.assert_allclose(g, want, **TOL[dtype])
    empty = _values(dtype, (0, 3, 16, 16), w_shape)
    y = la.CachedOp(_conv(dtype, (0, 3, 16, 16), w_shape))(**{k: la.array(v) for k, v in empty.items()})
    assert y.shape == (0, 8, 2, 2)
