"""Smoke run of ``benchmarks/real_models.py --quick``: every quick model loads both ways, its
outputs are checked equal (to torch's and to onnxruntime's) before timing, and the table, the
geometric mean and the worst row come out. No timing is asserted (the machine is shared)."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from benchmarks import real_models as bench  # noqa: E402
from lazyarray.threads import num_threads, set_num_threads  # noqa: E402


@pytest.fixture(autouse=True)
def _threads_given_back():
    """``bench.Model`` runs lazyarray at one thread (``la.set_num_threads(1)``), as the benchmark
    does; a test that builds one must not leave the process there. Later tests would run other
    kernels (BLAS at one thread): SqueezeNet's ill-conditioned softmax (`tests/onnx/test_light_models.py`,
    logits of 1e10 equal in exact arithmetic) then differs by whole ulps of its logits."""
    before = num_threads()
    yield
    set_num_threads(before)


def test_quick_mode_checks_and_compares_every_quick_model(capsys):
    before = num_threads()
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert num_threads() == before  # the thread setting is given back
    for name in bench.QUICK:
        rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(name + " ")]
        assert [r[1] for r in rows] == ["1", str(bench.BIG_BATCH)], out
        assert all(re.fullmatch(r"\d+\.\d\dx", c) for c in rows[0][2:4] + rows[1][2:4]), rows
        assert re.fullmatch(r"\d+\.\dx", rows[0][-1]), rows  # first call / session creation
    assert re.search(r"geometric mean: 1t \d+\.\d\dx, 2t \d+\.\d\dx", out)
    assert re.search(r"worst row \(1t\): \w+ batch \d+", out.splitlines()[-1])


def test_busy_mode_prints_busy_over_quiet_ratios(capsys):
    assert bench.main(["--quick", "--busy", "--only", "gru"]) == 0
    out = capsys.readouterr().out
    row = next(ln.split() for ln in out.splitlines() if ln.startswith("gru_time_major"))
    assert len(row) == 7 and all(float(c.rstrip("x")) > 0 for c in row[2:]), out  # la, ort 1t/2t and the probe
    assert re.search(r"la 2t: geometric mean \d+\.\d\dx, worst gru_time_major batch \d+ \d+\.\d\dx, "
                     r"\d+ of 2 rows over 1\.3x", out), out
    assert "probe 1t: geometric mean" in out


def test_busy_ratios_are_taken_inside_each_round(monkeypatch):
    """A round's busy time is divided by the same round's quiet time, so a machine that slows down for a
    whole round (both halves) moves no ratio: quiet rounds of 1, 10, 10 against busy 1.2, 12, 1.2 give
    1.2 (two rounds of three), where the medians taken apart would give 1.2 / 10."""
    quiet, busy = [1.0, 10.0, 10.0], [1.2, 12.0, 1.2]

    class Burner:
        switches = 0

        def busy(self, on):
            self.on, self.switches = on, self.switches + 1

    class Model:
        name = "m"

        def la_fn(self, ins):
            return lambda: None

        def ort_fn(self, t, ins):
            return lambda: None

    burner = Burner()
    monkeypatch.setattr(bench, "_on_threads", lambda t, fn: fn)
    monkeypatch.setattr(bench, "timed", lambda fn, budget: (busy if burner.on else quiet)[(burner.switches - 1) // 2])
    row = bench.row_busy(Model(), 1, {}, burner, rounds=3, budget=0.0)
    assert row[:2] == ["m", 1] and row[2:] == pytest.approx([1.2] * len(bench.BUSY_KEYS))
    assert burner.on is False  # the burner is left paused


def test_a_wrong_output_stops_the_run_before_anything_is_timed(monkeypatch):
    m = next(m for m in bench.manifest() if m["name"] == "gru_time_major")
    model = bench.Model(m, (1,))
    model.check()  # as loaded: equal
    real = model.la_run
    monkeypatch.setattr(model, "la_run", lambda ins: [y + np.float32(1e-2) for y in real(ins)])
    with pytest.raises(AssertionError, match="gru_time_major batch 1 output 0: lazyarray and torch differ"):
        model.check()


def test_the_larger_batch_repeats_the_largest_case_along_the_batch_axis_only():
    m = next(m for m in bench.manifest() if m["name"] == "gru_time_major")  # (time, batch, features)
    (b1, small, want), (b8, big, none) = bench.feeds(m)
    assert (b1, b8, none) == (1, bench.BIG_BATCH, None) and want is not None
    x = big["x"]
    assert x.shape[1] == bench.BIG_BATCH and x.shape[0] == small["x"].shape[0]
    np.testing.assert_array_equal(x[:, 3:6], x[:, 0:3])


def test_ab_mode_times_the_new_kernels_against_the_paths_they_replaced(capsys):
    from lazyarray.kernels import depthwise

    choose = depthwise.choose_impl
    assert bench.main(["--quick", "--ab", "--only", "gru"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("gru_time_major")]
    assert [r[1] for r in rows] == ["1", str(bench.BIG_BATCH)] and all(c.endswith("x") for r in rows for c in r[2:4])
    assert depthwise.choose_impl is choose  # the switches are given back
    from lazyarray.kernels import foreach, matmul
    from lazyarray.ops import registry
    assert registry.get("foreach").runner is foreach.run_foreach and registry.get("matmul").runner is matmul.run_matmul


def test_fuse_ab_mode_times_fused_attention_and_layer_norm_against_the_written_out_ops(capsys):
    import lazyarray as la

    assert bench.main(["--quick", "--fuse-ab", "--only", "hf_bert"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("hf_bert")]
    assert [r[1] for r in rows] == ["1", str(bench.BIG_BATCH)] and all(c.endswith("x") for r in rows for c in r[2:4])
    before, _, after = rows[0][4:7]
    assert int(after) < int(before), rows  # steps: unfused -> fused
    assert la.config.fuse_attention and la.config.fuse_layer_norm  # the switches are given back


def test_ab_cnn_mode_times_the_cnn_paths_against_them_switched_off(capsys):
    import lazyarray as la

    assert bench.main(["--quick", "--ab-cnn", "--only", "resnet"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("resnet_mini")]
    assert [r[1] for r in rows] == ["1", str(bench.BIG_BATCH)] and all(c.endswith("x") for r in rows for c in r[2:4])
    on, off = (int(v) for v in " ".join(rows[0][4:]).split(" / "))
    assert on < off  # (conv2d_act: a relu less per fused convolution)
    assert la.config.conv_pointwise and la.config.conv_activation  # (the switches are given back)


def test_first_call_mode_times_fresh_processes_with_a_cold_and_a_warm_kernel_cache(capsys):
    assert bench.main(["--first-call", "--only", "gru_time_major", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    row = next(ln.split() for ln in out.splitlines() if ln.strip().startswith("gru_time_major "))
    assert len(row) == 12 and re.fullmatch(r"\d+\.\dx", row[7]) and re.fullmatch(r"\d+\.\dx", row[8]), row
    assert re.search(r"warm/session: geometric mean \d+\.\dx, worst gru_time_major", out)
    # the warm first call by phase, CPU ms: they and the run add up to the first call's CPU time
    phases = next(ln.split() for ln in out.splitlines()[out.splitlines().index(
        next(ln for ln in out.splitlines() if ln.startswith("warm first call by phase"))):] if ln.strip().startswith("gru_time_major "))
    assert len(phases) == 14 and re.fullmatch(r"\d+\.\dx", phases[-1]), phases
    first, _, parse, imported, trace, compiled, collected, numba, run = map(float, phases[1:10])
    assert parse > 0 and imported > 0 and compiled > 0 and run > 0
    assert parse + imported + trace + compiled + collected + numba + run == pytest.approx(first, abs=0.3)


@pytest.mark.slow
def test_first_call_against_another_checkout_gives_before_and_after_rows(capsys):
    root = bench._HERE.parent
    assert bench.main(["--first-call", "--only", "arange_gather", "--rounds", "1", "--against", str(root)]) == 0
    out = capsys.readouterr().out
    trees = [ln.split()[1] for ln in out.splitlines() if ln.strip().startswith("arange_gather ")]
    assert trees == ["after", "before", "after", "before"], out  # (both tables)
    assert re.search(r"before: warm/session: geometric mean \d+\.\dx", out)
