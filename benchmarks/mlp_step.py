"""Training step of a 784-512-512-10 MLP (ReLU, softmax cross-entropy, SGD), float32.

Time per step, measured in the same run (interleaved rounds, fastest round of each), for:

* NumPy by hand: forward, manual backprop, in-place SGD update;
* CachedOp + autograd: ``with autograd.record(): loss = op(...)``; ``loss.backward()``;
  eager in-place SGD update on the parameters (one recorded node for the whole forward);
* hybridized step: forward, backward and update traced once under deferred compute into
  one symbol, run by one CachedOp (one planned program per step).

Target: CachedOp <= 1.1x the hand-written NumPy time.

    python benchmarks/mlp_step.py
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import best_of, table

import lazyarray as la

SIZES = (784, 512, 512, 10)
LR = 0.01


def init_params(rng):
    params = []
    for fan_in, fan_out in itertools.pairwise(SIZES):
        params.append((rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype("float32"))
        params.append(np.zeros(fan_out, dtype="float32"))
    return params


# -- NumPy by hand --------------------------------------------------------------------------------
def numpy_step(x, labels, params):
    w1, b1, w2, b2, w3, b3 = params
    n = x.shape[0]
    a1 = x @ w1.T
    a1 += b1
    h1 = np.maximum(a1, 0, out=a1)
    a2 = h1 @ w2.T
    a2 += b2
    h2 = np.maximum(a2, 0, out=a2)
    logits = h2 @ w3.T
    logits += b3
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    e /= e.sum(axis=1, keepdims=True)
    loss = -np.log(e[np.arange(n), labels]).mean()
    g3 = e
    g3[np.arange(n), labels] -= 1
    g3 /= n
    dw3, db3 = g3.T @ h2, g3.sum(0)
    g2 = g3 @ w3
    g2 *= h2 > 0
    dw2, db2 = g2.T @ h1, g2.sum(0)
    g1 = g2 @ w2
    g1 *= h1 > 0
    dw1, db1 = g1.T @ x, g1.sum(0)
    for p, g in zip(params, (dw1, db1, dw2, db2, dw3, db3)):
        p -= LR * g
    return loss


# -- lazyarray ------------------------------------------------------------------------------------
def forward(x, labels, w1, b1, w2, b2, w3, b3):
    h1 = la.relu(la.nn.dense(x, w1, b1))
    h2 = la.relu(la.nn.dense(h1, w2, b2))
    return la.nn.softmax_cross_entropy(la.nn.dense(h2, w3, b3), labels)


NAMES = ["x", "w1", "b1", "w2", "b2", "w3", "b3", "labels"]  # the symbols' list_inputs() order


def forward_op(x, labels, params):
    with la.deferred():
        loss = forward(x, labels, *params)
    op = la.CachedOp(la.get_symbol(loss, inputs=dict(zip(NAMES, [x] + params + [labels]))))
    assert op.sym.list_inputs() == NAMES
    return op


def autograd_step(op, x, labels, params):
    with la.autograd.record():
        loss = op(x, *params, labels)
    loss.backward()
    for p in params:
        p -= LR * p.grad
    return loss


def hybrid_step_op(x, labels, params):
    """Forward, backward and SGD update as one symbol: outputs are the loss and new parameters."""
    ps = [la.array(p.asnumpy()) for p in params]
    for p in ps:
        p.attach_grad()
    with la.deferred(), la.autograd.record():
        loss = forward(x, labels, *ps)
        loss.backward()
        new = [p - LR * p.grad for p in ps]
    op = la.CachedOp(la.get_symbol([loss] + new, inputs=dict(zip(NAMES, [x] + ps + [labels]))))
    assert op.sym.list_inputs() == NAMES
    return op


def interleaved(fns, number, rounds=15):
    """Seconds per call of each of ``fns``: rounds alternate between them (so a busy machine
    slows all alike), and each keeps its fastest round."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            best[k] = min(best[k], best_of(fn, repeat=1, number=number))
    return best


def main() -> None:
    rows = []
    for batch in (64, 1024):
        rows += bench(batch)
    print("MLP 784-512-512-10 training step, float32 (target: CachedOp <= 1.1x NumPy by hand)")
    print(table(["batch", "implementation", "ms / step", "x NumPy"], rows))


def bench(batch):
    """Rows of the table for one batch size."""
    rows = []
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((batch, 784)).astype("float32")
    ln = rng.integers(0, 10, batch)
    base = init_params(rng)

    # correctness: one step of each from the same start gives the same parameters
    p_np = [p.copy() for p in base]
    numpy_step(xn, ln, p_np)
    x, labels = la.array(xn), la.array(ln)
    p_ag = [la.array(p) for p in base]
    for p in p_ag:
        p.attach_grad()
    op = forward_op(x, labels, p_ag)
    autograd_step(op, x, labels, p_ag)
    p_hy = [la.array(p) for p in base]
    step = hybrid_step_op(x, labels, p_hy)
    outs = step(x, *p_hy, labels)
    for a, b, c in zip(p_np, p_ag, outs[1:]):
        np.testing.assert_allclose(b.asnumpy(), a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c.asnumpy(), a, rtol=1e-4, atol=1e-5)

    number = 10 if batch == 64 else 2
    p_np = [p.copy() for p in base]
    state = {"p": [la.array(p) for p in base]}

    def hybrid():
        outs = step(x, *state["p"], labels)
        state["p"] = outs[1:]

    t_np, t_ag, t_hy = interleaved([lambda: numpy_step(xn, ln, p_np),
                                    lambda: autograd_step(op, x, labels, p_ag), hybrid], number)
    rows.append([batch, "NumPy by hand", f"{t_np * 1e3:.3f}", "1.00"])
    rows.append([batch, "CachedOp + autograd", f"{t_ag * 1e3:.3f}", f"{t_ag / t_np:.2f}"])
    rows.append([batch, "hybridized step (one CachedOp)", f"{t_hy * 1e3:.3f}", f"{t_hy / t_np:.2f}"])
    return rows


if __name__ == "__main__":
    main()
