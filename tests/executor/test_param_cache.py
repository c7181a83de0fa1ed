"""executor/param_cache.py: a compiled program's parameter-only steps are computed once, and again
whenever a parameter changes; values always equal the program that computes every step every call."""
import json
import os
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.buffer import cells, version
from lazyarray.executor.param_cache import KEPT, ParamCache

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "onnx_dynamic")


class Net(B.HybridBlock):
    """Parameter-only steps (a transpose, a scale, a tanh) feeding a product with the input."""

    def __init__(self, units=3, in_units=4):
        super().__init__()
        self.w = B.Parameter("w", shape=(units, in_units), init=la.init.Normal(1.0))
        self.b = B.Parameter("b", shape=(units,), init=la.init.Normal(1.0))

    def forward(self, x):
        wt = la.transpose(self.w.data()) * 2.0
        return la.dot(x, wt) + la.tanh(self.b.data())


def expected(net, x):
    w, b = net.w.data().asnumpy(), net.b.data().asnumpy()
    return x.asnumpy() @ (w.T * 2.0) + np.tanh(b)


def caches(net) -> list[ParamCache]:
    """The param caches of the block's compiled plain signatures."""
    return [c.program for comp in net._by_sig.values() for c in comp.run._cache.values()
            if isinstance(c.program, ParamCache)]


def make(seed=0):
    la.random.seed(seed)
    net = Net()
    net.initialize()
    net.hybridize()
    return net


def x_of(n=5, seed=1):
    return la.array(np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32))


def test_values_equal_and_kept_from_the_second_call_at_the_same_versions():
    net, x = make(), x_of()
    for i in range(4):
        np.testing.assert_allclose(net(x).asnumpy(), expected(net, x), rtol=1e-5, atol=1e-6)
        (pc,) = caches(net)
        assert (pc.kept is None) == (i == 0)  # first call: parameters seen; second: kept
    assert all(not v.flags.writeable for v in pc.kept)
    assert pc.kept_bytes == sum(v.nbytes for v in pc.kept)


@pytest.mark.parametrize("change", ["set_data", "in_place", "trainer"])
def test_a_parameter_change_recomputes(change):
    net, x = make(), x_of()
    for _ in range(3):
        net(x)
    (pc,) = caches(net)
    before = pc.kept
    assert before is not None
    if change == "set_data":
        net.w.set_data(np.ones((3, 4), np.float32) * 0.5)
    elif change == "in_place":
        w = net.w.data()
        w[1:2] = la.array(np.full((1, 4), 3.0, np.float32))
    else:
        trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        with la.autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        trainer.step(1)
    for _ in range(3):  # recomputed at once, and kept again from the next call on
        np.testing.assert_allclose(net(x).asnumpy(), expected(net, x), rtol=1e-5, atol=1e-6)
    assert pc.kept is not None and pc.kept is not before


def test_a_parameter_handed_out_writable_is_never_kept_again():
    net, x = make(), x_of()
    for _ in range(3):
        net(x)
    alias = np.asarray(net.w.data())  # NumPy's view of the live buffer: its writes bump no version
    alias[:] = 7.0
    for _ in range(3):
        np.testing.assert_allclose(net(x).asnumpy(), expected(net, x), rtol=1e-5, atol=1e-6)
    alias[:] = -1.0
    np.testing.assert_allclose(net(x).asnumpy(), expected(net, x), rtol=1e-5, atol=1e-6)


def test_recording_keeps_per_call_steps_and_gradients_equal():
    net, x = make(), x_of()
    for _ in range(3):
        net(x)
    with la.tuning(param_cache_max_bytes=0):
        ref = make()
    grads = []
    for n in (net, ref):
        for p in n.collect_params().values():
            p.zero_grad()
        with la.autograd.record():
            loss = (n(x) ** 2).sum()
        loss.backward()
        grads.append({k: p.grad().asnumpy() for k, p in n.collect_params().items()})
    assert grads[0].keys() == grads[1].keys()
    for k in grads[0]:
        np.testing.assert_allclose(grads[0][k], grads[1][k], rtol=1e-5, atol=1e-6)
    assert len(caches(net)) == 1  # the training signature compiled without a param cache
    assert not caches(ref)


