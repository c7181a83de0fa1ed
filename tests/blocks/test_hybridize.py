"""Hybridize: trace once, run the compiled graph; outputs and gradients equal the imperative
block's for every layer and for nested models; modes, signatures and inlining."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

RNG = np.random.default_rng(1)


def arr(*shape, dtype=np.float32):
    return la.array(RNG.standard_normal(shape).astype(dtype))


class Counted(B.HybridBlock):
    """Counts how often its forward runs."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.calls = 0

    def forward(self, *args):
        object.__setattr__(self, "calls", self.calls + 1)
        return self.inner(*args)


class TwoBranch(B.HybridBlock):
    """Nested blocks, two inputs, a tuple output and a parameter used directly."""

    def __init__(self):
        super().__init__()
        self.left = B.HybridSequential()
        self.left.add(B.Dense(6, activation="relu"), B.BatchNorm(), B.Dense(4))
        self.right = B.Dense(4, activation="sigmoid")
        self.mix = B.Parameter(shape=(4,), init=la.init.Normal(1.0))

    def forward(self, a, b):
        la_, rb = self.left(a), self.right(b)
        return la_ * self.mix.data() + rb, la_ - rb


def cnn():
    net = B.HybridSequential()
    net.add(B.Conv2D(3, 3, padding=1, activation="relu"), B.BatchNorm(), B.MaxPool2D(), B.Flatten(),
            B.Dense(8, activation="tanh"), B.Dropout(0.0), B.Dense(3))
    return net


def embed_model():
    net = B.HybridSequential()
    net.add(B.Embedding(10, 5), B.Flatten(), B.Dense(2))
    return net


LAYERS = {
    "dense": (lambda: B.Dense(5, activation="relu"), lambda: [arr(4, 3)]),
    "dense-nd-noflatten": (lambda: B.Dense(5, flatten=False), lambda: [arr(2, 3, 4)]),
    "activation": (lambda: B.Activation("softrelu"), lambda: [arr(3, 4)]),
    "dropout-0": (lambda: B.Dropout(0.0), lambda: [arr(3, 4)]),
    "batchnorm": (lambda: B.BatchNorm(), lambda: [arr(6, 3, 2, 2)]),
    "batchnorm-2d": (lambda: B.BatchNorm(), lambda: [arr(5, 4)]),
    "embedding": (lambda: B.Embedding(10, 3), lambda: [la.array(np.array([[1, 2], [9, 1]]))]),
    "conv2d": (lambda: B.Conv2D(4, 3, strides=2, padding=1), lambda: [arr(2, 3, 7, 7)]),
    "maxpool": (lambda: B.MaxPool2D(3, 2, 1), lambda: [arr(2, 3, 6, 5)]),
    "flatten": (lambda: B.Flatten(), lambda: [arr(2, 3, 4)]),
    "sce-loss": (lambda: B.SoftmaxCrossEntropyLoss(), lambda: [arr(4, 5), la.array(np.array([0, 4, 2, 1]))]),
    "l2-loss": (lambda: B.L2Loss(), lambda: [arr(4, 3), arr(4, 3)]),
    "l1-loss": (lambda: B.L1Loss(), lambda: [arr(4, 3), arr(4, 3)]),
    "cnn": (cnn, lambda: [arr(4, 2, 6, 6)]),
    "embedding-model": (embed_model, lambda: [la.array(np.array([[1, 2, 3], [4, 5, 9]]))]),
    "nested-two-inputs": (TwoBranch, lambda: [arr(5, 3), arr(5, 2)]),
}


