"""A compiled step whose bound kernel never takes scratch (``Bound.scratch`` False: conv2d_act's
``loop`` / ``fused``, conv2d's direct loops, max pools) runs without lending its planned workspace
(``ops/scratch.bind_workspace``'s wrapper); one whose kernel may take scratch still lends it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor import program
from lazyarray.ops import scratch

RNG = np.random.default_rng(5)


def _squeeze_op(batch, dtype):
    """A squeeze-and-expand block (1x1 and 3x3 convolutions with relu, padded max pool, im2col-sized
    3x3 convolution), as a CachedOp with its arguments."""
    S = la.sym
    x = S.var("x", shape=(batch, 16, 12, 12), dtype=dtype)
    w1, b1 = S.var("w1", shape=(8, 16, 1, 1), dtype=dtype), S.var("b1", shape=(8,), dtype=dtype)
    w2, b2 = S.var("w2", shape=(16, 8, 3, 3), dtype=dtype), S.var("b2", shape=(16,), dtype=dtype)
    w3 = S.var("w3", shape=(96, 16, 3, 3), dtype=dtype)
    h = S.relu(S.nn.conv2d(x, w1, b1))
    h = S.relu(S.nn.conv2d(h, w2, b2, padding=(1, 1)))
    h = S.nn.max_pool2d(h, kernel=(3, 3), stride=(2, 2), padding=(1, 1))
    y = S.nn.conv2d(h, w3, padding=(1, 1))
    shapes = {"x": (batch, 16, 12, 12), "w1": (8, 16, 1, 1), "b1": (8,), "w2": (16, 8, 3, 3), "b2": (16,),
              "w3": (96, 16, 3, 3)}
    args = [la.array(RNG.standard_normal(shapes[n]).astype(dtype)) for n in y.list_inputs()]
    return la.CachedOp(y), la.CachedOp(y, fuse=False), args


def _lends(step) -> bool:
    return step.__qualname__.startswith(scratch.bind_workspace.__qualname__ + ".")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [1, 3])
def test_bound_steps_lend_their_workspace_only_where_their_kernel_takes_scratch(batch, dtype, kernel_path):
    op, plain, args = _squeeze_op(batch, dtype)
    want = plain(*args).asnumpy()
    with la.tuning(log_kernels=True):  # (the runners' steps: the reference of the bound ones)
        runners = op(*args).asnumpy()
    for _ in range(3):
        got = op(*args).asnumpy()
    np.testing.assert_array_equal(got, runners)
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-5)
    prog = op.program_for(args).program
    rows = {r["step"]: r for r in op.explain(*args).programs[0][1] if r["step"] != "-"}
    steps, chosen = prog.bindings.current[2], prog.bindings.chosen()
    with_workspace = [i for i in chosen if rows[i]["workspace"] != "-"]
    assert with_workspace, "no bound step has a workspace"
    for i in with_workspace:
        b = chosen[i]
        assert not isinstance(b, tuple)
        assert _lends(steps[i]) == b.scratch, (rows[i], b)
    for i, r in rows.items():  # (the runners' steps lend theirs as before)
        if r["workspace"] != "-" and i not in chosen:
            assert _lends(steps[i])
    if kernel_path == "compiled":  # (the loops bound: at least one step skips the wrapper)
        assert any(not chosen[i].scratch for i in with_workspace)


def test_a_step_that_lends_no_workspace_leaves_what_an_enclosing_step_lent():
    """A kernel reading scratch inside a step without the wrapper gets what was lent before (here
    nothing: the thread's own arena), never a workspace another step left lent."""
    op, _, args = _squeeze_op(1, "float32")
    for _ in range(3):
        op(*args)
    lent = scratch._LENT.get()
    assert lent is None or lent.arena is None
    assert scratch.current_arena() is scratch.ARENAS.peek(scratch._ident())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [1, 3])
def test_steps_whose_bound_kernel_reads_no_scratch_are_planned_none(batch, dtype, kernel_path, monkeypatch):
    """The plan gives no workspace to a step whose binding reads no scratch (``kernels/scratch_free.py``,
    asked at compile time): each such bound step has ``Bound.scratch`` False, the planned peak is lower
    than with every declared workspace planned, ``explain()`` says so, and the values are the runners'
    (which take the thread's own arena there) and the unfused program's."""
    op, plain, args = _squeeze_op(batch, dtype)
    want = plain(*args).asnumpy()
    with la.tuning(log_kernels=True):
        runners = op(*args).asnumpy()
    for _ in range(3):
        got = op(*args).asnumpy()
    np.testing.assert_array_equal(got, runners)
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-5)
    prog = op.program_for(args).program
    rows = {r["step"]: r for r in op.explain(*args).programs[0][1] if r["step"] != "-"}
    none = [i for i, r in rows.items() if r["workspace"] == "- (reads none)"]
    chosen = prog.bindings.chosen()
    for i in none:
        assert i in chosen and not chosen[i].scratch, rows[i]
    planned = [i for i, r in rows.items() if r["workspace"] not in ("-", "- (reads none)")]
    assert planned, "the im2col-sized convolution keeps its workspace"
    assert none, "no step was planned without its workspace"  # (the max pool's, at least)
    monkeypatch.setattr(program, "reads_no_scratch", lambda *a, **k: False)  # (every declared workspace planned)
    every = la.CachedOp(op.sym)
    np.testing.assert_array_equal(every(*args).asnumpy(), runners)
    full = every.program_for(args).program.plan
    assert len(prog.plan.workspace_of) == len(full.workspace_of) - len(none)
    assert prog.plan.naive_bytes < full.naive_bytes and prog.plan.peak_bytes <= full.peak_bytes


def test_a_batch_one_cnn_plans_a_lower_peak():
    """A batch-1 CNN whose convolutions run the direct loops and whose pool reads in place: no
    workspace planned at all, the peak its values' alone (``explain()``'s totals)."""
    S = la.sym
    x = S.var("x", shape=(1, 16, 12, 12))
    w1, b1 = S.var("w1", shape=(8, 16, 3, 3)), S.var("b1", shape=(8,))
    y = S.nn.max_pool2d(S.relu(S.nn.conv2d(x, w1, b1, padding=(1, 1))), kernel=(3, 3), stride=(2, 2), padding=(1, 1))
    op = la.CachedOp(y)
    args = [la.array(RNG.standard_normal(s).astype(np.float32)) for s in ((1, 16, 12, 12), (8, 16, 3, 3), (8,))]
    want = la.CachedOp(y, fuse=False)(*args).asnumpy()
    for _ in range(3):
        got = op(*args).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    prog = op.program_for(args).program
    rows = [r for r in op.explain(*args).programs[0][1] if r["step"] != "-"]
    if all(r["workspace"] == "- (reads none)" for r in rows if r["workspace"] != "-"):
        assert not prog.plan.workspace_of
        assert prog.plan.peak_bytes == prog.plan.lower_bound_bytes
    else:  # (numba off: im2col's columns, planned)
        assert prog.plan.workspace_of
