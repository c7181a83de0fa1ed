"""``Embedding(sparse_grad=True)``: a row_sparse weight gradient, eager and hybridized, and the
Trainer's lazy updates (only the looked-up rows change, weight decay included)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

INIT = np.arange(80, dtype=np.float32).reshape(20, 4) / 80
IDX = np.array([[1, 3], [3, 5]])
TOUCHED, OTHER = [1, 3, 5], [i for i in range(20) if i not in (1, 3, 5)]


def _train(sparse: bool, hybrid: bool, optimizer: str, steps: int = 3):
    emb = B.Embedding(20, 4, sparse_grad=sparse)
    emb.initialize()
    emb.weight.set_data(INIT)
    if hybrid:
        emb.hybridize()
    trainer = B.Trainer(emb.collect_params(), optimizer, {"learning_rate": 0.1, "wd": 0.01})
    x = la.array(IDX)
    target = la.array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 2, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", la.StorageFallbackWarning)
        for _ in range(steps):
            with la.autograd.record():
                loss = ((emb(x) - target) ** 2).sum()
            loss.backward()
            trainer.step(2)
    return emb


@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybridized"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_sparse_embedding_updates_only_the_rows_looked_up(hybrid, optimizer):
    sparse = _train(True, hybrid, optimizer)
    dense = _train(False, hybrid, optimizer)
    g = sparse.weight.grad()
    assert g.stype == "row_sparse" and g.indices.asnumpy().tolist() == TOUCHED
    assert dense.weight.grad().stype == "default"
    ws, wd = sparse.weight.data().asnumpy(), dense.weight.data().asnumpy()
    # rows looked up every step: lazy and dense updates agree; the others stay untouched
    np.testing.assert_allclose(ws[TOUCHED], wd[TOUCHED], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ws[OTHER], INIT[OTHER])
    assert not np.array_equal(wd[OTHER], INIT[OTHER])  # dense weight decay moves every row


def test_sparse_grad_gradient_equals_the_dense_gradient():
    sparse, dense = B.Embedding(20, 4, sparse_grad=True), B.Embedding(20, 4)
    for e in (sparse, dense):
        e.initialize()
        e.weight.set_data(INIT)
    grads = []
    for e in (sparse, dense):
        with la.autograd.record():
            y = (e(la.array(IDX)) ** 2).sum()
        y.backward()
        grads.append(e.weight.grad().asnumpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_zero_grad_clears_a_row_sparse_gradient():
    emb = _train(True, False, "sgd", steps=1)
    emb.weight.zero_grad()
    g = emb.weight.grad()
    assert g.stype == "row_sparse" and g.indices.asnumpy().size == 0
    np.testing.assert_array_equal(g.asnumpy(), np.zeros((20, 4), np.float32))
