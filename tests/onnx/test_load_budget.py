"""Issue #33 item 2: a few hundred bytes of ONNX model never make ``la.onnx.load`` allocate more than
it may. Sizes are checked before anything is allocated (``GraphFormatError``, or ``LoadSizeError``,
which is also ``la.OutOfMemoryError``, above the allocation limit); constants larger than
``import_ops.MAX_FOLD_BYTES`` are left in the graph as ops computed when it runs, and still compute
what the folded constant held."""
from __future__ import annotations

import time

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import GraphFormatError, OutOfMemoryError
from lazyarray.onnx import import_ops

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs=(), outputs=(("y", F32, None),), inits=(), opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def load(m, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    return la.onnx.load(path)


def ops_of(sym) -> list[str]:
    return [n.op.name for n in sym.topo() if n.op is not None]


def run(sym, **feeds):
    out = la.CachedOp(sym)(**{k: la.array(v) for k, v in feeds.items() if k in sym.list_inputs()})
    return [o.asnumpy() for o in (out if isinstance(out, list) else [out])]


def const_of_shape(shape, value=None):
    kw = {} if value is None else {"value": numpy_helper.from_array(np.asarray([value]))}
    return model([helper.make_node("ConstantOfShape", ["s"], ["y"], **kw)],
                 inits={"s": np.array(shape, np.int64)})


def range_model(start, limit, delta, dtype=np.int64):
    et = {np.int64: I64, np.int32: TensorProto.INT32, np.float32: F32, np.float64: TensorProto.DOUBLE}[dtype]
    return model([helper.make_node("Range", ["a", "b", "c"], ["y"])], outputs=[("y", et, None)],
                 inits={"a": np.array(start, dtype), "b": np.array(limit, dtype), "c": np.array(delta, dtype)})


def resize_model(scales, shape=(1, 1, 2, 2), **attrs):
    return model([helper.make_node("Resize", ["x", "", "sc"], ["y"], **attrs)], inputs=[("x", F32, list(shape))],
                 inits={"sc": np.array(scales, np.float32)}, opset=18)


def one_hot_model(depth, shape=(3,)):
    return model([helper.make_node("OneHot", ["i", "d", "v"], ["y"])], inputs=[("i", I64, list(shape))],
                 inits={"d": np.array(depth, np.int64), "v": np.array([0.0, 1.0], np.float32)})


def pool_model(op, kernel, shape=(1, 1, 4, 4), **attrs):
    return model([helper.make_node(op, ["x"], ["y"], kernel_shape=kernel, **attrs)], inputs=[("x", F32, list(shape))])


def scan_0d_model():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])], "body",
        [helper.make_tensor_value_info("s", F32, []), helper.make_tensor_value_info("x", F32, [])],
        [helper.make_tensor_value_info("s2", F32, []), helper.make_tensor_value_info("o", F32, [])])
    return model([helper.make_node("Scan", ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1)],
                 inputs=[("s0", F32, []), ("xs", F32, [])], outputs=[("sf", F32, None), ("ys", F32, None)])


