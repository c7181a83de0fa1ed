"""The training loop as users write it, Gluon style, against NumPy by hand (and jax.jit if present).

    with la.autograd.record():
        loss = loss_fn(net(x), y)        # net: a hybridized HybridSequential; the loss stays eager
    loss.backward()
    trainer.step(batch)

MLP 784-512-512-10 (ReLU, softmax cross-entropy, SGD), float32. Rows, measured in the same
run (interleaved rounds, fastest round of each):

* NumPy by hand (``benchmarks/mlp_step.py: numpy_step``), the reference;
* Gluon style with the structural backward cache (one compiled backward program reused by
  every step) and with it cleared before each step (what every step cost before the cache);
* jax.jit of the same step, when jax is importable.

Targets (issue #16): batch 64 at most 1.1x NumPy by hand; batch 1024 at most 1.0x.

    python benchmarks/training_loop.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table
from mlp_step import LR, init_params, interleaved, numpy_step

import lazyarray as la
from lazyarray import backward_cache
from lazyarray import blocks as B


def gluon_setup(batch, rng, base):
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu", in_units=784), B.Dense(512, activation="relu", in_units=512),
            B.Dense(10, in_units=512))
    net.initialize()
    for (_, layer), w, b in zip(net.children(), base[::2], base[1::2]):  # the same start as NumPy
        layer.weight.set_data(la.array(w.copy()))
        layer.bias.set_data(la.array(b.copy()))
    net.hybridize()
    loss_fn = B.SoftmaxCrossEntropyLoss()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": LR})
    x = la.array(rng.standard_normal((batch, 784)).astype("float32"))
    y = la.array(rng.integers(0, 10, batch))

    def step():
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    return step, x, y


def jax_step(batch, rng, base):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    params = [jnp.asarray(p) for p in base]
    x = jnp.asarray(rng.standard_normal((batch, 784)).astype("float32"))
    y = jnp.asarray(rng.integers(0, 10, batch))

    def loss(ps, x, y):
        w1, b1, w2, b2, w3, b3 = ps
        h = jax.nn.relu(x @ w1.T + b1)
        h = jax.nn.relu(h @ w2.T + b2)
        logits = h @ w3.T + b3
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(x.shape[0]), y])

    @jax.jit
    def update(ps, x, y):
        g = jax.grad(loss)(ps, x, y)
        return [p - LR * gi for p, gi in zip(ps, g)]

    state = {"p": params}

    def step():
        state["p"] = update(state["p"], x, y)
        state["p"][0].block_until_ready()

    step()
    return step


def bench(batch):
    rng = np.random.default_rng(0)
    base = init_params(rng)
    step, x, y = gluon_setup(batch, rng, base)
    for _ in range(3):
        step()

    def uncached():
        backward_cache.clear()
        step()

    xn, yn = x.asnumpy(), y.asnumpy()
    p_np = [p.copy() for p in base]
    fns = [lambda: numpy_step(xn, yn, p_np), step, uncached]
    names = ["NumPy by hand", "Gluon style (backward cache)", "Gluon style, cache cleared each step"]
    js = jax_step(batch, rng, base)
    if js is not None:
        fns.append(js)
        names.append("jax.jit")
    number = 10 if batch == 64 else 2
    times = interleaved(fns, number, rounds=9)
    return [[batch, n, f"{t * 1e3:.3f}", f"{t / times[0]:.2f}"] for n, t in zip(names, times)]


def main() -> None:
    rows = []
    for batch in (64, 1024):
        rows += bench(batch)
    print("Gluon-style training step, MLP 784-512-512-10 float32 (target: batch 64 <= 1.1x, 1024 <= 1.0x NumPy)")
    print(table(["batch", "implementation", "ms / step", "x NumPy"], rows))


if __name__ == "__main__":
    main()
