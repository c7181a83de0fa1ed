"""Mixed precision (``la.amp``): the zoo's ResNet-18 and Transformer encoder trained in float32,
float16 and bfloat16 on the same seed and synthetic batch; step time, memory and final loss side by
side, with each low-precision run's ratio to float32 from the same run.

float16 and bfloat16 use ``la.amp.convert_block`` (dense and conv layers in the low dtype, norms and
the loss in float32), ``la.amp.init_trainer`` (dynamic loss scaling from 2**16) and the optimizer's
``multi_precision=True`` float32 master weights. bfloat16 is emulated in float32 storage (see
``lazyarray/amp.py``), so its memory is float32's and its steps pay for the rounding; on this CPU
backend float16 has no fast matrix kernels either. What to read here is the final loss.

Columns: ``step ms`` the median of the timed steps (the first, which compiles, excluded);
``param MiB`` the parameters' arrays; ``peak MiB`` tracemalloc's peak over one more step;
``skipped`` steps skipped for inf/NaN gradients (the scale starts at 2**16 and backs off).

    python benchmarks/mixed_precision.py            # narrowed ResNet-18 widths, ~a few minutes
    python benchmarks/mixed_precision.py --quick    # a smoke run (tests/test_mixed_precision_benchmark.py)
    python benchmarks/mixed_precision.py --full     # the paper's ResNet-18 widths (slow on a CPU)
    python benchmarks/mixed_precision.py --init-scale 256   # no steps skipped while the scale backs off
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("_bench_util", Path(__file__).resolve().parent / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)

import lazyarray as la  # noqa: E402
from lazyarray import blocks as B  # noqa: E402
from lazyarray.blocks import models  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")


def _resnet(size: str):
    channels = {"quick": (8, 8, 16, 16, 32), "default": (16, 16, 32, 64, 128), "full": (64, 64, 128, 256, 512)}[size]
    batch = {"quick": 8, "default": 16, "full": 16}[size]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, 32, 32)).astype("float32")
    y = rng.integers(0, 10, batch)
    return (lambda: models.resnet18(10, channels=channels)), x, y


def _transformer(size: str):
    units, length, batch = {"quick": (16, 8, 8), "default": (64, 32, 16), "full": (128, 64, 16)}[size]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 100, (batch, length))
    y = rng.integers(0, 4, batch)
    return (lambda: models.transformer_encoder(100, 4, units=units, num_layers=2, num_heads=2,
                                               max_length=length)), x, y


MODELS = {"resnet18": _resnet, "transformer": _transformer}


def run(make, x, y, dtype: str, steps: int, lr: float, init_scale: float = 2.0**16) -> dict:
    """Train ``make()`` for ``steps`` updates on one batch; timings, memory and the final loss."""
    la.random.seed(0)
    net = make()
    net.initialize(la.init.Xavier())
    net(la.array(x[:1]))  # (shapes known, so the conversion sees every parameter)
    if dtype != "float32":
        la.amp.convert_block(net, dtype)
    net.hybridize()
    trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": lr, "multi_precision": True})
    scaler = (la.amp.init_trainer(trainer, net, target_dtype=dtype, scaler=la.amp.LossScaler(init_scale=init_scale))
              if dtype != "float32" else None)
    loss_fn = B.SoftmaxCrossEntropyLoss()
    X, Y = la.array(x), la.array(y)

    def step():
        with la.autograd.record():
            loss = loss_fn(net(X), Y)
            if scaler is None:
                loss.backward()
            else:
                with la.amp.scale_loss(loss, trainer) as scaled:
                    scaled.backward()
        trainer.step(len(y))

    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    params = sum(p.data().asnumpy().nbytes for p in net.collect_params().values())
    final = float(loss_fn(net(X), Y).mean().asnumpy())
    return {"ms": 1e3 * statistics.median(times[1:] or times), "param": params / 2**20, "peak": peak / 2**20,
            "loss": final, "skipped": scaler.skipped if scaler else 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny widths, a few steps (a smoke run)")
    size.add_argument("--full", action="store_true", help="the paper's ResNet-18 widths")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--models", default="resnet18,transformer")
    ap.add_argument("--init-scale", type=float, default=2.0**16,
                    help="the loss scaler's first scale (2**16 skips the first steps while it backs off)")
    args = ap.parse_args(argv)
    kind = "quick" if args.quick else "full" if args.full else "default"
    steps = args.steps or (6 if args.quick else 40)
    rows = []
    for name in args.models.split(","):
        make, x, y = MODELS[name](kind)
        results = {dt: run(make, x, y, dt, steps, lr=1e-3, init_scale=args.init_scale) for dt in DTYPES}
        ref = results["float32"]
        for dt, r in results.items():
            rows.append([name, dt, f"{r['ms']:.1f}", f"{r['ms'] / ref['ms']:.2f}x", f"{r['param']:.2f}",
                         f"{r['peak']:.1f}", f"{r['peak'] / ref['peak']:.2f}x", f"{r['loss']:.4f}",
                         f"{(r['loss'] - ref['loss']) / ref['loss']:+.2%}", str(r["skipped"])])
    print(f"mixed precision, {kind} sizes, {steps} Adam steps on one synthetic batch, seed 0, "
          f"initial loss scale {args.init_scale:g}")
    print(_util.table(["model", "dtype", "step ms", "time", "param MiB", "peak MiB", "memory", "final loss",
                       "vs float32", "skipped"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
