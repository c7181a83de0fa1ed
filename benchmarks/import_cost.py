"""Import cost: peak RSS of a fresh interpreter after ``import numpy`` vs after ``import lazyarray``.

Heavy dependencies (scipy, safetensors, networkx, tqdm) are imported on first use, so the
package itself is all that ``import lazyarray`` adds. Target: ``import lazyarray`` adds at most
~10 MiB over ``import numpy`` alone. ``tests/test_import_cost.py`` checks which modules get
imported; this script measures what that costs.

    python benchmarks/import_cost.py
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _util import table  # noqa: E402

TARGET_MIB = 10.0
REPEAT = 5

# Prints peak RSS in MiB (ru_maxrss is bytes on macOS, KiB elsewhere) and the import's seconds.
PROBE = """
import resource, sys, time
t0 = time.perf_counter()
import {module}
dt = time.perf_counter() - t0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10), dt)
"""


def measure(module: str) -> tuple[float, float]:
    """Median peak RSS (MiB) and import time (s) of ``import module`` in fresh interpreters."""
    runs = []
    for _ in range(REPEAT):
        out = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True,
                             check=True)
        rss, dt = map(float, out.stdout.split())
        runs.append((rss, dt))
    return statistics.median(r for r, _ in runs), statistics.median(t for _, t in runs)


def main() -> None:
    rss_np, t_np = measure("numpy")
    rss_la, t_la = measure("lazyarray")
    rows = [["import numpy", f"{rss_np:.1f}", f"{t_np * 1e3:.0f}", "", ""],
            ["import lazyarray", f"{rss_la:.1f}", f"{t_la * 1e3:.0f}", f"{rss_la - rss_np:+.1f}",
             f"{rss_la / rss_np:.2f}"]]
    print(f"Import cost (median of {REPEAT} fresh interpreters). Target: lazyarray adds <= {TARGET_MIB:.0f} MiB "
          "over NumPy")
    print(table(["", "peak RSS (MiB)", "time (ms)", "over NumPy (MiB)", "ratio"], rows))


if __name__ == "__main__":
    main()
