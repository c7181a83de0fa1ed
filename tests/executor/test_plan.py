"""Memory-plan invariants on random schedules (hypothesis) and on compiled random DAGs."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.executor.interpret import interpret as reference
from lazyarray.executor.plan import Step, Value, plan_memory
from lazyarray.executor.program import compile_program
from lazyarray.graph.node import const_node
from lazyarray.graph.rewrite import rewrite


@st.composite
def schedules(draw):
    """A random DAG schedule: externals, then steps reading earlier values, some views, some in-place."""
    n_ext = draw(st.integers(1, 3))
    devices = ["cpu(0)", "cpu(1)"]
    values = [Value(draw(st.sampled_from([8, 16, 64])), draw(st.sampled_from(devices)), external=True)
              for _ in range(n_ext)]
    steps = []
    for _ in range(draw(st.integers(1, 25))):
        k = draw(st.integers(1, 3))
        ins = tuple(draw(st.lists(st.integers(0, len(values) - 1), min_size=k, max_size=k)))
        view = draw(st.booleans()) and len(ins) == 1
        dev = values[ins[0]].device
        size = values[ins[0]].nbytes if view else draw(st.sampled_from([8, 16, 64, 128]))
        out = len(values)
        values.append(Value(size, dev, view_of=ins[0] if view else None))
        pairs = () if view else tuple((i, 0) for i in range(len(ins)) if draw(st.booleans()))
        steps.append(Step(ins, (out,), pairs))
    n = len(values)
    outs = draw(st.lists(st.integers(n_ext, n - 1), max_size=3)) if n > n_ext else []
    values = [Value(v.nbytes, v.device, v.external, v.view_of, i in outs) for i, v in enumerate(values)]
    return values, steps


def _same_bytes(plan, u, w) -> bool:
    """True when values ``u`` and ``w`` occupy overlapping bytes of one buffer."""
    if plan.buffer_of[u] != plan.buffer_of[w]:
        return False
    a, b = plan.offset_of[u], plan.offset_of[w]
    return a < b + plan.values[w].nbytes and b < a + plan.values[u].nbytes


@settings(max_examples=300, deadline=None)
@given(schedules())
def test_plan_invariants_on_random_schedules(sched):
    values, steps = sched
    plan = plan_memory(values, steps)
    plan.check()
    assert plan.peak_bytes <= plan.naive_bytes or plan.naive_bytes == 0
    # A true lower bound: no plan, in-place writes included, needs less.
    assert plan.peak_bytes >= plan.lower_bound_bytes
    for b, dev in enumerate(plan.buffer_device):
        assert dev in ("cpu(0)", "cpu(1)")
    text = str(plan)
    assert "peak_bytes" in text and "lower_bound_bytes" in text


def test_views_keep_their_base_alive():
    vals = [Value(64, external=True), Value(64), Value(64, view_of=1), Value(64), Value(64, escapes=True)]
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((0,), (3,)), Step((2, 3), (4,))]
    plan = plan_memory(vals, steps)
    plan.check()
    assert plan.end[1] == 3  # the base lives until its view's last reader
    assert not _same_bytes(plan, 1, 3)


def test_inplace_only_when_input_dies():
    vals = [Value(64, external=True), Value(64), Value(64), Value(64, escapes=True)]
    # value 1 is read again at step 2, so step 1 cannot overwrite it
    steps = [Step((0,), (1,)), Step((1,), (2,), inplace=((0, 0),)), Step((1, 2), (3,))]
    plan = plan_memory(vals, steps)
    plan.check()
    assert not _same_bytes(plan, 1, 2)
    assert not any(i == 1 and o == 2 for _, i, o in plan.inplace)


def test_greedy_by_size_avoids_the_fragmentation_of_in_order_best_fit():
    """Best fit in schedule order put the 32-byte value into the dead 96-byte buffer, then needed
    a second 96-byte buffer (208 bytes); placing the largest values first reaches the bound."""
    vals = [Value(64, external=True), Value(96), Value(32), Value(96), Value(16, escapes=True)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((2, 0), (3,)), Step((2, 3), (4,))]
    plan = plan_memory(vals, steps, align=16)
    plan.check()
    assert plan.lower_bound_bytes == 96 + 32 + 16
    assert plan.peak_bytes == plan.lower_bound_bytes
    assert _same_bytes(plan, 1, 3)  # the two dead-apart 96-byte values share their bytes
    assert not _same_bytes(plan, 2, 3)


def test_temporaries_live_inside_an_output_buffer_before_it_is_written():
    """An output's buffer is exactly its size and handed to the caller, but values that die
    before the output is written may use its bytes (the old planner gave the output its own)."""
    vals = [Value(64, external=True), Value(32), Value(96, escapes=True)]
    plan = plan_memory(vals, [Step((0,), (1,)), Step((0,), (2,))], align=16)
    plan.check()
    b = plan.buffer_of[2]
    assert b in plan.escaping_buffers and plan.buffer_size[b] == 96 and plan.offset_of[2] == 0
    assert plan.buffer_of[1] == b
    assert plan.peak_bytes == plan.lower_bound_bytes == 96


def test_no_value_straddles_an_output_buffer_edge():
    """A value alive before an output is written may sit in the output's bytes only wholly inside
    them: the output's buffer is a separate allocation."""
    vals = [Value(64, external=True), Value(64), Value(48), Value(64, escapes=True), Value(48, escapes=True)]
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((2,), (3,)), Step((0, 3), (4,))]
    plan = plan_memory(vals, steps, align=16)
    plan.check()
    for v in (1, 2):
        b, off = plan.buffer_of[v], plan.offset_of[v]
        assert off + vals[v].nbytes <= plan.buffer_size[b]
    for b in plan.escaping_buffers:
        held = [v for v in range(len(vals)) if plan.buffer_of[v] == b and vals[v].escapes]
        assert len(held) == 1 and plan.buffer_size[b] == vals[held[0]].nbytes


