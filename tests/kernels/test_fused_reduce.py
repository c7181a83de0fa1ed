"""``fused[chunked]`` for groups that end in a reduction over the last axis (sum, mean, max, min,
keepdims or not): the values are the unfused ops' bit for bit in float32 and float64 over the op
table's elementwise cases (with their broadcasting), with views, empty arrays, chunks over
threads and an output sharing an operand's memory; the chooser keeps such groups chunked and
``explain()`` names the reduction."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels, threads
from lazyarray.executor.fusion import fuse, fusible
from lazyarray.kernels import fused as kfused
from lazyarray.kernels import fused_chunked as fc
from lazyarray.ops.registry import all_ops
from tests.ops.cases import CASES

ELEMENTWISE = sorted(o.name for o in all_ops() if o.elementwise and o.name in CASES and len(o.inputs) in (1, 2))
ENDS = [(r, kd) for r in ("sum", "mean", "max", "min") for kd in (False, True)]


def assert_same_bits(got, want):
    """Equal values, NaN where NaN, and the same sign on zeros."""
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def both(sym, arrays: dict):
    """``sym`` compiled with and without fusion, on ``arrays``; and the fused program's graph."""
    ins = {k: la.array(v) for k, v in arrays.items()}
    on = la.CachedOp(sym)
    with np.errstate(all="ignore"):
        got, want = on(**ins).asnumpy(), la.CachedOp(sym, fuse=False)(**ins).asnumpy()
    return got, want, on.compiled()


def ends_in(compiled, red) -> bool:
    return any(n.op is not None and n.op.name == "fused" and n.name.endswith(f",{red}]") for n in compiled.topo())


def _cases():
    k = 0
    for name in ELEMENTWISE:
        for dtype in [d for d in ("float32", "float64") if d in CASES[name].dtypes]:
            rng = np.random.default_rng(abs(hash((name, dtype))) % 2**32)
            for j, sample in enumerate(CASES[name].samples(rng, dtype, False)):
                args = sample.args
                if not all(isinstance(a, np.ndarray) for a in args) or len(np.broadcast_shapes(
                        *[a.shape for a in args])) < 2:
                    continue  # (a reduction ends a group of 2 or more dims only)
                red, kd = ENDS[k % len(ENDS)]
                k += 1
                yield pytest.param(name, dtype, args, sample.params, red, kd, id=f"{name}-{dtype}-{j}-{red}-{kd}")


@pytest.mark.parametrize("name,dtype,args,params,red,kd", list(_cases()))
def test_groups_ending_in_a_reduction_equal_the_unfused_ops_on_the_op_table_cases(name, dtype, args, params, red,
                                                                                  kd):
    names = ["a", "b"][:len(args)]
    syms = [la.sym.var(n, shape=a.shape, dtype=a.dtype) for n, a in zip(names, args)]
    y = getattr(la.sym, name)(*syms, **params)
    sym = getattr(la.sym, red)(y * 2.0, axis=-1, keepdims=kd)
    got, want, compiled = both(sym, dict(zip(names, args)))
    assert_same_bits(got, want)
    node = y.outputs[0].node
    full = np.broadcast_shapes(*[a.shape for a in args])
    if fusible(node) and node.avals[0].dtype == np.dtype(dtype) and (full[-1] or red in ("sum", "mean")):
        assert ends_in(compiled, red), compiled  # the reduction is in the group


def _group(shapes, red, kd, dtype="float64"):
    syms = [la.sym.var(n, shape=s, dtype=dtype) for n, s in zip("ab", shapes)]
    sym = getattr(la.sym, red)(la.sym.square(syms[0] - syms[1]) * 0.5, axis=-1, keepdims=kd)
    (e,) = fuse(list(sym.outputs))
    assert e.node.op.name == "fused" and e.node.name.endswith(f",{red}]")
    return sym, e.node.params["graph"], [x.node.name if x.node.kind == "var" else
                                         np.asarray(x.node.value, x.node.avals[0].dtype) for x in e.node.inputs]


def _operands(order, arrays):
    return [arrays[n] if isinstance(n, str) else n for n in order]


