"""Sound traces: a hybridized block never returns a silently wrong result.

Python shape reads become guards (a trace is reused only where they hold); value reads of
anything that depends on a block input raise ``TraceError``; parameters read by reference are
bound, not folded; changing children or parameters invalidates the traces."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray import blocks as nn

BATCHES = (2, 4, 7)


def _x(n, d=3, seed=0):
    return la.array(np.random.default_rng(seed + n).standard_normal((n, d)).astype(np.float32))


def _same_as_imperative(make, batches=BATCHES, d=3):
    imp, hyb = make(), make()
    hyb.hybridize()
    for n in batches:
        x = _x(n, d)
        np.testing.assert_allclose(hyb(x).asnumpy(), imp(x).asnumpy(), rtol=1e-5, atol=1e-6)
    return hyb


class Mean(nn.HybridBlock):
    def forward(self, x):
        return x.sum() / x.shape[0]


class Branch(nn.HybridBlock):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x * -1


class Flat(nn.HybridBlock):
    def forward(self, x):
        return x.reshape(x.shape[0], -1)


class Zeros(nn.HybridBlock):
    def forward(self, x):
        return x + la.zeros((x.shape[0], 3))


class Loop(nn.HybridBlock):
    def forward(self, x):
        out = x[:, 0]
        for j in range(1, x.shape[1]):
            out = out + x[:, j] * j
        return out


class Inner(nn.HybridBlock):
    def forward(self, x):
        return x * len(x)


class Outer(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) + 1


class Generic(nn.HybridBlock):
    def forward(self, x):
        return la.nn.flatten(x) - x.mean(axis=0, keepdims=True) if x.ndim == 2 else x


@pytest.mark.parametrize("block", [Mean, Outer], ids=lambda b: b.__name__)
def test_blocks_that_use_the_batch_as_a_number_equal_the_imperative_block_at_every_batch_size(block):
    hyb = _same_as_imperative(block)
    assert hyb.trace_count == len(BATCHES)  # one trace per batch size: the guard on dim 0 fails


@pytest.mark.parametrize("block", [Flat, Zeros], ids=lambda b: b.__name__)
def test_blocks_that_read_the_batch_only_to_size_ops_trace_once_for_every_batch(block):
    """x.shape[0] of a symbolic trace is la.Dim("batch"): reshape(n, -1) and zeros((n, 3)) record it."""
    hyb = _same_as_imperative(block, batches=(2, 4, 7, 1))
    assert hyb.trace_count == 1 and "no guards" in hyb.guards()
    data = hyb.cached_op.sym.input_nodes()[0]
    assert str(data.avals[0].shape[0]) == "batch"


class BranchOnBatch(nn.HybridBlock):
    def forward(self, x):
        return x * 2 if x.shape[0] == 1 else x * 3  # a Python branch on the batch: never answered for one size


def test_a_branch_on_the_batch_is_never_answered_symbolically():
    hyb = _same_as_imperative(BranchOnBatch, batches=(1, 3, 1, 5))
    assert hyb.trace_count == 3  # traced with the call's shapes instead: one guarded trace per batch size


def test_a_python_loop_over_a_dim_is_guarded_on_that_dim_only():
    hyb = _same_as_imperative(Loop)
    assert hyb.trace_count == 1  # the batch size changes, the loop's dim 1 does not
    x = _x(2, d=5)
    np.testing.assert_allclose(hyb(x).asnumpy(), Loop()(x).asnumpy(), rtol=1e-6)
    assert hyb.trace_count == 2


def test_shape_generic_blocks_serve_every_batch_size_from_one_trace():
    hyb = _same_as_imperative(Generic, batches=range(1, 9))
    assert hyb.trace_count == 1
    assert "no guards" in hyb.guards()


def test_guards_name_the_input_dim_value_and_line():
    hyb = Mean()
    hyb.hybridize()
    hyb(_x(4))
    text = hyb.guards()
    assert "input 0 dim 0 == 4" in text
    assert "return x.sum() / x.shape[0]" in text


def test_reading_a_value_that_depends_on_the_input_is_a_trace_error_naming_the_line():
    hyb = Branch()
    hyb.hybridize()
    with pytest.raises(la.TraceError) as info:
        hyb(_x(2))
    msg = str(info.value)
    assert "if x.sum() > 0:" in msg and "greater" in msg
    assert "la.where" in msg and "la.cond" in msg and "active=False" in msg
    assert isinstance(info.value, la.LazyArrayError)


def test_hybridize_inactive_runs_the_branch_imperatively():
    hyb = Branch()
    hyb.hybridize(active=False)
    x = _x(3)
    np.testing.assert_allclose(hyb(-abs(x)).asnumpy(), (abs(x) * 1).asnumpy())


def test_a_data_dependent_shape_read_is_a_value_read():
    class Masked(nn.HybridBlock):
        def forward(self, x):
            y = x[x > 0]
            return y.sum() / y.shape[0]

    hyb = Masked()
    hyb.hybridize()
    with pytest.raises(la.TraceError, match=r"y.shape\[0\]"):
        hyb(_x(4))


def test_values_that_do_not_depend_on_inputs_can_be_read():
    class Scaled(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter("w", shape=(3,), init=la.init.One())

        def forward(self, x):
            scale = float(self.w.data().sum().asnumpy())  # a parameter's value: allowed
            return x * scale

    hyb = _same_as_imperative(lambda: _init(Scaled()))
    assert hyb.trace_count == 1


def _init(block):
    block.initialize()
    return block


def test_a_tied_parameter_read_by_reference_is_bound_not_folded():
    shared = nn.Parameter("shared", shape=(3,), init=la.init.One())
    shared.initialize()

    class Tied(nn.HybridBlock):
        def forward(self, x):
            return x * shared.data()

    hyb = Tied()
    hyb.hybridize()
    x = _x(2)
    np.testing.assert_allclose(hyb(x).asnumpy(), x.asnumpy())
    shared.set_data(np.full(3, 5.0, np.float32))
    np.testing.assert_allclose(hyb(x).asnumpy(), 5 * x.asnumpy())  # not a stale constant
    assert "shared" in hyb.cached_op.sym.list_inputs()


def test_changing_children_invalidates_the_trace():
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3))
    net.initialize()
    net.hybridize()
    x = _x(2)
    net(x)
    net.add(nn.Dense(2, in_units=4))
    net[1].initialize()
    assert net(x).shape == (2, 2)


def test_the_structure_is_checked_again_only_after_a_change_or_a_clear(monkeypatch):
    from lazyarray.blocks import block

    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3))
    net.initialize()
    net.hybridize()
    x = _x(2)
    net(x)
    checks = []
    real = block.HybridBlock._check_structure
    monkeypatch.setattr(block.HybridBlock, "_check_structure", lambda self: checks.append(1) or real(self))
    net(x)
    assert checks == []  # (nothing changed: the token is the one it saw)
    block.STRUCTURE.clear()
    want = net(x).asnumpy()
    assert checks == [1] and net.trace_count == 1  # (checked again, found unchanged: the trace kept)
    net.add(nn.Dense(2, in_units=4))
    net[1].initialize()
    got = net(x)
    assert checks == [1, 1] and got.shape == (2, 2)
    np.testing.assert_allclose(got.asnumpy(), net[1](la.array(want)).asnumpy(), rtol=1e-5, atol=1e-6)


def test_swapping_a_head_invalidates_the_trace():
    class Model(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.body = nn.Dense(4, in_units=3)
            self.head = nn.Dense(2, in_units=4)

        def forward(self, x):
            return self.head(self.body(x))

    net = _init(Model())
    net.hybridize()
    x = _x(2)
    net(x)
    net.head = _init(nn.Dense(5, in_units=4))
    imperative = net.head(net.body(x)).asnumpy()
    np.testing.assert_allclose(net(x).asnumpy(), imperative, rtol=1e-6)


def test_a_hybridized_block_called_with_a_non_array_is_a_type_error():
    hyb = Mean()
    hyb.hybridize()
    with pytest.raises(la.LazyArrayError) as info:
        hyb([1.0, 2.0])
    assert isinstance(info.value, TypeError)


# -- hypothesis: random small blocks mixing shape reads and shape-generic ops -----------------------
STEPS = st.lists(st.sampled_from(["div_rows", "flatten", "mean0", "scale_cols", "reshape_rows", "zeros_rows"]),
                 min_size=1, max_size=4)


def _block_of(steps):
    class Random(nn.HybridBlock):
        def forward(self, x):
            for s in steps:
                if s == "div_rows":
                    x = x / x.shape[0]
                elif s == "flatten":
                    x = la.nn.flatten(x)
                elif s == "mean0":
                    x = x - x.mean(axis=0, keepdims=True)
                elif s == "scale_cols":
                    x = x * x.shape[1]
                elif s == "reshape_rows":
                    x = x.reshape(x.shape[0], -1)
                else:
                    x = x + la.zeros((x.shape[0], x.shape[1]))
            return x

    return Random


@settings(max_examples=25, deadline=None)
@given(STEPS, st.lists(st.integers(1, 6), min_size=2, max_size=4))
def test_random_blocks_always_equal_the_imperative_block(steps, batches):
    block = _block_of(steps)
    _same_as_imperative(block, batches=batches)


def test_a_non_differentiable_output_next_to_a_differentiable_one_trains():
    class Two(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(3, in_units=4)

        def forward(self, x):
            y = self.fc(x)
            return y, y.argmax(axis=1)

    grads = []
    for hybrid in (False, True):
        la.random.seed(0)
        net = _init(Two())
        if hybrid:
            net.hybridize()
        with la.autograd.record():
            y, k = net(la.ones((2, 4)))
            loss = (y * y).sum()
        loss.backward()
        grads.append((net.fc.weight.grad().asnumpy(), k.asnumpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-6)
    np.testing.assert_array_equal(grads[1][1], grads[0][1])


def test_a_cached_op_with_a_nonzero_output_runs_under_record():
    x = la.array(np.array([1.0, -2.0, 3.0], np.float32))
    with la.deferred():
        y = x * 2
        nz = la.argwhere(x > 0)
    op = la.CachedOp(la.get_symbol([y, nz], inputs={"x": x}))
    x.attach_grad()
    with la.autograd.record():
        out, idx = op(x)
    out.backward(la.ones(3))
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(idx.asnumpy()).ravel(), [0, 2])
