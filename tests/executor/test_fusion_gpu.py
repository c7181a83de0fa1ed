"""GPU fusion (executor/fusion_gpu.py): the C form of every op equals NumPy's kernel, groups on a
GPU graph become one ``ElementwiseKernel`` whose values equal the unfused ops, and ops without an
exact form stop a group. Without a GPU the generated C runs through the C compiler
(``c_elementwise.py``); the last test runs CuPy where it is installed and a GPU is present."""
from __future__ import annotations

import itertools

import c_elementwise
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.aval import Aval
from lazyarray.device import Device
from lazyarray.executor import fusion, fusion_gpu
from lazyarray.executor.call import SubGraph
from lazyarray.graph.node import Entry, Node, var_node
from lazyarray.graph.symbol import Symbol
from lazyarray.ops.registry import get, infer

pytestmark = pytest.mark.skipif(c_elementwise.CC is None, reason="needs a C compiler (cc)")

CPU, GPU = Device("cpu", 0), Device("gpu", 0)
RNG = np.random.default_rng(7)
FLOATS = [np.dtype("float32"), np.dtype("float64")]
INTS = [np.dtype(t) for t in ("int8", "uint8", "int32", "int64")]
BOOL = np.dtype(bool)


def _values(dtype, shape, positive=False):
    if dtype.kind == "f":
        v = RNG.standard_normal(shape) * 3
        flat = v.reshape(-1)
        special = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, 0.5, 2.5, -1.5, 1.0, -1.0]  # (ties for rint)
        # at random places: each operand has its NaNs and infinities where the others have numbers
        flat[RNG.permutation(flat.size)[: len(special)]] = special[: flat.size]
        v = np.abs(v) + 0.5 if positive else v
        return v.astype(dtype)
    if dtype.kind == "b":
        return RNG.random(shape) < 0.5
    lo = 0 if dtype.kind == "u" else -50
    return RNG.integers(lo, 50, shape).astype(dtype)


def _node(op_name, in_dtypes, params=None, device=CPU, shapes=None):
    op = get(op_name)
    shapes = shapes or [(5, 7)] * len(in_dtypes)
    ins = [var_node(f"v{i}", Aval(s, d, device)) for i, (d, s) in enumerate(zip(in_dtypes, shapes))]
    p = op.make_params(dict(params or {}))
    avals = infer(op, [v.avals[0] for v in ins], p)
    return Node(op, tuple(Entry(v) for v in ins), p, avals), ins


def _group(node, ins) -> SubGraph:
    return SubGraph(Symbol([Entry(node)]), [v.name for v in ins])


