"""Random sampling as registry ops with explicit RNG state (``random_uniform``, ``random_normal``).

A hybridized block draws anew at every call (it used to capture one sample as a constant);
``la.random.seed(n)`` makes runs reproducible, and eager and hybridized draws equal; a lazy
random value is drawn once; CSE never merges two draws and constant folding never freezes one."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.graph.passes.constant_fold import constant_fold
from lazyarray.graph.passes.cse import cse
from lazyarray.ops import registry


class Noisy(nn.HybridBlock):
    def forward(self, x):
        return x + la.random.normal(size=x.shape)


class NoisyUniform(nn.HybridBlock):
    def forward(self, x):
        return x * la.random.uniform(-1.0, 1.0, x.shape)


def _runs(block, hybrid, shapes=((2, 3), (2, 3), (4, 3), (2, 3))):
    b = block()
    b.initialize()
    if hybrid:
        b.hybridize()
    return [b(la.ones(s)).asnumpy() for s in shapes]


@pytest.mark.parametrize("block", [Noisy, NoisyUniform])
def test_hybridized_block_draws_anew_at_every_call(block):
    outs = _runs(block, hybrid=True)
    assert not np.array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[1], outs[3])


def _same_draws(seed, block, first_hybrid, second_hybrid):
    """Two runs of ``block`` from the same seed draw the same values."""
    la.random.seed(seed)
    first = _runs(block, hybrid=first_hybrid)
    la.random.seed(seed)
    second = _runs(block, hybrid=second_hybrid)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("block", [Noisy, NoisyUniform])
def test_seed_makes_hybridized_runs_reproducible(block):
    _same_draws(0, block, True, True)


@pytest.mark.parametrize("block", [Noisy, NoisyUniform])
def test_eager_and_hybridized_draws_are_equal_for_the_same_seed(block):
    _same_draws(5, block, False, True)


def test_eager_deferred_and_compiled_draws_are_equal_for_the_same_seed():
    def draws(mode):
        la.random.seed(11)
        out = []
        for size in ((3,), (2, 2), ()):
            if mode == "eager":
                out.append(la.random.normal(2.0, 0.5, size).asnumpy())
                out.append(la.random.uniform(size=size, dtype="float64").asnumpy())
            elif mode == "deferred":
                with la.deferred():
                    a = la.random.normal(2.0, 0.5, size)
                out.append(a.asnumpy())
                with la.deferred():
                    b = la.random.uniform(size=size, dtype="float64")
                out.append(b.asnumpy())
            else:
                sym = la.sym.random_normal(shape=size, loc=2.0, scale=0.5)
                out.append(la.CachedOp(sym)().asnumpy())
                sym = la.sym.random_uniform(shape=size, dtype="float64")
                out.append(la.CachedOp(sym)().asnumpy())
        return out

    eager = draws("eager")
    for mode in ("deferred", "compiled"):
        for a, b in zip(eager, draws(mode)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def test_hybridized_training_step_gets_gradients_and_fresh_noise():
    b = Noisy()
    b.initialize()
    b.hybridize()
    seen = []
    for _ in range(2):
        x = la.ones((2, 3))
        x.attach_grad()
        with la.autograd.record():
            y = b(x)
            loss = (y * 2.0).sum()
        loss.backward()
        np.testing.assert_array_equal(x.grad.asnumpy(), np.full((2, 3), 2.0))
        seen.append(y.asnumpy())
    assert not np.array_equal(*seen)


def test_a_lazy_random_value_is_drawn_once():
    with la.deferred():
        r = la.random.normal(size=(4,))
        a = r + 1.0
        b = r * 2.0
    assert r.is_lazy and r.static_shape == (4,)
    va = a.asnumpy()  # computes a (and with it r), once
    vr = r.asnumpy()
    np.testing.assert_array_equal(va, vr + 1.0)
    np.testing.assert_array_equal(b.asnumpy(), vr * 2.0)  # computed later: reads the same draw
    np.testing.assert_array_equal(r.asnumpy(), vr)
    with la.deferred():
        c = r - 1.0  # a graph recorded from the computed value reads it
    np.testing.assert_array_equal(c.asnumpy(), vr - 1.0)


def test_lazy_value_computed_with_la_compute_keeps_one_draw():
    with la.deferred():
        r = la.random.uniform(size=(5,))
        a, b = r + 0.0, r * 1.0
    la.compute(a, b)
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    np.testing.assert_array_equal(r.asnumpy(), a.asnumpy())


def test_cse_never_merges_two_random_nodes_and_folding_never_freezes_one():
    r1 = la.sym.random_normal(shape=(3,))
    r2 = la.sym.random_normal(shape=(3,))
    both = la.Symbol(r1.outputs + r2.outputs)
    for sym in (cse(both), constant_fold(both), cse(constant_fold(both))):
        assert sum(1 for n in sym.topo() if n.op is registry.get("random_normal")) == 2
    diff = la.CachedOp(r1 - r2)
    a, b = diff().asnumpy(), diff().asnumpy()
    assert np.all(a != 0) and not np.array_equal(a, b)
    with la.deferred():  # recorded twice, same params: still two draws
        x, y = la.random.normal(size=(3,)), la.random.normal(size=(3,))
        d = x - y
    assert np.all(d.asnumpy() != 0)


def test_random_graph_round_trips_through_json_and_draws_at_every_call():
    x = la.sym.var("x", shape=(2, 3))
    y = x + la.sym.random_uniform(shape=(2, 3), low=5.0, high=6.0, dtype="float32", device=la.cpu(0))
    back = la.Symbol.from_json(y.to_json())
    assert back.to_json() == y.to_json()
    op = la.CachedOp(back)
    a, b = op(la.zeros((2, 3))).asnumpy(), op(la.zeros((2, 3))).asnumpy()
    assert a.min() >= 5.0 and a.max() < 6.0 and not np.array_equal(a, b)


def test_numpy_spellings_and_the_shape_alias():
    la.random.seed(1)
    a = la.random.uniform(0.0, 2.0, (2, 3)).asnumpy()
    la.random.seed(1)
    b = la.random.uniform(low=0.0, high=2.0, size=(2, 3)).asnumpy()
    la.random.seed(1)
    c = la.random.uniform(0.0, 2.0, shape=(2, 3)).asnumpy()
    la.random.seed(1)
    d = la.random.uniform(0.0, 2.0, size=(2, 3), shape=[2, 3]).asnumpy()  # both, equal: fine
    for v in (b, c, d):
        np.testing.assert_array_equal(a, v)
    assert la.random.normal(size=4).shape == (4,)
    assert la.random.normal().shape == () and la.random.uniform().shape == ()  # one sample, as NumPy
    with pytest.raises(la.ParamError, match=r"normal: size=\(2, 3\) and shape=\(3, 2\) disagree"):
        la.random.normal(size=(2, 3), shape=(3, 2))
    with pytest.raises(la.ParamError, match="uniform: size=3 and shape=4 disagree"):
        la.random.uniform(size=3, shape=4)


def test_bad_arguments_are_named():
    with pytest.raises(la.ParamValueError, match="random_normal: scale must be >= 0"):
        la.random.normal(0.0, -1.0, size=3)
    with pytest.raises(la.DTypeError, match="uniform: high must be a real number"):
        la.random.uniform(0.0, "1", size=3)
    with pytest.raises(la.ShapeError, match="normal: shape must be non-negative"):
        la.random.normal(size=(-1, 2))
    with pytest.raises(la.ShapeError):
        la.random_normal(shape=(-1,))
    with pytest.raises(la.ParamError, match="random_uniform: missing required parameter 'shape'"):
        la.random_uniform()


def test_registry_ops_take_device_and_dtype():
    la.random.seed(3)
    v = la.random_normal(shape=(20000,), loc=1.0, scale=2.0, dtype="float64", device=la.cpu(1))
    assert v.device == la.cpu(1) and v.dtype == np.float64
    s = v.asnumpy()
    assert abs(s.mean() - 1.0) < 0.05 and abs(s.std() - 2.0) < 0.05
    with la.cpu(1):
        assert la.random_uniform(shape=(2,)).device == la.cpu(1)  # the current device by default
        assert la.random.uniform(size=2).device == la.cpu(1)
    op = registry.get("random_uniform")
    assert op.random and not op.inputs and not op.differentiable


def test_random_ops_in_a_trace_follow_the_input_shape():
    b = Noisy()
    b.initialize()
    b.hybridize()
    for n in (2, 5, 2):
        assert b(la.zeros((n, 3))).shape == (n, 3)


# -- the compiled program draws what eager code draws, in the same order ---------------------------
class TwoDrawsReversed(nn.HybridBlock):
    def forward(self, x):
        a = la.random.normal(size=x.shape)
        b = la.random.uniform(size=x.shape)
        return b * 10.0 + a  # b's node is reached first when the graph is walked from its output


class UnusedDraw(nn.HybridBlock):
    def forward(self, x):
        la.random.normal(size=(100,))  # drawn eagerly; dead code in the traced graph
        return x + la.random.uniform(size=x.shape)


@pytest.mark.parametrize("block", [TwoDrawsReversed, UnusedDraw])
def test_several_draws_equal_eager_for_the_same_seed(block):
    _same_draws(5, block, False, True)


def test_an_unused_draw_runs_in_the_compiled_graph_but_is_not_returned_or_exported(tmp_path):
    b = UnusedDraw()
    b.initialize()
    b.hybridize()
    out = b(la.zeros((4,)))
    assert isinstance(out, la.NDArray) and out.shape == (4,)
    assert len(b.inference_symbol().symbol.outputs) == 2  # the block's output, then the draw it discards
    sym_path, _ = b.export(str(tmp_path / "unused"))
    assert len(la.load_symbol(sym_path).outputs) == 1  # the discarded draw is not part of the model


def test_drawing_from_overrides_this_threads_cpu_draws_only():
    import threading

    from lazyarray import rng

    la.random.seed(3)
    other = []
    with rng.drawing_from(np.random.default_rng(11)):
        inside = la.random.uniform(size=(4,)).asnumpy()
        t = threading.Thread(target=lambda: other.append(rng.generator(la.cpu(0))))
        t.start()
        t.join()
    np.testing.assert_array_equal(inside, np.random.default_rng(11).uniform(size=(4,)).astype(inside.dtype))
    assert other[0] is rng.generator(la.cpu(0))  # the other thread kept the process generator
    assert rng.generator(la.cpu(0)) is not None and rng._OVERRIDE.get() is None
