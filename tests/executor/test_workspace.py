"""Scratch memory comes from the plan: a compiled step's declared workspace is a planned buffer,
handed to its kernel as the scratch arena (``ops/scratch.py``), so ``peak_bytes`` is what a run
really holds; eager calls use the bounded per-thread arenas."""
from __future__ import annotations

import gc
import threading
import tracemalloc
import types

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.plan import Step, Value, plan_memory
from lazyarray.ops import scratch

NO_SPLIT = {"min_split_macs": 1 << 62}  # every conv on the calling thread (its scratch: the plan's)
# What a run may hold beyond the plan: Python objects of the call, and the padded copy the im2col
# kernel still makes itself (``conv_windows``) while its planned workspace holds room for it too.
FACTOR, SLACK = 1.15, 256 << 10


def _conv_net(n, c=8, wino=False):
    rng = np.random.default_rng(0)
    x = la.array(rng.standard_normal((n, c, 32, 32)).astype(np.float32))
    w1 = la.array(rng.standard_normal((16, c, 3, 3)).astype(np.float32) / 9)
    w2 = la.array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) / 9)
    with la.deferred():
        h = la.relu(la.nn.conv2d(x, w1, la.zeros(16), padding=(1, 1)))
        y = la.relu(la.nn.conv2d(h, w2, la.zeros(32), padding=(1, 1))).sum(axis=(2, 3))
    ref = np.maximum(_conv_np(np.maximum(_conv_np(x.asnumpy(), w1.asnumpy()), 0), w2.asnumpy()), 0).sum(axis=(2, 3))
    return la.get_symbol(y, inputs={"x": x}), x, ref


def _conv_np(x, w):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)  # n,c,9,h,w
    return np.einsum("ncthw,oct->nohw", cols, w.reshape(w.shape[0], c, 9))


def _dense_net(n):
    rng = np.random.default_rng(1)
    x = la.array(rng.standard_normal((n, 256)).astype(np.float32))
    ws = [(rng.standard_normal((256, 256)).astype(np.float32) / 16, np.zeros(256, np.float32)) for _ in range(4)]
    with la.deferred():
        h = x
        for w, b in ws:
            h = la.relu(la.nn.dense(h, la.array(w), la.array(b)))
    ref = x.asnumpy()
    for w, b in ws:
        ref = np.maximum(ref @ w.T + b, 0)
    return la.get_symbol(h, inputs={"x": x}), x, ref


def _first_run_peak(sym, x, ref):
    """The plan of a fresh CachedOp and the traced peak of its first run (which allocates its
    planned buffers), after a warm-up op ran the kernels (numba, kept weight layouts) twice."""
    warm = la.CachedOp(sym)
    for _ in range(3):
        warm(x)
    op = la.CachedOp(sym)
    plan = op.memory_plan(x=x.shape)
    scratch.ARENAS.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        out = op(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-3, atol=1e-3)
    return plan, peak - before


@pytest.mark.parametrize("make, n", [(_conv_net, 16), (_conv_net, 4), (_dense_net, 512)])
def test_planned_peak_is_the_measured_peak(make, n):
    with la.tuning(**NO_SPLIT):
        plan, measured = _first_run_peak(*make(n))
    assert plan.peak_bytes >= measured / FACTOR - SLACK, (plan.peak_bytes, measured, plan)
    assert plan.peak_bytes <= measured * FACTOR + SLACK, (plan.peak_bytes, measured, plan)


def test_a_conv_step_plans_its_workspace_and_explain_shows_where():
    sym, x, ref = _conv_net(4)
    op = la.CachedOp(sym)
    with la.tuning(**NO_SPLIT):
        exp = op.explain(x)
        np.testing.assert_allclose(op(x).asnumpy(), ref, rtol=1e-3, atol=1e-3)
    plan = exp.programs[0][0].plan
    conv_steps = [i for i, st in enumerate(plan.steps) if st.name.startswith("conv2d")]
    assert sorted(plan.workspace_of) == conv_steps
    for i, w in plan.workspace_of.items():
        assert plan.values[w].nbytes == plan.steps[i].workspace > 0
        assert plan.start[w] == plan.end[w] == i  # alive at its step only
    row = exp.steps[0]
    b, at = plan.buffer_of[plan.workspace_of[0]], plan.offset_of[plan.workspace_of[0]]
    assert row["workspace"].endswith(f"#{b}@{at:,}" if at else f"#{b}"), row
    assert "workspace" in plan.table()


