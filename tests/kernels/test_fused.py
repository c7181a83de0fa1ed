"""The kernels layer's fused groups: ``fused[numba]`` gives the unfused ops' values bit for bit
(NaN, inf, -0.0 included) over the op table's cases, with broadcasting, views and empty arrays;
the tiers (chunked first, compiled after ``fused_jit_after`` calls) and the name ``explain()``
shows; the table cache."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.executor.fusion import fuse
from lazyarray.kernels import fused as kfused
from tests.ops.cases import CASES

pytest.importorskip("numba")

UNARY = [n for n, code in kfused.OPS.items() if code >= kfused.J.NEGATIVE]
BINARY = [n for n, code in kfused.OPS.items() if code < kfused.J.NEGATIVE]
SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e-30, -1e30]


@pytest.fixture(autouse=True)
def _compiled_on():
    jit.set_enabled(True)
    yield
    jit.set_enabled(None)


def assert_same_bits(got, want):
    """Equal values, NaN where NaN, and the same sign on zeros."""
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def group(name, syms):
    """Three of ``name`` in a row (a group the fusion pass fuses): f(f(f(x))) or f(f(f(a, b), b), b)."""
    f = getattr(la.sym, name)
    if len(syms) == 1:
        return f(f(f(syms[0])))
    a, b = syms
    return f(f(f(a, b), b), b)


def fused_graph(sym):
    """The one ``fused`` node the fusion pass makes of ``sym``, and its operands' names in order."""
    (e,) = fuse(list(sym.outputs))
    assert e.node.op.name == "fused"
    return e.node.params["graph"], [x.node.name for x in e.node.inputs]


def unfused(sym, arrays: dict):
    with la.tuning(fuse_gelu=False):  # (the ops as written: the GELU pass would make an A-S GELU one nn.gelu)
        op = la.CachedOp(sym, fuse=False)
        res = op(**{k: la.array(v) for k, v in arrays.items()})
    return res.asnumpy()


def run_numba(graph, args, out=None):
    """``fused[numba]`` directly (whatever the chooser's cost model says of so short a group),
    asserting it ran rather than declined."""
    y = kfused.NUMBA.run(np, *args, graph=graph, out=out)
    assert y is not None
    return y


def _cases(names):
    for name in names:
        for dtype in ("float32", "float64"):
            rng = np.random.default_rng(abs(hash((name, dtype))) % 2**32)
            for k, sample in enumerate(CASES[name].samples(rng, dtype, False)):
                yield pytest.param(name, dtype, sample.args, id=f"{name}-{dtype}-{k}")


