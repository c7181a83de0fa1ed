"""The training loop as users write it, Gluon style, against NumPy by hand (and jax.jit if present).

    with la.autograd.record():
        loss = loss_fn(net(x), y)        # net: a hybridized HybridSequential; the loss stays eager
    loss.backward()
    trainer.step(batch)

MLP 784-512-512-10 (ReLU, softmax cross-entropy, SGD), float32. Rows, measured in the same
run (interleaved rounds, fastest round of each):

* NumPy by hand (``benchmarks/mlp_step.py: numpy_step``), the reference;
* Gluon style with the structural backward cache (one compiled backward program reused by
  every step) and the multi-tensor update (``Trainer.step``: a few flat calls per dtype and
  device) and the loss compiled (``blocks/loss.py``); the same with the dense values of its
  forward program kept row-major (``executor/units_major.py`` off: the step before that change
  at batch 64; batch 1024 is row-major either way); the same with the per-parameter update
  (an optimizer overriding ``update``), then also with the loss op by op (``hybridize(False)``;
  the step before this session's changes); and with the cache cleared before each step;
* jax.jit of the same step, when jax is importable.

Targets (issue #16): batch 64 at most 1.1x NumPy by hand; batch 1024 at most 1.0x; inference
(``net(x)``) at batch 1 at most 1.2x NumPy by hand.

    python benchmarks/training_loop.py [--clock cpu] [--profile BATCH]

``--profile 64`` prints instead the ``la.profile()`` table of 20 Gluon-style steps at that batch (per
kernel and implementation: calls, total and mean time; issue #34's regression was found by comparing
it between two commits) and the forward program's ``explain()``.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table
from mlp_step import LR, init_params, numpy_step

import lazyarray as la
from lazyarray import backward_cache
from lazyarray import blocks as B
from lazyarray.executor import units_major


class PerParamSGD(B.SGD):
    """SGD whose ``update`` is overridden: the trainer then updates parameter by parameter (the
    path before multi-tensor updates), with the same math."""

    def update(self, *args, **kwargs):
        return super().update(*args, **kwargs)


CLOCK = [time.perf_counter]


def interleaved(fns, number, rounds=9):
    """Seconds per call of each of ``fns``: rounds alternate between them, each keeps its fastest
    round; ``CLOCK`` (``--clock cpu``: process CPU time, steadier on a busy machine for one-thread
    runs, but it adds up every thread of jax's pool)."""
    clock = CLOCK[0]
    best = [float("inf")] * len(fns)
    gc.disable()
    try:
        for _ in range(rounds):
            for k, fn in enumerate(fns):
                t0 = clock()
                for _ in range(number):
                    fn()
                best[k] = min(best[k], (clock() - t0) / number)
    finally:
        gc.enable()
    return best


class PerParamAdam(B.Adam):
    def update(self, *args, **kwargs):
        return super().update(*args, **kwargs)


def update_rows():
    """``Trainer.step`` alone (gradients given), multi-tensor against per-parameter, for parameter
    sets of three shapes: few large (the MLP), many small, a transformer-like mix."""
    sets = [("MLP 784-512-512-10 (6, 2.7 MB)", [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)]),
            ("200 x (512,) (0.4 MB)", [(512,)] * 200),
            ("48 x (256, 256) + 96 x (256,) (12.7 MB)", [(256, 256)] * 48 + [(256,)] * 96)]
    opts = [("SGD momentum", lambda: B.SGD(learning_rate=0.01, momentum=0.9),
             lambda: PerParamSGD(learning_rate=0.01, momentum=0.9)),
            ("Adam", B.Adam, PerParamAdam)]
    rows = []
    for label, shapes in sets:
        for name, multi, single in opts:
            fns = []
            for make in (multi, single):
                params = []
                for k, shape in enumerate(shapes):
                    p = B.Parameter(f"p{k}", shape=shape)
                    p.initialize()
                    params.append(p)
                trainer = B.Trainer(params, make())
                leaves = [p._leaf() for p in params]
                for p, leaf in zip(params, leaves):
                    leaf.grad = la.array(np.full(p.shape, 0.5, "float32"))

                def run(leaves=leaves, trainer=trainer):
                    for leaf in leaves:
                        leaf.fresh = True  # the same gradient again, as if a backward wrote it
                    trainer.step(64)

                fns.append(run)
            t_multi, t_single = interleaved(fns, 5, rounds=9)
            rows.append([label, name, f"{t_multi * 1e3:.3f}", f"{t_single * 1e3:.3f}", f"{t_single / t_multi:.2f}"])
    return rows