def _run(factory, inputs, hybridize, training):
    la.random.seed(7)
    net = factory()
    net.initialize()
    if hybridize:
        net.hybridize()
    xs = [x.copy() for x in inputs]
    for x in xs:
        if x.dtype.kind == "f":
            x.attach_grad()
    results = []
    for _ in range(2):  # twice: the second call runs from the cache
        if training:
            with la.autograd.record():
                out = net(*xs)
                outs = list(out) if isinstance(out, tuple) else [out]
                total = sum((o * la.array(np.linspace(-1, 1, o.size).reshape(o.shape).astype(np.float32))).sum()
                            for o in outs)
            total.backward()
        else:
            out = net(*xs)
            outs = list(out) if isinstance(out, tuple) else [out]
        results.append([o.asnumpy() for o in outs])
    params = net.collect_params()
    grads = {n: p.grad().asnumpy() for n, p in params.items() if training and p.grad_req != "null"}
    values = {n: p.data().asnumpy() for n, p in params.items()}
    xgrads = [x.grad.asnumpy() for x in xs if training and x.dtype.kind == "f"]
    return results, grads, values, xgrads


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_hybridized_equals_imperative(name, training):
    factory, make_inputs = LAYERS[name]
    inputs = make_inputs()
    imp = _run(factory, inputs, False, training)
    hyb = _run(factory, inputs, True, training)
    for a, b in zip(imp[0], hyb[0]):  # outputs of both calls
        for x, y in zip(a, b):
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)
    for key in ("grads", "values"):
        d_imp, d_hyb = imp[1 if key == "grads" else 2], hyb[1 if key == "grads" else 2]
        assert d_imp.keys() == d_hyb.keys()
        for n in d_imp:  # parameter gradients, and values (running statistics updated in training)
            np.testing.assert_allclose(d_hyb[n], d_imp[n], rtol=1e-5, atol=1e-6, err_msg=f"{key} {n}")
    for a, b in zip(imp[3], hyb[3]):  # input gradients
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_forward_is_not_run_again():
    net = Counted(B.Dense(3))
    net.initialize()
    net.hybridize()
    x = arr(2, 4)
    for _ in range(3):
        net(x)
    assert net.calls == 1 and net.trace_count == 1
    with la.autograd.record():  # training mode is a different graph: traced once more
        for _ in range(3):
            net(x)
    assert net.calls == 2
    net.hybridize(False)
    net(x)
    assert net.calls == 3  # imperative again


def test_kernels_run_from_the_compiled_program(kernel_calls, kernel_path):
    """The registered kernels run; with compiled kernels the relu after a dense layer is the dense
    step's epilogue (executor/epilogue.py: one compiled pass adds the bias and applies relu)."""
    net = B.HybridSequential()
    net.add(B.Dense(4, activation="relu"), B.Dense(2))
    net.initialize()
    net.hybridize()
    x = arr(3, 5)
    net(x)
    kernel_calls.clear()
    net(x)
    assert sorted(kernel_calls) == (["dense", "dense"] if kernel_path == "compiled" else ["dense", "dense", "relu"])


def test_new_batch_size_recompiles_without_retracing_a_generic_graph():
    net = Counted(cnn())
    net.initialize()
    net.hybridize()
    for batch in (4, 1, 7):
        y = net(arr(batch, 2, 6, 6))
        assert y.shape == (batch, 3)
    assert net.calls == 1 and net.trace_count == 1


class Reshaper(B.HybridBlock):
    """Reshapes by the batch size: traced once with a symbolic batch, its other sizes fixed."""

    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return x.reshape(x.shape[0], -1) * 2


def test_a_graph_that_reshapes_by_the_batch_serves_every_batch_and_retraces_for_other_sizes():
    net = Reshaper()
    net.hybridize()
    assert net(arr(2, 3, 2)).shape == (2, 6)
    assert net(arr(5, 3, 2)).shape == (5, 6)  # the batch was traced as la.Dim("batch")
    assert net(arr(2, 3, 2)).shape == (2, 6)  # compiled per signature
    assert net.calls == 1
    assert net(arr(2, 4, 2)).shape == (2, 8)  # the other sizes are the trace's: traced again
    assert net.calls == 2


def test_static_shape_retraces_per_signature():
    net = Counted(B.Dense(2))
    net.initialize()
    net.hybridize(static_shape=True)
    net(arr(2, 3))
    net(arr(4, 3))
    assert net.calls == 2


