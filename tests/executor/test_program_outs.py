"""Ops of several outputs whose kernels write into ``out=(buf0, buf1, ...)`` (``OpDef.writes_out``)
run as ``StepKind.OUTS`` steps in a compiled program (``executor/program.py``): each output lives
in its planned buffer, reused run after run; values equal the reference evaluator's; outputs
handed to the caller stay theirs."""
import gc
import tracemalloc

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor import binding
from lazyarray.executor.interpret import interpret
from lazyarray.executor.program import StepKind, _choose_steps, _Graph, _own_outputs, compile_program
from lazyarray.ops import registry

S = la.sym
MULTI_OUT_OPS = ("gelu_with_grad", "layer_norm_with_stats", "layer_norm_grad", "layer_norm_grad_saved")


def _graph(shape=(64, 32), approximation="none"):
    """One graph running every converted op, with internal and handed-out outputs of each."""
    x = S.var("x", shape=shape)
    gamma = S.var("gamma", shape=shape[-1:])
    beta = S.var("beta", shape=shape[-1:])
    gy, gd = S.nn.gelu_with_grad(x, approximation=approximation)
    y, xhat, rstd = S.nn.layer_norm_with_stats(gy, gamma, beta)
    dx, dgamma, dbeta = S.nn.layer_norm_grad_saved(gd * y, xhat, rstd, gamma)
    ex, eg, eb = S.nn.layer_norm_grad(dx, x, gamma)
    outs = [S.sum(ex * y), eg + dgamma, eb * dbeta, rstd]  # rstd: a multi-output op's output handed out
    names = ["x", "gamma", "beta"]
    return [o.outputs[0] for o in outs], [(n, v) for n, v in zip(names, (x, gamma, beta))]


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) * 2 + 0.5,
            rng.standard_normal(shape[-1:]).astype(np.float32),
            rng.standard_normal(shape[-1:]).astype(np.float32)]


def _compile(shape=(64, 32), approximation="none"):
    outs, ins = _graph(shape, approximation)
    nodes = [v.outputs[0].node for _, v in ins]
    return compile_program(outs, nodes), outs, nodes


def _reference(outs, nodes, args):
    vals = {id(n): [a] for n, a in zip(nodes, args)}
    return interpret(outs, known=lambda n: vals.get(id(n)))


def test_the_converted_ops_declare_that_they_write_out():
    for name in MULTI_OUT_OPS:
        assert registry.get(name).writes_out, name


def test_multi_output_ops_that_write_out_run_as_outs_steps():
    outs, ins = _graph()
    g = _Graph(outs, [v.outputs[0].node for _, v in ins], None)
    owned = _own_outputs(g, list(outs))
    kinds = {sp.node.op.name: sp.kind for sp in _choose_steps(g, {g.slot(e) for e in owned})}
    for name in MULTI_OUT_OPS:
        assert kinds[name] is StepKind.OUTS, (name, kinds[name])


@pytest.mark.parametrize("approximation", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(64, 32), (3, 400, 300)])  # the second: gelu's chunked path
def test_planned_outputs_give_the_reference_values(shape, approximation):
    prog, outs, nodes = _compile(shape, approximation)
    prog.plan.check()
    for seed in (0, 1):  # a second run over reused buffers
        args = _inputs(shape, seed)
        got = prog.run(args)
        for a, b in zip(got, _reference(outs, nodes, args)):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def test_kernels_are_handed_the_same_planned_buffers_every_run(monkeypatch):
    seen: dict[str, list] = {}
    for name in MULTI_OUT_OPS:
        op = registry.get(name)
        inner = op.bind(np)

        def spy(*args, out=None, _inner=inner, _name=name, **kw):
            assert out is not None, f"{_name} was not given its planned buffers"
            seen.setdefault(_name, []).append(tuple(o.__array_interface__["data"][0] for o in out))
            return _inner(*args, out=out, **kw)

        monkeypatch.setitem(op._bound, np, spy)
    monkeypatch.setattr(binding, "binds", lambda op: False)  # (the runners' steps: a bound one skips the spy)
    prog, outs, nodes = _compile()
    for seed in range(3):
        prog.run(_inputs((64, 32), seed))
    for name in MULTI_OUT_OPS:
        addresses = seen[name]
        assert len(addresses) == 3 and len(set(addresses[0])) == len(addresses[0])  # distinct buffers
        if name != "layer_norm_with_stats":  # (its rstd is handed out: memory the caller may keep)
            assert addresses[0] == addresses[1] == addresses[2], name