def test_the_workspace_is_placed_like_any_value_and_reused():
    # two steps with 1000-byte workspaces, each alive at its step only: they share their bytes
    vals = [Value(64, external=True), Value(64), Value(64, escapes=True)]
    steps = [Step((0,), (1,), workspace=1000, name="a"), Step((1,), (2,), workspace=1000, name="b")]
    p = plan_memory(vals, steps)
    p.check()
    wa, wb = p.workspace_of[0], p.workspace_of[1]
    assert p.buffer_of[wa] == p.buffer_of[wb] and p.offset_of[wa] == p.offset_of[wb]
    assert p.buffer_of[wa] not in p.escaping_buffers  # never inside memory handed to the caller
    assert p.peak_bytes >= p.lower_bound_bytes
    assert p.lower_bound_bytes == 64 + 64 + 1000


def test_the_bound_workspace_is_the_kernels_scratch_and_its_slots_stay():
    raw = np.zeros(4096, np.uint8)
    seen = []

    def step(s):
        a = scratch.scratch(np, 1, (16,), np.float32)
        b = scratch.scratch(np, 0, (8,), np.float64)
        seen.append((a, b, scratch.slot_buffers()[1], scratch.thread_memo("t")))

    run = scratch.bind_workspace(step, 0)
    arena = scratch.workspace_arena(raw)
    run([arena])
    run([arena])
    (a1, b1, s1, m1), (a2, b2, s2, m2) = seen
    for arr in (a1, b1):
        assert np.shares_memory(arr, raw)
    assert not np.shares_memory(a1, b1)  # slots alive together never overlap
    assert s1 is s2 and m1 is m2 and np.shares_memory(a1, a2)  # the same slot run after run
    own = scratch.scratch(np, 1, (16,), np.float32)  # unbound again: the thread's own arena
    assert not np.shares_memory(own, raw)


def test_a_request_the_workspace_cannot_hold_is_allocated():
    raw = np.zeros(128, np.uint8)
    got = []
    arena = scratch.workspace_arena(raw)
    scratch.bind_workspace(lambda s: got.append(scratch.scratch(np, 0, (1000,), np.float32)), 0)([arena])
    assert got[0].shape == (1000,) and not np.shares_memory(got[0], raw)


