"""Small graphs, where the fixed cost per call and per step decides speed.

Three workloads on tiny arrays, each timed as NumPy eager, lazyarray eager and a ``CachedOp``
(and ``jax.jit`` where jax is importable; never required):

* **chain**: 1,000 elementwise ops ``x = x * 0.999; x = x + 0.001`` on a 4x4 float32
  (the CachedOp column is the cached replay of the compiled chain);
* **MLP**: batch-1 inference of a 784-512-512-10 ReLU MLP, float32;
* **LSTM cell**: one step of an LSTM cell (batch 1, 64 inputs, 128 units), float32.

Then the one-off costs on the chain: ``CachedOp`` build + first call, and ``symbol.to_json()``; and
on the model zoo's resnet18 and transformer encoder (batch 1): build + first call, a later call
(what of the first call is the run), and ``to_json``.

Every row's columns are measured in the same run, in alternating rounds (column A, B, C, A,
B, C, ...), and the medians are reported with their ratio to NumPy eager (or to jax.jit).

    python benchmarks/small_graphs.py            # full rounds
    python benchmarks/small_graphs.py --quick    # one short round each: a smoke run
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table

import lazyarray as la

CHAIN = 1000  # ops in the chain (500 multiplies, 500 adds)
WARM_CALLS = 5  # calls of each function before timing: past every tier (compiled kernels from the third)
MLP = (784, 512, 512, 10)
LSTM_IN, LSTM_UNITS = 64, 128


def _jax():
    try:
        import jax
    except Exception:  # jax is a peer to compare against, never a requirement
        return None
    return jax


# -- the workloads, written once for any module with multiply/add/... (NumPy, lazyarray, jax) -----
def chain(x):
    for _ in range(CHAIN // 2):
        x = x * 0.999
        x = x + 0.001
    return x


def mlp_np(x, w1, b1, w2, b2, w3, b3, mod=np):
    h = mod.maximum(x @ w1.T + b1, 0)
    h = mod.maximum(h @ w2.T + b2, 0)
    return h @ w3.T + b3


def mlp_la(x, w1, b1, w2, b2, w3, b3):
    h = la.relu(la.nn.dense(x, w1, b1))
    h = la.relu(la.nn.dense(h, w2, b2))
    return la.nn.dense(h, w3, b3)


def _sigmoid_np(v, mod=np):
    return 1 / (1 + mod.exp(-v))


def lstm_np(x, h, c, wx, wh, b, mod=np):
    gates = x @ wx.T + h @ wh.T + b
    n = LSTM_UNITS
    i, f, g, o = (gates[:, k * n:(k + 1) * n] for k in range(4))
    c2 = _sigmoid_np(f, mod) * c + _sigmoid_np(i, mod) * mod.tanh(g)
    return _sigmoid_np(o, mod) * mod.tanh(c2), c2


def lstm_la(x, h, c, wx, wh, b):
    gates = la.nn.dense(x, wx, b) + la.nn.dense(h, wh)
    n = LSTM_UNITS
    i, f, g, o = (gates[:, k * n:(k + 1) * n] for k in range(4))
    c2 = la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(g)
    return la.sigmoid(o) * la.tanh(c2), c2


# -- timing --------------------------------------------------------------------------------------
def alternating(fns: list, rounds: int, budget: float) -> list[float]:
    """Median seconds per call of each of ``fns``, timed in alternating rounds (each round runs
    every function ``number`` times, ``number`` sized so a round takes about ``budget`` s)."""
    for fn in fns:  # warm-up past the tiers (a fused group compiles at its third call: fused_jit_after)
        for _ in range(WARM_CALLS):
            fn()
    numbers = []
    for fn in fns:  # (sized on calls after the warm-up: one timed call during a tier-up made a round one call)
        t0 = time.perf_counter()
        for _ in range(WARM_CALLS):
            fn()
        one = max((time.perf_counter() - t0) / WARM_CALLS, 1e-7)
        numbers.append(max(1, int(budget / one)))
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            n = numbers[k]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times[k].append((time.perf_counter() - t0) / n)
    return [statistics.median(t) for t in times]


def _row(name, cols, times, base, unit_scale=1e3):
    row = [name]
    for (label, _), t in zip(cols, times):
        row.append(f"{t * unit_scale:.3f} ({t / base:.2f}x)")
    return row


# -- the rows --------------------------------------------------------------------------------------
def chain_case(jax):
    rng = np.random.default_rng(0)
    xn = rng.random((4, 4)).astype("float32")
    xa = la.array(xn)
    sym = chain(la.sym.var("x", shape=(4, 4), dtype="float32"))
    op = la.CachedOp(sym)
    np.testing.assert_allclose(op(xa).asnumpy(), chain(xn), rtol=1e-4)
    np.testing.assert_allclose(chain(xa).asnumpy(), chain(xn), rtol=1e-4)
    cols = [("NumPy eager", lambda: chain(xn)), ("lazyarray eager", lambda: chain(xa)),
            ("CachedOp", lambda: op(xa))]
    if jax is not None:
        jf = jax.jit(chain)
        xj = jax.numpy.asarray(xn)
        cols.append(("jax.jit", lambda: jf(xj).block_until_ready()))
    return f"chain of {CHAIN} ops, 4x4", cols, sym


def mlp_case(jax):
    rng = np.random.default_rng(1)
    params = []
    for fan_in, fan_out in zip(MLP[:-1], MLP[1:]):
        params.append((rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype("float32"))
        params.append((0.1 * rng.standard_normal(fan_out)).astype("float32"))
    xn = rng.standard_normal((1, MLP[0])).astype("float32")
    arrays = [la.array(a) for a in [xn] + params]
    names = ["x", "w1", "b1", "w2", "b2", "w3", "b3"]
    op, ordered = traced(mlp_la, names, arrays)
    np.testing.assert_allclose(op(*ordered).asnumpy(), mlp_np(xn, *params), rtol=1e-4, atol=1e-5)
    cols = [("NumPy eager", lambda: mlp_np(xn, *params)), ("lazyarray eager", lambda: mlp_la(*arrays)),
            ("CachedOp", lambda: op(*ordered))]
    if jax is not None:
        jf = jax.jit(lambda *a: mlp_np(*a, mod=jax.numpy))
        js = [jax.numpy.asarray(a) for a in [xn] + params]
        cols.append(("jax.jit", lambda: jf(*js).block_until_ready()))
    return "MLP 784-512-512-10, batch 1", cols


def traced(fn, names, arrays):
    """A CachedOp of ``fn`` traced on ``arrays`` (deferred compute), and the arrays in its input order."""
    with la.deferred():
        out = fn(*arrays)
    by_name = dict(zip(names, arrays))
    sym = la.get_symbol(list(out) if isinstance(out, tuple) else out, inputs=by_name)
    return la.CachedOp(sym), [by_name[nm] for nm in sym.list_inputs()]


def lstm_case(jax):
    rng = np.random.default_rng(2)
    n = LSTM_UNITS
    vals = [rng.standard_normal((1, LSTM_IN)), rng.standard_normal((1, n)), rng.standard_normal((1, n)),
            rng.standard_normal((4 * n, LSTM_IN)) / 8, rng.standard_normal((4 * n, n)) / 11,
            0.1 * rng.standard_normal(4 * n)]
    vals = [v.astype("float32") for v in vals]
    arrays = [la.array(v) for v in vals]
    op, ordered = traced(lstm_la, ["x", "h", "c", "wx", "wh", "b"], arrays)
    got = op(*ordered)
    for g, r in zip(got, lstm_np(*vals)):
        np.testing.assert_allclose(g.asnumpy(), r, rtol=1e-4, atol=1e-5)
    cols = [("NumPy eager", lambda: lstm_np(*vals)), ("lazyarray eager", lambda: lstm_la(*arrays)),
            ("CachedOp", lambda: op(*ordered))]
    if jax is not None:
        jf = jax.jit(lambda *a: lstm_np(*a, mod=jax.numpy))
        js = [jax.numpy.asarray(v) for v in vals]
        cols.append(("jax.jit", lambda: [r.block_until_ready() for r in jf(*js)]))
    return f"LSTM cell, batch 1, {LSTM_IN}->{n}", cols


def build_rows(sym, rounds: int, budget: float) -> list:
    """CachedOp build + first call, and ``to_json``, on the chain (alternating rounds)."""
    x = la.array(np.ones((4, 4), np.float32))

    def build():
        la.CachedOp(sym)(x)

    t_build, t_json = alternating([build, sym.to_json], rounds, budget)
    return [["CachedOp build + first call", f"{t_build * 1e3:.3f}"], ["symbol.to_json()", f"{t_json * 1e3:.3f}"]]


def zoo_cases() -> list:
    """``(name, symbol, its input arrays in order)`` of the zoo's resnet18 (3x32x32) and transformer
    encoder (64 tokens), batch 1: the inference graph ``export`` writes."""
    rng = np.random.default_rng(3)
    M = la.blocks.models
    nets = [("resnet18", M.resnet18(classes=10, thumbnail=True), rng.standard_normal((1, 3, 32, 32)).astype("float32")),
            ("transformer", M.transformer_encoder(1000, classes=2, units=128, num_layers=2, num_heads=2,
                                                  max_length=128), rng.integers(0, 1000, (1, 64)))]
    cases = []
    for name, net, xn in nets:
        la.random.seed(0)
        net.initialize()
        x = la.array(xn)
        net.hybridize()
        net(x)
        sym, params = net.export_graph()
        cases.append((name, sym, [params[n].data() if n in params else x for n in sym.list_inputs()]))
    return cases


def zoo_rows(rounds: int) -> list:
    """Per zoo model: CachedOp build + first call, a later call (the first call's run part), and
    ``to_json`` (alternating rounds)."""
    rows = []
    for name, sym, args in zoo_cases():
        op = la.CachedOp(sym)
        op(*args)

        def build(sym=sym, args=args):
            la.CachedOp(sym)(*args)

        t_build, t_call, t_json = alternating([build, lambda op=op, args=args: op(*args), sym.to_json], rounds, 0.0)
        rows.append([f"{name}: CachedOp build + first call", f"{t_build * 1e3:.3f}"])
        rows.append([f"{name}: a later call", f"{t_call * 1e3:.3f}"])
        rows.append([f"{name}: symbol.to_json() ({len(sym.topo())} nodes)", f"{t_json * 1e3:.3f}"])
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one short round per row (a smoke run)")
    args = ap.parse_args(argv)
    rounds, budget = (1, 0.002) if args.quick else (9, 0.05)
    jax = _jax()
    head = ["workload (ms per call, x NumPy)", "NumPy eager", "lazyarray eager", "CachedOp"] + ["jax.jit"] * (jax is not None)
    rows = []
    sym = None
    for case in (chain_case, mlp_case, lstm_case):
        res = case(jax)
        name, cols = res[0], res[1]
        if len(res) > 2:
            sym = res[2]
        times = alternating([fn for _, fn in cols], rounds, budget)
        rows.append(_row(name, cols, times, times[0]))
    print(f"Small graphs, same-run medians of {rounds} alternating rounds")
    print(table(head, rows))
    print()
    print("One-off costs on the chain (ms)")
    print(table(["what", "ms"], build_rows(sym, rounds, budget if not args.quick else 0.0)))
    print()
    print("One-off costs on the model zoo, batch 1 (ms)")
    print(table(["what", "ms"], zoo_rows(1 if args.quick else 5)))


if __name__ == "__main__":
    main()