def _close(got, want, scale=1.0):
    """Equal dtype and shape; floats within a few ulps (``scale`` widens it for chains, where the
    math library's last-bit differences are carried through several ops), the rest exactly."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        rtol = (1e-5 if want.dtype == np.float32 else 1e-12) * scale
        atol = (1e-6 if want.dtype == np.float32 else 1e-14) * scale
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


UNARY_FLOAT = ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "expm1", "log1p", "log2",
               "log10", "floor", "ceil", "trunc", "asin", "acos", "atan", "asinh", "acosh", "atanh", "round",
               "reciprocal", "sigmoid", "isnan", "isinf", "isfinite", "signbit"]
UNARY_NUM = ["negative", "positive", "square", "abs", "relu", "sign"]
BINARY_FLOAT = ["atan2", "hypot", "copysign", "power", "divide", "heaviside"]
BINARY_NUM = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
              "greater", "greater_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]

CASES = (
    [(op, (d,), {}) for op in UNARY_FLOAT for d in FLOATS]
    + [(op, (d,), {}) for op in UNARY_NUM for d in FLOATS + INTS]
    + [(op, (d, d), {}) for op in BINARY_FLOAT for d in FLOATS]
    + [(op, (a, b), {}) for op in BINARY_NUM for a, b in
       [(FLOATS[0], FLOATS[0]), (FLOATS[1], FLOATS[1]), (INTS[2], INTS[2]), (INTS[1], INTS[1]),
        (INTS[2], FLOATS[0]), (INTS[0], INTS[2])]]
    + [(op, (a, b), {}) for op in LOGICAL for a, b in [(BOOL, BOOL), (FLOATS[0], INTS[2])]]
    + [("logical_not", (d,), {}) for d in (BOOL, FLOATS[0])]
    + [(op, (a, a), {}) for op in BITWISE for a in (BOOL, INTS[0], INTS[3])]
    + [("bitwise_invert", (d,), {}) for d in INTS]
    + [("where", (BOOL, a, b), {}) for a, b in [(FLOATS[0], FLOATS[0]), (INTS[2], FLOATS[1])]]
    + [("gelu", (d,), {"approximation": ap}) for d in FLOATS for ap in ("none", "tanh")]
    + [("quadratic", (d,), {"a": 0.5, "b": -2.0, "c": 3.0}) for d in FLOATS + [INTS[2]]]
    + [("divide", (INTS[2], INTS[2]), {})]  # true division of ints: a double loop
    + [("relu_grad", (d, d), {}) for d in FLOATS]
)


@pytest.mark.parametrize("op_name,dtypes,params", CASES,
                         ids=[f"{c[0]}-{'-'.join(d.name for d in c[1])}{'-' + str(c[2]) if c[2] else ''}"
                              for c in CASES])
def test_every_c_form_equals_numpys_kernel(op_name, dtypes, params):
    node, ins = _node(op_name, dtypes, params)
    assert fusion_gpu.gpu_form(node), f"{op_name} on {dtypes} should have a C form"
    positive = op_name in ("power",)
    arrays = [_values(d, (5, 7), positive=positive and i == 0) for i, d in enumerate(dtypes)]
    if op_name == "divide" and dtypes[0].kind == "i":
        arrays[1][arrays[1] == 0] = 3
    with np.errstate(all="ignore"):
        want = np.asarray(node.op.bind(np)(*arrays, **node.params))
        got = fusion_gpu.run(c_elementwise.xp, _group(node, ins), arrays)
    _close(got, want.astype(node.avals[0].dtype, copy=False))
    assert want.dtype == node.avals[0].dtype


@pytest.mark.parametrize("op_name,dtypes", [
    ("floor_divide", (INTS[2], INTS[2])),  # C truncates toward zero, NumPy floors
    ("remainder", (INTS[2], INTS[2])),
    ("bitwise_left_shift", (INTS[2], INTS[2])),  # NumPy gives 0 past the width, C is undefined
    ("nextafter", (FLOATS[0], FLOATS[0])),
    ("sqrt", (INTS[2],)),  # an int operand of a float-only form: NumPy's loop is double, no form claimed
])
def test_ops_without_an_exact_form_are_not_fusible_on_a_gpu(op_name, dtypes):
    node, _ = _node(op_name, dtypes, device=GPU)
    assert not fusion_gpu.gpu_form(node)
    assert not fusion.fusible(node)


def _gpu_chain():
    """x * 2 + b (a broadcast bias row) -> sigmoid -> floor_divide-free tail, on gpu(0) avals."""
    x = var_node("x", Aval((64, 33), np.dtype("float32"), GPU))
    b = var_node("b", Aval((33,), np.dtype("float32"), GPU))
    two = var_node("two", Aval((), np.dtype("float32"), GPU))
    apply = _apply
    h = apply("add", apply("multiply", Entry(x), Entry(two)), Entry(b))
    y = apply("gelu", apply("sigmoid", h), approximation="tanh")
    z = apply("maximum", apply("subtract", y, Entry(two)), h)
    return [x, b, two], z


def test_a_gpu_group_takes_ops_the_cpu_cannot_fuse_and_runs_as_one_kernel():
    ins, out = _gpu_chain()
    (fused_out,) = fusion.fuse([out])
    node = fused_out.node
    assert node.op.name == "fused"
    # sigmoid has no out= kernel (not fusible on the CPU); on a GPU it has a C form and joins
    assert node.name == "fused[multiply,add,sigmoid,gelu,subtract,maximum]"
    sub = node.params["graph"]
    arrays = {"x": _values(np.dtype("float32"), (64, 33)), "b": _values(np.dtype("float32"), (33,)),
              "two": np.float32(2.0).reshape(())}
    assert sorted(e.node.name for e in node.inputs) == sorted(v.name for v in ins)
    operands = [arrays[e.node.name] for e in node.inputs]
    with np.errstate(all="ignore"):
        got = fusion.FUSED.bind(c_elementwise.xp)(*operands, graph=sub)
        want = _unfused(out, arrays)
    _close(got, want)


def _unfused(entry, arrays, fused_xp=np):
    """The graph of ``entry`` evaluated op by op with the registry's NumPy kernels (``fused`` nodes
    with their kernel on ``fused_xp``)."""
    env = {}

    def ev(node):
        if id(node) not in env:
            if node.op is None:
                env[id(node)] = np.asarray(arrays[node.name])
            else:
                xp = fused_xp if node.op.name == "fused" else np
                env[id(node)] = np.asarray(node.op.bind(xp)(*[ev(e.node) for e in node.inputs], **node.params))
        return env[id(node)]

    return ev(entry.node)


def _apply(name, *entries, **params):
    op = get(name)
    p = op.make_params(params)
    return Entry(Node(op, tuple(entries), p, infer(op, [e.aval for e in entries], p)))


def test_an_op_without_a_form_splits_the_gpu_group():
    x = var_node("x", Aval((8, 8), np.dtype("int32"), GPU))
    apply = _apply
    a = apply("square", apply("add", Entry(x), Entry(x)))
    b = apply("floor_divide", a, Entry(x))  # no exact C form: stays a node of its own
    c = apply("abs", apply("negative", apply("multiply", b, b)))
    (res,) = fusion.fuse([c])
    names = [n.name or n.op.name for n in Symbol([res]).topo() if n.op is not None]
    # add and square alone are too few to fuse (fusion.MIN_GROUP); the tail after the split is a group
    assert names == ["add", "square", "floor_divide", "fused[multiply,negative,abs]"]
    arrays = {"x": RNG.integers(1, 9, (8, 8)).astype("int32")}
    got = _unfused(res, arrays, c_elementwise.xp)
    _close(got, _unfused(c, arrays))


# (no exp: exp(exp(x)) turns a last-bit difference of the math library into a visible one)
_UNARY_CHAIN = ["tanh", "sigmoid", "negative", "square", "abs", "relu", "sin"]
_BINARY_CHAIN = ["add", "subtract", "multiply", "maximum", "minimum"]


@settings(max_examples=20, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(_UNARY_CHAIN + _BINARY_CHAIN), st.integers(0, 10)),
                      min_size=3, max_size=9),
       dtype=st.sampled_from(["float32", "float64"]), row=st.booleans())
def test_random_gpu_groups_equal_the_unfused_ops(steps, dtype, row):
    dt = np.dtype(dtype)
    x = var_node("x", Aval((16, 9), dt, GPU))
    b = var_node("b", Aval((9,) if row else (16, 9), dt, GPU))
    live = [Entry(x), Entry(b)]
    for name, k in steps:
        op = get(name)
        args = [live[-1]] if name in _UNARY_CHAIN else [live[-1], live[k % len(live)]]
        p = op.make_params({})
        live.append(Entry(Node(op, tuple(args), p, infer(op, [e.aval for e in args], p))))
    out = live[-1]
    arrays = {"x": RNG.standard_normal((16, 9)).astype(dt), "b": RNG.standard_normal(b.avals[0].shape).astype(dt)}
    (res,) = fusion.fuse([out])
    with np.errstate(all="ignore"):
        _close(_unfused(res, arrays, c_elementwise.xp), _unfused(out, arrays), scale=10)


def test_kernel_source_is_typed_and_named_after_its_text():
    node, ins = _node("add", (INTS[2], FLOATS[0]))
    params, out, body, name = fusion_gpu.kernel_source(_group(node, ins))
    assert params == "int32 in0, float32 in1" and out == "float64 out0"
    assert body == "out0 = (double)((((double)(in0)) + ((double)(in1))));"
    assert name.startswith("lazyarray_fused_") and name == fusion_gpu.kernel_source(_group(node, ins))[3]


def test_cupy_runs_fused_groups_equal_to_unfused():
    pytest.importorskip("cupy")
    if not la.gpu_available():
        pytest.skip("no GPU")
    x = la.sym.var("x", shape=(300, 257))
    b = la.sym.var("b", shape=(257,))
    sym = la.sym.maximum(la.sym.sigmoid(la.sym.tanh(x * 2 + b) - 0.5), la.sym.relu(x))
    xs = RNG.standard_normal((300, 257)).astype("float32")
    bs = RNG.standard_normal(257).astype("float32")
    with la.gpu(0):
        args = {"x": la.array(xs), "b": la.array(bs)}
        on = la.CachedOp(sym, fuse=True)
        off = la.CachedOp(sym, fuse=False)
        assert any(n.op is not None and n.op.name == "fused" for n in on.compiled(x=(300, 257), b=(257,)).topo())
        got, want = on(**args).asnumpy(), off(**args).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # (CUDA contracts multiply-adds into FMAs)


def test_all_forms_are_registered_elementwise_ops():
    for name in itertools.chain(fusion_gpu.C_FORMS):
        assert get(name).elementwise, name
