"""Export under SIGKILL: 20 kills of a process while it exports a new model over an old one.

After each kill the model is loaded with ``SymbolBlock.imports``; every outcome is counted as
the complete old model, the complete new one, a named ``GraphFormatError``, or (the failure
this guards against) a mix that loads. Then the next export runs and the temporaries left
in the folder are counted. Target: 20 of 20 old / new / named error; 0 stale temporaries.

    python benchmarks/export_kills.py
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray import blocks as nn  # noqa: E402

KILLS = 20
WRITER = """
import sys
import lazyarray as la
from lazyarray import blocks as nn
la.random.seed(int(sys.argv[2]))
net = nn.HybridSequential()
net.add(nn.Dense(1024, in_units=1024), nn.Dense(1024, in_units=1024))
net.initialize(); net.hybridize(); net(la.ones((1, 1024)))
print("ready", flush=True)
net.export(sys.argv[1])
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


def fingerprint(params) -> list:
    return sorted(round(float(np.asarray(p.data().asnumpy(), np.float64).sum()), 2) for p in params.values())


def main() -> None:
    rng = random.Random(0)
    old, new = model(1, 64), model(2, 1024)
    refs = {"old": fingerprint(old.collect_params()), "new": fingerprint(new.collect_params())}
    counts = {"old": 0, "new": 0, "named error": 0, "mixed (wrong)": 0}
    stale = 0
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "m")
        for _ in range(KILLS):
            old.export(prefix)
            proc = subprocess.Popen([sys.executable, "-c", WRITER, prefix, "2"], stdout=subprocess.PIPE)
            proc.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.04))  # the export of this model takes about 0.03 s here
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            try:
                back = nn.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
            except la.GraphFormatError:
                counts["named error"] += 1
            else:
                got = fingerprint(back.collect_params())
                kind = next((k for k, v in refs.items() if v == got), "mixed (wrong)")
                counts[kind] += 1
            old.export(prefix)
            stale += sum(".tmp-" in p for p in os.listdir(d))
    print(f"Export under SIGKILL ({KILLS} kills). Target: every kill old / new / named error; 0 stale temporaries")
    print(table(["old", "new", "named error", "mixed (wrong)", "stale temporaries after next export"],
                [[counts["old"], counts["new"], counts["named error"], counts["mixed (wrong)"], stale]]))


if __name__ == "__main__":
    main()