def test_a_run_allocates_no_multi_output_values():
    """layer_norm_with_stats makes only per-row temporaries: with its outputs planned, a steady run
    allocates far less than one of its (1024, 256) outputs (before: all three, 2 MiB and more)."""
    x, gamma, beta = S.var("x", shape=(1024, 256)), S.var("gamma", shape=(256,)), S.var("beta", shape=(256,))
    y, xhat, _ = S.nn.layer_norm_with_stats(x, gamma, beta)
    out = S.sum(y * xhat)
    prog = compile_program(list(out.outputs), [v.outputs[0].node for v in (x, gamma, beta)])
    args = _inputs((1024, 256))
    prog.run(args)  # the first run allocates the pooled buffers
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        prog.run(args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    one_output = 1024 * 256 * 4
    assert peak - base < one_output // 4, f"a run allocated {peak - base:,} bytes"


def test_outputs_of_a_multi_output_op_are_the_callers():
    x, gamma, beta = S.var("x", shape=(8, 16)), S.var("gamma", shape=(16,)), S.var("beta", shape=(16,))
    res = S.nn.layer_norm_with_stats(x, gamma, beta)
    nodes = [v.outputs[0].node for v in (x, gamma, beta)]
    prog = compile_program(list(res.outputs), nodes)
    prog.plan.check()
    a1 = _inputs((8, 16), 0)
    first = prog.run(a1)
    kept = [f.copy() for f in first]
    second = prog.run(_inputs((8, 16), 1))  # the first run's outputs are still held
    for f, k in zip(first, kept):
        np.testing.assert_array_equal(f, k)
        assert not any(np.shares_memory(f, s) for s in second)
    assert not np.shares_memory(first[0], first[1])
    for a, b in zip(first, _reference(list(res.outputs), nodes, a1)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_gelu_with_grad_of_a_large_transposed_input():
    """The chunked path writes through ``reshape(-1)``: its outputs must be C-ordered (``empty_like``
    of a transposed input is not, and the writes went to a copy)."""
    x = np.random.default_rng(0).standard_normal((640, 512)).astype(np.float32).T
    y, d = registry.get("gelu_with_grad").bind(np)(x)
    np.testing.assert_allclose(y, registry.get("gelu").bind(np)(np.ascontiguousarray(x)), rtol=1e-6, atol=1e-6)
    ones = np.ones_like(x)
    np.testing.assert_allclose(d, registry.get("gelu_grad").bind(np)(ones, np.ascontiguousarray(x)),
                               rtol=1e-6, atol=1e-6)


# -- foreach: the stacked step outputs, final and saved states go to planned buffers --------------
def _rnn_ref(xs, h, w, u):
    outs = []
    for x in xs:
        h = np.tanh(x @ w + h @ u)
        outs.append(h)
    return (np.stack(outs) if outs else np.zeros((0,) + h.shape, h.dtype)), h


@pytest.mark.parametrize("steps", [5, 0])
def test_foreach_writes_its_outputs_into_the_planned_buffers(steps, monkeypatch):
    rng = np.random.default_rng(0)
    xs, h, w, u = (rng.standard_normal(s).astype(np.float32) for s in ((steps, 2, 3), (2, 4), (3, 4), (4, 4)))
    arrays = {k: la.array(v) for k, v in {"xs": xs, "h": h, "w": w, "u": u}.items()}
    with la.deferred():
        outs, final = la.foreach(lambda x, s: ((hn := la.tanh(la.dot(x, arrays["w"]) + la.dot(s, arrays["u"]))), hn),
                                 arrays["xs"], arrays["h"])
        res = [outs * 2, final + 1]
    sym = la.get_symbol(res, inputs=arrays)
    op = registry.get("foreach")
    inner, given = op.bind(np), []

    def spy(*args, out=None, **kw):
        given.append(out)
        return inner(*args, out=out, **kw)

    monkeypatch.setitem(op._bound, np, spy)
    monkeypatch.setattr(binding, "binds", lambda op: False)  # (the runners' steps: a bound one skips the spy)
    cached = la.CachedOp(sym)
    want = _rnn_ref(xs, h, w, u)
    for _ in range(2):
        got = cached(**arrays)
        np.testing.assert_allclose(got[0].asnumpy(), want[0] * 2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1].asnumpy(), want[1] + 1, rtol=1e-5, atol=1e-6)
        del got  # (what the caller holds is never written again: the stacked outputs' buffer may be an output's)
    assert len(given) == 2 and all(isinstance(o, tuple) and len(o) == 3 for o in given)  # (+ saved states)
    for o in given[0]:
        assert o.base is not None  # a view of a planned buffer, not memory the kernel made
    # the saved states are internal (only a gradient would read them): pooled, the same memory each run
    if steps:  # (empty arrays have no memory to compare)
        assert given[0][2].__array_interface__["data"][0] == given[1][2].__array_interface__["data"][0]
