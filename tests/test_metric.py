"""la.metric against NumPy formulas written in the test, accumulated over several batches."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la

rng = np.random.default_rng(0)


def _probs(n, k):
    p = rng.random((n, k)) + 0.05
    return (p / p.sum(1, keepdims=True)).astype(np.float32)


def test_accuracy_over_batches_and_lists():
    m = la.metric.Accuracy()
    batches = [(rng.integers(0, 4, 6), rng.standard_normal((6, 4)).astype(np.float32)) for _ in range(3)]
    for label, pred in batches[:2]:
        m.update(la.array(label), la.array(pred))
    m.update([la.array(batches[2][0])], [batches[2][1]])  # lists, NumPy predictions
    correct = sum((p.argmax(1) == lab).sum() for lab, p in batches)
    assert m.get() == ("accuracy", pytest.approx(correct / 18))
    assert m.num_inst == 18
    m.reset()
    assert math.isnan(m.get()[1])


def test_accuracy_with_class_ids_and_other_axis():
    m = la.metric.Accuracy(axis=0)
    pred = rng.standard_normal((3, 5)).astype(np.float32)  # classes on axis 0
    label = rng.integers(0, 3, 5)
    m.update(la.array(label), la.array(pred))
    assert m.get()[1] == pytest.approx((pred.argmax(0) == label).mean())
    ids = la.metric.Accuracy()
    ids.update(la.array([1, 2, 3]), la.array([1, 0, 3]))
    assert ids.get()[1] == pytest.approx(2 / 3)


def test_cross_entropy():
    m = la.metric.CrossEntropy(eps=1e-12)
    ref, n = 0.0, 0
    for _ in range(2):
        p, lab = _probs(5, 3), rng.integers(0, 3, 5)
        m.update(la.array(lab), la.array(p))
        ref += -np.log(p[np.arange(5), lab] + 1e-12).sum()
        n += 5
    assert m.get() == ("cross-entropy", pytest.approx(ref / n, rel=1e-6))


@pytest.mark.parametrize("ignore", [None, 0])
def test_perplexity(ignore):
    m = la.metric.Perplexity(ignore_label=ignore)
    p, lab = _probs(8, 4), rng.integers(0, 4, 8)
    lab[:2] = 0
    m.update([la.array(lab)], [la.array(p)])
    keep = np.ones(8, bool) if ignore is None else lab != ignore
    ref = math.exp(-np.log(p[np.arange(8), lab][keep]).sum() / keep.sum())
    assert m.get() == ("perplexity", pytest.approx(ref, rel=1e-6))


def test_mismatched_updates_raise():
    with pytest.raises(la.LazyArrayError, match="2 label arrays but 1"):
        la.metric.Accuracy().update([la.array([0]), la.array([1])], [la.array([[0.0, 1.0]])])
    with pytest.raises(la.LazyArrayError, match="labels must lie"):
        la.metric.CrossEntropy().update(la.array([5]), la.array([[0.5, 0.5]]))
    with pytest.raises(la.LazyArrayError, match="3 labels but 2"):
        la.metric.Accuracy().update(la.array([0, 1, 1]), la.array([[0.0, 1.0], [1.0, 0.0]]))
