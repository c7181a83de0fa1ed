"""``fused[mixed]``: groups with ops the compiled loop has no exact form for (exp, log, tanh,
sigmoid, power, ...) run as compiled runs of exact ops and NumPy kernels; the values are the
unfused ops' bit for bit (NaN, inf, -0.0 included) in float32 and float64 over the op table's
cases, with broadcasting, views, empty arrays; the admission test, the cost model and the name
``explain()`` shows."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.executor.fusion import fuse
from lazyarray.kernels import fused as kfused
from lazyarray.kernels import fused_chunked, fused_mixed, fused_table
from lazyarray.ops.registry import all_ops
from tests.kernels.test_fused import SPECIALS, assert_same_bits, unfused
from tests.ops.cases import CASES

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _compiled_on():
    jit.set_enabled(True)
    yield
    jit.set_enabled(None)


# every elementwise op of the table without an exact compiled form that keeps a float dtype
# (and a CPU kernel a group can hold: a NumPy ufunc or one that writes into ``out``, fusion.fusible)
OTHER = sorted(o.name for o in all_ops() if o.elementwise and o.name not in kfused.OPS and o.name in CASES
               and not o.params and o.compose is None and not o.random and len(o.inputs) in (1, 2)
               and (o.np_ufunc is not None or o.writes_out) and o.name not in ("where", "relu_grad"))
TRANSCENDENTAL = ("exp", "log", "tanh", "log1p", "sin", "cos", "power", "logaddexp", "hypot")


def around(name, syms, shapes):
    """A group with ``name`` between two runs of exact ops: (2x + 0.25) -> op -> * x - x, the
    first run on the first operand where it has the output's shape (else outside the group)."""
    f = getattr(la.sym, name)
    full = np.broadcast_shapes(*shapes)
    a = syms[0] * 2.0 + 0.25 if shapes[0] == full else syms[0]
    y = f(a) if len(syms) == 1 else f(a, syms[1])
    return y * syms[-1] - syms[-1]


def fused_graph(sym):
    """The one ``fused`` node the fusion pass makes of ``sym``, and its operands: a variable's
    name, or a constant's value as a NumPy array."""
    (e,) = fuse(list(sym.outputs))
    assert e.node.op.name == "fused"
    assert all(x.node.kind in ("var", "const") for x in e.node.inputs)
    return e.node.params["graph"], [x.node.name if x.node.kind == "var" else
                                    np.asarray(x.node.value, x.node.avals[0].dtype) for x in e.node.inputs]


def operands(order, arrays):
    return [arrays[n] if isinstance(n, str) else n for n in order]


def run_mixed(graph, args, out=None):
    """``fused[mixed]`` directly, asserting it ran rather than declined."""
    y = kfused.MIXED.run(np, *args, graph=graph, out=out)
    assert y is not None
    return y


def _float_cases():
    for name in OTHER:
        for dtype in [d for d in ("float32", "float64") if d in CASES[name].dtypes]:
            rng = np.random.default_rng(abs(hash((name, dtype))) % 2**32)
            samples = CASES[name].samples(rng, dtype, False)
            for k, sample in enumerate(samples):
                args = sample.args
                if all(isinstance(a, np.ndarray) and a.dtype == dtype for a in args):
                    yield pytest.param(name, dtype, args, id=f"{name}-{dtype}-{k}")


def test_the_ops_covered_include_the_transcendental_ones():
    assert set(TRANSCENDENTAL) <= set(OTHER)


@pytest.mark.parametrize("name,dtype,args", list(_float_cases()))
def test_mixed_equals_the_unfused_ops_on_the_op_table_cases(name, dtype, args):
    names = ["a", "b"][:len(args)]
    syms = [la.sym.var(n, shape=a.shape, dtype=dtype) for n, a in zip(names, args)]
    sym = around(name, syms, [a.shape for a in args])
    arrays = dict(zip(names, args))
    graph, order = fused_graph(sym)
    plan = fused_mixed.plan_of(graph)
    if not plan:  # (only groups with a boolean value in them: comparisons, isnan, logical ops)
        assert any(n.avals[0].dtype == np.bool_ for n in graph.sym.topo() if n.op is not None), name
        return
    with np.errstate(all="ignore"):
        want = unfused(sym, arrays)
        assert_same_bits(run_mixed(graph, operands(order, arrays)), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "log1p", "sin", "cos"])
