"""Gluon's other losses (blocks/loss.py): values against NumPy references written from Gluon's /
PyTorch's documented formulas, ``weight`` / ``sample_weight`` / ``batch_axis``, gradients against
central finite differences in float64 (compiled and op by op), CTC against an enumeration of every
alignment, and class labels refused where they are read (the loss, the value and its index named)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from ops.cases import ctc_by_enumeration

import lazyarray as la
from lazyarray import blocks as B

RNG = np.random.default_rng(7)


def _rows_mean(x, batch_axis=0):
    axes = tuple(i for i in range(x.ndim) if i != batch_axis)
    return x.mean(axis=axes) if axes else x


def _log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# -- references (the textbook formulas, not the stable forms the blocks use) -------------------------------
def _bce_ref(x, z, pos_weight=None):
    p, w = _sigmoid(x), (1.0 if pos_weight is None else pos_weight)
    return -(w * z * np.log(p) + (1 - z) * np.log(1 - p))


def _huber_ref(x, z, rho):
    d = np.abs(x - z)
    return np.where(d <= rho, 0.5 * d**2 / rho, d - 0.5 * rho)


def _poisson_ref(x, t, from_logits, full):
    loss = np.exp(x) - t * x if from_logits else x - t * np.log(x + 1e-8)
    if full:  # PyTorch's Stirling term, only where target > 1
        safe = np.maximum(t, 1)
        loss = loss + np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe), 0)
    return loss


def _cosine_ref(a, b, y, margin):
    cos = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    return np.where(y == 1, 1 - cos, np.maximum(cos - margin, 0))


def _pred(shape=(4, 3)):
    return RNG.standard_normal(shape)


def _binary(shape=(4, 3)):
    return (RNG.random(shape) > 0.5).astype(np.float64)


def _signed(shape=(4, 3)):
    return np.where(RNG.random(shape) > 0.5, 1.0, -1.0)


def _dist(shape=(4, 3)):
    return RNG.dirichlet(np.ones(shape[-1]), shape[:-1])


# name: (make the loss, inputs as NumPy arrays (the differentiated ones first), element-wise reference,
#        indices of the inputs to differentiate)
CASES = {
    "bce": (lambda: B.SigmoidBinaryCrossEntropyLoss(), lambda: [_pred(), _binary()], _bce_ref, (0,)),
    "bce-soft-labels": (lambda: B.SigmoidBinaryCrossEntropyLoss(), lambda: [_pred(), RNG.random((4, 3))],
                        _bce_ref, (0,)),
    "bce-from-sigmoid": (lambda: B.SigmoidBinaryCrossEntropyLoss(from_sigmoid=True),
                         lambda: [_sigmoid(_pred()), _binary()],
                         lambda p, z: -(z * np.log(p + 1e-12) + (1 - z) * np.log(1 - p + 1e-12)), (0,)),
    "huber": (lambda: B.HuberLoss(rho=0.7), lambda: [_pred(), _pred()], lambda x, z: _huber_ref(x, z, 0.7), (0, 1)),
    "kl-logits": (lambda: B.KLDivLoss(), lambda: [_log_softmax(_pred()), _dist()],
                  lambda x, z: z * (np.log(z) - x), (0,)),
    "kl-scores": (lambda: B.KLDivLoss(from_logits=False), lambda: [_pred(), _dist()],
                  lambda x, z: z * (np.log(z) - _log_softmax(x)), (0,)),
    "hinge": (lambda: B.HingeLoss(margin=0.8), lambda: [_pred(), _signed()],
              lambda x, z: np.maximum(0, 0.8 - x * z), (0,)),
    "squared-hinge": (lambda: B.SquaredHingeLoss(), lambda: [_pred(), _signed()],
                      lambda x, z: np.maximum(0, 1 - x * z) ** 2, (0,)),
    "logistic-signed": (lambda: B.LogisticLoss(), lambda: [_pred(), _signed()],
                        lambda x, z: np.log1p(np.exp(-x * z)), (0,)),
    "logistic-binary": (lambda: B.LogisticLoss(label_format="binary"), lambda: [_pred(), _binary()],
                        lambda x, z: np.log1p(np.exp(-x * (2 * z - 1))), (0,)),
    "poisson-logits": (lambda: B.PoissonNLLLoss(), lambda: [_pred(), RNG.poisson(2.0, (4, 3)).astype(float)],
                       lambda x, t: _poisson_ref(x, t, True, False), (0,)),
    "poisson-rates-full": (lambda: B.PoissonNLLLoss(from_logits=False, compute_full=True),
                           lambda: [RNG.random((4, 3)) + 0.5, RNG.poisson(2.0, (4, 3)).astype(float)],
                           lambda x, t: _poisson_ref(x, t, False, True), (0,)),
    "sce-one-hot": (lambda: B.SoftmaxCrossEntropyLoss(sparse_label=False),
                    lambda: [_pred(), np.eye(3)[RNG.integers(0, 3, 4)]],
                    lambda x, z: -(z * _log_softmax(x)).sum(-1, keepdims=True), (0,)),
}


def _call(loss_fn, arrays, sample_weight=None, grad=()):
    xs = [la.array(a) for a in arrays]
    for i in grad:
        xs[i].attach_grad()
    with la.autograd.record():
        out = loss_fn(*xs) if sample_weight is None else loss_fn(*xs, sample_weight=la.array(sample_weight))
    if grad:
        out.backward()
    return out.asnumpy(), [xs[i].grad.asnumpy() for i in grad]


@pytest.mark.parametrize("hybrid", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_values_match_the_formulas(case, hybrid):
    make, inputs, ref, _ = CASES[case]
    loss_fn = make()
    loss_fn.hybridize(hybrid)
    arrays = inputs()
    np.testing.assert_allclose(_call(loss_fn, arrays)[0], _rows_mean(ref(*arrays)), rtol=1e-10, atol=1e-12)
    # Gluon's weighting: sample_weight broadcast against the element-wise loss, then weight, then the mean
    loss_fn.weight = 2.5
    sw = RNG.random((4, 1))
    np.testing.assert_allclose(_call(loss_fn, arrays, sw)[0], _rows_mean(ref(*arrays) * sw * 2.5),
                               rtol=1e-10, atol=1e-12)


def _numeric_grad(loss_fn, arrays, i, eps=1e-6):
    x = arrays[i]
    grad = np.zeros_like(x)
    for k in range(x.size):
        vals = []
        for sign in (1, -1):
            moved = [a.copy() for a in arrays]
            moved[i].reshape(-1)[k] += sign * eps
            vals.append(loss_fn(*[la.array(a) for a in moved]).asnumpy().sum())
        grad.reshape(-1)[k] = (vals[0] - vals[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("hybrid", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_gradients_match_finite_differences(case, hybrid):
    make, inputs, _, grad = CASES[case]
    loss_fn = make()
    loss_fn.hybridize(hybrid)
    arrays = inputs()
    _, grads = _call(loss_fn, arrays, grad=grad)
    for i, got in zip(grad, grads):
        np.testing.assert_allclose(got, _numeric_grad(loss_fn, arrays, i), rtol=1e-6, atol=1e-8,
                                   err_msg=f"{case}: input {i}")


def test_bce_pos_weight_as_gluon():
    x, z, pw = _pred(), _binary(), RNG.random((1, 3)) * 3
    for from_sigmoid in (False, True):
        loss_fn = B.SigmoidBinaryCrossEntropyLoss(from_sigmoid=from_sigmoid)
        pred = _sigmoid(x) if from_sigmoid else x
        p = la.array(pred)
        p.attach_grad()
        with la.autograd.record():
            out = loss_fn(p, la.array(z), None, la.array(pw))
        out.backward()
        np.testing.assert_allclose(out.asnumpy(), _rows_mean(_bce_ref(x, z, pw)), rtol=1e-8)
        num = _numeric_grad(lambda a, b, c, f=loss_fn: f(a, b, None, c), [pred, z, pw], 0)
        np.testing.assert_allclose(p.grad.asnumpy(), num, rtol=1e-6, atol=1e-8)


def test_bce_is_stable_for_large_scores():
    x = np.array([[800.0, -800.0, 30.0]], np.float32)
    out = B.SigmoidBinaryCrossEntropyLoss()(la.array(x), la.array(np.array([[0.0, 1.0, 1.0]], np.float32)))
    np.testing.assert_allclose(out.asnumpy(), [(800 + 800 + np.log1p(np.exp(-30))) / 3], rtol=1e-6)
    assert out.dtype == np.float32


@pytest.mark.parametrize("hybrid", [True, False])
def test_cosine_embedding_and_triplet(hybrid):
    a, b, y = _pred((5, 4)), _pred((5, 4)), np.array([1, -1, 1, -1, -1])
    cos_fn, trip_fn = B.CosineEmbeddingLoss(margin=0.1), B.TripletLoss(margin=0.5)
    cos_fn.hybridize(hybrid)
    trip_fn.hybridize(hybrid)
    np.testing.assert_allclose(cos_fn(la.array(a), la.array(b), la.array(y)).asnumpy(), _cosine_ref(a, b, y, 0.1),
                               rtol=1e-10)
    pos, neg = _pred((5, 4)), _pred((5, 4))
    want = np.maximum(((a - pos) ** 2).sum(-1) - ((a - neg) ** 2).sum(-1) + 0.5, 0)
    np.testing.assert_allclose(trip_fn(la.array(a), la.array(pos), la.array(neg)).asnumpy(), want, rtol=1e-10)
    sw = RNG.random(5)
    np.testing.assert_allclose(trip_fn(la.array(a), la.array(pos), la.array(neg), sample_weight=la.array(sw)).asnumpy(),
                               want * sw, rtol=1e-10)
    for fn, arrays in ((cos_fn, [a, b, y.astype(float)]), (trip_fn, [a, pos, neg])):
        _, grads = _call(fn, arrays, grad=(0, 1))
        for i, got in zip((0, 1), grads):
            np.testing.assert_allclose(got, _numeric_grad(fn, arrays, i), rtol=1e-6, atol=1e-8)


def test_batch_axis_keeps_that_axis():
    x, z = _pred((3, 5)), _pred((3, 5))
    out = B.HuberLoss(batch_axis=1)(la.array(x), la.array(z)).asnumpy()
    np.testing.assert_allclose(out, _huber_ref(x, z, 1.0).mean(axis=0), rtol=1e-10)


# -- CTC -----------------------------------------------------------------------------------------------------
def _ctc_inputs():
    logits = RNG.standard_normal((3, 4, 4))  # (N, T, C): blank = class 3
    labels = np.array([[0, 1, -1], [2, 2, -1], [1, -1, -1]])
    return logits, labels


@pytest.mark.parametrize("hybrid", [True, False])
def test_ctc_matches_the_enumeration_of_alignments(hybrid):
    logits, labels = _ctc_inputs()
    loss_fn = B.CTCLoss()
    loss_fn.hybridize(hybrid)
    tnc = logits.transpose(1, 0, 2)
    want = ctc_by_enumeration(tnc, labels, np.full(3, 4), np.array([2, 2, 1]))
    np.testing.assert_allclose(loss_fn(la.array(logits), la.array(labels)).asnumpy(), want, rtol=1e-10)
    # the other layouts, lengths given (the padding past them is not read), weights
    tn = B.CTCLoss(layout="TNC", label_layout="TN", weight=0.5)
    tn.hybridize(hybrid)
    lengths = np.array([3, 4, 2])
    want = ctc_by_enumeration(tnc, labels, lengths, np.array([2, 1, 1]))
    got = tn(la.array(tnc), la.array(labels.T.copy()), la.array(lengths), la.array(np.array([2, 1, 1])),
             la.array(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(got.asnumpy(), want * [0.5, 1.0, 1.5], rtol=1e-10)


@pytest.mark.parametrize("hybrid", [True, False])
def test_ctc_gradient_matches_finite_differences(hybrid):
    logits, labels = _ctc_inputs()
    loss_fn = B.CTCLoss()
    loss_fn.hybridize(hybrid)
    _, (got,) = _call(loss_fn, [logits, labels], grad=(0,))
    np.testing.assert_allclose(got, _numeric_grad(loss_fn, [logits, labels], 0), rtol=1e-6, atol=1e-8)


def test_ctc_trains_a_dense_layer():
    """A hybridized net under a CTC loss learns (the loss falls) through Trainer."""
    net = B.Dense(4, flatten=False)
    net.initialize()
    net.hybridize()
    trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
    x = la.array(RNG.standard_normal((2, 5, 3)).astype(np.float32))
    y = la.array(np.array([[0, 1], [2, -1]]))
    loss_fn, first = B.CTCLoss(), None
    for _ in range(20):
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(2)
        first = float(loss.asnumpy().mean()) if first is None else first
    assert float(loss.asnumpy().mean()) < 0.5 * first


def test_ctc_labels_are_checked_where_read():
    logits = la.array(RNG.standard_normal((2, 4, 4)))
    with pytest.raises(la.OpIndexError, match=r"CTCLoss: label 3 is outside \[0, 3\) at index \(1, 0\)"):
        B.CTCLoss()(logits, la.array(np.array([[0, 1], [3, -1]]))).asnumpy()  # 3 is the blank
    with pytest.raises(la.OpValueError, match=r"CTCLoss: label 0.5 at index \(0, 1\) is not a whole number"):
        B.CTCLoss()(logits, la.array(np.array([[0, 0.5], [1, -1]]))).asnumpy()


def test_ctc_too_short_for_its_labels_is_inf():
    out = B.CTCLoss()(la.array(np.zeros((1, 2, 3))), la.array(np.array([[0, 0]])))  # needs 0, blank, 0
    assert np.isinf(out.asnumpy()).all()


# -- labels -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hybrid", [True, False])
@pytest.mark.parametrize("kwargs", [{}, {"from_logits": True}, {"axis": 0}])
def test_sce_refuses_a_float_label_that_is_not_whole(kwargs, hybrid):
    loss_fn = B.SoftmaxCrossEntropyLoss(**kwargs)
    loss_fn.hybridize(hybrid)
    pred = la.array(np.full((3, 3), -np.log(3)))  # (log-probabilities of 1/3 too: from_logits gives log 3)
    with pytest.raises(la.OpValueError, match=r"SoftmaxCrossEntropyLoss: label 1.9 at index 2 is not a whole number"):
        loss_fn(pred, la.array(np.array([0.0, 1.0, 1.9]))).asnumpy()
    with pytest.raises(la.OpIndexError, match=r"SoftmaxCrossEntropyLoss: label -1 is outside \[0, 3\) at index 1"):
        loss_fn(pred, la.array(np.array([0, -1, 1]))).asnumpy()
    np.testing.assert_allclose(loss_fn(pred, la.array(np.array([0.0, 2.0, 1.0]))).asnumpy(), np.log(3))


def test_sce_labels_checked_at_run_time_in_a_deferred_graph():
    with la.deferred():
        out = B.SoftmaxCrossEntropyLoss()(la.zeros((2, 3)), la.array(np.array([0.0, 3.0])))
    with pytest.raises(la.OpIndexError, match=r"label 3 is outside \[0, 3\) at index 1"):
        out.asnumpy()


def test_sce_one_hot_labels_need_sparse_label_false():
    pred, onehot = la.array(_pred((4, 3))), la.array(np.eye(3)[[0, 1, 2, 0]])
    with pytest.raises(la.ShapeError, match="one-hot or soft labels need sparse_label=False"):
        B.SoftmaxCrossEntropyLoss()(pred, onehot)
    dense = B.SoftmaxCrossEntropyLoss(sparse_label=False)(pred, onehot).asnumpy()
    sparse = B.SoftmaxCrossEntropyLoss()(pred, la.array(np.array([0, 1, 2, 0]))).asnumpy()
    np.testing.assert_allclose(dense, sparse, rtol=1e-6)
    # (N, 1) class indices are Gluon's keepdims form: accepted
    np.testing.assert_allclose(B.SoftmaxCrossEntropyLoss()(pred, la.array(np.array([[0], [1], [2], [0]]))).asnumpy(),
                               sparse, rtol=1e-6)
    with pytest.raises(la.ShapeError, match="class indices need sparse_label=True"):
        B.SoftmaxCrossEntropyLoss(sparse_label=False)(pred, la.array(np.array([0, 1, 2, 0])))


def test_sce_sample_weight_per_sample():
    pred, label, sw = _pred((4, 3)), np.array([0, 1, 2, 0]), RNG.random((4, 1))
    want = -np.take_along_axis(_log_softmax(pred), label[:, None], axis=1)[:, 0] * sw[:, 0]
    got = B.SoftmaxCrossEntropyLoss()(la.array(pred), la.array(label), la.array(sw)).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("make", [
    lambda: B.HuberLoss(rho=0), lambda: B.HuberLoss(rho=math.nan), lambda: B.HingeLoss(margin="x"),
    lambda: B.LogisticLoss(label_format="probability"), lambda: B.CTCLoss(layout="NCT"),
    lambda: B.KLDivLoss(from_logits=1), lambda: B.L2Loss(weight=math.inf), lambda: B.CosineEmbeddingLoss(margin=2),
])
def test_bad_constructor_arguments_are_named_errors(make):
    with pytest.raises((la.ParamError, la.ParamValueError)):
        make()