def test_offsets_are_aligned_and_gaps_are_not_allocated():
    """Offsets are multiples of ``align``; the padding between values is never allocated, so
    tiny values cost no more than one buffer each."""
    vals = [Value(8, external=True)] + [Value(8) for _ in range(4)] + [Value(8, escapes=True)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((0,), (3,)), Step((0,), (4,)), Step((1, 2, 3, 4), (5,))]
    plan = plan_memory(vals, steps, align=64)
    plan.check()
    assert all(plan.offset_of[v] % 64 == 0 for v in range(1, 6))
    assert plan.peak_bytes == plan.naive_bytes == 40


def test_external_never_written():
    vals = [Value(64, external=True), Value(64, escapes=True)]
    plan = plan_memory(vals, [Step((0,), (1,), inplace=((0, 0),))])
    assert plan.buffer_of[0] is None and plan.inplace == []


@st.composite
def graphs(draw):
    """A random elementwise/reduction DAG over two inputs, built with la.sym."""
    x = la.sym.var("x", shape=(3, 4))
    y = la.sym.var("y", shape=(3, 4))
    pool = [x, y]
    unary = [la.sym.exp, la.sym.tanh, la.sym.relu, la.sym.negative, la.sym.sin,
             lambda a: la.sym.transpose(la.sym.transpose(a)), lambda a: la.sym.reshape(a, shape=(12,)) * 1]
    binary = [la.sym.add, la.sym.multiply, la.sym.subtract, la.sym.maximum]
    for _ in range(draw(st.integers(1, 20))):
        if draw(st.booleans()):
            a = draw(st.sampled_from(pool))
            f = draw(st.sampled_from(unary))
            r = f(a)
            if r.infer_shape()[1][0] != (3, 4):
                r = la.sym.reshape(r, shape=(3, 4))
        else:
            a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
            r = draw(st.sampled_from(binary))(a, b)
        pool.append(r)
    k = draw(st.integers(1, 3))
    outs = [p.outputs[0] for p in pool[-k:]]
    return la.Symbol(outs)


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_compiled_random_graphs_match_reference(sym):
    rng = np.random.default_rng(0)
    names = sym.list_inputs()
    vals = {"x": rng.standard_normal((3, 4)).astype("float32"), "y": rng.standard_normal((3, 4)).astype("float32")}
    prog = compile_program(list(sym.outputs), sym.input_nodes(), names=sym.names())
    prog.plan.check()
    # reference: the node-by-node interpreter on a copy with the inputs bound as constants
    bound = rewrite(sym, lambda node, ins: const_node(vals[node.name], node.avals[0])
                    if node.op is None and node.kind == "var" else None)
    want = reference(list(bound.outputs))
    for _ in range(2):  # the second run reuses the buffer set
        got = prog.run([vals[n] for n in names])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_plan_table_lists_buffers():
    x = la.sym.var("x", shape=(256, 1024))
    h = x
    for _ in range(5):
        h = la.sym.relu(h * 2)
    plan = la.CachedOp(h, fuse=False).memory_plan()  # the planner sees each op
    assert plan.num_buffers >= 1
    assert plan.peak_bytes <= 1.05 * plan.lower_bound_bytes
    assert plan.naive_bytes == 10 * 256 * 1024 * 4
    assert "buffer" in str(plan).splitlines()[0]


def test_relu_grad_writes_over_the_gradient_it_reads():
    """``relu_grad(y, g)`` declares ``g`` (then ``y``) as buffers its result may take: a backward's
    ``g @ w`` product dies there, so the relu gradient lands in its memory (no second buffer of
    the layer's size), with the values of ``g * (y > 0)``."""
    y, g, w = (la.sym.var(n, shape=s) for n, s in (("y", (64, 300)), ("g", (64, 200)), ("w", (200, 300))))
    r = la.sym.relu_grad(y, la.sym.matmul(g, w))
    out = la.sym.sum_to(r, shape=(300,))
    prog = compile_program([out.outputs[0]], [v.outputs[0].node for v in (y, g, w)])
    names = [s.name.rstrip("0123456789") for s in prog.plan.steps]
    at = names.index("relu_grad")
    step = prog.plan.steps[at]
    assert [(i, o) for k, i, o in prog.plan.inplace if k == at] == [(step.inputs[1], step.outputs[0])]
    rng = np.random.default_rng(0)
    yv, gv, wv = (rng.standard_normal(s).astype("float32") for s in ((64, 300), (64, 200), (200, 300)))
    for _ in range(2):
        np.testing.assert_allclose(prog.run([yv, gv, wv])[0], ((gv @ wv) * (yv > 0)).sum(0), rtol=1e-4, atol=1e-3)
