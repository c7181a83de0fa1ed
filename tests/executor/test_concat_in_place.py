"""Concatenations written in place by their producers (executor/concat_in_place.py): the planner's
placement on schedules (a byte-level simulation checks every read), and compiled programs whose
values equal the same programs with the switch off, and the torch-exported DenseNet."""
import json
import os
import random

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.executor.concat_in_place import IN_PLACE, place
from lazyarray.executor.plan import Step, Value, plan_memory
from lazyarray.executor.program import compile_program

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "onnx_dynamic")


# -- the planner -----------------------------------------------------------------------------------
def _simulate(values, steps, concats, done):
    """Run the schedule on the plan's bytes: every step writes new tokens into its outputs (a
    concatenation not written in place copies its parts), every read checks the tokens it finds;
    a concatenation written in place must find its parts already where its result lies."""
    plan = plan_memory(values, steps)
    plan.check()
    mem = [np.full(n, -1, dtype=np.int64) for n in plan.buffer_size]
    want: dict[int, np.ndarray] = {}

    def at(v):
        b, off = plan.buffer_of[v], plan.offset_of[v]
        return mem[b][off:off + values[v].nbytes]

    token = 0
    for i, st in enumerate(steps):
        for u in st.inputs:
            if not values[u].external:
                assert np.array_equal(at(u), want[u]), f"step {i} reads value {u} overwritten"
        if i in concats:
            want[st.outputs[0]] = np.concatenate([want.get(u, np.zeros(values[u].nbytes, np.int64))
                                                  for u in st.inputs])
            if i in done:
                assert np.array_equal(at(st.outputs[0]), want[st.outputs[0]]), f"step {i}: parts not in place"
            else:
                at(st.outputs[0])[:] = want[st.outputs[0]]
            continue
        for o in st.outputs:
            n = values[o].nbytes
            want[o] = np.arange(token, token + n)
            token += n
            at(o)[:] = want[o]
    return plan


def _dense_block(k=3, size=16, grow=8):
    """DenseNet's block: before each layer the concatenation of every earlier feature map."""
    values = [Value(size, external=True), Value(size)]  # input, the block's first features
    steps = [Step((0,), (1,))]
    feats, concats, total = [1], {}, size
    for _ in range(k):
        values.append(Value(total))
        concats[len(steps)] = tuple(np.cumsum([0] + [values[f].nbytes for f in feats[:-1]]).tolist())
        steps.append(Step(tuple(feats), (len(values) - 1,)))
        values.append(Value(grow))
        steps.append(Step((len(values) - 2,), (len(values) - 1,)))
        feats.append(len(values) - 1)
        total += grow
    values.append(Value(total))
    concats[len(steps)] = tuple(np.cumsum([0] + [values[f].nbytes for f in feats[:-1]]).tolist())
    steps.append(Step(tuple(feats), (len(values) - 1,)))
    values.append(Value(4, escapes=True))
    steps.append(Step((len(values) - 2,), (len(values) - 1,)))
    return values, steps, concats


def test_a_dense_block_lives_in_one_buffer_written_once():
    values, steps, concats = _dense_block()
    writable = {v for st in steps for v in st.outputs} - {st.outputs[0] for k, st in enumerate(steps) if k in concats}
    new, done = place(values, steps, concats, writable)
    assert done == frozenset(concats)
    root = steps[max(concats)].outputs[0]
    assert all(new[v].view_of == root for st in steps for v in st.outputs if v != root and not new[v].escapes)
    plan = _simulate(new, steps, concats, done)
    assert plan.peak_bytes < _simulate(values, steps, concats, frozenset()).peak_bytes


def test_parts_that_disagree_fall_back():
    # cat([a, b]) then cat([b, a]): b cannot lie both after and before a
    values = [Value(8, external=True), Value(8), Value(8), Value(16), Value(16), Value(4, escapes=True)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,)), Step((2, 1), (4,)), Step((3, 4), (5,))]
    concats = {2: (0, 8), 3: (0, 8)}
    new, done = place(values, steps, concats, {1, 2})
    assert done == frozenset({3})
    _simulate(new, steps, concats, done)


