"""A hybridized SymbolBlock compiles its graph as it is (``SymbolBlock._trace_new``): no trace records it again."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la


class _Two(la.blocks.HybridBlock):
    def __init__(self):
        super().__init__()
        self.fc = la.blocks.Dense(4, in_units=3)

    def forward(self, x):
        h = self.fc(x)
        return [la.relu(h), h.sum(axis=1)]


def _imported(tmp_path, net, x):
    net.initialize()
    net.hybridize()
    net(x)
    sym_file, param_file = net.export(str(tmp_path / "m"))
    return la.blocks.SymbolBlock.imports(sym_file, ["data"], param_file)


def _outs(y):
    return [v.asnumpy() for v in (y if isinstance(y, (list, tuple)) else [y])]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_imported_graph_is_compiled_untraced_for_every_batch(tmp_path, dtype):
    net = la.blocks.Dense(2, in_units=3, dtype=dtype)
    x = la.array(np.arange(6).reshape(2, 3), dtype=dtype)
    block = _imported(tmp_path, net, x)
    want = {n: _outs(block(la.array(np.arange(n * 3).reshape(n, 3) / 7, dtype=dtype))) for n in (2, 5, 1)}
    block.hybridize()
    for n in (2, 5, 1):
        got = _outs(block(la.array(np.arange(n * 3).reshape(n, 3) / 7, dtype=dtype)))
        assert got[0].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got[0], want[n][0])
    assert block.cached_op.sym is block.symbol  # the graph itself, not a recording of it
    assert block.trace_count == 1  # one graph for every signature


def test_a_strided_input_gives_the_values_of_a_contiguous_one(tmp_path):
    block = _imported(tmp_path, la.blocks.Dense(2, in_units=3), la.ones((2, 3)))
    block.hybridize()
    base = np.arange(24, dtype="float32").reshape(4, 6) / 5
    view = la.array(base)[:, ::2]
    np.testing.assert_array_equal(block(view).asnumpy(), block(la.array(np.ascontiguousarray(base[:, ::2]))).asnumpy())


def test_several_outputs_come_back_as_the_list_the_unhybridized_block_gives(tmp_path):
    x = la.array(np.linspace(-1, 1, 6).reshape(2, 3), dtype="float32")
    block = _imported(tmp_path, _Two(), x)
    want = block(x)
    block.hybridize()
    got = block(x)
    assert isinstance(want, list) and isinstance(got, list) and len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.asnumpy(), w.asnumpy())
    assert block.cached_op.sym is block.symbol


def test_gradients_through_the_untraced_graph_match_the_unhybridized_block(tmp_path):
    x = la.array(np.linspace(-1, 1, 6).reshape(2, 3), dtype="float32")
    block = _imported(tmp_path, la.blocks.Dense(2, in_units=3), x)
    grads = []
    for hybrid in (False, True):
        block.hybridize(hybrid)
        for p in block.collect_params().values():
            p.zero_grad()
        with la.autograd.record():
            y = block(x)
        y.backward()
        grads.append({k: p.grad().asnumpy().copy() for k, p in block.collect_params().items()})
    assert grads[0].keys() == grads[1].keys()
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-6)


def test_a_subclass_with_its_own_forward_is_traced(tmp_path):
    x = la.ones((2, 3))
    base = _imported(tmp_path, la.blocks.Dense(2, in_units=3), x)

    class Doubled(la.blocks.SymbolBlock):
        def forward(self, data):
            return super().forward(data) * 2

    block = Doubled(base.symbol, ["data"])
    block._load({k: p.data().asnumpy() for k, p in base.collect_params().items()}, {}, None)
    block.hybridize()
    np.testing.assert_array_equal(block(x).asnumpy(), base(x).asnumpy() * 2)
    assert block.cached_op.sym is not block.symbol  # (a trace of its forward)


def test_a_signature_the_graph_cannot_take_raises_as_the_unhybridized_block_does(tmp_path):
    block = _imported(tmp_path, la.blocks.Dense(2, in_units=3), la.ones((2, 3)))
    with pytest.raises(la.LazyArrayError):
        block(la.ones((2, 4)))
    block.hybridize()
    with pytest.raises(la.LazyArrayError):
        block(la.ones((2, 4)))
