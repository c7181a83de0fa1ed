"""la.onnx.export at edge values (issue #33): slices NumPy clamps differently from ONNX Slice
(negative steps, starts below -len), float remainder by inf/-inf/0/nan, and graphs that output one
value twice. onnxruntime's outputs are checked against NumPy's (and lazyarray's)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import lazyarray as la

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _session(path):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _export(outputs, inputs, path, **kw):
    sym = la.get_symbol(outputs, inputs=inputs)
    la.onnx.export(sym, str(path), **kw)
    return sym, _session(path)


# -- basic indexing -> Slice ------------------------------------------------------------------------
BOUNDS = [None, *range(-8, 9)]
STEPS = [-3, -2, -1, 1, 2, 3]
ALL_SLICES = [slice(a, b, c) for a, b, c in itertools.product(BOUNDS, BOUNDS, STEPS)]
# multi-axis keys with ints, None and ... mixed in, on a (5, 4, 3) array
KEYS_3D = [(slice(-6, None, -2),), (slice(-6, None, -2), slice(1, None)), (Ellipsis, slice(-9, -1, -1)),
           (1, slice(-5, None, -1), None), (slice(None, None, -1), -1, slice(-4, 0, -2)),
           (None, slice(-7, 3, -1), Ellipsis, slice(4, -9, -1)), (slice(-5, -6, -1), 0),
           (slice(-6, -7, -1), slice(None), slice(2, -5, -1)), (-1, slice(-100, 100, -3), slice(100, -100, -1))]


def _slices_model(tmp_path, n, dynamic: bool):
    xv = np.arange(n, dtype=np.float32) * 1.5 - 2
    x = la.array(xv)
    with la.deferred():
        xs = la.array(xv)
        outs = [xs[k] for k in ALL_SLICES]
    kw = {"dynamic_axes": {"x": {0: "n"}}} if dynamic else {}
    _, sess = _export(outs, {"x": xs}, tmp_path / f"slices_{dynamic}.onnx", **kw)
    return x, outs, sess


def test_every_one_axis_slice_is_numpys_on_a_static_axis(tmp_path):
    """x[-6::-2] of 5 elements is empty in NumPy; ONNX's clamp used to start it at x[0]."""
    x, outs, sess = _slices_model(tmp_path, 5, dynamic=False)
    xv = x.asnumpy()
    got = sess.run(None, {"x": xv})
    for k, g, lazy in zip(ALL_SLICES, got, outs):
        np.testing.assert_array_equal(g, xv[k], err_msg=str(k))
        np.testing.assert_array_equal(lazy.asnumpy(), xv[k], err_msg=str(k))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 9])
def test_every_one_axis_slice_is_numpys_on_a_dynamic_axis(tmp_path, n):
    """Exported at 5 elements with axis 0 dynamic, run at other lengths: a negative-step slice whose
    start is below -len there selects nothing, as in NumPy."""
    _, _, sess = _slices_model(tmp_path, 5, dynamic=True)
    xv = np.arange(n, dtype=np.float32) * 1.5 - 2
    got = sess.run(None, {"x": xv})
    for k, g in zip(ALL_SLICES, got):
        np.testing.assert_array_equal(g, xv[k], err_msg=str(k))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_multi_axis_keys_with_negative_steps_are_numpys(tmp_path, dynamic):
    xv = np.arange(60, dtype=np.float32).reshape(5, 4, 3)
    with la.deferred():
        xs = la.array(xv)
        outs = [xs[k] for k in KEYS_3D]
    kw = {"dynamic_axes": {"x": {0: "a", 2: "c"}}} if dynamic else {}
    _, sess = _export(outs, {"x": xs}, tmp_path / "keys.onnx", **kw)
    shapes = [(5, 4, 3)] + ([(2, 4, 1), (7, 4, 6), (5, 4, 9)] if dynamic else [])
    for shape in shapes:
        v = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        for k, g in zip(KEYS_3D, sess.run(None, {"x": v})):
            np.testing.assert_array_equal(g, v[k], err_msg=f"{k} of {shape}")