def test_a_new_part_never_shares_bytes_with_another_value():
    # the last cat([a, b]) places b after a; an earlier cat([a, d]) would put d on b's bytes
    values = [Value(8, external=True), Value(8), Value(8), Value(8), Value(16), Value(16), Value(4, escapes=True)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (4,)), Step((4,), (3,)), Step((1, 3), (5,)),
             Step((4, 5), (6,))]
    concats = {2: (0, 8), 4: (0, 8)}
    new, done = place(values, steps, concats, {1, 2, 3})
    assert done == frozenset({4})
    _simulate(new, steps, concats, done)


@pytest.mark.parametrize("case", ["escaping part", "escaping result", "external part", "not writable",
                                  "empty part", "a part twice"])
def test_what_stays_a_step(case):
    values = [Value(8, external=True), Value(8), Value(8), Value(16), Value(4, escapes=True)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,)), Step((3,), (4,))]
    concats, writable = {2: (0, 8)}, {1, 2}
    if case == "escaping part":
        values[1] = Value(8, escapes=True)
    elif case == "escaping result":
        values[3] = Value(16, escapes=True)
    elif case == "external part":
        steps[2] = Step((0, 2), (3,))
    elif case == "not writable":
        writable = {2}
    elif case == "empty part":
        values[1], values[3] = Value(0), Value(8)
        concats = {2: (0, 0)}
    else:
        steps[2] = Step((2, 2), (3,))
    new, done = place(values, steps, concats, writable)
    assert not done and new == values


@pytest.mark.parametrize("seed", range(40))
def test_random_schedules_read_what_was_written(seed):
    rng = random.Random(seed)
    values = [Value(8 * rng.randint(1, 3), external=True)]
    steps, concats, made = [], {}, []
    for _ in range(rng.randint(4, 14)):
        if len(made) >= 2 and rng.random() < 0.4:
            parts = rng.sample(made, rng.randint(1, min(4, len(made))))
            concats[len(steps)] = tuple(np.cumsum([0] + [values[p].nbytes for p in parts[:-1]]).tolist())
            values.append(Value(sum(values[p].nbytes for p in parts), escapes=rng.random() < 0.1))
            ins = tuple(parts)
        else:
            values.append(Value(8 * rng.randint(1, 3), escapes=rng.random() < 0.1))
            ins = tuple(rng.sample([0] + made, min(len(made) + 1, rng.randint(1, 2))))
        steps.append(Step(ins, (len(values) - 1,)))
        made.append(len(values) - 1)
    writable = {st.outputs[0] for k, st in enumerate(steps) if k not in concats}
    new, done = place(values, steps, concats, writable)
    _simulate(new, steps, concats, done)


# -- compiled programs -----------------------------------------------------------------------------
def _block(x):
    """A small DenseNet block over ``x`` (1, 4, 3, 3): each layer reads the concatenation of every
    earlier map; the first map is also read directly."""
    a = la.sym.exp(x * 0.5)
    b = la.sym.tanh(a) * 2.0
    c1 = la.sym.concatenate([a, b], axis=1)
    f = la.sym.sin(la.sym.sum(c1, axis=1, keepdims=True) + a)
    c2 = la.sym.concatenate([a, b, f], axis=1)
    return la.sym.relu(c2) + la.sym.sum(la.sym.cos(c1)) + la.sym.sum(a)


def _np_block(x):
    a = np.exp(x * 0.5)
    b = np.tanh(a) * 2.0
    c1 = np.concatenate([a, b], axis=1)
    f = np.sin(c1.sum(axis=1, keepdims=True) + a)
    c2 = np.concatenate([a, b, f], axis=1)
    return np.maximum(c2, 0) + np.cos(c1).sum() + a.sum()


