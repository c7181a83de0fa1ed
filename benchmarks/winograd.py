"""im2col against Winograd F(2x2, 3x3) and F(4x4, 3x3) on ResNet-18 CIFAR's 3x3 stride-1 layers.

Two tables:

* accuracy: the float32 result's largest error against a float64 direct convolution, divided by
  the output's largest magnitude, for random normal inputs and He-initialized weights (std
  sqrt(2 / (9 C))); F(4, 3) with the points ``winograd4.POINTS`` and, for comparison, with the
  usual (0, 1, -1, 2, -2, inf); and the share of outputs outside rtol 1e-5 / atol 1e-6 of the
  float64 result (on unit-scale layers no float32 algorithm stays within that everywhere);
* speed: ms per call of each algorithm at batch 64 and 1, on 1 and 2 threads
  (``la.set_num_threads``), rounds alternating the algorithms, each keeping its median; the
  ratios are taken in the same run, and the last columns are what ``conv2d`` chooses
  (``winograd4.winograd_tile``); each Winograd tile twice: its kernels transformed at every call
  (training) and kept from the weight's second call (inference, ``winograd2.kernels``).

The machine is shared: compare the ratios, not the times.

    python benchmarks/winograd.py            # run WITHOUT OMP_NUM_THREADS=1 in the environment
    python benchmarks/winograd.py --quick    # batch 8 and 1, few rounds
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

_spec = importlib.util.spec_from_file_location("_bench_util", Path(__file__).resolve().parent / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)

import lazyarray as la  # noqa: E402
from lazyarray.kernels import winograd2, winograd4  # noqa: E402
from lazyarray.kernels.conv2d import run_conv2d  # noqa: E402

# (name, channels, image size): ResNet-18 CIFAR's 3x3 stride-1 convolutions, padding 1
LAYERS = [("64 x 32x32", 64, 32), ("128 x 16x16", 128, 16), ("256 x 8x8", 256, 8), ("512 x 4x4", 512, 4)]


def im2col(x, w, out):
    with la.tuning(winograd=False):  # (conv2d's im2col paths, as for any other layer)
        return run_conv2d(np, x, w, padding=(1, 1), out=out)


def f23(x, w, out):
    return winograd2.winograd_conv2d(np, x, w, (1, 1), out=out)


def f43(x, w, out):
    return winograd4.winograd4_conv2d(np, x, w, (1, 1), out=out)


ALGORITHMS = {"im2col": im2col, "F(2,3)": f23, "F(4,3)": f43}


def transforming(fn):
    """``fn`` with the kernels transformed at every call (training: the weights change every step)."""
    def run(x, w, out):
        with la.tuning(keep_weights=False):
            return fn(x, w, out)
    return run


# speed: the Winograd kernels transformed at every call (training), and kept (inference: the weight
# unchanged since its last call, ``winograd2.kernels``)
SPEED = {"im2col": im2col, "F(2,3)": transforming(f23), "F(4,3)": transforming(f43),
         "F(2,3) kept": f23, "F(4,3) kept": f43}
NAMES = {0: "im2col", 2: "F(2,3)", 4: "F(4,3)"}
RTOL, ATOL = 1e-5, 1e-6  # tests/onnx's comparison with onnxruntime


def direct64(x, w):
    """The float64 direct convolution (padding 1): windows times kernels, summed in one tensordot."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))  # (N, C, Ho, Wo, 3, 3)
    return np.tensordot(win, w.astype(np.float64), axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


def usual_points_f43(x, w):
    """F(4, 3) with the usual points (0, 1, -1, 2, -2, inf), for the accuracy table only."""
    at, g, bt = (np.array(m, dtype=np.float64) for m in winograd4.toom_cook((0, 1, -1, 2, -2, None), 4, 3))
    saved = winograd4._AT, winograd4._G, winograd4._BT, winograd4._GG
    winograd4._AT, winograd4._G, winograd4._BT, winograd4._GG = at, g, bt, np.kron(g, g)
    winograd4.CONSTANTS.clear()  # (the matrices' cast copies: made again from the swapped ones)
    try:
        return f43(x, w, None)
    finally:
        winograd4._AT, winograd4._G, winograd4._BT, winograd4._GG = saved
        winograd4.CONSTANTS.clear()


def layer_inputs(rng, n, c, hw):
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    return x, w


def accuracy(batch: int) -> str:
    rng = np.random.default_rng(0)
    rows = []
    for name, c, hw in LAYERS:
        x, w = layer_inputs(rng, batch, c, hw)
        ref = direct64(x, w)
        scale = np.abs(ref).max()
        ys = [fn(x, w, None) for fn in ALGORITHMS.values()]
        errs = [np.abs(y - ref).max() / scale for y in ys]
        errs.append(np.abs(usual_points_f43(x, w) - ref).max() / scale)
        outside = [np.mean(np.abs(y - ref) > ATOL + RTOL * np.abs(ref)) for y in ys]
        rows.append([name, *(f"{e:.2e}" for e in errs), f"{errs[2] / errs[0]:.1f}x", f"{errs[2] / errs[1]:.1f}x",
                     *(f"{o:.2%}" for o in outside)])
    heads = ["layer", *ALGORITHMS, "F(4,3) usual points", "F(4,3) / im2col", "F(4,3) / F(2,3)",
             *(f"{k} outside" for k in ALGORITHMS)]
    return (f"float32 error / max |y| against a float64 direct convolution (batch {batch}); 'outside': the share\n"
            f"of outputs off the float64 result by more than rtol {RTOL:g} / atol {ATOL:g} (the ONNX tests' tolerance)\n"
            + _util.table(heads, rows))


def speed(batch: int, nthreads: int, rounds: int, reps: int) -> str:
    rng = np.random.default_rng(1)
    rows = []
    totals = dict.fromkeys(SPEED, 0.0)
    chosen_total = {False: 0.0, True: 0.0}
    la.set_num_threads(nthreads)
    for name, c, hw in LAYERS:
        x, w = layer_inputs(rng, batch, c, hw)
        out = np.empty((batch, c, hw, hw), np.float32)
        ref = direct64(x, w)
        times = {k: [] for k in SPEED}
        items = list(SPEED.items())
        for fn in (f23, f43):  # the kept kernels: made at the second call
            fn(x, w, out)
            fn(x, w, out)
        for r in range(rounds):
            for label, fn in (items if r % 2 == 0 else items[::-1]):
                np.testing.assert_allclose(fn(x, w, out), ref, rtol=1e-3, atol=1e-4 * np.abs(ref).max())
                times[label].append(_util.best_of(lambda fn=fn, x=x, w=w, out=out: fn(x, w, out), reps))
        m = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        for k in totals:
            totals[k] += m[k]
        chosen = {}
        for kept in (False, True):
            tile = winograd4.winograd_tile(x.shape, w.shape, (1, 1), (1, 1), (1, 1), 1, hw, hw, cached=kept)
            chosen[kept] = NAMES[tile] + (" kept" if kept and tile else "")
            chosen_total[kept] += m[chosen[kept]]
        best = min(("im2col", "F(2,3)", "F(4,3)"), key=m.get)
        best_kept = min(("im2col", "F(2,3) kept", "F(4,3) kept"), key=m.get)
        rows.append([name, *(f"{v:.2f}" for v in m.values()), f"{m['F(2,3)'] / m['F(4,3)']:.2f}x",
                     f"{m['F(4,3)'] / m['F(4,3) kept']:.2f}x", f"{m['im2col'] / m['F(4,3) kept']:.2f}x",
                     f"{m['F(2,3) kept'] / m['F(4,3) kept']:.2f}x", best, chosen[False], best_kept, chosen[True]])
    rows.append(["sum", *(f"{v:.2f}" for v in totals.values()), f"{totals['F(2,3)'] / totals['F(4,3)']:.2f}x",
                 f"{totals['F(4,3)'] / totals['F(4,3) kept']:.2f}x", f"{totals['im2col'] / totals['F(4,3) kept']:.2f}x",
                 f"{totals['F(2,3) kept'] / totals['F(4,3) kept']:.2f}x", "", f"{chosen_total[False]:.2f} ms", "",
                 f"{chosen_total[True]:.2f} ms"])
    heads = ["layer", *(f"{k} ms" for k in SPEED), "F(2,3) / F(4,3)", "F(4,3) / kept", "im2col / F(4,3) kept",
             "F(2,3) kept / F(4,3) kept", "fastest", "chosen", "fastest kept", "chosen kept"]
    return (f"batch {batch}, {nthreads} thread(s): ms per call (median of {rounds} alternating rounds); 'kept': the\n"
            f"transformed kernels kept (inference), else transformed every call (training)\n"
            + _util.table(heads, rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default: 64 and 1)")
    ap.add_argument("--threads", type=int, action="append", help="thread counts (default: 1 and 2)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args(argv)
    batches = args.batch or ([8, 1] if args.quick else [64, 1])
    rounds, reps = (args.rounds or (3 if args.quick else 7)), (2 if args.quick else 3)
    before = la.threads.num_threads()
    try:
        if not args.no_accuracy:
            print(accuracy(8))
        for b in batches:
            for t in args.threads or [1, 2]:
                print(speed(b, t, rounds, reps))
    finally:
        la.set_num_threads(before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
