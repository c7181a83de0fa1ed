"""``la.profile()`` of a compiled program times the steps a plain run runs (its bound steps,
``executor/binding.py``), naming each bound step's choice as ``explain()`` does."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

RNG = np.random.default_rng(3)


def _cnn_op(batch=1):
    """conv2d -> relu -> max_pool2d -> flatten -> dense, as a CachedOp, with its arguments."""
    S = la.sym
    x = S.var("x", shape=(batch, 3, 8, 8))
    w, b = S.var("w", shape=(8, 3, 3, 3)), S.var("b", shape=(8,))
    w1 = S.var("w1", shape=(4, 128))
    y = S.nn.dense(S.nn.flatten(S.nn.max_pool2d(S.relu(S.nn.conv2d(x, w, b, padding=(1, 1))), kernel=(2, 2))), w1)
    shapes = {"x": (batch, 3, 8, 8), "w": (8, 3, 3, 3), "b": (8,), "w1": (4, 128)}
    args = [la.array(RNG.standard_normal(shapes[n]).astype(np.float32)) for n in y.list_inputs()]
    return la.CachedOp(y), args


def _boom(s):
    raise AssertionError("a profiled run took a runner's step")


def test_a_profiled_run_times_the_bound_steps_and_names_their_choices():
    op, args = _cnn_op()
    want = op(*args).asnumpy()
    op(*args)  # (the second run binds)
    prog = op.program_for(args).program
    chosen = prog.bindings.chosen()
    assert chosen, "no step was bound"
    for i in chosen:  # (the runners' steps: a profiled run must not call them)
        prog.steps[i] = _boom
    with la.profile() as prof:
        got = op(*args).asnumpy()
    np.testing.assert_array_equal(got, want)
    events = {e.step: e for e in prof.events if e.where == "compiled"}
    assert set(events) == set(range(len(prog.step_specs)))
    for i, b in chosen.items():
        assert events[i].impl == (b[0] if isinstance(b, tuple) else b).choice.label()
    rows = {r["step"]: r for r in op.explain(*args).programs[0][1] if r["step"] != "-"}
    for i, e in events.items():
        assert rows[i]["op[implementation]"].endswith(f"[{e.impl}]")


def test_a_profiled_first_run_binds_as_a_plain_second_run_does():
    """Under ``la.profile()`` no run is provisional (``jit.first_run``): the steps bind at once, and
    the profile names what they bound."""
    op, args = _cnn_op(2)
    with la.profile() as prof:
        got = op(*args).asnumpy()
    prog = op.program_for(args).program
    chosen = prog.bindings.chosen()
    assert chosen
    events = {e.step: e.impl for e in prof.events if e.where == "compiled"}
    assert all(events[i] == (b[0] if isinstance(b, tuple) else b).choice.label() for i, b in chosen.items())
    np.testing.assert_allclose(op(*args).asnumpy(), got, rtol=1e-6, atol=1e-6)


def test_under_the_kernels_log_a_profiled_run_takes_the_runners_steps():
    op, args = _cnn_op()
    op(*args)
    op(*args)
    with la.tuning(log_kernels=True), la.profile() as prof:
        op(*args)
    prog = op.program_for(args).program
    assert not prog.bindings.chosen()  # (the log wants the runners' notes)
    assert any(e.impl != "reference" for e in prof.events if e.where == "compiled")


def test_a_tiered_step_is_named_by_the_tier_each_profiled_call_runs():
    """A fused group's bound step counts its first calls, then binds its later tier inside
    (``runner.counted_until``): each profiled call's row names the tier that call ran, from the bound
    step (the runners' steps are never called)."""
    pytest.importorskip("numba")
    x = la.sym.var("x", shape=(4, 4), dtype="float32")
    y = x
    for _ in range(20):  # (40 ops on 16 values: the compiled loop pays, kernels/fused.pays)
        y = y * 0.999 + 0.001
    op, a = la.CachedOp(y), la.array(RNG.random((4, 4)).astype(np.float32))
    with la.tuning(fused_jit_after=3):
        op(a)  # (call 1, the first run: the runners' steps, counted)
        op(a)  # (call 2: binds, counted)
        prog = op.program_for([a]).program
        fused = [i for i, specs in enumerate(prog.step_specs) if specs[0].node.op.name == "fused"]
        assert fused and all(i in prog.bindings.chosen() for i in fused)
        for i in fused:
            prog.steps[i] = _boom
        seen = []
        for _ in range(3):  # (calls 3, 4 and 5)
            with la.profile() as prof:
                op(a)
            seen.append({e.impl for e in prof.events if e.step in fused} - {"numba compile"})
        rows = {r["step"]: r for r in op.explain(a).programs[0][1] if r["step"] != "-"}
    assert seen == [{"chunked"}, {"numba"}, {"numba"}]
    assert all(rows[i]["op[implementation]"] == "fused[numba]" for i in fused)