def _run_both(outs, ins, args):
    outs = [e for o in outs for e in o.outputs]
    ins = [v.outputs[0].node for v in ins]
    prog = compile_program(outs, ins)
    with la.tuning(concat_in_place=False):
        ref = compile_program(outs, ins)
    assert not ref.plan.concats_in_place
    for _ in range(2):  # (a second run reuses the buffer set)
        got, want = prog.run(args), ref.run(args)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    return prog, got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_block_equals_the_copying_program(dtype):
    x = la.sym.var("x", shape=(1, 4, 3, 3), dtype=dtype)
    xn = np.random.default_rng(0).standard_normal((1, 4, 3, 3)).astype(dtype)
    prog, got = _run_both([_block(x)], [x], [xn])
    assert len(prog.plan.concats_in_place) == 2
    assert len(prog.steps) + len(prog.made_once) == len(prog.plan.steps)
    np.testing.assert_allclose(got[0], _np_block(xn), rtol=1e-5 if dtype == "float32" else 1e-12)
    prog.plan.check()
    assert "concats_in_place" in str(prog.plan) and "concats_in_place" in prog.plan._repr_html_()


def test_explain_lists_the_concatenations_written_in_place():
    x = la.sym.var("x", shape=(1, 4, 3, 3))
    net = B.SymbolBlock(_block(x), ["x"])
    text = str(net.explain(la.ones((1, 4, 3, 3))))
    assert f"concatenate[{IN_PLACE}]" in text and "2 concatenations written in place" in text


@pytest.mark.parametrize("case", ["batch of two", "part handed out", "result handed out", "input part",
                                  "empty part", "a part twice"])
def test_programs_that_keep_the_step_and_equal_the_copy(case):
    shape = (2, 4, 3) if case == "batch of two" else (1, 4, 3)
    x = la.sym.var("x", shape=shape)
    e = la.sym.var("e", shape=(shape[0], 0, 3))
    a = la.sym.exp(x)
    b = la.sym.tanh(x)
    if case == "input part":
        a = x
    elif case == "empty part":
        a = la.sym.exp(e)
    elif case == "a part twice":
        b = a
    c = la.sym.concatenate([a, b], axis=1)
    outs = [c] if case == "result handed out" else [la.sym.relu(c) * 2.0]
    if case == "part handed out":
        outs.append(b)
    args = [np.random.default_rng(1).standard_normal(shape).astype("float32"), np.zeros((shape[0], 0, 3), "float32")]
    prog, _ = _run_both(outs, [x, e], args)
    assert not prog.plan.concats_in_place


def test_a_batch_joined_on_its_first_axis_is_written_in_place():
    x = la.sym.var("x", shape=(2, 3, 5))
    c = la.sym.concatenate([la.sym.exp(x), la.sym.tanh(x)], axis=0)
    prog, got = _run_both([la.sym.relu(c) * 2.0], [x], [np.ones((2, 3, 5), dtype=np.float32)])
    assert prog.plan.concats_in_place


@pytest.mark.parametrize("batch", [1, 8])
def test_densenet_equals_torch_and_the_copying_program(batch):
    pytest.importorskip("onnx")
    name = "densenet_mini"
    m = next(m for m in json.load(open(os.path.join(FIXTURES, "manifest.json"))) if m["name"] == name)
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    path = os.path.join(FIXTURES, name + ".onnx")
    net = B.SymbolBlock.imports(path, m["inputs"])
    net.hybridize()
    ref = B.SymbolBlock.imports(path, m["inputs"])
    ref.hybridize()
    rng = np.random.default_rng(batch)
    x = la.array(rng.standard_normal((batch,) + tuple(data[f"{m['cases'][0]}/in/{m['inputs'][0]}"].shape[1:]))
                 .astype(np.float32))
    with la.tuning(concat_in_place=False):
        want = ref(x).asnumpy()
    got = net(x).asnumpy()
    assert got.tobytes() == want.tobytes()
    assert "8 concatenations written in place" in str(net.explain(x))  # (batch 8: at the block's image stride)
    for case in m["cases"]:
        xs = [la.array(data[f"{case}/in/{k}"]) for k in m["inputs"]]
        np.testing.assert_allclose(net(*xs).asnumpy(), data[f"{case}/out/0"], rtol=1e-3, atol=1e-4)
