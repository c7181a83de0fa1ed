"""Export under SIGKILL: 20 kills of a process while it exports a new model over an old one, for
each writer of more than one file: ``net.export`` (symbol + safetensors parameters),
``la.mxnet.export`` (MXNet symbol + ``.params``) and ``la.onnx.export`` with external data
(``.onnx`` + ``.onnx.data``).

After each kill the model is loaded; every outcome is counted as the complete old model, the
complete new one, a named ``GraphFormatError``, or (the failure this guards against) a mix that
loads. Then the next export runs and the temporaries left in the folder are counted. Target: 20 of
20 old / new / named error for every writer; 0 stale temporaries.

    python benchmarks/export_kills.py [--writers net,mxnet,onnx]
"""
from __future__ import annotations

import argparse
import importlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# run as a script, this folder is first on the path, where benchmarks/onnx.py would shadow the onnx package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

import lazyarray as la  # noqa: E402
from benchmarks._util import table  # noqa: E402
from lazyarray import blocks as nn  # noqa: E402

KILLS = 20
WRITER = """
import importlib, sys
import lazyarray as la
from lazyarray import blocks as nn
importlib.import_module("lazyarray.onnx.export").EXTERNAL_DATA_THRESHOLD = 16
la.random.seed(int(sys.argv[3]))
net = nn.HybridSequential()
net.add(nn.Dense(1024, in_units=1024), nn.Dense(1024, in_units=1024))
net.initialize(); net.hybridize(); net(la.ones((1, 1024)))
print("ready", flush=True)
kind, prefix = sys.argv[1], sys.argv[2]
if kind == "net":
    net.export(prefix)
elif kind == "mxnet":
    la.mxnet.export(net, prefix)
else:
    la.onnx.export(net, prefix + ".onnx")
print("done", flush=True)
"""


def model(seed: int, units: int):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(units, in_units=units), nn.Dense(units, in_units=units))
    net.initialize()
    net.hybridize()
    net(la.ones((1, units)))
    return net


def fingerprint(arrays) -> list:
    return sorted(round(float(np.asarray(a, np.float64).sum()), 2) for a in arrays)


def _export(kind: str, net, prefix: str) -> None:
    if kind == "net":
        net.export(prefix)
    elif kind == "mxnet":
        la.mxnet.export(net, prefix)
    else:
        la.onnx.export(net, prefix + ".onnx")


def _load(kind: str, prefix: str) -> list:
    if kind == "net":
        back = nn.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
        return fingerprint(p.data().asnumpy() for p in back.collect_params().values())
    if kind == "mxnet":
        _, params = la.mxnet.load(prefix + "-symbol.json", prefix + "-0000.params")
        return fingerprint(p.asnumpy() for p in params.values())
    _, arrays = importlib.import_module("lazyarray.onnx.load").load_arrays(prefix + ".onnx")
    return fingerprint(arrays.values())


def _export_seconds(kind: str, prefix: str) -> float:
    """How long the writer process takes from "ready" to "done" (the fastest of 3): kills are spread
    over that time."""
    times = []
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, kind, prefix, "2"], stdout=subprocess.PIPE, cwd=ROOT)
        proc.stdout.readline()
        start = time.perf_counter()
        proc.stdout.readline()
        times.append(time.perf_counter() - start)
        proc.wait()
    return min(times)


def run(kind: str, old, new, rng: random.Random) -> list:
    refs = {"old": fingerprint(p.data().asnumpy() for p in old.collect_params().values()),
            "new": fingerprint(p.data().asnumpy() for p in new.collect_params().values())}
    counts = {"old": 0, "new": 0, "named error": 0, "mixed (wrong)": 0}
    stale = 0
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "m")
        seconds = _export_seconds(kind, prefix)
        for _ in range(KILLS):
            _export(kind, old, prefix)
            proc = subprocess.Popen([sys.executable, "-c", WRITER, kind, prefix, "2"], stdout=subprocess.PIPE, cwd=ROOT)
            proc.stdout.readline()
            time.sleep(rng.uniform(0.0, seconds))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            try:
                got = _load(kind, prefix)
            except la.GraphFormatError:
                counts["named error"] += 1
            else:
                counts[next((k for k, v in refs.items() if v == got), "mixed (wrong)")] += 1
            _export(kind, old, prefix)
            stale += sum(".tmp-" in p for p in os.listdir(d))
    return [kind, f"{seconds:.3f}", counts["old"], counts["new"], counts["named error"], counts["mixed (wrong)"], stale]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", default="net,mxnet,onnx", help="comma-separated: net, mxnet, onnx")
    kinds = ap.parse_args().writers.split(",")
    importlib.import_module("lazyarray.onnx.export").EXTERNAL_DATA_THRESHOLD = 16  # external data, as in WRITER
    rng = random.Random(0)
    rows = []
    for kind in kinds:
        # net.export: another graph (64 units) under the new one; the others: the same graph with other
        # weights, where a mix would load silently
        old = model(1, 64 if kind == "net" else 1024)
        rows.append(run(kind, old, model(2, 1024), rng))
    print(f"Export under SIGKILL ({KILLS} kills per writer). Target: every kill old / new / named error; "
          "0 stale temporaries")
    print(table(["writer", "export (s)", "old", "new", "named error", "mixed (wrong)", "stale temporaries after next export"], rows))


if __name__ == "__main__":
    main()
