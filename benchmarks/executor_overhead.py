"""Executor overhead: what a compiled program costs per step beyond its kernels.

1. A 200-node elementwise graph on 4x4 float32 arrays: microseconds per node through a CachedOp
   (fused), eager lazyarray and raw NumPy, and the CachedOp's overhead beyond the kernels.
   Target: <= 1.5 us per node of overhead beyond raw NumPy.
2. Unfusible graphs, where every node is a step: the same chain with ``fuse=False``, and a chain of
   products and views (``matmul``, ``transpose``, ``reshape``, ``expand_dims``, ``squeeze``; 4x4).
   Target: CachedOp <= eager lazyarray, and <= 1.1x raw NumPy per node.
3. ``--models``: the small transformers of ``tests/data/onnx_dynamic`` (hf_bert, torch_encoder;
   batch 1, one thread), hybridized: CPU microseconds per call, the program's steps (and views
   made once per buffer set, ``executor/set_views.py``), and microseconds per step.
4. ``--call``: a one-step hybridized block (relu; Dense(4)) at batch 1: CPU microseconds per call,
   what a call costs beyond its one kernel (np.maximum's time beside it).
5. ``--steps``: what a step's closure costs around its kernel (``executor/step_forms.py``, and a
   workspace lent as the kernel's scratch, ``ops/scratch.bind_workspace``): CPU nanoseconds per
   call of each form over a kernel that does nothing, and of that kernel called directly.

Rows 1-2 are measured in the same run, in alternating rounds, medians. ``--against PATH``
(with ``--models``) alternates fresh processes of this checkout and of another one and prints
the ratio per call, this / that (the machine is shared: read ratios).

    python benchmarks/executor_overhead.py
    python benchmarks/executor_overhead.py --models [--against /path/to/other/checkout]
    python benchmarks/executor_overhead.py --call [--against /path/to/other/checkout]
    python benchmarks/executor_overhead.py --steps
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from _util import best_of, probe_in, table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray.executor.step_forms import FORMS  # noqa: E402
from lazyarray.ops.scratch import bind_workspace, workspace_arena  # noqa: E402

NODES = 200
OPS = ("add", "multiply", "tanh", "subtract", "maximum")


def chain(mod, x, y):
    """The same 200-op chain for lazyarray (``la``) or NumPy (``np``)."""
    h = x
    for i in range(NODES):
        k = OPS[i % len(OPS)]
        if k == "tanh":
            h = mod.tanh(h)
        else:
            h = getattr(mod, k)(h, y if i % 2 else x)
    return h


def views(mod, x, w):
    """An unfusible 200-node chain: products and views of their results (for ``la`` or ``np``)."""
    h = x
    for _ in range(NODES // 5):
        h = mod.matmul(h, w)
        h = mod.transpose(h)
        h = mod.reshape(h, (2, 8))
        h = mod.expand_dims(mod.reshape(h, (4, 4)), 0)
        h = mod.squeeze(h, 0)
    return h


def alternating(fns, rounds: int = 15, number: int = 20) -> list[float]:
    """Median seconds per call of each of ``fns``, timed in alternating rounds."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[k].append((time.perf_counter() - t0) / number)
    return [statistics.median(t) for t in times]


def unfusible_rows(rounds: int = 15) -> list:
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((4, 4)).astype("float32")
    yn = rng.standard_normal((4, 4)).astype("float32")
    x, y = la.array(xn), la.array(yn)
    rows = []
    for name, fn in (("elementwise chain, fuse=False", chain), ("products and views", views)):
        with la.deferred():
            out = fn(la, x, y)
        op = la.CachedOp(la.get_symbol(out, inputs={"x": x, "y": y}), fuse=False)
        np.testing.assert_allclose(op(x, y).asnumpy(), fn(np, xn, yn), rtol=1e-4)
        np.testing.assert_allclose(fn(la, x, y).asnumpy(), fn(np, xn, yn), rtol=1e-4)
        prog = next(iter(op._cache.values())).program
        t_np, t_eager, t_op = alternating([lambda fn=fn: fn(np, xn, yn), lambda fn=fn: fn(la, x, y),
                                           lambda op=op: op(x, y)], rounds)
        us = 1e6 / NODES
        once = len(getattr(prog, "made_once", ()))  # (another checkout's programs may have none)
        rows.append([name, f"{len(prog.steps)} (+{once})", f"{t_np * us:.3f}", f"{t_eager * us:.3f}",
                     f"{t_op * us:.3f}", f"{t_op / t_np:.2f}", f"{t_op / t_eager:.2f}"])
    return rows


# -- 4. a step's closure around its kernel ---------------------------------------------------------
def _noop(*arrays, out=None, **params):
    return out if out is not None else arrays[0] if arrays else None


