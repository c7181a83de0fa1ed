"""``la.profile()``: eager and compiled kernel calls timed, a table sorted by time, a Chrome trace
that Perfetto's JSON loader takes (checked against the trace-event format's schema)."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray.mode import MODE, PROFILING

# The Trace Event Format (the fields Perfetto's and chrome://tracing's JSON importers read):
# a "traceEvents" array of complete ("X") and metadata ("M") events.
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "ph", "pid", "tid"],
                "properties": {
                    "name": {"type": "string"},
                    "cat": {"type": "string"},
                    "ph": {"enum": ["X", "M"]},
                    "ts": {"type": "number", "minimum": 0},
                    "dur": {"type": "number", "minimum": 0},
                    "pid": {"type": "integer"},
                    "tid": {"type": "integer"},
                    "args": {"type": "object"},
                },
                "if": {"properties": {"ph": {"const": "X"}}},
                "then": {"required": ["ts", "dur", "cat"]},
            },
        },
    },
}


def _net():
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Conv2D(8, 3, padding=1, in_channels=3), la.blocks.Activation("relu"),
            la.blocks.Flatten(), la.blocks.Dense(4))
    net.initialize()
    return net


def test_eager_calls_are_timed_with_their_implementation():
    x = la.array(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    w = la.ones((4, 3, 3, 3))
    # (no numba compile among the events: neither im2col's compiled columns nor the compiled loops at a batch)
    with la.profile() as prof, la.tuning(conv_im2col_compiled=False, conv_blocked=False, conv_direct_batch=False):
        y = la.relu(la.nn.conv2d(x, w, padding=(1, 1)))
        y = y + 1
    names = [e.key for e in prof.events]
    assert names == ["nn.conv2d[im2col]", "relu[maximum]", "add[add]"]
    assert all(e.where == "eager" and e.dur_ns >= 0 for e in prof.events)
    assert prof.events[0].shapes == ((2, 3, 8, 8), (4, 3, 3, 3))


def test_compiled_steps_are_timed_per_step_and_named_after_their_nodes():
    net = _net()
    net.hybridize()
    x = la.ones((2, 3, 8, 8))
    net(x)
    net(x)  # (a program's second run loads the kernels its first left out: jit.tiered; no compile below)
    with la.profile() as prof:
        net(x)
        net(x)
    compiled = [e for e in prof.events if e.where == "compiled"]
    steps = {e.step for e in compiled}
    assert len(compiled) == 2 * len(steps) and steps == set(range(len(steps)))
    # (the relu after the convolution runs in its step: nn.conv2d_act, graph/passes/conv_activation.py)
    assert compiled[0].key == "nn.conv2d_act[write_out, blocked]" and compiled[0].node == "conv2d_act0"
    assert len(prof.programs) == 1


def test_the_table_is_sorted_by_total_time_and_counts_calls():
    with la.profile() as prof:
        for _ in range(3):
            la.relu(la.ones((4,)))
        la.nn.conv2d(la.ones((1, 3, 64, 64)), la.ones((8, 3, 3, 3)))
    rows = prof.totals()
    assert [r[2] for r in rows] == sorted((r[2] for r in rows), reverse=True)
    assert dict((k, n) for k, n, _ in rows)["relu[maximum]"] == 3
    text = prof.table()
    assert text.splitlines()[0].split() == ["op[implementation]", "calls", "total", "ms", "mean", "us", "%", "time"]
    assert "relu[maximum]" in text and str(prof) == text


def test_the_chrome_trace_is_valid_trace_event_json(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    net = _net()
    net.hybridize()
    with la.profile() as prof:
        net(la.ones((2, 3, 8, 8)))
        la.relu(la.ones((3,)))
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    jsonschema.validate(trace, TRACE_SCHEMA)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(prof.events)
    assert {e["cat"] for e in events} == {"compiled", "eager"}
    starts = [e["ts"] for e in events]
    assert min(starts) == 0 and starts == sorted(starts)
    assert not list(tmp_path.glob(".trace.json.tmp-*"))  # written atomically


def test_profiling_is_on_only_inside_the_block_and_only_in_this_thread():
    seen = []
    with la.profile() as prof:
        assert MODE.get() & PROFILING
        t = threading.Thread(target=lambda: seen.append(bool(MODE.get() & PROFILING)) or la.relu(la.ones((2,))))
        t.start()
        t.join()
    assert seen == [False] and prof.events == []
    assert not MODE.get() & PROFILING
    with la.profile() as outer:
        la.relu(la.ones((2,)))
        with la.profile() as inner:
            la.exp(la.ones((2,)))
        la.relu(la.ones((2,)))
    assert [e.name for e in inner.events] == ["exp"]
    assert [e.name for e in outer.events] == ["relu", "relu"]


def test_deferred_code_records_nodes_and_times_nothing_until_it_runs():
    with la.profile() as prof:
        with la.deferred():
            y = la.relu(la.ones((2,)) * 3)
        assert prof.events == []
        y.asnumpy()
    assert prof.events  # the recorded graph ran when it was needed


@pytest.mark.parametrize("rows,impl", [(16, "units_major"), (256, "gemm")])
def test_a_step_of_two_ops_is_labelled_with_the_choice_its_dense_made(rows, impl):
    """A dense layer and its in-place relu run as one step (``executor/epilogue.py``), timed as
    ``nn.dense+relu``: the implementation its dense chose names it (not ``reference``), and
    ``explain()`` says the same, with the value's memory order."""
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Dense(256, activation="relu", in_units=64), la.blocks.Dense(4, in_units=256))
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(0).standard_normal((rows, 64)).astype(np.float32))
    net(x)
    net(x)  # (the second run loads what the first left out: jit.tiered)
    with la.profile() as prof:
        net(x)
    assert [e.key for e in prof.events if e.where == "compiled"][0] == f"nn.dense+relu[{impl}]"
    row = str(net.explain(x)).splitlines()[2]
    assert f"nn.dense+relu[{impl}]" in row and ("units major" in row) == (impl == "units_major")
