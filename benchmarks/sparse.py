"""Sparse storage: lazyarray vs scipy.sparse used directly vs dense NumPy.

1. ``dot(csr, dense)``: a 100k x 10k CSR at 1% density (10M stored values) times a 10k x 64
   dense matrix, float32. lazyarray eagerly (``la.dot``) and through a CachedOp, against
   ``scipy.sparse.csr_matrix @ ndarray`` and the dense NumPy product of the same matrices.
2. A sparse-embedding training step: a 100k x 64 table, a batch of 512 x 8 token ids,
   loss = sum(emb(ids) * c), backward, SGD update.
   * lazyarray: ``Embedding(sparse_grad=True)`` + ``Trainer("sgd")`` (row_sparse gradient,
     lazy update of the 4096 looked-up rows at most), eager and hybridized;
   * lazyarray ``dot(csr one-hot, W)`` with ``W.attach_grad(stype="row_sparse")`` and
     ``la.sparse.sgd_update``;
   * scipy.sparse: one-hot CSR ``X``; ``X @ W``, gradient ``X.T @ G`` (scipy returns it dense),
     ``W -= lr * grad``;
   * dense NumPy: the one-hot matrix dense, the same three steps.

Target: lazyarray within 1.2x of scipy.sparse, and far below dense.

    python benchmarks/sparse.py [--small]
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import best_of, table

import lazyarray as la
from lazyarray import blocks as B

SMALL = "--small" in sys.argv
M, N, K, DENSITY = (10_000, 2_000, 64, 0.01) if SMALL else (100_000, 10_000, 64, 0.01)
VOCAB, DIM, BATCH, TOKENS, LR = (10_000 if SMALL else 100_000), 64, 512, 8, 0.01


def interleaved(fns: dict, rounds: int) -> dict:
    """Median seconds per call of each function, timed in alternating rounds (so drift in the
    machine's speed hits every variant alike)."""
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            times[k].append(best_of(f, repeat=1))
    return {k: float(np.median(v)) for k, v in times.items()}


def bench_dot():
    rng = np.random.default_rng(0)
    a = sp.random(M, N, density=DENSITY, format="csr", dtype=np.float32, random_state=rng)
    b = rng.standard_normal((N, K)).astype(np.float32)
    x = la.sparse.from_scipy(a)
    w = la.array(b)
    with la.deferred():
        y = la.dot(x, w)
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x, "w": w}))
    want = a @ b
    np.testing.assert_allclose(la.dot(x, w).asnumpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(op(x, w).asnumpy(), want, rtol=1e-4, atol=1e-4)
    t = interleaved({"scipy": lambda: a @ b, "la": lambda: la.dot(x, w), "op": lambda: op(x, w)}, rounds=11)
    t_scipy, t_la, t_op = t["scipy"], t["la"], t["op"]
    dense = a.toarray()
    t_dense = best_of(lambda: dense @ b, repeat=3)
    rows = [["scipy.sparse csr @ dense", t_scipy * 1e3, 1.0],
            ["lazyarray la.dot(csr, dense)", t_la * 1e3, t_la / t_scipy],
            ["lazyarray CachedOp", t_op * 1e3, t_op / t_scipy],
            ["dense NumPy (same matrices)", t_dense * 1e3, t_dense / t_scipy]]
    print(f"\ndot(csr, dense): {M} x {N} at {DENSITY:.0%} ({a.nnz:,} stored) @ {N} x {K}, float32")
    print(table(["variant", "ms", "x scipy"], rows))


def bench_embedding():
    rng = np.random.default_rng(1)
    table0 = (rng.standard_normal((VOCAB, DIM)) * 0.1).astype(np.float32)
    ids = rng.integers(0, VOCAB, (BATCH, TOKENS))
    c = rng.standard_normal((BATCH, TOKENS, DIM)).astype(np.float32)
    flat = ids.reshape(-1)
    onehot = sp.csr_matrix((np.ones(flat.size, np.float32), flat, np.arange(flat.size + 1)),
                           shape=(flat.size, VOCAB))
    c2 = c.reshape(-1, DIM)

    # scipy.sparse directly
    w_sp = table0.copy()

    def scipy_step():
        y = onehot @ w_sp
        loss = float(np.sum(y * c2))
        grad = onehot.T @ c2  # dense (VOCAB, DIM)
        np.subtract(w_sp, LR * grad, out=w_sp)
        return loss

    # dense NumPy
    dense_onehot = onehot.toarray()
    w_np = table0.copy()

    def dense_step():
        y = dense_onehot @ w_np
        loss = float(np.sum(y * c2))
        grad = dense_onehot.T @ c2
        np.subtract(w_np, LR * grad, out=w_np)
        return loss

    # lazyarray: Embedding(sparse_grad=True) + Trainer, eager and hybridized
    def make_block(hybrid):
        emb = B.Embedding(VOCAB, DIM, sparse_grad=True)
        emb.initialize()
        emb.weight.set_data(table0)
        if hybrid:
            emb.hybridize()
        return emb, B.Trainer(emb.collect_params(), "sgd", {"learning_rate": LR})

    x_ids, c_la = la.array(ids), la.array(c)

    def block_step(emb, trainer):
        with la.autograd.record():
            loss = (emb(x_ids) * c_la).sum()
        loss.backward()
        trainer.step(1)
        return loss

    eager_blk, hybrid_blk = make_block(False), make_block(True)

    # lazyarray: dot(csr one-hot, W) with a row_sparse gradient and sgd_update
    x_csr = la.sparse.from_scipy(onehot)
    c2_la = la.array(c2)
    w_la = la.array(table0)
    w_la.attach_grad(stype="row_sparse")

    def dot_step():
        with la.autograd.record():
            loss = (la.dot(x_csr, w_la) * c2_la).sum()
        loss.backward()
        la.sparse.sgd_update(w_la, w_la.grad, lr=LR)
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error", la.StorageFallbackWarning)  # no hidden densification
        # one step each from the same table gives the same table
        for f in (scipy_step, dense_step, dot_step, lambda: block_step(*eager_blk),
                  lambda: block_step(*hybrid_blk)):
            f()
        ref = w_sp
        for got in (w_np, w_la.asnumpy(), eager_blk[0].weight.data().asnumpy(),
                    hybrid_blk[0].weight.data().asnumpy()):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        t = interleaved({"scipy": scipy_step, "eager": lambda: block_step(*eager_blk),
                         "hybrid": lambda: block_step(*hybrid_blk), "dot": dot_step}, rounds=21)
        t_scipy, t_eager, t_hybrid, t_dot = t["scipy"], t["eager"], t["hybrid"], t["dot"]
        t_dense = best_of(dense_step, repeat=3)
    rows = [["scipy.sparse (one-hot csr, dense grad + update)", t_scipy * 1e3, 1.0],
            ["lazyarray Embedding(sparse_grad) + Trainer, eager", t_eager * 1e3, t_eager / t_scipy],
            ["lazyarray Embedding(sparse_grad) + Trainer, hybridized", t_hybrid * 1e3, t_hybrid / t_scipy],
            ["lazyarray dot(csr, W) row_sparse grad + sgd_update", t_dot * 1e3, t_dot / t_scipy],
            ["dense NumPy (one-hot dense)", t_dense * 1e3, t_dense / t_scipy]]
    print(f"\nsparse-embedding training step: table {VOCAB} x {DIM}, batch {BATCH} x {TOKENS} ids, SGD")
    print(table(["variant", "ms", "x scipy"], rows))


def main():
    print(f"numpy {np.__version__}, scipy {__import__('scipy').__version__}, lazyarray {la.__version__}")
    bench_dot()
    bench_embedding()


if __name__ == "__main__":
    main()
