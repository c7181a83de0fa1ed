"""Exported models in onnxruntime vs the same models hybridized in lazyarray.

For the demo CNN (``lazyarray demo``'s model, 1 x 12 x 12 images), the MLP 784-512-512-10 and
ResNet-18 (CIFAR-style 32 x 32 stem; with ``--full`` also the ImageNet-style 224 x 224 at batch 1):

* export: seconds of ``net.export_onnx`` (``la.onnx.export``) and the file's size;
* inference at batch 1 and 64: the hybridized block (``net(x).asnumpy()``) against an
  onnxruntime session over the exported file, like with like: lazyarray under
  ``la.set_num_threads(t)`` against ORT with ``intra_op_num_threads=t``, for t = 1 and 2.

Outputs are checked equal (rtol 1e-4) before anything is timed. Rounds alternate the two
variants, each after a rest (``SETTLE``: the other runtime's spinning threads go idle first); each keeps the median of its rounds, and the ratio ``la / ort`` is taken in the same
run (the machine is shared: compare ratios, not absolute times).
Target (issue 15): lazyarray within 1.3x of onnxruntime at batch 64.

Where the gaps come from (measured on the 2-core development machine): at batch 1 the small
models pay per node, not per multiply-add: each of our kernels is a few NumPy calls plus
Python glue (a 12 x 12 conv2d costs ~14 us, a hybridized call ~10 us before any kernel) where
onnxruntime runs one C++ kernel per (fused) node: the demo CNN's 11 steps cost 3-18 us each
(conv2d, batch_norm's per-call scale and shift, pools) against onnxruntime's whole call of
~14 us, so its batch-1 ratio (about 6-7x) is per-node overhead, not arithmetic. At batch 64 the
demo CNN's 12 x 12 and 6 x 6 images made NumPy loop over rows of 12 or 6 values in every op;
its planned buffers are now stored batch last (``executor/batch_last.py``), which took it from
2.2-2.6x to about 1.5x (1 thread) and 2.0x (2 threads). Then: its small products run on one BLAS
thread (``kernels/blas_threads.py``: OpenBLAS split them over both cores, which cost more than it
saved, and spun when another process held the second core: 4-15x onnxruntime's time on a busy
machine), the second conv's product runs in column blocks that take OpenBLAS's small-matrix
kernel, im2col is one copy, and a relu after a max pool runs on the pooled values: its steps
went from 317 to 247 us, about 1.3x onnxruntime on 1 thread (CPU time, busy machine: 1.6x
before) and at par on 2. Then its relu and batch norm moved after the max pool where the norm's
scales allow (``nn.batch_norm_max_pool2d``: a quarter of the values; 252 -> about 235 us, 1.15x
onnxruntime on 1 thread). With numba installed (the ``jit`` extra) its pools, pooled norm, relus
and im2col copies run as compiled loops (``lazyarray/jit.py``): 0.88-1.03x onnxruntime on 1 thread. On 2 threads onnxruntime gains 1.05-1.7x (its pool spins, so handing a
kernel's half to another thread costs it about a microsecond); handing work to another Python
thread costs 50-65 us on this machine (a no-op ``threads.split`` or ``chunked``, a
``ThreadPoolExecutor`` submit and wait: the waiting thread's wake-up), a quarter of the whole
model's time, so its kernels stay on one thread (and since its products need no switch of
BLAS's threads, ``blas_threads.small_calls_serial``, its 2-thread time is its 1-thread time;
the switch had cost ~20 us a call). Running the whole graph as two half-batch
programs on two threads (tried: the SBP rules say which graphs allow it) took 0.33 -> 0.93 ms
for the CNN and 0.75 -> 0.97 ms for the MLP, and did not help ResNet-18: the two threads take
turns on the GIL between their many small NumPy calls.
ResNet at batch 1 pays im2col copies and thin BLAS products against onnxruntime's direct
NCHWc convolutions. The MLP is three GEMMs: its gap
is OpenBLAS against MLAS on those shapes. With 2 threads on a shared machine OpenBLAS's
spinning threads collapse (a bare 64x784 @ 784x512 matmul runs 6x slower on 2 threads than on
1 when other processes hold the cores): read the 2-thread columns on a quiet machine only.
ResNet's convolutions no longer lean on BLAS's threads: on 2 threads each splits its batch into
chunks of images over the pool, one BLAS thread per chunk (``threads.split``), so copies and
Winograd transforms run on both cores too (``benchmarks/conv_threads.py`` per layer).

    python benchmarks/onnx.py            # the table (a few minutes)
    python benchmarks/onnx.py --quick    # small models, few rounds: a smoke run of seconds
    python benchmarks/onnx.py --full     # adds ResNet-18 ImageNet-style 224 x 224 at batch 1
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# This file is named like the onnx package. Run as a script, Python puts its directory first on
# the path, where it would shadow the package for ``import onnx`` (in la.onnx and onnxruntime):
# the directory leaves the path, and ``_util`` is loaded from its file (imported as
# ``benchmarks.onnx``, by the smoke test, the path is left alone).
_HERE = Path(__file__).resolve().parent
if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
_spec = importlib.util.spec_from_file_location("_bench_util", _HERE / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)
table = _util.table

import lazyarray as la  # noqa: E402
from lazyarray import blocks as B  # noqa: E402
from lazyarray.cli import build_model  # noqa: E402
from lazyarray.threads import num_threads  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def mlp(hidden=512):
    net = B.HybridSequential()
    net.add(B.Dense(hidden, activation="relu"), B.Dense(hidden, activation="relu"), B.Dense(10))
    return net


def models(quick: bool, full: bool):
    """(name, make the block, the shape of one sample, batch sizes) per model."""
    if quick:
        return [("demo CNN", lambda: build_model("cnn"), (1, 12, 12), (1, 8)),
                ("MLP 784-64-64-10", lambda: mlp(64), (784,), (1, 8)),
                ("ResNet-18 narrow 32x32", lambda: la.blocks.models.resnet18(
                    classes=10, thumbnail=True, channels=(8, 8, 16, 32, 64)), (3, 32, 32), (1,))]
    rows = [("demo CNN 1x12x12", lambda: build_model("cnn"), (1, 12, 12), (1, 64)),
            ("MLP 784-512-512-10", mlp, (784,), (1, 64)),
            ("ResNet-18 CIFAR 32x32", lambda: la.blocks.models.resnet18(classes=10, thumbnail=True),
             (3, 32, 32), (1, 64))]
    if full:
        rows.append(("ResNet-18 ImageNet 224x224", lambda: la.blocks.models.resnet18(classes=1000, thumbnail=False),
                     (3, 224, 224), (1,)))
    return rows


def ort_session(path: str, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


# Seconds of rest before each timed round: both runtimes' idle threads spin for a while after a
# call (OpenBLAS's for about 2**28 cycles, onnxruntime's pool briefly), and on 2 cores the spinning
# threads of the round before took a core from the round being timed. Measured on the MLP at
# batch 64 on 2 threads: without the rest lazyarray 0.72-0.91 ms, onnxruntime 0.68-0.71 ms; with
# it 0.64-0.66 and 0.48-0.49 (both faster, the ratio steadier: 1.31-1.36x against 1.06-1.29x).
SETTLE = 0.2


def timed(fn, budget: float) -> float:
    """Seconds per call of ``fn`` over about ``budget`` seconds, after ``SETTLE`` seconds of rest."""
    return _util.timed(fn, budget, SETTLE)


def compare(la_fn, ort_fn, rounds: int, budget: float) -> tuple[float, float]:
    """Median seconds per call of each, rounds alternating between them (which goes first alternates too)."""
    la_t, ort_t = [], []
    for r in range(rounds):
        if r % 2:
            ort_t.append(timed(ort_fn, budget))
            la_t.append(timed(la_fn, budget))
        else:
            la_t.append(timed(la_fn, budget))
            ort_t.append(timed(ort_fn, budget))
    return statistics.median(la_t), statistics.median(ort_t)


def bench_model(name, make, sample, batches, *, rounds, budget, threads, workdir):
    rng = np.random.default_rng(0)
    net = make()
    net.initialize()
    net.hybridize()
    net(la.array(rng.standard_normal((1, *sample)).astype("float32"))).asnumpy()  # shapes and trace
    path = os.path.join(workdir, name.split()[0].lower() + ".onnx")
    t0 = time.perf_counter()
    net.export_onnx(path)
    export_s = time.perf_counter() - t0
    export_row = [name, f"{export_s * 1e3:.0f}", f"{os.path.getsize(path) / 2**20:.2f}"]
    sessions = {t: ort_session(path, t) for t in threads}
    in_name = sessions[threads[0]].get_inputs()[0].name
    rows = []
    for batch in batches:
        x = rng.standard_normal((batch, *sample)).astype("float32")
        xl = la.array(x)
        ours = net(xl).asnumpy()
        for t, sess in sessions.items():
            theirs = sess.run(None, {in_name: x})[0]
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{name} batch {batch}: lazyarray and onnxruntime ({t} threads) differ")
        row = [name, batch]
        for t, sess in sessions.items():
            la.set_num_threads(t)
            la_s, ort_s = compare(lambda xl=xl: net(xl).asnumpy(),
                                  lambda sess=sess, feed={in_name: x}: sess.run(None, feed), rounds, budget)
            row += [f"{la_s * 1e3:.3f}", f"{ort_s * 1e3:.3f}", f"{la_s / ort_s:.2f}x"]
        rows.append(row)
    return export_row, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small models, few rounds (a smoke run)")
    ap.add_argument("--full", action="store_true", help="add ResNet-18 ImageNet-style 224x224 at batch 1")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds per comparison (median)")
    ap.add_argument("--only", default="", help="run the models whose name contains this text (e.g. ResNet)")
    ap.add_argument("--batch", type=int, action="append", help="only these batch sizes (repeatable)")
    ap.add_argument("--threads", type=int, action="append", help="only these thread counts (default: 1 and 2)")
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    budget = 0.02 if args.quick else 0.3
    threads = tuple(args.threads or (1, 2))
    exports, rows = [], []
    import onnx  # noqa: F401  (imported once here, so the first export's time is the export's)
    before = num_threads()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            for name, make, sample, batches in models(args.quick, args.full):
                if args.only.lower() not in name.lower():
                    continue
                batches = [b for b in batches if not args.batch or b in args.batch]
                e, r = bench_model(name, make, sample, batches, rounds=rounds, budget=budget,
                                   threads=threads, workdir=workdir)
                exports.append(e)
                rows += r
    finally:
        la.set_num_threads(before)
    print("export (la.onnx.export via HybridBlock.export_onnx)")
    print(table(["model", "export ms", "file MiB"], exports))
    print()
    print("inference, ms per call (median of alternating rounds); ratio = lazyarray / onnxruntime")
    headers = ["model", "batch"]
    for t in threads:
        headers += [f"la {t}t", f"ort {t}t", f"ratio {t}t"]
    print(table(headers, rows))
    print("\noutputs checked equal (rtol 1e-4) before timing; target: ratio <= 1.3x at batch 64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
