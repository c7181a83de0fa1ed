"""Imperative vs hybridized blocks: the demo CNN and the 784-512-512-10 MLP.

Per model and batch size (1 and 64), measured in the same run with interleaved rounds:

* inference call: ``net(x)`` (predict mode), values materialized;
* training step: ``with autograd.record(): loss = loss_fn(net(x), y)``; ``loss.backward()``;
  ``trainer.step(batch)`` (SGD with momentum);
* first call of a freshly hybridized block: trace + compile + run, inference and training.

``--first-call`` instead: the first hybridized call of the zoo's models (transformer, 2 and 12
layers; ResNet-18, inference and a training step with the Trainer) and of imported ONNX fixtures, each
in a fresh process (one thread), as CPU time split into the trace, the compile (passes, planning,
choosing: ``CachedOp`` compiles and the backward cache's), an ONNX file's import, the cyclic GC's collections, numba's
compiles or cache loads (wall), and the rest (the run's compute); beside the second call. ``--against
DIR`` runs the same children on the lazyarray checkout under DIR too, alternating, for a before/after
table (medians of ``--rounds``).

Targets: hybridized inference at batch 1 at least 2x faster than imperative; hybridized
training step no slower than imperative at batch 64.

    python benchmarks/hybridize.py [--quick]
    python benchmarks/hybridize.py --first-call [--against /path/to/other/checkout] [--rounds 3]
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import probe_in, table

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.cli import build_model

MODELS = {
    "demo CNN (1x12x12)": (lambda: build_model("cnn"), (1, 12, 12), 4),
    "MLP 784-512-512-10": (lambda: _mlp(), (784,), 10),
}


def _mlp():
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu"), B.Dense(512, activation="relu"), B.Dense(10))
    return net


def _numpy_mlp(x, ws):
    h = np.maximum(x @ ws[0].T + ws[1], 0)
    h = np.maximum(h @ ws[2].T + ws[3], 0)
    return h @ ws[4].T + ws[5]


def make(factory, shape, hybridize):
    la.random.seed(0)
    net = factory()
    net.initialize()
    net(la.ones((1,) + shape))  # create the lazy-shaped parameters
    if hybridize:
        net.hybridize()
    return net


def workloads(net, x, y, trainer, loss_fn, batch):
    def infer():
        net(x).asnumpy()

    def train():
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    return infer, train


def interleaved(fns: dict, rounds: int, number: int) -> dict:
    """Median seconds per call of each function, rounds interleaved so load spikes hit all."""
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[k].append((time.perf_counter() - t0) / number)
    return {k: statistics.median(v) for k, v in times.items()}


def first_call(factory, shape, classes, batch, training) -> float:
    net = make(factory, shape, True)
    x = la.array(np.random.default_rng(0).standard_normal((batch,) + shape).astype(np.float32))
    y = la.array(np.zeros(batch, np.int64))
    t0 = time.perf_counter()
    if training:
        with la.autograd.record():
            loss = B.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
    else:
        net(x).asnumpy()
    return time.perf_counter() - t0


def main(quick: bool = False) -> None:
    rounds, number = (5, 5) if quick else (15, 20)
    rows = []
    verdicts = []
    for name, (factory, shape, classes) in MODELS.items():
        for batch in (1, 64):
            rng = np.random.default_rng(batch)
            x = la.array(rng.standard_normal((batch,) + shape).astype(np.float32))
            y = la.array(rng.integers(0, classes, batch))
            fns = {}
            for mode in ("imperative", "hybridized"):
                net = make(factory, shape, mode == "hybridized")
                trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
                infer, train = workloads(net, x, y, trainer, B.SoftmaxCrossEntropyLoss(), batch)
                infer(), train()  # warm up: trace and compile both modes
                fns[(mode, "infer")], fns[(mode, "train")] = infer, train
            if name.startswith("MLP"):  # the floor: the same inference in NumPy by hand
                ws = [p.data().asnumpy() for p in make(factory, shape, False).collect_params().values()]
                xv = x.asnumpy()
                fns[("numpy", "infer")] = lambda ws=ws, xv=xv: _numpy_mlp(xv, ws)
            t = interleaved(fns, rounds, number if batch == 1 else max(number // 4, 2))
            if ("numpy", "infer") in t:
                rows.append([name, batch, "inference, NumPy by hand", "", "",
                             f"floor {t[('numpy', 'infer')] * 1e3:.3f}"])
            for what in ("infer", "train"):
                imp, hyb = t[("imperative", what)], t[("hybridized", what)]
                label = "inference call" if what == "infer" else "training step"
                rows.append([name, batch, label, f"{imp * 1e3:.3f}", f"{hyb * 1e3:.3f}", f"{imp / hyb:.2f}x"])
                if what == "infer" and batch == 1:
                    verdicts.append(f"{name}: hybridized inference at batch 1 is {imp / hyb:.2f}x faster "
                                    f"({'meets' if imp / hyb >= 2 else 'MISSES'} the 2x target)")
                if what == "train" and batch == 64:
                    verdicts.append(f"{name}: hybridized training step at batch 64 is {imp / hyb:.2f}x "
                                    f"imperative speed ({'meets' if hyb <= imp * 1.02 else 'MISSES'} 'no slower')")
        for batch in (1, 64):
            fi = statistics.median(first_call(factory, shape, classes, batch, False) for _ in range(3))
            ft = statistics.median(first_call(factory, shape, classes, batch, True) for _ in range(3))
            rows.append([name, batch, "first call: trace+compile+run", "", f"infer {fi * 1e3:.1f}",
                         f"train {ft * 1e3:.1f}"])
    print("imperative vs hybridized blocks, ms per call (median of interleaved rounds)")
    print(table(["model", "batch", "workload", "imperative ms", "hybridized ms", "speedup"], rows))
    print()
    for v in verdicts:
        print(v)
    print()
    guards_table()


class _Guarded(B.HybridBlock):
    """Reads the batch size in Python: guarded on input 0 dim 0, one trace per batch size."""

    def __init__(self):
        super().__init__()
        self.fc = B.Dense(64, in_units=32)

    def forward(self, x):
        return self.fc(x).sum(axis=1) / x.shape[0]


def guards_table() -> None:
    """Sound traces over batch sizes 1..64: traces made, and what the guard check costs per call."""
    from lazyarray.guards import Guard

    rows = []
    for label, make in (("shape-generic MLP 32-64-10", _small_mlp), ("guarded block (x.shape[0])", _Guarded)):
        net = make()
        net.initialize()
        net.hybridize()
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", la.RecompileWarning)  # 64 signatures on purpose
            for b in range(1, 65):
                net(la.ones((b, 32)))
        sweep = (time.perf_counter() - t0) / 64
        x = la.ones((16, 32))
        net(x)
        steady = min(_timed(lambda net=net, x=x: net(x), 300) for _ in range(5))
        rows.append([label, net.trace_count, f"{sweep * 1e3:.2f}", f"{steady * 1e6:.1f}"])
    guards = [Guard(0, 0, 16), Guard(0, 1, 32)]
    sig = (((16, 32), np.dtype("float32"), la.cpu()),)
    check = min(_timed(lambda: all(g.holds(sig) for g in guards), 20000) for _ in range(5))
    print("hybridized blocks over batch sizes 1..64 (sound traces; target: guard check < 2 us per call)")
    print(table(["block", "traces", "ms per call over the sweep", "us per call, steady"], rows))
    print(f"guard check for a new signature (2 guards): {check * 1e6:.2f} us; a repeated signature checks "
          "nothing (one dict lookup)")


def _small_mlp():
    net = B.HybridSequential()
    net.add(B.Dense(64, in_units=32, activation="relu"), B.Dense(10, in_units=64))
    return net


def _timed(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


# -- first calls, split by phase ----------------------------------------------------------------------
HERE = Path(__file__).resolve().parent
FIRST_CALLS = ("transformer2 infer", "transformer12 infer", "transformer2 train", "resnet18 infer",
               "resnet18 train", "onnx hf_bert", "onnx convnext_mini")
PHASES = ("first", "parse", "import", "trace", "compile", "gc", "numba", "rest", "second", "wall")


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _zoo_call(name: str):
    """The first-call workload ``name`` (see FIRST_CALLS), ready to run: one call per ``fn()``."""
    model, mode = name.split()
    if model.startswith("transformer"):
        net = B.models.transformer_encoder(1000, classes=2, units=128, num_layers=int(model[11:]), num_heads=2,
                                           max_length=128)
        rng = np.random.default_rng(0)
        x, y = la.array(rng.integers(0, 1000, (32, 64))), la.array(rng.integers(0, 2, 32))
        net.initialize()
        net(x)  # (deferred parameters take their shapes imperatively first, as benchmarks/models.py does)
        net.hybridize()
        trainer, loss_fn = B.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3}), B.SoftmaxCrossEntropyLoss()
    else:
        run = _bench_module("models").Run(model, True, 32, False)
        net, x, y, trainer, loss_fn = run.net, run.x, run.y, run.trainer, run.loss_fn
    infer, train = workloads(net, x, y, trainer, loss_fn, 32)
    return infer if mode == "infer" else train


def _onnx_call(name: str):
    rm = _bench_module("real_models")
    m = next(m for m in rm.manifest() if m["name"] == name)
    ins = rm.feeds(m)[0][1]
    held = []

    def fn():  # the first call imports the file and hybridizes (as real_models.py --first-call times it)
        if not held:
            held.append(la.blocks.SymbolBlock.imports(str(rm.FIXTURES / (name + ".onnx")), m["inputs"]))
            held[0].hybridize()
        return [y.asnumpy() for y in rm._listed(held[0](*[la.array(ins[k]) for k in m["inputs"]]))]
    return fn


def first_call_child(name: str) -> dict:
    """In a fresh process that first pays what real_models.py --first-call's children pay (onnx and
    onnxruntime imported, numba started, a small model imported and run): ``name``'s first call and
    its second, CPU seconds by phase (real_models.py's ``phase_timers``: the ONNX parse, the rest of the
    import, the trace, the compiles and the GC's collections, each without the phases inside it, by
    wrapping functions for good: run it in a child process; numba's compiles and cache loads as
    ``jit.compile_ns_within`` reports them, wall time), and the first call's wall time."""
    from lazyarray import jit

    la.set_num_threads(1)
    jit.warm_up()
    rm = _bench_module("real_models")
    if importlib.util.find_spec("onnxruntime") is not None:  # the process real_models.py --first-call times in
        importlib.import_module("onnxruntime")
        rm.Model(next(m for m in rm.manifest() if m["name"] == rm.WARM_UP), (1,)).check()
    fn = _onnx_call(name.split()[1]) if name.startswith("onnx") else _zoo_call(name)
    spent = rm.phase_timers()
    w0, c0 = time.perf_counter_ns(), time.process_time()
    fn()
    first, w1 = time.process_time() - c0, time.perf_counter_ns()
    numba = jit.compile_ns_within(w0, w1) / 1e9
    c0 = time.process_time()
    fn()
    second = time.process_time() - c0
    phases = {k: spent[k] for k in rm.PHASES}
    return {"first": first, **phases, "numba": numba, "rest": first - sum(phases.values()) - numba,
            "second": second, "wall": (w1 - w0) / 1e9, "file": la.__file__}


