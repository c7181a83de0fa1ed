"""A compiled program's steps with the kernels' choices bound in (``executor/binding.py``): each step of
an op with a binder runs what its runner would choose for the same call (``kernels.choose``, shown by
``explain()``), with the same values; a run under another tuning table or thread count binds again;
the kernels log and ``la.profile()`` still name every choice."""
from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels, threads
from lazyarray.kernels import dense as kdense
from lazyarray.kernels import log as klog

RNG = np.random.default_rng(0)
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "onnx_dynamic")


def _cnn_op(batch=1, dtype="float32"):
    """conv2d (bias, padding) -> relu -> max_pool2d -> flatten -> dense -> relu -> dense, as a CachedOp,
    with its arguments in input order."""
    S = la.sym
    x = S.var("x", shape=(batch, 3, 8, 8), dtype=dtype)
    w, b = S.var("w", shape=(8, 3, 3, 3), dtype=dtype), S.var("b", shape=(8,), dtype=dtype)
    w1, b1 = S.var("w1", shape=(16, 128), dtype=dtype), S.var("b1", shape=(16,), dtype=dtype)
    w2 = S.var("w2", shape=(4, 16), dtype=dtype)
    h = S.nn.max_pool2d(S.relu(S.nn.conv2d(x, w, b, padding=(1, 1))), kernel=(2, 2))
    y = S.nn.dense(S.relu(S.nn.dense(S.nn.flatten(h), w1, b1)), w2)
    shapes = {"x": (batch, 3, 8, 8), "w": (8, 3, 3, 3), "b": (8,), "w1": (16, 128), "b1": (16,), "w2": (4, 16)}
    args = [la.array(RNG.standard_normal(shapes[n]).astype(dtype)) for n in y.list_inputs()]
    return la.CachedOp(y), args


def _program(op, args):
    return op.explain(*args).programs[0][0]


def _bound_names(prog) -> dict:
    """step index -> the implementation bound there (a dense layer's step with its relu: the dense's,
    which ``explain()`` shows)."""
    return {i: (b[0] if isinstance(b, tuple) else b).choice.label() for i, b in prog.bindings.chosen().items()}


@pytest.mark.parametrize("batch", [1, 4])
def test_bound_steps_run_what_the_runners_choose_with_their_values(batch):
    op, args = _cnn_op(batch)
    explained = op.explain(*args)  # (under la.profile(): the runners' steps, noting their choices)
    with la.profile():
        want = op(*args).asnumpy()
    for _ in range(3):
        got = op(*args).asnumpy()
    np.testing.assert_array_equal(got, want)
    prog = explained.programs[0][0]
    bound = _bound_names(prog)
    assert bound, "no step was bound"
    rows = explained.programs[0][1]
    for i, names in bound.items():
        assert rows[i]["op[implementation]"].split("[", 1)[1].rstrip("]") == names


def test_each_bound_choice_equals_choose_for_the_steps_arrays():
    op, args = _cnn_op(1)
    op(*args)
    prog = _program(op, args)
    op(*args)
    x, w, b = (a.asnumpy() for a in args[:3])  # (inputs in order: x, w, b, w1, b1, w2)
    assert x.shape == (1, 3, 8, 8) and w.shape == (8, 3, 3, 3) and b.shape == (8,)
    conv = [v for v in prog.bindings.chosen().values() if not isinstance(v, tuple) and v.choice.impl.op == "conv2d"]
    assert len(conv) == 1
    assert conv[0].choice == kernels.choose("conv2d", np, x, w, b, out=np.empty((1, 8, 8, 8), np.float32),
                                            padding=(1, 1))
    dense = [v for v in prog.bindings.chosen().values() if isinstance(v, tuple)][0]  # (dense + relu)
    h, w1, b1 = np.empty((1, 128), np.float32), args[3].asnumpy(), args[4].asnumpy()
    assert dense[0].choice == kernels.choose("dense", np, h, w1, b1, out=np.empty((1, 16), np.float32))
    assert dense[1].choice.impl.op == "relu"


def test_another_tuning_table_binds_again_and_the_first_comes_back():
    op, args = _cnn_op(1)
    want = op(*args).asnumpy()
    prog = _program(op, args)
    op(*args)
    first = prog.bindings.current[0]
    dense_steps = [i for i, b in prog.bindings.chosen().items() if isinstance(b, tuple) or b.choice.impl.op == "dense"]
    assert all(_impl(prog, i) is kdense.GEMV for i in dense_steps)
    with la.tuning(dense_region_min_weight_bytes=0):
        with la.profile() as prof:
            ref = op(*args).asnumpy()  # (the runners, under this table)
        got = op(*args).asnumpy()
        assert prog.bindings.current[0] is la.tuning_table.current()
        assert all(_impl(prog, i) is kdense.REGION for i in dense_steps)
    assert any(e.impl.startswith(("region", "gemv")) for e in prof.events)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(op(*args).asnumpy(), want)
    assert prog.bindings.current[0] is first
    assert all(_impl(prog, i) is kdense.GEMV for i in dense_steps)