def test_static_slice_shapes_agree_with_onnx_shape_inference(tmp_path):
    """The declared output shapes are the ones ONNX's own inference finds (no merge conflicts)."""
    xv = np.arange(5, dtype=np.float32)
    with la.deferred():
        xs = la.array(xv)
        outs = [xs[k] for k in ALL_SLICES]
    path = tmp_path / "shapes.onnx"
    _export(outs, {"x": xs}, path)
    inferred = onnx.shape_inference.infer_shapes(onnx.load(str(path)), strict_mode=True)
    for k, o in zip(ALL_SLICES, inferred.graph.output):
        assert [d.dim_value for d in o.type.tensor_type.shape.dim] == [len(xv[k])], str(k)


# -- float remainder ----------------------------------------------------------------------------------
GRID = [0.0, -0.0, 2.0, -2.0, 0.5, -3.25, 7.0, 1e30, -1e-30, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_remainder_is_numpys_with_inf_zero_and_nan(tmp_path, dtype):
    with np.errstate(over="ignore"):  # (1e30 is inf in float16: one more infinity)
        a, b = (v.reshape(-1).astype(dtype) for v in np.meshgrid(GRID, GRID, indexing="ij"))
    with la.deferred():
        xa, xb = la.array(a), la.array(b)
        y = la.remainder(xa, xb)
    path = tmp_path / "rem.onnx"
    _export([y], {"a": xa, "b": xb}, path)
    with np.errstate(all="ignore"):
        want = np.remainder(a, b)
    got, = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # (nan where NumPy has nan, inf where it has inf)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(y.asnumpy(), want)
    # the signs of zeros by the spec's evaluator (onnxruntime's Where may drop a -0.0's sign)
    from onnx.reference import ReferenceEvaluator
    with np.errstate(all="ignore"):
        ref, = ReferenceEvaluator(str(path)).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(np.signbit(ref), np.signbit(want))


def test_integer_remainder_still_has_the_divisors_sign(tmp_path):
    a, b = (v.reshape(-1) for v in np.meshgrid(np.arange(-7, 8), [-3, -2, -1, 1, 2, 5], indexing="ij"))
    with la.deferred():
        xa, xb = la.array(a), la.array(b)
        y = la.remainder(xa, xb)
    path = tmp_path / "irem.onnx"
    _, sess = _export([y], {"a": xa, "b": xb}, path)
    np.testing.assert_array_equal(sess.run(None, {"a": a, "b": b})[0], np.remainder(a, b))


# -- one value output twice ---------------------------------------------------------------------------
def _twice_cases():
    def same(x):
        y = la.exp(x)
        return [y, y]

    def dropout(x):
        y = la.exp(x) * 2.0
        return [y, la.nn.dropout(y, 0.5)]  # (inference: the same value)

    def input_twice(x):
        return [x, x, la.negative(x)]

    def three(x):
        y = la.tanh(x)
        return [y, la.sin(x), y, y]

    return {"same": same, "dropout": dropout, "input_twice": input_twice, "three": three}


@pytest.mark.parametrize("case", sorted(_twice_cases()))
def test_a_value_output_twice_makes_a_valid_model(tmp_path, case):
    fn = _twice_cases()[case]
    xv = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    with la.deferred():
        xs = la.array(xv)
        outs = fn(xs)
    sym, sess = _export(outs, {"x": xs}, tmp_path / f"{case}.onnx")
    names = [o.name for o in sess.get_outputs()]
    assert len(names) == len(set(names)) == len(outs)
    got = sess.run(None, {"x": xv})
    want = la.CachedOp(sym)(x=la.array(xv))
    want = want if isinstance(want, list) else [want]
    for g, w, lazy in zip(got, want, outs):
        np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-6)
        np.testing.assert_allclose(g, lazy.asnumpy(), rtol=1e-6)
