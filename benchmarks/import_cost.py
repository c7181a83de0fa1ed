"""Import cost: peak RSS of a fresh interpreter after ``import numpy`` vs after ``import lazyarray``;
and, with ``--onnx``, the time to import ONNX models (``SymbolBlock.imports``).

Heavy dependencies (scipy, safetensors, networkx, tqdm) are imported on first use, so the
package itself is all that ``import lazyarray`` adds. Target: ``import lazyarray`` adds at most
~10 MiB over ``import numpy`` alone. ``tests/test_import_cost.py`` checks which modules get
imported; this script measures what that costs.

``--onnx``: per model of ``tests/data/onnx_dynamic`` (hf_bert, lstm_bidir, convnext_mini by default),
in fresh interpreters: the CPU time of the process's first ``SymbolBlock.imports`` of the file (after
one small model was imported, so the process's first uses are paid apart), and the median of five more
imports in the same process. ``--against PATH`` alternates those processes with ones that import the
lazyarray of another checkout (``PATH`` holds its ``lazyarray/``) and prints the ratio this / that,
per process pair (the machine is shared: compare ratios).

    python benchmarks/import_cost.py
    python benchmarks/import_cost.py --onnx [--models hf_bert,lstm_bidir] [--against /path/to/other/checkout]
    python benchmarks/import_cost.py --against /path/to/other/checkout [--rounds 11]   # import lazyarray, A/B
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import probe_in, table  # noqa: E402

TARGET_MIB = 10.0
REPEAT = 5

# Prints peak RSS in MiB (ru_maxrss is bytes on macOS, KiB elsewhere) and the import's seconds, wall and CPU.
PROBE = """
import resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import {module}
dt, dc = time.perf_counter() - t0, time.process_time() - c0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10), dt, dc)
"""


def _probe(module: str, root: Path | None) -> tuple[float, float]:
    env = None if root is None else {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True,
                         check=True, env=env)
    rss, dt, dc = map(float, out.stdout.split())
    return rss, dt, dc


def measure(module: str, root: Path | None = None) -> tuple[float, float]:
    """Median peak RSS (MiB) and import time (s) of ``import module`` in fresh interpreters (the
    lazyarray under ``root`` first on the path, when given)."""
    runs = [_probe(module, root) for _ in range(REPEAT)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def measure_against(other: Path, rounds: int) -> list:
    """``import lazyarray`` from this checkout and from ``other``, alternating: rows of median peak RSS,
    wall and CPU time, and the ratios this / other of the times per process pair."""
    this, that = [], []
    for r in range(rounds):
        pair = [(this, ROOT), (that, other)]
        for runs, root in (pair if r % 2 == 0 else pair[::-1]):
            runs.append(_probe("lazyarray", root))
    rows = [[name] + [f"{statistics.median(x[k] for x in runs) * (1e3 if k else 1):.{0 if k else 1}f}" for k in range(3)]
            for name, runs in (("import lazyarray (this)", this), (f"import lazyarray ({other})", that))]
    return rows + [["this / other", ""] + [f"{statistics.median(a[k] / b[k] for a, b in zip(this, that)):.2f}"
                                          for k in (1, 2)]]


ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "onnx_dynamic"
MODELS = ("hf_bert", "lstm_bidir", "convnext_mini")
ROUNDS = 5

# Prints {"first": s, "again": s} of CPU time: the first import of the model in this process (after one
# small model), then the median of five more.
ONNX_PROBE = """
import json, statistics, sys, time
import lazyarray as la
man = {{m["name"]: m for m in json.load(open({manifest!r}))}}
def imp(name):
    t0 = time.process_time()
    la.blocks.SymbolBlock.imports({fixtures!r} + "/" + name + ".onnx", man[name]["inputs"])
    return time.process_time() - t0
imp("arange_gather")
first = imp({model!r})
again = statistics.median(imp({model!r}) for _ in range(5))
print(json.dumps({{"first": first, "again": again, "file": la.__file__}}))
"""


def onnx_import(model: str, root: Path) -> dict:
    """One fresh interpreter importing ``model`` with the lazyarray under ``root``."""
    code = ONNX_PROBE.format(manifest=str(FIXTURES / "manifest.json"), fixtures=str(FIXTURES), model=model)
    return probe_in(root, code)


def onnx_rows(models, against: Path | None, rounds: int = ROUNDS) -> list:
    """Per model: medians over ``rounds`` fresh processes (alternating with ``against`` when given)."""
    rows = []
    for model in models:
        this, that = [], []
        for _ in range(rounds):
            this.append(onnx_import(model, ROOT))
            if against is not None:
                that.append(onnx_import(model, against))
        row = [model] + [f"{statistics.median(r[k] for r in this) * 1e3:.1f}" for k in ("first", "again")]
        if against is not None:
            row += [f"{statistics.median(r[k] for r in that) * 1e3:.1f}" for k in ("first", "again")]
            row += [f"{statistics.median(a[k] / b[k] for a, b in zip(this, that)):.2f}" for k in ("first", "again")]
        rows.append(row)
    return rows


def print_onnx(models, against: Path | None, rounds: int = ROUNDS) -> None:
    head = ["model", "first import (ms)", "again (ms)"]
    if against is not None:
        head += ["other: first", "other: again", "ratio first", "ratio again"]
    print(f"ONNX import, CPU ms, medians of {rounds} fresh processes" + (
        f" alternating with {against} (ratio: this / other, per process pair)" if against is not None else ""))
    print(table(head, onnx_rows(models, against, rounds)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", action="store_true", help="time ONNX model imports instead")
    ap.add_argument("--models", default=",".join(MODELS), help="with --onnx: fixture names, comma-separated")
    ap.add_argument("--against", default="", help="another checkout to alternate with (ONNX imports with --onnx, "
                                                  "else import lazyarray)")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="with --onnx: fresh processes per model")
    args = ap.parse_args(argv)
    if args.onnx:
        print_onnx(args.models.split(","), Path(args.against).resolve() if args.against else None, args.rounds)
        return
    if args.against:
        print(f"import lazyarray, medians of {args.rounds} fresh interpreters each, alternating")
        print(table(["", "peak RSS (MiB)", "wall (ms)", "CPU (ms)"], measure_against(Path(args.against).resolve(),
                                                                                    args.rounds)))
        return
    rss_np, t_np = measure("numpy")
    rss_la, t_la = measure("lazyarray", ROOT)
    rows = [["import numpy", f"{rss_np:.1f}", f"{t_np * 1e3:.0f}", "", ""],
            ["import lazyarray", f"{rss_la:.1f}", f"{t_la * 1e3:.0f}", f"{rss_la - rss_np:+.1f}",
             f"{rss_la / rss_np:.2f}"]]
    print(f"Import cost (median of {REPEAT} fresh interpreters). Target: lazyarray adds <= {TARGET_MIB:.0f} MiB "
          "over NumPy")
    print(table(["", "peak RSS (MiB)", "time (ms)", "over NumPy (MiB)", "ratio"], rows))


if __name__ == "__main__":
    main()
