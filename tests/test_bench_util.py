"""benchmarks/_util.py's helpers that the benchmark scripts share."""
import importlib.util
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_bench_util_for_tests", Path(__file__).resolve().parents[1] / "benchmarks" / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks


def test_the_burner_burns_only_while_busy_and_is_gone_after_the_block():
    with _util.Burner() as burner:
        pid = burner.proc.pid
        time.sleep(0.3)
        paused = _cpu_seconds(pid)
        time.sleep(0.3)
        assert _cpu_seconds(pid) - paused < 0.05  # stopped: no CPU time
        burner.busy(True)
        deadline = time.monotonic() + 5.0  # a loaded machine gives it a share of a core
        while _cpu_seconds(pid) - paused < 0.1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _cpu_seconds(pid) - paused >= 0.1  # burning
        burner.busy(False)
        stopped = _cpu_seconds(pid)
        time.sleep(0.3)
        assert _cpu_seconds(pid) - stopped < 0.05
    assert burner.proc.poll() is not None