@pytest.mark.parametrize("red,kd", ENDS)
def test_views_in_and_a_given_out(red, kd):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((80, 60))
    views = {"a": base.T[::2], "b": base[:30, 10:11]}  # (30, 80) strided; a (30, 1) column of a window
    sym, graph, order = _group([(30, 80), (30, 1)], red, kd)
    _, want, _ = both(sym, {k: np.ascontiguousarray(v) for k, v in views.items()})
    out = np.empty(want.shape)
    got = fc.run_chunked(np, *_operands(order, views), graph=graph, out=out)
    assert got is out
    assert_same_bits(got, want)


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0, 0), (2, 0, 3)])
@pytest.mark.parametrize("red,kd", ENDS)
def test_empty_arrays(shape, red, kd):
    arrays = {"a": np.ones(shape, "float32"), "b": np.ones(shape[-1:], "float32")}
    syms = [la.sym.var(n, shape=v.shape, dtype="float32") for n, v in arrays.items()]
    sym = getattr(la.sym, red)(la.sym.square(syms[0] - syms[1]) * 0.5, axis=-1, keepdims=kd)
    if red in ("max", "min") and shape[-1] == 0:  # the unfused op's error stays: no identity
        assert not ends_in(la.CachedOp(sym).compiled(), red)
        with pytest.raises(Exception, match="zero-size array"):
            la.CachedOp(sym)(**{k: la.array(v) for k, v in arrays.items()}).asnumpy()
        return
    got, want, compiled = both(sym, arrays)
    assert ends_in(compiled, red)
    assert_same_bits(got, want)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("red,kd", ENDS)
def test_blocks_of_rows_over_threads_give_the_whole_arrays_sums(red, kd, dtype, n_threads, monkeypatch):
    monkeypatch.setattr(fc, "CHUNK_BYTES", 4096)  # many blocks of rows
    monkeypatch.setattr(threads, "MIN_PARALLEL_BYTES", 0)
    rng = np.random.default_rng(2)
    la.set_num_threads(n_threads)
    try:
        for shapes in ([(257, 129), (129,)], [(9, 31, 650), (9, 31, 1)], [(40, 3000), (40, 1)]):
            arrays = {n: (rng.standard_normal(s) * 100).astype(dtype) for n, s in zip("ab", shapes)}
            syms = [la.sym.var(n, shape=s, dtype=dtype) for n, s in zip("ab", shapes)]
            sym = getattr(la.sym, red)(la.sym.square(syms[0] - syms[1]) * 0.5, axis=-1, keepdims=kd)
            got, want, compiled = both(sym, arrays)
            assert ends_in(compiled, red)
            assert_same_bits(got, want)
    finally:
        la.set_num_threads(os.cpu_count() or 1)


def test_an_output_sharing_an_operands_memory_reduces_into_a_copy(monkeypatch):
    """(The planner may give the output the buffer of an operand of its size that dies there; an
    operand broadcast over every block of rows is read after the first block is written.)"""
    monkeypatch.setattr(fc, "CHUNK_BYTES", 1024)
    rng = np.random.default_rng(3)
    arrays = {"a": rng.standard_normal((64, 64)), "b": rng.standard_normal(64)}
    sym, graph, order = _group([(64, 64), (64,)], "sum", False)
    _, want, _ = both(sym, arrays)
    b = arrays["b"].copy()
    got = fc.run_chunked(np, *_operands(order, {"a": arrays["a"], "b": b}), graph=graph, out=b)
    assert_same_bits(got, want)


@pytest.mark.parametrize("red", ["sum", "mean", "max", "min"])
def test_the_chooser_keeps_them_chunked_and_explain_names_the_reduction(red):
    sym, graph, _ = _group([(4, 4), (4, 1)], red, False)
    assert kfused.admission(graph) == ("chunked", False, False)
    with la.tuning(fused_jit_after=0):
        choice = kernels.choose("fused", np, np.ones((4, 4)), graph=graph)
    assert choice.impl is kfused.CHUNKED and repr(choice) == f"fused[chunked, ends in {red}]"
    op = la.CachedOp(sym)
    a, b = la.array(np.ones((4, 4))), la.array(np.ones((4, 1)))
    assert f"fused[chunked, ends in {red}]" in str(op.explain(a=a, b=b))


def test_the_written_function_gives_the_loops_values():
    sym, graph, order = _group([(6, 50), (50,)], "mean", True, "float32")
    rng = np.random.default_rng(4)
    arrays = {"a": rng.standard_normal((6, 50)).astype("float32"), "b": rng.standard_normal(50).astype("float32")}
    _, want, _ = both(sym, arrays)
    steps = fc.steps_of(graph)
    for _ in range(fc.WRITE_AFTER + 2):
        assert_same_bits(fc.run_chunked(np, *_operands(order, arrays), graph=graph), want)
    assert steps.written is not None