# (model, error class, message pattern): every one a bare MemoryError / ValueError / ZeroDivisionError
# (or a hang allocating) before
HOSTILE = {
    "ConstantOfShape 2**40": (lambda: const_of_shape([2**40]), OutOfMemoryError,
                              r"ConstantOfShape\): output float32\[1099511627776\] needs .*4 TiB.*allocation limit"),
    "ConstantOfShape -1": (lambda: const_of_shape([-1]), GraphFormatError, "negative dim -1"),
    "ConstantOfShape 0, 2**62": (lambda: const_of_shape([0, 2**62]), GraphFormatError,
                                 "more than any array can hold"),
    "Range 0..1e12": (lambda: range_model(0, 10**12, 1), OutOfMemoryError, r"Range\): output int64\[1000000000000\]"),
    "Range float 0..1e12": (lambda: range_model(0, 1e12, 1, np.float32), OutOfMemoryError, r"Range\): output float32"),
    "Range step 0": (lambda: range_model(0, 5, 0), GraphFormatError, "delta is 0.*non-zero step"),
    "Range NaN": (lambda: range_model(0, np.nan, 1, np.float32), GraphFormatError, "limit=nan.*finite"),
    "Resize 1e9": (lambda: resize_model([1, 1, 1e9, 1e9]), GraphFormatError, r"Resize\): output shape"),
    "Resize 1e5": (lambda: resize_model([1, 1, 1e5, 1e5]), OutOfMemoryError,
                   r"Resize\): output float32\[1,1,200000,200000\] needs .*149 GiB"),
    "Resize NaN": (lambda: resize_model([1, 1, np.nan, 1]), GraphFormatError, "scales must be finite and > 0"),
    "Resize 0": (lambda: resize_model([1, 1, 0, 1]), GraphFormatError, "scales must be finite and > 0"),
    "Resize antialias 1e-9": (lambda: resize_model([1, 1, 1e-9, 1], mode="linear", antialias=1), OutOfMemoryError,
                              "index and weight tables"),
    "OneHot 2**40": (lambda: one_hot_model(2**40), OutOfMemoryError, r"OneHot\): output float32\[3,1099511627776\] needs .*12 TiB"),
    "OneHot -1": (lambda: one_hot_model(-1), GraphFormatError, "depth=-1"),
    "DepthToSpace 0": (lambda: model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=0)],
                                     inputs=[("x", F32, [1, 4, 2, 2])]), GraphFormatError, "blocksize=0"),
    "DepthToSpace channels": (lambda: model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)],
                                            inputs=[("x", F32, [1, 6, 2, 2])]), GraphFormatError,
                              "6 channels, not a multiple of blocksize"),
    "SpaceToDepth 0": (lambda: model([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=0)],
                                     inputs=[("x", F32, [1, 4, 2, 2])]), GraphFormatError, "blocksize=0"),
    "AveragePool 0, 0": (lambda: pool_model("AveragePool", [0, 0]), GraphFormatError, r"kernel_shape=\[0, 0\]"),
    "MaxPool strides 0": (lambda: pool_model("MaxPool", [2, 2], strides=[0, 1]), GraphFormatError,
                          r"strides=\[0, 1\]"),
    "AveragePool 10**6": (lambda: pool_model("AveragePool", [10**6, 10**6], auto_pad="SAME_UPPER"),
                          GraphFormatError, "taps, more than"),
    "AveragePool window > input": (lambda: pool_model("AveragePool", [5, 5]), GraphFormatError,
                                   "spans 5 on spatial axis 0"),
    "Scan 0-d input": (scan_0d_model, GraphFormatError, "scalar \\(0-d\\)"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_sizes_raise_named_errors_before_allocating(case, tmp_path, monkeypatch):
    monkeypatch.setattr(la.config, "max_alloc_bytes", 2**30)
    make, kind, match = HOSTILE[case]
    start = time.perf_counter()
    with pytest.raises(kind, match=match) as info:
        load(make(), tmp_path)
    assert time.perf_counter() - start < 20  # nothing large computed first
    err = info.value
    assert isinstance(err, GraphFormatError)  # a model problem, named with the file and the node
    assert "m.onnx" in str(err) and "node" in str(err)


def test_the_size_error_is_a_memory_error_and_a_format_error(tmp_path, monkeypatch):
    monkeypatch.setattr(la.config, "max_alloc_bytes", 10**9)
    with pytest.raises(import_ops.LoadSizeError) as info:
        load(const_of_shape([2**40]), tmp_path)
    assert isinstance(info.value, MemoryError) and isinstance(info.value, la.OutOfMemoryError)
    assert isinstance(info.value, la.GraphFormatError)
    assert "max_alloc_bytes=1000000000" in str(info.value) and "LAZYARRAY_MAX_ALLOC_BYTES" in str(info.value)  # the setting


# -- deferred constants --------------------------------------------------------------------------------
@pytest.fixture
def small_fold(monkeypatch):
    """A fold bound of 4 KiB: the deferred paths with small, quick arrays."""
    monkeypatch.setattr(import_ops, "MAX_FOLD_BYTES", 4096)


def test_a_large_constant_of_shape_is_filled_when_run(tmp_path):
    sym = load(const_of_shape([2**25], np.float32(2.5)), tmp_path)  # 128 MiB: not computed while loading
    assert ops_of(sym) == ["fill"] and not sym.constant_nodes()
    assert sym.outputs[0].aval.shape == (2**25,)


def test_a_deferred_constant_of_shape_computes_what_the_fold_did(tmp_path, small_fold):
    sym = load(const_of_shape([3, 700], np.int32(7)), tmp_path)  # 8400 bytes > 4096
    assert ops_of(sym) == ["fill"]
    (got,) = run(sym)
    np.testing.assert_array_equal(got, np.full((3, 700), 7, np.int32))
    assert got.dtype == np.int32
    small = load(const_of_shape([3, 7], np.int32(7)), tmp_path)
    assert ops_of(small) == []  # under the bound: folded as before


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (3, 3000, 2, np.int64), (10, -20000, -3, np.int32), (-5, 20000, 7, np.int64),
    (0.5, 800.5, 0.25, np.float32), (1.0, -1500.0, -0.5, np.float64),
])
def test_a_deferred_range_computes_what_the_fold_did(start, limit, delta, dtype, tmp_path, small_fold):
    sym = load(range_model(start, limit, delta, dtype), tmp_path)
    assert "iota" in ops_of(sym)
    (got,) = run(sym)
    s, d = np.array(start, dtype), np.array(delta, dtype)
    count = max(int(np.ceil((np.array(limit, dtype) - s) / d)), 0)
    want = (s + np.arange(count) * d).astype(dtype)  # what the load-time fold (and ONNX's reference) gives
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    from onnx.reference import ReferenceEvaluator
    np.testing.assert_allclose(got, ReferenceEvaluator(range_model(start, limit, delta, dtype)).run(None, {})[0],
                               rtol=1e-6)