def _impl(prog, i):
    b = prog.bindings.chosen()[i]
    return (b[0] if isinstance(b, tuple) else b).choice.impl


def test_another_thread_count_binds_again():
    a = la.sym.var("a", shape=(64, 128))
    b = la.sym.var("b", shape=(128, 64))
    op = la.CachedOp(la.sym.relu(la.sym.matmul(a, b)))
    an, bn = RNG.standard_normal((64, 128)).astype(np.float32), RNG.standard_normal((128, 64)).astype(np.float32)
    before = threads.num_threads()
    try:
        seen = {}
        for n in (1, 2, 1):
            la.set_num_threads(n)
            y = op(la.array(an), la.array(bn)).asnumpy()
            prog = _program(op, [la.array(an), la.array(bn)])
            op(la.array(an), la.array(bn))
            assert prog.bindings.current[1] == n
            mm = [v for v in prog.bindings.chosen().values() if v.choice.impl.op == "matmul"][0]
            assert mm.choice == kernels.choose("matmul", np, an, bn)
            seen[n] = mm.choice
            np.testing.assert_allclose(y, np.maximum(an @ bn, 0), rtol=1e-5, atol=1e-4)
        assert seen[1].impl.name == "blas"
    finally:
        la.set_num_threads(before)


def test_the_kernels_log_still_names_each_choice_of_a_compiled_program(caplog):
    op, args = _cnn_op(1)
    op(*args)
    klog.clear()
    with la.tuning(log_kernels=True), caplog.at_level(logging.INFO, logger="lazyarray.kernels"):
        op(*args)
    lines = [r.getMessage() for r in caplog.records if r.name == "lazyarray.kernels"]
    assert any(line.startswith("conv2d[") for line in lines) and any(line.startswith("dense[") for line in lines)


def test_a_binder_that_declines_leaves_the_runner_in_the_step():
    """Half-precision conv2d: its binder declines (the runner computes in float32), the step calls
    the runner, and the values are the eager call's. (conv_activation off: the relu stays a step
    of its own, not a part of an ``nn.conv2d_act`` step.)"""
    with la.tuning(conv_activation=False):
        _declining_binder_leaves_the_runner()


def _declining_binder_leaves_the_runner():
    x = la.sym.var("x", shape=(1, 2, 6, 6), dtype="float16")
    w = la.sym.var("w", shape=(3, 2, 3, 3), dtype="float16")
    op = la.CachedOp(la.sym.relu(la.sym.nn.conv2d(x, w)))
    xn = RNG.standard_normal((1, 2, 6, 6)).astype(np.float16)
    wn = RNG.standard_normal((3, 2, 3, 3)).astype(np.float16)
    for _ in range(2):
        y = op(la.array(xn), la.array(wn)).asnumpy()
    want = la.relu(la.nn.conv2d(la.array(xn), la.array(wn))).asnumpy()
    np.testing.assert_array_equal(y, want)
    prog = _program(op, [la.array(xn), la.array(wn)])
    op(la.array(xn), la.array(wn))
    assert [v.choice.impl.op for v in prog.bindings.chosen().values()] == ["relu"]


def test_a_new_process_wide_setting_binds_again():
    op, args = _cnn_op(1)
    want = op(*args).asnumpy()
    prog = _program(op, args)
    op(*args)
    dense_steps = [i for i, b in prog.bindings.chosen().items() if isinstance(b, tuple) or b.choice.impl.op == "dense"]
    try:
        la.config.dense_region_min_weight_bytes = 0  # (la.config: a new default table)
        got = op(*args).asnumpy()
        assert all(_impl(prog, i) is kdense.REGION for i in dense_steps)
    finally:
        la.config.reset()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    op(*args)
    assert all(_impl(prog, i) is kdense.GEMV for i in dense_steps)