def test_rank_change_retraces():
    net = Counted(B.Flatten())
    net.hybridize()
    assert net(arr(2, 3, 4)).shape == (2, 12)
    assert net(arr(2, 3, 4, 5)).shape == (2, 60)
    assert net.calls == 2


def test_dropout_uses_the_mode_of_each_call():
    net = B.Dropout(0.5)
    net.hybridize()
    x = la.ones((100, 100))
    np.testing.assert_array_equal(net(x).asnumpy(), np.ones((100, 100)))
    with la.autograd.record():
        y1, y2 = net(x).asnumpy(), net(x).asnumpy()
    assert 0.4 < (y1 == 0).mean() < 0.6 and (y1 != y2).any()  # a fresh mask every call
    np.testing.assert_array_equal(net(x).asnumpy(), np.ones((100, 100)))


def test_batchnorm_running_stats_are_graph_outputs_written_back():
    net = B.BatchNorm()
    net.initialize()
    net.hybridize()
    x = arr(8, 3, 2, 2) + 5
    with la.autograd.record():
        net(x)
    compiled = net._by_sig[(True, ((x.shape, x.dtype, x.device),))]
    assert [p.name for p in compiled.updates] == ["running_mean", "running_var"]
    assert len(compiled.symbol.outputs) == 3
    mean = x.asnumpy().mean(axis=(0, 2, 3))
    np.testing.assert_allclose(net.running_mean.data().asnumpy(), 0.1 * mean, rtol=1e-5)
    inference = net._by_sig.get((False, ((x.shape, x.dtype, x.device),)))
    assert inference is None  # not traced yet
    net(x)
    assert len(net._by_sig[(False, ((x.shape, x.dtype, x.device),))].symbol.outputs) == 1


def test_hybridized_child_is_inlined_into_the_parent_graph():
    child = Counted(B.Dense(3, activation="relu"))
    parent = B.HybridSequential()
    parent.add(child, B.Dense(2))
    parent.initialize()
    parent.hybridize()  # hybridizes the child too
    assert child.hybridized
    x = arr(4, 5)
    parent(x)
    parent(x)
    assert child.calls == 1 and child.trace_count == 0  # ran once, inside the parent's trace
    sym = parent._by_sig[(False, ((x.shape, x.dtype, x.device),))].symbol
    ops = [n.op.name for n in sym.topo() if n.op is not None]
    assert ops == ["dense", "relu", "dense"]
    assert sym.list_inputs() == ["data", "0.inner.weight", "0.inner.bias", "1.weight", "1.bias"]


def test_hybridized_block_inside_imperative_code_and_deferred_compute():
    net = B.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    x = arr(4, 3)
    eager = net(x).asnumpy()
    with la.deferred():
        y = net(x) * 1.0
        assert y.is_lazy
    np.testing.assert_allclose(y.asnumpy(), eager, rtol=1e-6)


def test_non_array_argument_is_rejected_clearly():
    net = B.Activation("relu")
    net.hybridize()
    with pytest.raises(TypeError, match=r"la.array"):
        net(np.ones(3))


def test_forward_returning_a_non_array_is_explained():
    class Bad(B.HybridBlock):
        def forward(self, x):
            return {"y": x, "n": "two"}  # (a dict of arrays is fine: tests/blocks/test_gluon_habits.py)

    net = Bad()
    net.hybridize()
    with pytest.raises(TypeError, match=r"tuples / lists / dicts of them.*output\['n'\] is a str"):
        net(arr(2))


def test_training_a_hybridized_model_reduces_the_loss():
    la.random.seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    net = B.HybridSequential()
    net.add(B.Dense(16, activation="relu"), B.BatchNorm(), B.Dense(2))
    net.initialize()
    net.hybridize()
    trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})
    loss_fn = B.SoftmaxCrossEntropyLoss()
    xs, ys = la.array(x), la.array(y)
    losses = []
    for _ in range(30):
        with la.autograd.record():
            loss = loss_fn(net(xs), ys)
        loss.backward()
        trainer.step(64)
        losses.append(loss.asnumpy().mean())
    assert losses[-1] < 0.3 * losses[0]
    acc = (net(xs).asnumpy().argmax(axis=1) == y).mean()
    assert acc > 0.9