def test_mixed_keeps_nan_inf_and_signed_zero(name, dtype):
    a = np.array(SPECIALS * 3, dtype)
    x = la.sym.var("a", shape=a.shape, dtype=dtype)
    sym = la.sym.maximum(getattr(la.sym, name)(x * x - x) / x, x) + x
    graph, order = fused_graph(sym)
    with np.errstate(all="ignore"):
        assert_same_bits(run_mixed(graph, operands(order, {"a": a})), unfused(sym, {"a": a}))


def gelu_erf_poly(x, b):
    """GELU with erf as ONNX exports spell it (Abramowitz-Stegun 7.1.26: one exp among 24 exact
    ops), after a bias add: several values cross from the first compiled run to the second."""
    v = x + b
    z = v / 1.4142135
    az = la.sym.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * az)
    p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    e = la.sym.exp(la.sym.negative(az * az))
    return v * 0.5 * (1.0 + la.sym.sign(z) * (1.0 - p * e))


LAYOUTS = {  # output shape, bias shape
    "short bias row": ((1, 64, 64), (64,)),
    "long bias row": ((3, 700), (700,)),
    "column": ((6, 70), (6, 1)),
    "scalar": ((5, 7), ()),
    "middle": ((3, 4, 5), (4, 1)),
    "0-d": ((), ()),
    "empty": ((0, 3), (3,)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_mixed_broadcasts_like_the_unfused_ops(layout, dtype):
    xshape, bshape = LAYOUTS[layout]
    rng = np.random.default_rng(len(layout))
    arrays = {"x": (3 * rng.standard_normal(xshape)).astype(dtype), "b": rng.standard_normal(bshape).astype(dtype)}
    syms = {n: la.sym.var(n, shape=v.shape, dtype=dtype) for n, v in arrays.items()}
    sym = gelu_erf_poly(syms["x"], syms["b"])
    graph, order = fused_graph(sym)
    plan = fused_mixed.plan_of(graph)
    assert plan and sum(st.table is not None for st in plan.steps) == 2
    assert max(len(st.outs) for st in plan.steps) > 1  # (the first run leaves several values)
    assert_same_bits(run_mixed(graph, operands(order, arrays)), unfused(sym, arrays))


def test_mixed_reads_views_and_writes_into_out():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((40, 60))
    a = base.T[::2]  # (30, 40), strided
    b = base[:30, 10:50]  # (30, 40), a window of rows
    syms = [la.sym.var(n, shape=(30, 40), dtype="float64") for n in "ab"]
    sym = la.sym.tanh(la.sym.abs(syms[0] - syms[1]) * syms[1] + 1.0) * syms[0] + syms[1]
    want = unfused(sym, {"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b)})
    graph, order = fused_graph(sym)
    out = np.empty((30, 40))
    got = run_mixed(graph, operands(order, {"a": a, "b": b}), out=out)
    assert got is out
    assert_same_bits(got, want)


def test_admission_says_which_groups_a_mixed_plan_takes():
    x = la.sym.var("x", shape=(8,), dtype="float32")
    # no run of two exact ops: nothing to compile
    assert fused_mixed.plan_of(fused_graph(la.sym.exp(la.sym.tanh(x * 2.0)) + x)[0]) is False
    # two dtypes, an integer group, float16: not taken
    i = la.sym.var("i", shape=(8,), dtype="int32")
    assert fused_mixed.plan_of(fused_graph(la.sym.exp((i + i) * i - i))[0]) is False
    h = la.sym.var("h", shape=(8,), dtype="float16")
    assert fused_mixed.plan_of(fused_graph(la.sym.exp(h * h + h) * h)[0]) is False
    # an output larger than one chunk
    big = la.sym.var("big", shape=(fused_chunked.CHUNK_BYTES // 4 + 1,), dtype="float32")
    assert fused_mixed.plan_of(fused_graph(la.sym.exp(big * big + big) * big)[0]) is False
    # a run leaving more values to later ops than the compiled loop writes
    vals = [x * float(k + 2) for k in range(fused_table.OUT_SLOTS + 1)]
    acc = vals[0] + vals[1]
    y = la.sym.exp(acc)
    for v in vals:
        y = y * v
    assert fused_mixed.plan_of(fused_graph(y)[0]) is False
    # and the chooser's one admission function names the path for each group
    path, table, plan = kfused.admission(fused_graph(gelu_erf_poly(x, x))[0])
    assert (path, table) == ("chunked", False) and plan  # (eligible; 8 values, 24 ops: not paying)


def _chain(shape, n):
    x = la.sym.var("x", shape=shape, dtype="float32")
    y = x
    for _ in range(n):
        y = y * 0.999 + 0.001
    y = la.sym.exp(y)
    for _ in range(n):
        y = y * 0.999 + 0.001
    return la.CachedOp(y)


def _impl_of(op, x) -> str:
    text = str(op.explain(x))
    for name in ("numba", "mixed", "chunked"):
        if f"fused[{name}]" in text:
            return name
    return "?"


def test_long_groups_on_small_outputs_run_mixed_after_the_first_calls_and_explain_names_it():
    op = _chain((4, 4), 50)
    x = la.array(np.random.default_rng(5).standard_normal((4, 4)).astype("float32"))
    with la.tuning(fused_jit_after=2):
        first = op(x).asnumpy()  # (call 1: chunked)
        seen = [_impl_of(op, x) for _ in range(2)]  # calls 2 and 3
        assert_same_bits(op(x).asnumpy(), first)
    assert seen == ["chunked", "mixed"]


def test_the_cost_model_keeps_short_groups_and_large_outputs_chunked():
    x = la.sym.var("x", shape=(64, 64), dtype="float32")
    graph, _ = fused_graph(gelu_erf_poly(x, x))
    plan = fused_mixed.plan_of(graph)
    assert plan and not kfused.mixed_pays(plan, (64, 64)) and not kfused.mixed_pays(plan, (4, 4))
    assert kfused.pays(100, (4, 4), calls=2) and not kfused.pays(20, (4, 4), calls=2)
    with la.tuning(fused_jit_after=0):
        op = _chain((64, 64), 50)
        x = la.array(np.ones((64, 64), np.float32))
        op(x)
        assert _impl_of(op, x) == "chunked"


def test_numba_off_runs_chunked():
    jit.set_enabled(False)
    op = _chain((4, 4), 50)
    x = la.array(np.ones((4, 4), np.float32))
    with la.tuning(fused_jit_after=0):
        op(x)
        assert _impl_of(op, x) == "chunked"


def test_the_chunked_scratch_pool_is_a_named_cache_that_clears():
    x = la.sym.var("x", shape=(64, 64), dtype="float32")
    op = la.CachedOp(la.sym.tanh(x * x + x) * x)
    v = np.random.default_rng(7).standard_normal((64, 64)).astype("float32")
    with la.tuning(jit=False):
        want = op(la.array(v)).asnumpy()
        assert len(fused_chunked.POOL) >= 1
        fused_chunked.POOL.clear()
        assert len(fused_chunked.POOL) == 0
        assert_same_bits(op(la.array(v)).asnumpy(), want)


def test_bias_rows_shorter_than_a_tile_are_copied_and_long_ones_walked():
    x, short = np.zeros((1, 64, 64), np.float32), np.zeros(64, np.float32)
    assert fused_table.layout([x, short], x.shape)[2] == (1,)  # (copied: tiles of 64 values cost every op)
    y, long_row = np.zeros((3, 700), np.float32), np.zeros(700, np.float32)
    strides, cols, copied = fused_table.layout([y, long_row], y.shape)
    assert (cols, copied, strides[1]) == (700, (), (0, 1))
