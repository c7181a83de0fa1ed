"""``fused[chunked]`` over whole arrays (an output that fits one chunk): the first calls run the
group's steps in a loop, later ones the steps written out as one function; both give the unfused
ops' values (every step form: unary and binary ufuncs with a positional ``out``, ``maximum`` with a
keyword one, a kernel with params)."""
from __future__ import annotations

import numpy as np

import lazyarray as la
from lazyarray.executor.fusion import fuse
from lazyarray.kernels import fused_chunked as fc


def _group():
    x = la.sym.var("x", shape=(3, 4), dtype="float32")
    y = la.sym.var("y", shape=(4,), dtype="float32")
    h = la.sym.tanh(x * 2.0) + y
    h = la.sym.maximum(h, x) - y
    h = la.sym.nn.gelu(h, approximation="tanh") * la.sym.exp(h)
    (e,) = fuse(list(h.outputs))
    assert e.node.op.name == "fused"
    return h, e.node.params["graph"], [a.node for a in e.node.inputs]


def _unfused(sym, xs, ys):
    return la.CachedOp(sym, fuse=False)(x=la.array(xs), y=la.array(ys)).asnumpy()


def test_the_loop_then_the_written_function_give_the_unfused_values():
    sym, graph, operands = _group()
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")
    want = _unfused(sym, xs, ys)
    values = {"x": xs, "y": ys}
    args = [values[n.name] if n.op is None and n.kind == "var" else np.asarray(n.value) for n in operands]
    steps = fc.steps_of(graph)
    forms = {(form, bool(params)) for *_, form, _ins, params in steps.whole}
    assert {(1, False), (2, False), (0, False), (0, True)} <= forms  # every way a step is called
    seen = []
    for _ in range(fc.WRITE_AFTER + 2):
        got = fc.run_chunked(np, *args, graph=graph)
        seen.append(steps.written is not None)
        np.testing.assert_array_equal(got, want)
    assert seen == [False] * (fc.WRITE_AFTER - 1) + [True] * 3


def test_a_compiled_program_runs_the_written_function_with_the_same_values():
    sym, _, _ = _group()
    op = la.CachedOp(sym)
    rng = np.random.default_rng(1)
    xs, ys = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")
    want = _unfused(sym, xs, ys)
    for _ in range(fc.WRITE_AFTER + 1):
        np.testing.assert_array_equal(op(x=la.array(xs), y=la.array(ys)).asnumpy(), want)


def test_pooled_registers_start_on_a_cache_line_and_are_kept_per_shape():
    fc.POOL.clear()
    f32, f64 = np.dtype("float32"), np.dtype("float64")
    regs = fc.scratch_registers([f32, f64], (64, 768))
    assert [r.shape for r in regs] == [(64, 768)] * 2 and [r.dtype for r in regs] == [f32, f64]
    assert all(r.ctypes.data % 64 == 0 for r in regs)
    assert fc.scratch_registers([f32, f64], (64, 768)) is regs  # (the views, kept)
    other = fc.scratch_registers([f32], (3, 5))
    assert other[0].shape == (3, 5) and other[0].ctypes.data == regs[0].ctypes.data  # (one pool per thread)
    big = fc.scratch_registers([f64], (fc.CHUNK_BYTES,))  # larger than a pool buffer: fresh, not kept
    assert big[0].size == fc.CHUNK_BYTES and fc.scratch_registers([f64], (fc.CHUNK_BYTES,)) is not big
    fc.POOL.clear()
    assert fc.scratch_registers([f32, f64], (64, 768)) is not regs