def test_cached_op_is_the_one_that_ran_the_last_call():
    net = B.HybridSequential()
    net.add(B.Dense(8, activation="relu"), B.Dense(2))
    net.initialize()
    assert net.cached_op is None
    net.hybridize()
    assert net.cached_op is None  # nothing traced yet
    net(la.ones((4, 3)))
    op = net.cached_op
    assert isinstance(op, la.CachedOp) and op.num_compiles == 1
    assert op.sym.list_inputs()[0] == "data"
    assert "memory plan" in op._repr_html_()


def test_a_hybridized_loss_on_a_hybridized_net_gives_the_imperative_gradients():
    x = la.array(np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32))
    labels = la.array(np.array([0, 1, 2, 0, 1, 2]))
    grads = []
    for hybrid in (False, True):
        la.random.seed(3)
        net = B.HybridSequential()
        net.add(B.Dense(8, activation="relu"), B.Dense(3))
        net.initialize()
        loss_fn = B.SoftmaxCrossEntropyLoss()
        if hybrid:
            net.hybridize()
            loss_fn.hybridize()
        for _ in range(2):  # the second call runs the cached graphs
            with la.autograd.record():
                loss = loss_fn(net(x), labels)
            loss.backward()
        assert "data0" in loss_fn.cached_op.sym.list_inputs() if hybrid else True
        grads.append({n: p.grad().asnumpy() for n, p in net.collect_params().items()})
    for n in grads[0]:
        np.testing.assert_allclose(grads[1][n], grads[0][n], rtol=1e-5, atol=1e-6)


def test_a_hybridized_block_keeps_a_bounded_number_of_signatures():
    import warnings

    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=2))
    net.initialize()
    net.hybridize(cache_size=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 40):
            net(la.ones((n, 2)))
    assert len(net._by_sig) == 5
    msgs = [str(w.message) for w in caught if issubclass(w.category, la.RecompileWarning)]
    assert len(msgs) == 1 and "argument 0 dim 0" in msgs[0]  # once per cause


def test_static_shape_retraces_are_counted_and_warned_once_per_cause():
    import warnings

    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=2))
    net.initialize()
    net.hybridize(static_shape=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 12):
            net(la.ones((n, 2)))
    assert net.trace_count == 11
    msgs = [str(w.message) for w in caught if issubclass(w.category, la.RecompileWarning)]
    assert len(msgs) == 1 and "float32[8, 2]" in msgs[0] and "float32[9, 2]" in msgs[0]


class _FlatDense(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = B.Dense(3, in_units=8)

    def forward(self, x):
        return self.dense(x.reshape(x.shape[0], -1))


def test_a_symbolic_trace_exports_one_graph_for_every_batch(tmp_path):
    net = _FlatDense()
    net.initialize()
    net.hybridize()
    net(la.array(arr(2, 4, 2)))
    sym_file, param_file = net.export(str(tmp_path / "flat"))
    text = open(sym_file).read()
    assert '"version": 3' in text and '"dim": "batch"' in text
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    for n in (1, 5):
        x = la.array(arr(n, 4, 2))
        np.testing.assert_allclose(back(x).asnumpy(), net(x).asnumpy(), rtol=1e-6, atol=1e-6)
    assert net.trace_count == 1


class _GcSeen(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(gc.isenabled())
        return x * 2


def test_a_trace_runs_with_the_cyclic_gc_paused_and_turns_it_on_again():
    net = _GcSeen()
    net.hybridize()
    x = arr(2, 3)
    np.testing.assert_allclose(net(x).asnumpy(), x.asnumpy() * 2)
    assert net.seen and not any(net.seen) and gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        net(arr(5, 3, 2))
        assert not gc.isenabled()
    finally:
        gc.enable()