@pytest.mark.parametrize("name,dtype,args", list(_cases(UNARY + BINARY)))
def test_numba_equals_the_unfused_ops_on_the_op_table_cases(name, dtype, args):
    names = ["a", "b"][:len(args)]
    syms = [la.sym.var(n, shape=a.shape, dtype=dtype) for n, a in zip(names, args)]
    sym = group(name, syms)
    arrays = dict(zip(names, args))
    want = unfused(sym, arrays)
    graph, order = fused_graph(sym)
    assert_same_bits(run_numba(graph, [arrays[n] for n in order]), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_numba_keeps_nan_inf_and_signed_zero(name, dtype):
    vals = np.array(SPECIALS, dtype)
    a = np.repeat(vals, len(vals))
    b = np.tile(vals, len(vals))  # every pair of specials
    arrays = {"a": a, "b": b} if name in BINARY else {"a": a}
    syms = [la.sym.var(n, shape=v.shape, dtype=dtype) for n, v in arrays.items()]
    sym = group(name, syms)
    with np.errstate(all="ignore"):
        want = unfused(sym, arrays)
        graph, order = fused_graph(sym)
        assert_same_bits(run_numba(graph, [arrays[n] for n in order]), want)


LAYOUTS = {  # output shape, operand shapes: broadcast rows, columns, scalars, the middle axis
    "same": ((6, 700), [(6, 700), (6, 700)]),
    "bias row": ((6, 700), [(6, 700), (700,)]),
    "column": ((6, 700), [(6, 700), (6, 1)]),
    "scalar": ((6, 700), [(6, 700), ()]),
    "middle": ((3, 4, 5), [(3, 4, 5), (3, 1, 5)]),
    "both broadcast": ((4, 5), [(4, 1), (1, 5)]),
    "0-d": ((), [(), ()]),
    "empty": ((0, 3), [(0, 3), (3,)]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_numba_broadcasts_like_the_unfused_ops(layout, dtype):
    _, shapes = LAYOUTS[layout]
    rng = np.random.default_rng(len(layout))
    arrays = {n: rng.standard_normal(s).astype(dtype) for n, s in zip("ab", shapes)}
    syms = {n: la.sym.var(n, shape=v.shape, dtype=dtype) for n, v in arrays.items()}
    sym = la.sym.maximum(syms["a"] * syms["b"] - syms["b"], syms["a"] / syms["b"])
    want = unfused(sym, arrays)
    graph, order = fused_graph(sym)
    assert_same_bits(run_numba(graph, [arrays[n] for n in order]), want)


def test_numba_reads_views_and_writes_into_out():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((40, 60))
    a = base.T[::2]  # (30, 40), strided
    b = base[:30, 10:50]  # (30, 40), a window of rows
    syms = [la.sym.var(n, shape=(30, 40), dtype="float64") for n in "ab"]
    sym = la.sym.sqrt(la.sym.abs(syms[0] - syms[1]) + syms[1] * syms[1])
    want = unfused(sym, {"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b)})
    graph, order = fused_graph(sym)
    out = np.empty((30, 40))
    got = run_numba(graph, [{"a": a, "b": b}[n] for n in order], out=out)
    assert got is out
    assert_same_bits(got, want)


def test_large_groups_split_over_threads_equal_the_unfused_ops():
    rng = np.random.default_rng(4)
    arrays = {"a": rng.standard_normal((700, 1500)).astype("float32"), "b": rng.standard_normal(1500).astype("float32")}
    syms = {n: la.sym.var(n, shape=v.shape, dtype="float32") for n, v in arrays.items()}
    sym = la.sym.relu(syms["a"] * syms["b"] + syms["b"])
    want = unfused(sym, arrays)
    graph, order = fused_graph(sym)
    before = la.get_num_threads() if hasattr(la, "get_num_threads") else None
    la.set_num_threads(2)
    try:
        assert_same_bits(run_numba(graph, [arrays[n] for n in order]), want)
    finally:
        if before is not None:
            la.set_num_threads(before)


def _chain_op():
    x = la.sym.var("x", shape=(4, 4), dtype="float32")
    y = x
    for _ in range(20):  # (40 ops on 16 values: the compiled loop pays, fused.pays)
        y = y * 0.999
        y = y + 0.001
    return la.CachedOp(y)


def _impl_of(op, x) -> str:
    text = str(op.explain(x))
    return "numba" if "fused[numba]" in text else "chunked" if "fused[chunked]" in text else "?"


def test_first_calls_run_chunked_then_the_compiled_loop_and_explain_names_each():
    op = _chain_op()
    x = la.array(np.random.default_rng(5).random((4, 4)).astype("float32"))
    with la.tuning(fused_jit_after=2):
        first = op(x).asnumpy()  # (call 1: chunked)
        seen = [_impl_of(op, x) for _ in range(2)]  # calls 2 and 3
        assert_same_bits(op(x).asnumpy(), first)
    assert seen == ["chunked", "numba"]


def test_groups_without_exact_compiled_ops_or_one_dtype_stay_chunked():
    x = la.sym.var("x", shape=(8,), dtype="float32")
    tanh_group, _ = fused_graph(la.sym.tanh(x * 2.0) + x)
    assert kfused.table_of(tanh_group) is False
    i = la.sym.var("i", shape=(8,), dtype="int32")
    int_group, _ = fused_graph((i + i) * i - i)
    assert kfused.table_of(int_group) is False
    with la.tuning(fused_jit_after=0):
        assert kernels.choose("fused", np, np.ones(8, np.float32), graph=tanh_group).impl.name == "chunked"


def test_numba_off_runs_chunked():
    x = la.sym.var("x", shape=(8,), dtype="float64")
    graph, _ = fused_graph((x * x + x) * x)
    jit.set_enabled(False)
    with la.tuning(fused_jit_after=0):
        assert kernels.choose("fused", np, np.ones(8), graph=graph).impl.name == "chunked"


def test_the_chooser_takes_the_compiled_loop_where_it_pays():
    assert kfused.pays(1000, (4, 4)) and kfused.pays(40, (4, 4))
    assert not kfused.pays(3, (4, 4)) and not kfused.pays(16, (64, 64)) and not kfused.pays(3, (4096, 4096))
    x = la.sym.var("x", shape=(4, 4), dtype="float64")
    short, _ = fused_graph((x * x + x) * x)
    with la.tuning(fused_jit_after=0):
        assert kernels.choose("fused", np, np.ones((4, 4)), graph=short).impl.name == "chunked"
    y = x
    for _ in range(20):
        y = y * x + x
    long, _ = fused_graph(y)
    with la.tuning(fused_jit_after=0):
        assert kernels.choose("fused", np, np.ones((4, 4)), graph=long).impl.name == "numba"


def test_groups_with_scalar_and_array_operands_get_tables_of_their_own():
    rng = np.random.default_rng(6)
    for bshape in ((), (5, 7), (7,)):
        arrays = {"a": rng.standard_normal((5, 7)), "b": rng.standard_normal(bshape)}
        syms = {n: la.sym.var(n, shape=v.shape, dtype="float64") for n, v in arrays.items()}
        sym = (syms["a"] - syms["b"]) * syms["b"] + syms["a"]
        graph, order = fused_graph(sym)
        assert_same_bits(run_numba(graph, [arrays[n] for n in order]), unfused(sym, arrays))


def test_tables_are_shared_by_structure_and_bounded():
    kfused.TABLES.clear()
    assert len(kfused.TABLES) == 0
    graphs = []
    for _ in range(2):  # two traces of one structure: one table
        x = la.sym.var("x", shape=(8,), dtype="float64")
        graphs.append(fused_graph((x * x + x) * x)[0])
    assert kfused.table_of(graphs[0]) is kfused.table_of(graphs[1])
    assert len(kfused.TABLES) == 1
    small = kfused.TableCache(size=1)
    small.put("a", 1)
    small.put("b", 2)
    assert len(small) == 1 and small.get("a") is None and small.get("b") == 2
