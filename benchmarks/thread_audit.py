"""What the real models' compiled calls do with a second thread: the audit behind the two-thread column
of ``benchmarks/real_models.py``. Nothing here is timed: every count is the same on a busy machine.

Per model and batch (the fixtures of ``real_models.py``), after warm calls on one and on two threads:

* **declined**: steps whose binder (``kernels.bind``) declined, by thread count: such a step pays its
  op's runner (chooser, tuning table, mode) on every call. A step that binds on one thread and declines
  on two is the class of bug ``kernels/matmul.py``'s ``order_decides`` fixed (a stack times a matrix
  asked its chooser per call at two threads);
* **choices**: the ``la.profile()`` labels (``op[impl]``) that differ between one thread and two;
* **per call on two threads**: BLAS thread switches (``threads.blas_one_thread``: each a pair of
  calls into every BLAS library), pool hand-offs (``threads.split``'s parts, ``threads.chunked``'s
  pooled arrays) and compiled parallel regions (``contention.region_done``'s plans) a call makes.

Found at main f42585a (all 20 models, batches 1 and 8): no step declines on either count, no choice
differs, and no row splits over the pool or runs a parallel region on two threads (the regions wait for
larger work: ``conv_region_min_macs``, ``dense_region_min_weight_bytes``; ``conv_blocked_region`` is
off); the second thread works only inside OpenBLAS's products of ``blas_threads.MIN_PARALLEL_FLOPS``
and more. Three batch-8 rows switch BLAS to one thread and back for their mid-sized products
(``blas_threads.one_thread``): convnext_mini and swin_vit_mini 12 times a call, hf_vit 14.

    python benchmarks/thread_audit.py                      # every model, batches 1 and 8
    python benchmarks/thread_audit.py --only resnet,vit    # models whose name contains one of these
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if __name__ == "__main__":  # (benchmarks/onnx.py would shadow the onnx package)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))
_spec = importlib.util.spec_from_file_location("_real_models", _HERE / "real_models.py")
real_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_models)

import lazyarray as la  # noqa: E402
from lazyarray import threads  # noqa: E402
from lazyarray.executor import binding  # noqa: E402
from lazyarray.kernels import contention  # noqa: E402

WARM_CALLS = 6
COUNTED_CALLS = 5


class Recorder:
    """Counts of what the instrumented functions saw: ``declined`` (op, threads) -> steps,
    ``events`` (kind, detail) -> count while ``counting``."""

    def __init__(self):
        self.declined = collections.Counter()
        self.events = collections.Counter()
        self.counting = False

    def note(self, kind: str, detail) -> None:
        if self.counting:
            self.events[kind, detail] += 1


@contextlib.contextmanager
def instrumented(rec: Recorder):
    """``binding.bind``, ``threads.split``/``chunked``, ``contention.region_done`` and the BLAS switch's
    setters wrapped to tell ``rec``; all given back on exit."""
    bind, split, chunked, done = binding.bind, threads.split, threads.chunked, contention.region_done

    def spy_bind(op, xp, *arrays, **params):
        b = bind(op, xp, *arrays, **params)
        if b is None:
            rec.declined[op.name, threads.num_threads()] += 1
        return b

    def spy_split(parts, work):
        rec.note("pool split", f"{len(parts)} parts")
        return split(parts, work)

    def spy_chunked(rows, per, nbytes, work):
        if nbytes >= threads.MIN_PARALLEL_BYTES and threads.num_threads() > 1:
            rec.note("pool chunks", f"{nbytes} bytes")
        return chunked(rows, per, nbytes, work)

    def spy_done(key, start):
        rec.note("parallel region", str(key)[:100])
        return done(key, start)

    binding.bind, threads.split, threads.chunked, contention.region_done = spy_bind, spy_split, spy_chunked, spy_done
    try:
        yield
    finally:
        binding.bind, threads.split, threads.chunked, contention.region_done = bind, split, chunked, done


@contextlib.contextmanager
def switches_counted(rec: Recorder):
    """The BLAS switch's setters (looked up now, on the thread count set) wrapped to tell ``rec`` of each
    switch to one thread; given back (looked up again) on exit."""
    blas = threads.blas_one_thread()
    with blas.lock:
        controllers = blas._blas()
        blas.controllers = [(get, _counting(rec, put)) for get, put in controllers]
    try:
        yield
    finally:
        threads.blas_changed()


def _counting(rec: Recorder, put):
    def counted(n):
        if n == 1:
            rec.note("BLAS switch", "to one thread and back")
        return put(n)

    return counted


def audit(model, batch: int, ins: dict, rec: Recorder) -> dict:
    """One row: steps declined by thread count, the labels only one thread or only two ran, and the
    events per call on two threads."""
    f = model.la_fn(ins)
    rec.declined.clear()
    labels = {}
    for t in (1, 2):
        la.set_num_threads(t)
        for _ in range(WARM_CALLS):
            f()
        with la.profile() as p:
            f()
        labels[t] = collections.Counter({k: n for k, n, _ in p.totals()})
    rec.events.clear()
    with switches_counted(rec):
        rec.counting = True
        try:
            for _ in range(COUNTED_CALLS):
                f()
        finally:
            rec.counting = False
    return {"declined": dict(rec.declined), "only 1t": dict(labels[1] - labels[2]),
            "only 2t": dict(labels[2] - labels[1]),
            "per call at 2t": {k: n / COUNTED_CALLS for k, n in rec.events.items()}}


def report(name: str, batch: int, row: dict) -> list[str]:
    lines = [f"{name} b{batch}: " + ("nothing declined, same choices, no BLAS switch, split or region" if not any(row.values())
                                    else "")]
    for (op, t), n in sorted(row["declined"].items()):
        lines.append(f"    declined on {t} thread(s): {op} ({n} steps)")
    for key in ("only 1t", "only 2t"):
        if row[key]:
            lines.append(f"    {key}: {row[key]}")
    for (kind, detail), n in sorted(row["per call at 2t"].items()):
        lines.append(f"    per call at 2 threads: {n:g} x {kind} ({detail})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated parts of model names")
    ap.add_argument("--batches", default=f"1,{real_models.BIG_BATCH}")
    args = ap.parse_args(argv)
    before = threads.num_threads()
    rec = Recorder()
    batches = {int(b) for b in args.batches.split(",")}
    try:
        with instrumented(rec):
            for m in real_models.manifest():
                if args.only and not real_models._picked(m["name"], args.only):
                    continue
                model = real_models.Model(m, (1, 2))
                for batch, ins, _ in real_models.feeds(m):
                    if batch in batches:
                        print("\n".join(report(m["name"], batch, audit(model, batch, ins, rec))), flush=True)
    finally:
        la.set_num_threads(before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
