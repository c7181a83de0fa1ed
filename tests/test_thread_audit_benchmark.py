"""Smoke run of ``benchmarks/thread_audit.py``: a model's row comes out with its counts, a binder that
declines is counted by thread count, and the instrumented functions and the thread count are given back.
Nothing is timed."""
from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from benchmarks import thread_audit as audit  # noqa: E402
from lazyarray import threads  # noqa: E402
from lazyarray.executor import binding  # noqa: E402
from lazyarray.kernels import contention  # noqa: E402


def test_a_quick_row_comes_out_and_everything_is_given_back(capsys):
    before = (threads.num_threads(), binding.bind, threads.split, threads.chunked, contention.region_done)
    assert audit.main(["--only", "arange_gather", "--batches", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("arange_gather b1: ")
    assert (threads.num_threads(), binding.bind, threads.split, threads.chunked, contention.region_done) == before


def test_a_binder_that_declines_is_counted_by_thread_count(monkeypatch):
    monkeypatch.setattr(binding, "bind", lambda op, xp, *arrays, **params: None)  # (every step declines)
    m = [m for m in audit.real_models.manifest() if m["name"] == "arange_gather"][0]
    model = audit.real_models.Model(m, (1, 2))
    batch, ins, _ = audit.real_models.feeds(m)[0]
    rec = audit.Recorder()
    before = threads.num_threads()
    try:
        with audit.instrumented(rec):
            row = audit.audit(model, batch, ins, rec)
    finally:
        threads.set_num_threads(before)
    counts = {t for _, t in row["declined"]}
    assert row["declined"] and counts == {1, 2}
    assert any(line.startswith("    declined on 2 thread(s): ") for line in audit.report("x", batch, row))


def test_the_report_names_each_event_per_call():
    row = {"declined": {}, "only 1t": {}, "only 2t": {"nn.dense[region]": 1},
           "per call at 2t": {("BLAS switch", "to one thread and back"): 12.0}}
    lines = audit.report("m", 8, row)
    assert lines[0] == "m b8: "
    assert "    only 2t: {'nn.dense[region]': 1}" in lines
    assert "    per call at 2 threads: 12 x BLAS switch (to one thread and back)" in lines
