"""Shared helpers for the benchmark scripts: timing and table printing."""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path


def best_of(fn, repeat: int = 5, number: int = 1) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` rounds of ``number`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def timed(fn, budget: float, settle: float = 0.0) -> float:
    """Seconds per call of ``fn``, called enough times to fill about ``budget`` seconds, after
    ``settle`` seconds of rest (another runtime's spinning threads go idle first)."""
    time.sleep(settle)
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    number = max(1, int(budget / max(once, 1e-7)))
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def table(headers: list[str], rows: list[list]) -> str:
    """A plain-text table with right-aligned columns."""
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else f"{c:.3g}" if isinstance(c, float) else str(c)
                                            for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for k, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def probe_in(root: Path, code: str) -> dict:
    """Run ``code`` in a fresh interpreter that imports the lazyarray under ``root``; its last line of
    output is a JSON object with a ``file`` key (``la.__file__``), checked to lie under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=str(root))
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not got["file"].startswith(str(root)):
        raise RuntimeError(f"the probe imported {got['file']}, not the lazyarray under {root}")
    return got


class Burner:
    """A process that keeps one core busy while ``busy(True)`` holds (``with Burner() as b: b.busy(True)``).

    A plain ``python -c`` spin loop, paused with SIGSTOP and resumed with SIGCONT: nothing is pickled
    or imported into the child, so any script can use it (``multiprocessing``'s spawn could not
    import this file by name)."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        self.proc.send_signal(signal.SIGSTOP)
        return self

    def busy(self, on: bool) -> None:
        self.proc.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
        time.sleep(0.05)

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait(5)