def first_call_table(names, rounds: int, against: Path | None) -> None:
    trees = {"this": HERE.parent} | ({"other": against.resolve()} if against else {})
    # (the onnx package is imported before this folder, which holds an onnx.py, is on the path)
    code = ("import sys, json, importlib.util as u; u.find_spec('onnx') and __import__('onnx'); "
            "sys.path.append({here!r}); import hybridize; "
            "print(json.dumps(hybridize.first_call_child({name!r})))")
    got = {(n, t): [] for n in names for t in trees}
    for r in range(rounds):
        for n in names:
            for t in (list(trees) if r % 2 == 0 else list(trees)[::-1]):  # alternating
                got[(n, t)].append(probe_in(trees[t], code.format(here=str(HERE), name=n)))
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    rows = []
    for n in names:
        for t in trees:
            med = {k: statistics.median(d[k] for d in got[(n, t)]) * 1e3 for k in PHASES}
            rows.append([n, "" if against is None else ("after" if t == "this" else "before")]
                        + [f"{med[k]:.1f}" for k in PHASES])
    print(f"first hybridized call, CPU ms by phase (fresh process each, one thread; medians of {rounds}; "
          "onnx parse: the file read and checked; onnx import: its conversion to a graph; compile: passes, "
          "guards, planning, choices; numba: wall ms of its compiles and cache loads; rest: the run's compute "
          "and all else), the second call (CPU) and the first call's wall ms")
    print(table(["workload", "tree", "first call", "onnx parse", "onnx import", "trace", "compile", "gc", "numba",
                 "rest", "second call", "first wall"],
                rows))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--guards", action="store_true")
    ap.add_argument("--first-call", action="store_true", help="first hybridized calls by phase (fresh processes)")
    ap.add_argument("--only", default="", help="comma-separated workloads of --first-call")
    ap.add_argument("--against", type=Path, default=None, help="another lazyarray checkout: before/after")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.guards:
        guards_table()
    elif args.first_call:
        first_call_table([n for n in FIRST_CALLS if not args.only or n.split()[-1] in args.only.split(",")
                          or n in args.only.split(",")], args.rounds, args.against)
    else:
        main(quick=args.quick)
