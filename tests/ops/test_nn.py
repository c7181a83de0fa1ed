"""Registry-driven checks of the nn ops: NumPy values and dtypes, deferred recording,
finite-difference gradients."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

FAMILY = ("nn",)


test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(FAMILY)


# -- tailored checks ------------------------------------------------------------------------------


def test_softmax_cross_entropy_is_the_mean_over_rows():
    logits = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    labels = np.array([0, 2])
    got = la.nn.softmax_cross_entropy(la.array(logits), la.array(labels)).item()
    rows = [-np.log(np.exp(r[k]) / np.exp(r).sum()) for r, k in zip(logits, labels)]
    assert got == pytest.approx(np.mean(rows), rel=1e-12)


def test_dense_is_x_times_weight_transposed_plus_bias():
    x, w, b = np.ones((2, 3)), np.arange(12.0).reshape(4, 3), np.arange(4.0)
    got = la.nn.dense(la.array(x), la.array(w), la.array(b)).asnumpy()
    np.testing.assert_array_equal(got, x @ w.T + b)


@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
@pytest.mark.parametrize("call,fragments", [
    (lambda: la.matmul(la.ones((2, 3)), la.ones((4, 3))), ["matmul:", "[2,3]", "[4,3]", "transpose"]),
    (lambda: la.dot(la.ones((2, 3)), la.ones((2,))), ["dot:", "[2,3]", "[2]"]),
    (lambda: la.nn.dense(la.ones((2, 3)), la.ones((4, 5))), ["dense:", "[2,3]", "[4,5]", "(units, in_units)"]),
    (lambda: la.nn.dense(la.ones((2, 3)), la.ones((4, 3)), la.ones((5,))), ["dense:", "bias [5]", "[4,3]"]),
    (lambda: la.nn.softmax_cross_entropy(la.ones((2, 3)), la.array(np.array([0, 1, 2]))),
     ["softmax_cross_entropy:", "labels [3]", "logits [2,3]"]),
], ids=["matmul", "dot", "dense", "dense-bias", "sce-labels"])
def test_shape_errors_name_op_shapes_and_fix(call, fragments, deferred):
    with la.deferred(deferred), pytest.raises(la.ShapeError) as info:
        call()
    for f in fragments:
        assert f in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("call,fragments", [
    (lambda: la.nn.softmax(la.ones((2, 3), dtype="int32")), ["softmax:", "int32", "astype('float32')", "[2,3]"]),
    (lambda: la.nn.softmax_cross_entropy(la.ones((2, 3)), la.ones((2,))),
     ["softmax_cross_entropy:", "labels must be integer", "astype('int64')"]),
    (lambda: la.nn.dropout_mask(la.ones((2,), dtype="int64"), p=0.5), ["dropout_mask:", "int64"]),
], ids=["softmax-int", "sce-float-labels", "dropout-int"])
def test_dtype_errors_name_op_dtype_and_fix(call, fragments):
    with pytest.raises(la.DTypeError) as info:
        call()
    for f in fragments:
        assert f in str(info.value)
    assert isinstance(info.value, TypeError)


def test_softmax_axis_out_of_range():
    with pytest.raises(la.AxisError, match=r"softmax: axis 2 is out of range.*\[inputs: float32\[2,3\]\]"):
        la.nn.softmax(la.ones((2, 3)), axis=2)


def test_one_hot_rows():
    got = la.nn.one_hot(la.array(np.array([2, 0])), depth=3).asnumpy()
    np.testing.assert_array_equal(got, np.eye(3, dtype=np.float32)[[2, 0]])


@pytest.mark.parametrize("n,hw,kernel,params", [
    (1, (9, 7), (3, 2), {"padding": (1, 0)}),  # one image: the per-image product
    (3, (10, 9), (3, 2), {}),  # 8x8 = 64 output pixels per image: per image too
    (2, (12, 11), (1, 1), {}),  # 1x1 stride 1: the input itself, no im2col copy
    (3, (12, 11), (1, 1), {"stride": (2, 2), "dilation": (1, 1)}),  # 6x6 < 64 pixels: one product for all
])
def test_conv2d_either_product_layout_matches_the_loop_reference(n, hw, kernel, params):
    from .cases import _conv2d_ref
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, 5) + hw).astype(np.float32)
    w, b = rng.standard_normal((4, 5) + kernel).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    got = la.nn.conv2d(la.array(x), la.array(w), la.array(b), **params).asnumpy()
    want = _conv2d_ref(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), **params)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_matmul_of_stacked_column_major_operands_equals_numpy(dtype):
    from lazyarray.ops.nn import _matmul

    # b a stack of column-major matrices (attention's K^T as a transposed view): the kernel copies it
    # C-ordered first; a transposed a, a broadcast b and 1-row / 1-column matrices run as they are
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 5, 2, 4)) * 4).astype(dtype)
    q, k = x.transpose(0, 2, 1, 3), x.transpose(0, 2, 3, 1)  # (3, 2, 5, 4) and (3, 2, 4, 5)
    assert k.strides[-2] == k.itemsize and not k.flags.c_contiguous
    cases = [(q, k), (k.transpose(0, 1, 3, 2), k), (q, x[:1, :1].transpose(0, 1, 3, 2)[..., :1])]
    for a, b in cases:
        got = _matmul(np, a, b)  # (the kernel itself: la.array would copy the views C-ordered)
        want = np.matmul(a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)
    out = np.empty((3, 2, 5, 5), dtype)
    assert _matmul(np, q, k, out=out) is out
    np.testing.assert_allclose(out, np.matmul(q, k), rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("out_kind", ["none", "aligned", "misaligned", "other dtype", "strided"])
@pytest.mark.parametrize("rows", [1, 5])
def test_dense_kernel_writes_any_out_numpy_accepts(out_kind, rows):
    """The dense kernel takes ndarray.dot where NumPy allows it (a C-ordered, aligned ``out`` of the
    result's dtype) and matmul elsewhere: the same values either way."""
    from lazyarray.ops.registry import get
    dense = get("dense").bind(np)
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((rows, 40), (48, 40), (48,)))
    want = x @ w.T + b
    if out_kind == "none":
        out = None
    elif out_kind == "aligned":
        out = np.empty((rows, 48), "float32")
    elif out_kind == "misaligned":
        out = np.empty(rows * 48 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(rows, 48)
        assert not out.flags.aligned
    elif out_kind == "other dtype":
        out = np.empty((rows, 48), "float64")
    else:
        out = np.empty((rows, 96), "float32")[:, ::2]
    got = dense(x, w, b, out=out)
    if out is not None:
        assert got is out
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