def test_eager_arenas_are_per_thread_bounded_and_cleared():
    scratch.ARENAS.clear()
    mine = scratch.scratch(np, 0, (10,), np.float32)
    other = []
    t = threading.Thread(target=lambda: other.append(scratch.scratch(np, 0, (10,), np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(mine, other[0])
    assert len(scratch.ARENAS) == 2
    big = scratch.scratch(np, 2, (scratch.SCRATCH_MAX_BYTES // 4 + 1,), np.float32)  # over the bound: its own
    assert scratch.slot_buffers()[2] is None and big.base is None
    scratch.ARENAS.clear()
    assert len(scratch.ARENAS) == 0
    assert not np.shares_memory(scratch.scratch(np, 0, (10,), np.float32), mine)


def test_only_cpu_steps_take_their_workspace_from_the_plan():
    # a GPU kernel allocates its temporaries from CuPy's pool: a planned GPU workspace would sit unused
    from lazyarray.aval import Aval
    from lazyarray.ops import registry

    conv = registry.get("conv2d")
    params = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    gpu = types.SimpleNamespace(kind="gpu", id=0)  # (a stand-in: la.gpu(0) needs CuPy installed)
    for device, planned in ((la.cpu(0), True), (gpu, False)):
        avals = [Aval((2, 3, 8, 8), np.dtype(np.float32), device), Aval((4, 3, 3, 3), np.dtype(np.float32), device)]
        declared = scratch.workspace_bytes(conv, avals, params)
        assert declared == (2 * 3 * 10 * 10 + 2 * 8 * 8 * 3 * 9) * 4  # padded input + im2col columns
        assert scratch.planned_workspace_bytes(conv, avals, params) == (declared if planned else 0)


def test_a_context_copied_into_another_thread_never_shares_the_bound_workspace():
    """The workspace lent to a step names its thread: another thread running a copy of the step's
    context (``asyncio.to_thread``, a thread that inherits its starter's context) takes its own arena."""
    import contextvars

    raw = np.zeros(4096, np.uint8)
    got = []

    def step(s):
        mine = scratch.scratch(np, 0, (16,), np.float32)
        ctx = contextvars.copy_context()
        t = threading.Thread(target=lambda: got.append(ctx.run(scratch.scratch, np, 0, (16,), np.float32)))
        t.start()
        t.join()
        got.append(mine)

    scratch.bind_workspace(step, 0)([scratch.workspace_arena(raw)])
    theirs, mine = got
    assert np.shares_memory(mine, raw) and not np.shares_memory(theirs, raw)


def test_a_step_run_inside_another_lends_its_workspace_then_the_outer_one_again():
    """A program run inside a step (a control-flow body) lends its steps' workspaces and gives the
    enclosing step's back; a step that raises gives it back too; after both, the thread's own arena."""
    outer_raw, inner_raw = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
    got = {}

    def failing(s):
        got["failing"] = scratch.scratch(np, 0, (16,), np.float32)
        raise ValueError("kernel failed")

    def inner(s):
        got["inner"] = scratch.scratch(np, 0, (16,), np.float32)

    inner_run = scratch.bind_workspace(inner, 0)
    failing_run = scratch.bind_workspace(failing, 0)
    inner_slots = [scratch.workspace_arena(inner_raw)]

    def outer(s):
        inner_run(inner_slots)
        with pytest.raises(ValueError):
            failing_run(inner_slots)
        got["outer"] = scratch.scratch(np, 1, (16,), np.float32)

    scratch.bind_workspace(outer, 0)([scratch.workspace_arena(outer_raw)])
    assert np.shares_memory(got["inner"], inner_raw) and np.shares_memory(got["failing"], inner_raw)
    assert np.shares_memory(got["outer"], outer_raw)
    own = scratch.scratch(np, 0, (16,), np.float32)
    assert not np.shares_memory(own, outer_raw) and not np.shares_memory(own, inner_raw)


def test_a_thread_running_a_copied_context_lends_its_own_workspace_and_leaves_the_starters():
    """A thread running a copy of a step's context runs a step with a workspace of its own: it lends
    that one (not the starter's), and the starter's step still has its own when the thread is done."""
    import contextvars

    mine_raw, theirs_raw = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
    got = {}

    def theirs(s):
        got["theirs"] = scratch.scratch(np, 0, (16,), np.float32)

    def step(s):
        ctx = contextvars.copy_context()
        run = scratch.bind_workspace(theirs, 0)
        t = threading.Thread(target=lambda: ctx.run(run, [scratch.workspace_arena(theirs_raw)]))
        t.start()
        t.join()
        got["mine"] = scratch.scratch(np, 0, (16,), np.float32)

    scratch.bind_workspace(step, 0)([scratch.workspace_arena(mine_raw)])
    assert np.shares_memory(got["theirs"], theirs_raw) and np.shares_memory(got["mine"], mine_raw)


def test_each_buffer_set_has_its_own_workspace_arenas():
    """A program's workspace slots hold an arena each, made with the buffer set: two sets (two threads
    running the program at once) never share one, and a set's arena is the same run after run."""
    sym, x, ref = _conv_net(2)
    op = la.CachedOp(sym)
    with la.tuning(**NO_SPLIT):
        for _ in range(3):
            np.testing.assert_allclose(op(x).asnumpy(), ref, rtol=1e-3, atol=1e-3)
    prog = next(iter(op._cache.values())).program
    assert prog.plan.workspace_of
    first, second = prog._new_set(), prog._new_set()
    for w in prog.plan.workspace_of.values():
        a, b = first[w], second[w]
        assert isinstance(a, scratch.Arena) and isinstance(b, scratch.Arena)
        assert not np.shares_memory(a.raw, b.raw)
    pooled = prog._pool[0]
    arenas = [pooled[w] for w in prog.plan.workspace_of.values()]
    with la.tuning(**NO_SPLIT):
        op(x)
    assert [prog._pool[0][w] for w in prog.plan.workspace_of.values()] == arenas