class Noisy(B.HybridBlock):
    """A random draw shaped like a parameter-only value."""

    def __init__(self):
        super().__init__()
        self.w = B.Parameter("w", shape=(3, 4), init=la.init.Normal(1.0))

    def forward(self, x):
        noise = la.random.normal(shape=(4, 3))
        return la.dot(x, la.transpose(self.w.data()) + noise)


def test_random_ops_are_never_kept():
    net = Noisy()
    net.initialize()
    net.hybridize()
    x = x_of()
    outs = [net(x).asnumpy() for _ in range(4)]
    assert not np.allclose(outs[2], outs[3])  # a fresh draw every call
    text = str(net.explain(x))
    assert f"transpose[{KEPT}]" in text
    assert not any("normal" in r["op[implementation]"] and KEPT in r["op[implementation]"]
                   for _, rows in net.explain(x).programs for r in rows)


class TwoSizes(B.HybridBlock):
    """Two parameter-only values: 4x3 floats (48 bytes) and 40x3 (480 bytes)."""

    def __init__(self):
        super().__init__()
        self.a = B.Parameter("a", shape=(3, 4), init=la.init.Normal(1.0))
        self.b = B.Parameter("b", shape=(3, 40), init=la.init.Normal(1.0))

    def forward(self, x, y):
        return la.dot(x, la.transpose(self.a.data()) * 2.0), la.dot(y, la.transpose(self.b.data()) * 2.0)


@pytest.mark.parametrize("budget", [0, 100, 1 << 20])
def test_memory_bound(budget):
    with la.tuning(param_cache_max_bytes=budget):
        net = TwoSizes()
        net.initialize()
        net.hybridize()
        x, y = x_of(), la.array(np.ones((2, 40), np.float32))
        for _ in range(3):
            got = net(x, y)
    a, b = net.a.data().asnumpy(), net.b.data().asnumpy()
    np.testing.assert_allclose(got[0].asnumpy(), x.asnumpy() @ (a.T * 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1].asnumpy(), y.asnumpy() @ (b.T * 2), rtol=1e-5, atol=1e-5)
    pcs = caches(net)
    if budget == 0:
        assert not pcs
        return
    (pc,) = pcs
    assert pc.kept_bytes <= budget
    assert sum(v.nbytes for v in pc.kept) == pc.kept_bytes
    assert pc.kept_bytes == (48 if budget == 100 else 48 + 480)


def test_explain_rows_and_header():
    net, x = make(), x_of()
    for _ in range(3):
        net(x)
    ex = net.explain(x)
    (prog, rows), = ex.programs
    kept = [r for r in rows if KEPT in r["op[implementation]"]]
    assert kept and all(r["memory"] == "kept" and r["step"] == "-" for r in kept)
    assert {r["op[implementation]"].split("[")[0] for r in kept} >= {"transpose", "tanh"}
    assert f"(and {len(prog.kept)} steps computed once: parameters)" in str(ex).splitlines()[0]
    assert len(prog.kept) == len(kept)


class Returns(B.HybridBlock):
    """A parameter-only value is also an output."""

    def __init__(self):
        super().__init__()
        self.w = B.Parameter("w", shape=(3, 4), init=la.init.Normal(1.0))

    def forward(self, x):
        wt = la.transpose(self.w.data()) * 2.0
        return la.dot(x, wt), wt


def test_kept_values_are_never_handed_out():
    net = Returns()
    net.initialize()
    net.hybridize()
    x = x_of()
    for _ in range(3):
        _, wt = net(x)
    (pc,) = caches(net)
    got = wt.asnumpy()
    assert not any(np.shares_memory(got, v) for v in pc.kept)
    wt[:] = la.array(np.zeros((4, 3), np.float32))  # the caller's own array
    y, wt2 = net(x)
    want = net.w.data().asnumpy().T * 2.0
    np.testing.assert_allclose(wt2.asnumpy(), want, rtol=1e-6)
    np.testing.assert_allclose(y.asnumpy(), x.asnumpy() @ want, rtol=1e-5, atol=1e-6)