def gluon_setup(batch, rng, base, per_param=False, eager_loss=False):
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu", in_units=784), B.Dense(512, activation="relu", in_units=512),
            B.Dense(10, in_units=512))
    net.initialize()
    for (_, layer), w, b in zip(net.children(), base[::2], base[1::2]):  # the same start as NumPy
        layer.weight.set_data(la.array(w.copy()))
        layer.bias.set_data(la.array(b.copy()))
    net.hybridize()
    loss_fn = B.SoftmaxCrossEntropyLoss()  # compiles itself (blocks/loss.py)
    if eager_loss:
        loss_fn.hybridize(False)  # op by op, as before losses compiled themselves
    opt = PerParamSGD(learning_rate=LR) if per_param else B.SGD(learning_rate=LR)
    trainer = B.Trainer(net.collect_params(), opt)
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
    rng2 = np.random.default_rng(0)
    init_params(rng2)
    per_param, _, _ = gluon_setup(batch, rng2, base, per_param=True)  # the same start and data
    rng3 = np.random.default_rng(0)
    init_params(rng3)
    before, _, _ = gluon_setup(batch, rng3, base, per_param=True, eager_loss=True)
    rng4 = np.random.default_rng(0)
    init_params(rng4)
    row_major, _, _ = gluon_setup(batch, rng4, base)
    for _ in range(3):
        step()
        per_param()
        before()
    max_rows, units_major.MAX_ROWS = units_major.MAX_ROWS, 0  # its forward program compiles row-major
    try:
        for _ in range(3):
            row_major()
    finally:
        units_major.MAX_ROWS = max_rows

    def uncached():
        backward_cache.clear()
        step()

    xn, yn = x.asnumpy(), y.asnumpy()
    p_np = [p.copy() for p in base]
    fns = [lambda: numpy_step(xn, yn, p_np), step, row_major, per_param, before, uncached]
    names = ["NumPy by hand", "Gluon style (backward cache, multi-tensor update)",
             "Gluon style, dense values row-major", "Gluon style, per-parameter update",
             "Gluon style, per-parameter update, eager loss", "Gluon style, cache cleared each step"]
    js = jax_step(batch, rng, base)
    if js is not None:
        fns.append(js)
        names.append("jax.jit")
    number = 10 if batch == 64 else 2
    times = interleaved(fns, number, rounds=15)
    jax_t = times[-1] if js is not None else None
    return [[batch, n, f"{t * 1e3:.3f}", f"{t / times[0]:.2f}"] + ([f"{t / jax_t:.2f}"] if jax_t else [])
            for n, t in zip(names, times)]


def inference_rows():
    """Inference at batch 1: the hybridized MLP against NumPy by hand (and jax.jit if present)."""
    rng = np.random.default_rng(0)
    base = init_params(rng)
    step, _, _ = gluon_setup(1, rng, base)
    net = step.__closure__[step.__code__.co_freevars.index("net")].cell_contents
    xn = rng.standard_normal((1, 784)).astype("float32")
    x = la.array(xn)
    w = [p.data().asnumpy() for p in net.collect_params().values()]

    def by_hand():
        h = x_ = xn
        for k in range(0, 6, 2):
            h = x_ @ w[k].T
            h += w[k + 1]
            if k < 4:
                x_ = np.maximum(h, 0, out=h)
        return h

    np.testing.assert_allclose(net(x).asnumpy(), by_hand(), rtol=1e-5, atol=1e-5)
    fns, names = [by_hand, lambda: net(x).asnumpy()], ["NumPy by hand", "hybridized net(x)"]
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None:
        wj, xj = [jnp.asarray(a) for a in w], jnp.asarray(xn)

        @jax.jit
        def fwd(ps, v):
            for k in range(0, 6, 2):
                v = v @ ps[k].T + ps[k + 1]
                if k < 4:
                    v = jax.nn.relu(v)
            return v

        fwd(wj, xj).block_until_ready()
        fns.append(lambda: fwd(wj, xj).block_until_ready())
        names.append("jax.jit")
    times = interleaved(fns, 200, rounds=15)
    jax_t = times[-1] if jax is not None else None
    return [[1, n, f"{t * 1e3:.4f}", f"{t / times[0]:.2f}"] + ([f"{t / jax_t:.2f}"] if jax_t else [])
            for n, t in zip(names, times)]


def profile_rows(batch: int) -> None:
    """``--profile``: the per-kernel table of 20 steps (after 5 untimed) and the forward's explain()."""
    rng = np.random.default_rng(0)
    step, x, _ = gluon_setup(batch, rng, init_params(rng))
    for _ in range(5):
        step()
    with la.profile() as prof:
        for _ in range(20):
            step()
    print(f"la.profile() of 20 Gluon-style steps at batch {batch}")
    print(prof.table())
    print()
    net = step.__closure__[step.__code__.co_freevars.index("net")].cell_contents
    print(net.explain(x))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--profile", type=int, metavar="BATCH", help="print la.profile() of 20 steps at BATCH")
    args = ap.parse_args()
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    if args.profile:
        profile_rows(args.profile)
        return
    rows = []
    for batch in (64, 1024):
        rows += bench(batch)
    print("Gluon-style training step, MLP 784-512-512-10 float32 (target: batch 64 <= 1.1x, 1024 <= 1.0x NumPy)")
    print(table(["batch", "implementation", "ms / step", "x NumPy"] + ["x jax.jit"] * (len(rows[0]) > 4), rows))
    print()
    print("Trainer.step alone: multi-tensor (chunked flat groups) against the per-parameter update")
    print(table(["parameters", "optimizer", "multi-tensor ms", "per-parameter ms", "speedup"], update_rows()))
    print()
    rows = inference_rows()
    print("Inference, MLP 784-512-512-10 float32 at batch 1 (target: <= 1.2x NumPy by hand)")
    print(table(["batch", "implementation", "ms / call", "x NumPy"] + ["x jax.jit"] * (len(rows[0]) > 4), rows))


if __name__ == "__main__":
    main()
