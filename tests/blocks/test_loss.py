"""The losses of blocks/loss.py compile themselves: values and gradients equal the op-by-op path,
attributes set later are honoured, new shapes recompile quietly, user subclasses stay imperative."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

RNG = np.random.default_rng(0)

CASES = {
    "sce": (lambda: B.SoftmaxCrossEntropyLoss(), lambda n: RNG.integers(0, 5, n)),
    "sce-float-labels": (lambda: B.SoftmaxCrossEntropyLoss(weight=0.5),
                         lambda n: RNG.integers(0, 5, n).astype(np.float32)),
    "sce-dense": (lambda: B.SoftmaxCrossEntropyLoss(sparse_label=False),
                  lambda n: RNG.dirichlet(np.ones(5), n).astype(np.float32)),
    "l2": (lambda: B.L2Loss(), lambda n: RNG.standard_normal((n, 5)).astype(np.float32)),
    "l1": (lambda: B.L1Loss(weight=2.0), lambda n: RNG.standard_normal((n, 5)).astype(np.float32)),
}


def _value_and_grad(loss_fn, pred, label):
    p = la.array(pred)
    p.attach_grad()
    with la.autograd.record():
        out = loss_fn(p, la.array(label))
    out.backward()
    return out.asnumpy(), p.grad.asnumpy()


@pytest.mark.parametrize("case", list(CASES))
def test_compiled_loss_equals_op_by_op(case):
    make, labels = CASES[case]
    compiled, eager = make(), make()
    eager.hybridize(False)
    assert compiled.hybridized and not eager.hybridized
    for n in (4, 7):
        pred, label = RNG.standard_normal((n, 5)).astype(np.float32), labels(n)
        (v1, g1), (v2, g2) = _value_and_grad(compiled, pred, label), _value_and_grad(eager, pred, label)
        np.testing.assert_allclose(v1, v2, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g1, g2, rtol=1e-6, atol=1e-7)


def test_setting_an_attribute_drops_the_compiled_graph():
    loss_fn = B.L2Loss()
    pred, label = la.array(np.ones((2, 3), np.float32)), la.array(np.zeros((2, 3), np.float32))
    np.testing.assert_allclose(loss_fn(pred, label).asnumpy(), [0.5, 0.5])
    loss_fn.weight = 4.0
    np.testing.assert_allclose(loss_fn(pred, label).asnumpy(), [2.0, 2.0])


def test_many_shapes_recompile_without_warnings():
    loss_fn = B.SoftmaxCrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 20):
            out = loss_fn(la.array(RNG.standard_normal((n, 3)).astype(np.float32)), la.array(np.zeros(n, np.int64)))
            assert out.shape == (n,)


def test_a_subclass_with_its_own_forward_stays_imperative():
    class Reads(B.Loss):
        def forward(self, pred, label):
            scale = float(np.abs(pred.asnumpy()).max())  # a value read: fine imperatively
            return self._finish(((pred - label) / scale) ** 2)

    loss_fn = Reads()
    assert not loss_fn.hybridized
    out = loss_fn(la.array(np.array([[2.0, -4.0]], np.float32)), la.array(np.zeros((1, 2), np.float32)))
    np.testing.assert_allclose(out.asnumpy(), [(0.25 + 1.0) / 2])


def test_integer_label_sce_is_one_op_forward_and_one_backward():
    loss_fn = B.SoftmaxCrossEntropyLoss()
    with la.deferred():
        loss = loss_fn(la.array(np.zeros((4, 3), np.float32)), la.array(np.array([0, 1, 2, 0])))
    names = [n.op.name for n in la.get_symbol(loss).topo() if n.op is not None]
    assert names == ["softmax_cross_entropy_rows"]
    p = la.array(RNG.standard_normal((4, 3)).astype(np.float32))
    p.attach_grad()
    with la.deferred(), la.autograd.record():
        loss = loss_fn(p, la.array(np.array([0, 1, 2, 0])))
        loss.backward()
        names = {n.op.name for n in la.get_symbol(p.grad).topo() if n.op is not None}
    assert "softmax_cross_entropy_rows_grad" in names and not names & {"one_hot", "log_softmax", "softmax"}


def _one_hot_formula(pred, label):
    """The per-sample loss as the one-hot formula (``sum(log_softmax * -one_hot)``), op by op."""
    onehot = la.nn.one_hot(label, depth=pred.shape[-1], dtype=pred.dtype)
    return B.SoftmaxCrossEntropyLoss()._finish((la.nn.log_softmax(pred, axis=-1) * -onehot).sum(axis=-1))


@pytest.mark.parametrize("hybrid", [True, False])
@pytest.mark.parametrize("shape,dtype", [((64, 10), "float32"), ((7, 3, 5), "float64"), ((300, 1000), "float32")])
def test_integer_label_sce_picks_by_index_with_the_one_hot_formulas_values(shape, dtype, hybrid):
    """The integer-label loss runs one indexing op each way (ops/loss.py; compiled, the forward
    hands the backward its probabilities), and its value and gradient are those of the one-hot
    formula bit for bit (the same operations in the same order; (300, 1000) takes log_softmax's
    row-chunked path), for a head gradient other than ones too."""
    loss_fn = B.SoftmaxCrossEntropyLoss()
    loss_fn.hybridize(hybrid)
    pred = RNG.standard_normal(shape).astype(dtype)
    label = RNG.integers(0, shape[-1], shape[:-1])
    head = RNG.random(shape[:1]).astype(dtype)  # (a loss per sample: other axes averaged)
    got, want = [], []
    for fn, out in ((loss_fn, got), (_one_hot_formula, want)):
        p = la.array(pred)
        p.attach_grad()
        with la.autograd.record():
            loss = fn(p, la.array(label))
        loss.backward(la.array(head))
        out += [loss.asnumpy(), p.grad.asnumpy()]
    assert got[0].dtype == want[0].dtype == dtype and got[1].dtype == dtype
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_integer_label_sce_rejects_a_label_out_of_range():
    loss_fn = B.SoftmaxCrossEntropyLoss()
    for bad in (3, -1):  # a negative label is refused too: not a class counted from the end
        with pytest.raises(la.OpIndexError, match=rf"label {bad} is outside \[0, 3\)"):
            loss_fn(la.array(np.zeros((2, 3), np.float32)), la.array(np.array([0, bad]))).asnumpy()