def step_rows(number: int = 100_000, repeat: int = 7) -> list:
    """CPU ns per call of each step form over ``_noop`` (3 inputs, parameters where the form takes
    them), and the same with a workspace lent; the kernel called directly is the baseline."""
    def ns(fn) -> float:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()
            for _ in range(number):
                fn()
            best = min(best, (time.process_time() - t0) / number * 1e9)
        return best

    slots = [np.zeros(4, np.float32) for _ in range(6)] + [workspace_arena(np.zeros(64, np.uint8))]
    node = (la.sym.var("x", shape=(4,)) * 2).outputs[0].node
    rows = [["the kernel called directly", "", f"{ns(lambda: _noop(slots[0], slots[1], slots[2], out=slots[4])):.0f}", ""]]
    cases = (("ufunc2", (0, 1), (4,), {}), ("out3", (0, 1, 2), (4,), {}), ("out_any", (0, 1, 2), (4,), {"axis": 1}),
             ("outs", (0, 1, 2), (4, 5), {"axis": 1}), ("fresh1", (0,), (3,), {"axis": 1}),
             ("fresh_any", (0, 1, 2), (3,), {"axis": 1}))
    for form, ins, outs, kw in cases:
        step = FORMS[form](_noop, ins, outs, kw, node)
        lent = bind_workspace(step, 6)
        rows.append([form, f"{len(ins)} in, {len(kw)} param", f"{ns(lambda f=step: f(slots)):.0f}",
                     f"{ns(lambda f=lent: f(slots)):.0f}"])
    return rows


# -- 3. the small transformers -------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "onnx_dynamic"
MODELS = ("hf_bert", "torch_encoder")

# Prints {"us": CPU us per call (median of 15 rounds of 50 calls, after 300), "steps", "once"}.
MODEL_PROBE = """
import json, statistics, time
import numpy as np
import lazyarray as la
m = {{m["name"]: m for m in json.load(open({manifest!r}))}}[{model!r}]
data = np.load({fixtures!r} + "/" + {model!r} + ".npz")
b1 = [c for c in m["cases"] if c.split("_")[0] == "b1"][-1]
xs = [la.array(data[b1 + "/in/" + k]) for k in m["inputs"]]
la.set_num_threads(1)
net = la.blocks.SymbolBlock.imports({fixtures!r} + "/" + {model!r} + ".onnx", m["inputs"])
net.hybridize()
def run():
    y = net(*xs)
    return [v.asnumpy() for v in (y if isinstance(y, (list, tuple)) else [y])]
for got, k in zip(run(), range(len(m["outputs"]))):
    np.testing.assert_allclose(got, data[b1 + "/out/" + str(k)], rtol=1e-3, atol=1e-4)
for _ in range(300):
    run()
ts = []
for _ in range(15):
    t0 = time.process_time()
    for _ in range(50):
        run()
    ts.append((time.process_time() - t0) / 50)
with la.profile() as prof:
    run()
progs = list(prof.programs.values())
print(json.dumps({{"us": statistics.median(ts) * 1e6, "steps": sum(len(p.steps) for p in progs),
                  "once": sum(len(getattr(p, "made_once", ())) for p in progs), "file": la.__file__}}))
"""


def model_call(model: str, root: Path) -> dict:
    code = MODEL_PROBE.format(manifest=str(FIXTURES / "manifest.json"), fixtures=str(FIXTURES), model=model)
    return probe_in(root, code)


def model_rows(models, against: Path | None, rounds: int) -> list:
    rows = []
    for model in models:
        this, that = [], []
        for _ in range(rounds):
            this.append(model_call(model, ROOT))
            if against is not None:
                that.append(model_call(model, against))
        us = statistics.median(r["us"] for r in this)
        steps = this[0]["steps"]
        row = [model, f"{steps} (+{this[0]['once']})", f"{us:.0f}", f"{us / steps:.2f}"]
        if against is not None:
            us2 = statistics.median(r["us"] for r in that)
            row += [f"{that[0]['steps']} (+{that[0]['once']})", f"{us2:.0f}", f"{us2 / that[0]['steps']:.2f}",
                    f"{statistics.median(a['us'] / b['us'] for a, b in zip(this, that)):.2f}"]
        rows.append(row)
    return rows


def print_models(models, against: Path | None, rounds: int) -> None:
    head = ["model", "steps (+made once)", "us / call", "us / step"]
    if against is not None:
        head += ["other: steps", "other: us / call", "other: us / step", "ratio per call"]
    print(f"Small transformers, batch 1, one thread: CPU us per call, medians of {rounds} fresh processes"
          + (f" alternating with {against} (ratio: this / other, per process pair)" if against else ""))
    print(table(head, model_rows(models, against, rounds)))