def test_a_deferred_one_hot_and_eye_like_compute_what_the_fold_did(tmp_path, small_fold):
    sym = load(model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=0)], inputs=[("i", I64, [4])],
                     inits={"d": np.array(1000, np.int64), "v": np.array([-1.0, 3.0], np.float32)}), tmp_path)
    assert "iota" in ops_of(sym)
    idx = np.array([0, 999, -1, 5], np.int64)
    (got,) = run(sym, i=idx)
    want = np.full((1000, 4), -1.0, np.float32)
    want[idx % 1000, np.arange(4)] = 3.0
    np.testing.assert_array_equal(got, want)
    eye = load(model([helper.make_node("EyeLike", ["x"], ["y"], k=-2)], inputs=[("x", F32, [40, 30])]), tmp_path)
    assert "equal" in ops_of(eye) and all(c.value.size <= 40 for c in eye.constant_nodes())
    (got,) = run(eye, x=np.zeros((40, 30), np.float32))
    np.testing.assert_array_equal(got, np.eye(40, 30, k=-2, dtype=np.float32))


def test_a_value_needed_while_loading_is_bounded(tmp_path, small_fold):
    """A shape the graph is built from cannot wait for run time: computing it past the bound raises."""
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["big"], value=numpy_helper.from_array(np.array([2], np.int64))),
             helper.make_node("ReduceMax", ["big"], ["r"], keepdims=1),
             helper.make_node("Tile", ["x", "r"], ["y"])]
    m = model(nodes, inputs=[("x", F32, [3])], inits={"n": np.array([1024], np.int64)})  # 8 KiB of int64
    with pytest.raises(import_ops.LoadSizeError, match=r"input 1 \(repeats.*fill -> int64\[1024\], 8192 bytes.*MAX_FOLD_BYTES"):
        load(m, tmp_path)
    ok = model(nodes, inputs=[("x", F32, [3])], inits={"n": np.array([16], np.int64)})
    (got,) = run(load(ok, tmp_path), x=np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(got, np.tile(np.arange(3, dtype=np.float32), 2))


def test_resize_tables_are_bounded(tmp_path, small_fold):
    with pytest.raises(import_ops.LoadSizeError, match="index and weight tables of output sizes"):
        load(resize_model([1, 1, 500, 1]), tmp_path)  # 1000 output rows: 24000 bytes of tables > 4096
    sym = load(resize_model([1, 1, 2, 1]), tmp_path)
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(run(sym, x=x)[0], np.repeat(x, 2, axis=2))


def test_resize_to_an_empty_axis(tmp_path):
    m = model([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear")], inputs=[("x", F32, [1, 1, 2, 2])],
              inits={"sz": np.array([1, 1, 0, 3], np.int64)})
    (got,) = run(load(m, tmp_path), x=np.ones((1, 1, 2, 2), np.float32))
    assert got.shape == (1, 1, 0, 3)
