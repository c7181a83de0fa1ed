"""drop_kept_dims: reshape(mean(x, keepdims=True)) that only drops the kept unit axes -> mean(x) without
keepdims, with equal values bit for bit; left alone where the reshape does more or the mean has
another reader, and off with the tuning table's ``drop_kept_dims``."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.drop_kept_dims import drop_kept_dims

RNG = np.random.default_rng(2)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


@pytest.mark.parametrize("shape,axis,view", [
    ((1, 10, 3, 3), (2, 3), lambda m: la.sym.reshape(m, shape=(1, 10))),
    ((4, 10, 3, 3), (-2, -1), lambda m: la.sym.reshape(m, shape=(4, 10))),
    ((2, 6, 5, 4), (2, 3), lambda m: la.sym.flatten(m)),
    ((3, 1, 5), 2, lambda m: la.sym.squeeze(m, axis=2)),
    ((2, 0, 3, 3), (2, 3), lambda m: la.sym.reshape(m, shape=(2, 0))),
], ids=["global-pool-b1", "negative-axes", "flatten", "squeeze", "empty"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropped_and_values_equal(shape, axis, view, dtype, run_symbol):
    x = la.sym.var("x", shape=shape, dtype=dtype)
    sym = view(la.sym.mean(x, axis=axis, keepdims=True))
    out = drop_kept_dims(sym).check()
    assert _ops(out) == ["mean"] and out.outputs[0].node.params["keepdims"] is False
    v = RNG.standard_normal(shape).astype(dtype)
    base = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)  # (a strided view as the input too)
    base[..., ::2] = v
    for value in (v, base[..., ::2]):
        got, want = run_symbol(out, x=value)[0], run_symbol(sym, x=value)[0]
        assert got.shape == want.shape and got.tobytes() == want.tobytes()


def test_other_reshapes_readers_and_the_switch_leave_it():
    x = la.sym.var("x", shape=(2, 10, 3, 3))
    m = la.sym.mean(x, axis=(2, 3), keepdims=True)
    for sym in (la.sym.reshape(m, shape=(20,)),  # (merges axes: not only the kept ones dropped)
                la.sym.reshape(m, shape=(2, 10)) + la.sym.sum(m),  # (the mean has a second reader)
                la.sym.reshape(la.sym.mean(x, axis=(2, 3)), shape=(2, 10)),  # (no kept axes)
                la.sym.reshape(la.sym.sum(x, axis=(2, 3), keepdims=True), shape=(2, 10))):  # (not a mean)
        assert _ops(drop_kept_dims(sym)) == _ops(sym)
    with la.tuning(drop_kept_dims=False):
        sym = la.sym.reshape(m, shape=(2, 10))
        assert _ops(drop_kept_dims(sym)) == ["mean", "reshape"]


def test_a_hybridized_global_pool_head_is_one_step():
    net = la.blocks.HybridSequential()
    net.add(la.blocks.GlobalAvgPool2D(), la.blocks.Flatten())
    net.initialize()
    x = la.array(RNG.standard_normal((1, 10, 3, 3)).astype("float32"))
    want = net(x).asnumpy()
    net.hybridize()
    for _ in range(3):
        got = net(x).asnumpy()
    assert got.tobytes() == want.tobytes()
    assert "reshape" not in str(net.explain(x)) and "flatten" not in str(net.explain(x))