def test_a_programs_first_run_binds_nothing_and_the_next_run_binds():
    """A CachedOp's first run for a signature (``jit.first_run``) answers some facts provisionally
    (the BLAS probe waits for a later run): its steps call their runners, and the binding is made at
    the next run, so no choice is kept from the first run's answers."""
    op, args = _cnn_op(2)
    want = op(*args).asnumpy()  # (the signature's first run)
    prog = op.program_for(args).program  # (not by explain(): its profiled run binds, as a plain run does)
    assert not prog.bindings.chosen()
    got = op(*args).asnumpy()
    assert prog.bindings.chosen()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,ops", [("hf_bert", {"nn.layer_norm", "nn.fused_attention", "nn.dense+nn.gelu", "nn.dense"}),
                                      ("hf_t5_encoder", {"nn.rms_norm", "nn.fused_attention"}),
                                      ("hf_gpt2", {"nn.layer_norm", "nn.fused_attention", "nn.gelu"})])  # (its tanh GELU: fuse_gelu_tanh)
def test_a_small_transformers_norms_attention_and_fused_groups_are_bound_as_explain_names_them(name, ops):
    """The imported transformers' layer / RMS norms, fused attention and fused elementwise groups are
    bound (issue #35); each bound step runs what its runner chose under ``la.profile()`` (explain's
    names, after the fused groups' tiers), with the same values bit for bit."""
    pytest.importorskip("onnx")
    m = next(m for m in json.load(open(os.path.join(FIXTURES, "manifest.json"))) if m["name"] == name)
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    case = [c for c in m["cases"] if c.startswith("b1")][-1]
    xs = [la.array(data[f"{case}/in/{k}"]) for k in m["inputs"]]
    with la.tuning(param_cache_max_bytes=0):  # (the program itself, not a parameter cache around it)
        net = la.blocks.SymbolBlock.imports(os.path.join(FIXTURES, name + ".onnx"), m["inputs"])
        net.hybridize()
        for _ in range(4):  # (past the fused groups' tiers: the bound steps rebind once there)
            net(*xs)
        explained = net.explain(*xs)
        with la.profile():
            want = _first(net(*xs))
        got = _first(net(*xs))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, data[f"{case}/out/0"], rtol=1e-3, atol=1e-4)
    prog, rows = explained.programs[0]
    rows = {r["step"]: r for r in rows if r["step"] != "-"}  # (by step: views made once have rows too)
    bound = _bound_names(prog)
    assert ops <= {rows[i]["op[implementation]"].split("[", 1)[0] for i in bound}
    for i, impl in bound.items():
        if not rows[i]["op[implementation]"].startswith("fused["):  # (a tiered group: its first binding's)
            assert rows[i]["op[implementation]"].split("[", 1)[1].rstrip("]") == impl, rows[i]


def _first(y):
    return (y[0] if isinstance(y, (list, tuple)) else y).asnumpy()


def _chain_op(n=40):
    """A long elementwise chain on a small output (one fused group: ``fused[numba]`` once past its
    tier, where numba is on) and its unfused form."""
    x, y = la.sym.var("x", shape=(4, 4)), la.sym.var("y", shape=(4, 4))
    h = x
    for i in range(n):
        h = h * y + x if i % 2 else la.sym.maximum(h - y, x)
    return la.CachedOp(h), la.CachedOp(h, fuse=False)


def test_a_fused_group_bound_before_its_tier_rebinds_after_it(kernel_path):
    """A fused group's first ``fused_jit_after`` calls run chunked: bound at the program's second
    run, its step counts calls as the runner does and binds the compiled path when the count passes;
    every run's values are the unfused program's."""
    op, plain = _chain_op()
    assert kernels.binds("fused")  # (the op has no runner: its kernel asks kernels/fused.py, and binds)
    xn, yn = RNG.standard_normal((4, 4)).astype(np.float32), RNG.standard_normal((4, 4)).astype(np.float32)
    want = plain(la.array(xn), la.array(yn)).asnumpy()
    for _ in range(5):
        np.testing.assert_array_equal(op(la.array(xn), la.array(yn)).asnumpy(), want)
    prog = _program(op, [la.array(xn), la.array(yn)])
    fused = [b for b in prog.bindings.chosen().values() if b.choice.impl.op == "fused"]
    # (bound at the second run, tier 1; its Bound names the tier its last call ran: runner.by_facts)
    assert len(fused) == 1 and fused[0].choice.impl.name == ("numba" if kernel_path == "compiled" else "chunked")
    graph = [s[0].node.params["graph"] for s in prog.step_specs if s[0].node.op.name == "fused"][0]
    state = graph.derived["fused"]
    if kernel_path == "compiled":  # (numba off: not tiered, the bound step counts nothing it needs)
        assert state.calls >= la.tuning_table.current().fused_jit_after  # (counted as the runner counts)
    # the compiled loop ran (its layout kept) in the runs after the tier, bound: no runner asked
    assert (state.layout is not None) == (kernel_path == "compiled")