def test_concurrent_calls_from_two_threads():
    net, xs = make(), [x_of(seed=s) for s in range(2)]
    want = [expected(net, x) for x in xs]
    errors = []

    def work(k):
        try:
            for _ in range(50):
                np.testing.assert_allclose(net(xs[k]).asnumpy(), want[k], rtol=1e-5, atol=1e-6)
        except Exception as exc:  # (reported by the main thread)
            errors.append(exc)

    net(xs[0])  # (compiled before the threads start)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert caches(net)[0].kept is not None


def test_a_cached_op_without_parameters_runs_every_step():
    x = la.sym.var("x", shape=(2, 3))
    w = la.sym.var("w", shape=(3, 3))
    sym = la.sym.dot(x, la.sym.transpose(w) * 2.0)
    vals = [la.ones((2, 3)), la.array(np.arange(9, dtype=np.float32).reshape(3, 3))]
    plain, kept = la.CachedOp(sym), la.CachedOp(sym, parameters=["w"])
    for _ in range(3):
        np.testing.assert_allclose(kept(*vals).asnumpy(), plain(*vals).asnumpy())
    assert not any(isinstance(c.program, ParamCache) for c in plain._cache.values())
    assert all(isinstance(c.program, ParamCache) for c in kept._cache.values())


@pytest.mark.parametrize("name", ["lstm_bidir", "gru_time_major", "convnext_mini"])
def test_imported_models_equal_the_uncached_program(name):
    pytest.importorskip("onnx")
    m = next(m for m in json.load(open(os.path.join(FIXTURES, "manifest.json"))) if m["name"] == name)
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    path = os.path.join(FIXTURES, name + ".onnx")
    net = B.SymbolBlock.imports(path, m["inputs"])
    net.hybridize()
    with la.tuning(param_cache_max_bytes=0):
        ref = B.SymbolBlock.imports(path, m["inputs"])
        ref.hybridize()
    for case in m["cases"][:2]:
        xs = [la.array(data[f"{case}/in/{k}"]) for k in m["inputs"]]
        with la.tuning(param_cache_max_bytes=0):
            want = ref(*xs)
        want = want if isinstance(want, (list, tuple)) else [want]
        for _ in range(3):
            got = net(*xs)
            got = got if isinstance(got, (list, tuple)) else [got]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[0].asnumpy(), data[f"{case}/out/0"], rtol=1e-3, atol=1e-4)
    assert caches(net) and all(pc.kept is not None for pc in caches(net))
    assert not caches(ref)


def test_parameters_must_be_input_names():
    x = la.sym.var("x", shape=(2, 3))
    with pytest.raises(la.errors.ParamError, match="not inputs of the symbol"):
        la.CachedOp(la.sym.relu(x), parameters=["w"])
    with pytest.raises(la.errors.ParamError, match="a list of input names"):
        la.CachedOp(la.sym.relu(x), parameters="x")


def test_kept_values_follow_the_arrays_given_not_the_last_ones():
    """A CachedOp called with another weight array (same shape, version 0 like the first) runs the
    parameter-only steps on it: the kept values' one-pass check compares the arrays themselves."""
    x, w = la.sym.var("x", shape=(2, 3)), la.sym.var("w", shape=(3, 3))
    op = la.CachedOp(la.sym.dot(x, la.sym.transpose(w) * 2.0), parameters=["w"])
    xs = la.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    w1, w2 = la.array(np.eye(3, dtype=np.float32)), la.array(np.full((3, 3), 0.5, np.float32))
    for w_ in (w1, w1, w1, w2, w2, w1, w1):  # (kept for w1 at the last call)
        np.testing.assert_allclose(op(xs, w_).asnumpy(), xs.asnumpy() @ (w_.asnumpy().T * 2.0))
    w1[0, 0] = 5.0  # an in-place write after the values were kept for w1: seen by its version cell
    np.testing.assert_allclose(op(xs, w1).asnumpy(), xs.asnumpy() @ (w1.asnumpy().T * 2.0))


def test_version_cells_count_every_write():
    a = la.array(np.zeros(4, np.float32))
    (cell,) = cells([a._value])
    assert cell[0] == version(a._value) == 0
    a[1] = 2.0
    a[2] = 3.0
    assert cell[0] == version(a._value) == 2
    assert cells([a._value])[0] is cell  # (one cell per live array)