# -- 4. a call's fixed cost ----------------------------------------------------------------------
# Prints {"relu", "dense", "numpy": CPU us per call (best of 7 rounds of 20000, after 500)}: a hybridized
# block of one step without parameters (relu) and with two (Dense(4, in_units=4)), batch 1, one thread;
# "numpy": np.maximum on the same array (the kernel alone).
CALL_PROBE = """
import json, time
import numpy as np
import lazyarray as la
la.set_num_threads(1)
class Relu(la.blocks.HybridBlock):
    def forward(self, x):
        return la.relu(x)
x = la.array(np.ones((1, 4), "float32"))
def best(fn):
    for _ in range(500):
        fn()
    ts = []
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(20000):
            fn()
        ts.append((time.process_time() - t0) / 20000 * 1e6)
    return min(ts)
out = {"file": la.__file__, "numpy": best(lambda: np.maximum(x._value, 0))}
for name, net in (("relu", Relu()), ("dense", la.blocks.Dense(4, in_units=4))):
    net.initialize()
    net.hybridize()
    out[name] = best(lambda: net(x))
print(json.dumps(out))
"""


def print_calls(against: Path | None, rounds: int) -> None:
    """A one-step hybridized block's microseconds per call (what a call costs beyond its kernel)."""
    this, that = [], []
    for _ in range(rounds):
        this.append(probe_in(ROOT, CALL_PROBE))
        if against is not None:
            that.append(probe_in(against, CALL_PROBE))
    rows = []
    for k in ("relu", "dense", "numpy"):
        row = [k, f"{statistics.median(r[k] for r in this):.2f}"]
        if against is not None:
            row += [f"{statistics.median(r[k] for r in that):.2f}",
                    f"{statistics.median(a[k] / b[k] for a, b in zip(this, that)):.2f}"]
        rows.append(row)
    print(f"One-step hybridized block, batch 1, one thread: CPU us per call, medians of {rounds} fresh processes"
          + (f" alternating with {against} (ratio: this / other)" if against else ""))
    print(table(["block", "us / call"] + (["other: us / call", "ratio"] if against else []), rows))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", action="store_true", help="the small transformers' cost per call and per step")
    ap.add_argument("--only", default=",".join(MODELS), help="with --models: fixture names, comma-separated")
    ap.add_argument("--against", default="", help="with --models / --call: another checkout to alternate with")
    ap.add_argument("--rounds", type=int, default=3, help="with --models / --call: fresh processes per model")
    ap.add_argument("--call", action="store_true", help="a one-step hybridized block's cost per call")
    ap.add_argument("--steps", action="store_true", help="a step's closure around a kernel that does nothing")
    args = ap.parse_args(argv)
    if args.call:
        print_calls(Path(args.against).resolve() if args.against else None, args.rounds)
        return
    if args.steps:
        print("A step's closure around a kernel that does nothing: CPU ns per call, best of 7 rounds")
        print(table(["form", "arguments", "ns / call", "with a workspace lent"], step_rows()))
        return
    if args.models:
        print_models(args.only.split(","), Path(args.against).resolve() if args.against else None, args.rounds)
        return
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((4, 4)).astype("float32")
    yn = rng.standard_normal((4, 4)).astype("float32")
    x, y = la.array(xn), la.array(yn)
    with la.deferred():
        out = chain(la, x, y)
    op = la.CachedOp(la.get_symbol(out, inputs={"x": x, "y": y}))
    np.testing.assert_allclose(op(x, y).asnumpy(), chain(np, xn, yn), rtol=1e-5)
    steps = len(next(iter(op._cache.values())).program.steps)

    t_np = best_of(lambda: chain(np, xn, yn), repeat=15, number=20)
    t_eager = best_of(lambda: chain(la, x, y), repeat=15, number=20)
    t_cached = best_of(lambda: op(x, y), repeat=15, number=20)
    us = 1e6 / NODES
    rows = [("raw NumPy", t_np), ("eager lazyarray", t_eager), ("CachedOp", t_cached)]
    print(f"{NODES}-node elementwise graph on 4x4 float32 ({steps} compiled steps)")
    print(f"{'engine':<18}{'us / node':>10}{'x NumPy':>10}")
    for name, t in rows:
        print(f"{name:<18}{t * us:>10.3f}{t / t_np:>10.2f}")
    overhead = (t_cached - t_np) * us
    print(f"CachedOp overhead beyond the kernels: {overhead:.3f} us / node (target <= 1.5)")
    print(f"CachedOp vs eager lazyarray: {t_eager / t_cached:.2f}x faster")
    print()
    print(f"Unfusible {NODES}-node graphs on 4x4 float32 (every node a step; us / node, alternating rounds). "
          "Target: CachedOp <= 1.1x NumPy and <= eager")
    print(table(["graph", "steps (+made once)", "NumPy", "eager lazyarray", "CachedOp", "x NumPy", "x eager"],
                unfusible_rows()))


if __name__ == "__main__":
    main()
