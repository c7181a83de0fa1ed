"""Gradients through data-dependent shapes: recorded under ``la.deferred()`` an input that
went through a boolean mask has an unknown (None) dim until it runs. A gradient rule that
needs a size must then read it when the graph runs, never count the unknown dim as 1 (or
fail). Each test compares the deferred gradient with the eager one (all shapes known)."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import lazyarray as la

MASK6 = np.array([1, 0, 1, 1, 0, 1], bool)  # 4 of 6 kept


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _grads(fn, arrays, deferred, head=None):
    """Gradients of ``sum(fn(*xs) * head)`` w.r.t. every float array of ``arrays``."""
    xs = [la.array(a) for a in arrays]
    wrt = [x for x in xs if x.dtype.kind == "f"]
    for x in wrt:
        x.attach_grad()
    with la.autograd.record():
        with la.deferred() if deferred else contextlib.nullcontext():
            y = fn(*xs)
            assert y.is_lazy == deferred
            if head is not None:  # (backward's out_grad must match the static shape, which has a None)
                y = (y * la.array(head.astype(y.dtype))).sum()
    y.backward()
    return [x.grad.asnumpy() for x in wrt]


def _check(fn, arrays, seed=0, rtol=1e-5):
    """The deferred gradients equal the eager ones, for ones and for a random head gradient."""
    rng = np.random.default_rng(seed)
    eager_out = fn(*[la.array(a) for a in arrays])
    for head in (None, rng.standard_normal(eager_out.shape)):
        eager = _grads(fn, arrays, False, head)
        lazy = _grads(fn, arrays, True, head)
        assert len(eager) == len(lazy)
        for i, (e, lz) in enumerate(zip(eager, lazy)):
            assert lz.shape == e.shape, i
            np.testing.assert_allclose(lz, e, rtol=rtol, atol=1e-6, err_msg=f"gradient of input {i}")


def _mask(m=MASK6):
    return la.array(m)


# -- softmax_cross_entropy ------------------------------------------------------------------------
def _sce_reference_grad(logits, labels, keep):
    """d mean(-log softmax(logits[keep])[label]) / d logits, in NumPy."""
    sel = logits[keep].astype(np.float64)
    e = np.exp(sel - sel.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    onehot = np.eye(logits.shape[-1])[labels]
    g = np.zeros(logits.shape)
    g[keep] = (p - onehot) / labels.size
    return g


def test_softmax_cross_entropy_grad_of_a_masked_batch_matches_eager():
    rng = np.random.default_rng(0)
    logits, labels = rng.random((6, 3)).astype(np.float32), np.array([0, 1, 2, 0])
    grads = {}
    for deferred in (False, True):
        L = la.array(logits)
        L.attach_grad()
        with la.autograd.record():
            with la.deferred() if deferred else contextlib.nullcontext():
                loss = la.nn.softmax_cross_entropy(L[_mask()], la.array(labels))
        loss.backward()
        grads[deferred] = L.grad.asnumpy()
    np.testing.assert_allclose(grads[True], grads[False], rtol=1e-5, atol=1e-7)  # was 4x (the batch size)
    np.testing.assert_allclose(grads[False], _sce_reference_grad(logits, labels, MASK6), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("labels_masked", [False, True], ids=["known-labels", "masked-labels"])
def test_softmax_cross_entropy_grad_with_masked_logits_and_labels(labels_masked):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 6) if labels_masked else rng.integers(0, 5, 4)

    def fn(logits, lab):
        return la.nn.softmax_cross_entropy(logits[_mask()], lab[_mask()] if labels_masked else lab)

    _check(fn, [_f32(rng, 6, 5), labels])


def test_softmax_cross_entropy_grad_with_several_masked_batch_dims():
    rng = np.random.default_rng(2)
    m = np.array([[1, 0, 1], [1, 1, 0]], bool)  # (2, 3) leading dims -> one unknown dim of 4
    labels3 = rng.integers(0, 4, (2, 3))

    def fn(logits, lab):
        return la.nn.softmax_cross_entropy(logits[_mask(m)], lab[_mask(m)])

    _check(fn, [_f32(rng, 2, 3, 4), labels3])

    def fn_3d(logits, lab):  # a masked batch with a known middle dim: (None, 2, 4)
        return la.nn.softmax_cross_entropy(logits[_mask()], lab[_mask()])

    _check(fn_3d, [_f32(rng, 6, 2, 4), rng.integers(0, 4, (6, 2))])


def test_softmax_cross_entropy_grad_with_a_masked_class_dim():
    rng = np.random.default_rng(3)
    classes = np.array([1, 1, 0, 1, 0, 1], bool)  # 4 of 6 classes kept

    def fn(logits, lab):
        return la.nn.softmax_cross_entropy(la.transpose(la.transpose(logits)[_mask(classes)]), lab)

    _check(fn, [_f32(rng, 5, 6), rng.integers(0, 4, 5)])


# -- mean -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (0, True), (-1, False), ((0, 1), True),
                                           (None, True)])
def test_mean_grad_over_a_masked_dim(axis, keepdims):
    rng = np.random.default_rng(4)
    _check(lambda x: la.mean(x[_mask()], axis=axis, keepdims=keepdims), [_f32(rng, 6, 3)])


def test_mean_grad_of_a_float64_masked_array_keeps_its_dtype():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 2))
    _check(lambda a: la.mean(a[_mask()]), [x])


# -- linear algebra -------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["1d@1d", "1d@2d", "2d@1d"])
def test_dot_grad_with_a_masked_inner_dim(case):
    rng = np.random.default_rng(6)
    shapes = {"1d@1d": ((6,), (6,)), "1d@2d": ((6,), (6, 2)), "2d@1d": ((6, 3), (3,))}[case]

    def fn(a, b):
        return la.dot(a[_mask()], b[_mask()] if case != "2d@1d" else b)

    _check(fn, [_f32(rng, *s) for s in shapes])


@pytest.mark.parametrize("case", ["1d@2d", "2d@1d", "1d@1d", "batched"])
def test_matmul_grad_with_a_masked_dim(case):
    rng = np.random.default_rng(7)
    fns = {
        "1d@2d": (lambda a, b: la.matmul(a[_mask()], b[_mask()]), ((6,), (6, 2))),
        "2d@1d": (lambda a, b: la.matmul(la.transpose(b[_mask()]), a[_mask()]), ((6,), (6, 2))),
        "1d@1d": (lambda a, b: la.matmul(a[_mask()], b[_mask()]), ((6,), (6,))),
        "batched": (lambda a, b: la.matmul(a[_mask()], b), ((6, 2, 3), (3, 4))),
    }
    fn, shapes = fns[case]
    _check(fn, [_f32(rng, *s) for s in shapes])


@pytest.mark.parametrize("case", ["3d-input", "1d-input", "2d-input-bias", "masked-batch"])
def test_dense_grad_with_masked_units_or_batch(case):
    rng = np.random.default_rng(8)
    fns = {
        "3d-input": (lambda x, w: la.nn.dense(x, w[_mask()]), ((2, 4, 3), (6, 3))),
        "1d-input": (lambda x, w: la.nn.dense(x, w[_mask()]), ((3,), (6, 3))),
        "2d-input-bias": (lambda x, w, b: la.nn.dense(x, w[_mask()], b[_mask()]), ((5, 3), (6, 3), (6,))),
        "masked-batch": (lambda x, w, b: la.nn.dense(x[_mask()], w, b), ((6, 2, 3), (4, 3), (4,))),
    }
    fn, shapes = fns[case]
    _check(fn, [_f32(rng, *s) for s in shapes], rtol=1e-4)


def test_dense_accepts_a_known_bias_with_masked_units():
    # The shape rule compared the bias (4,) with an unknown unit count and refused it.
    rng = np.random.default_rng(9)
    _check(lambda x, w, b: la.nn.dense(x, w[_mask()], b), [_f32(rng, 5, 3), _f32(rng, 6, 3), _f32(rng, 4)])


# -- shape ops ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [(2, 3), (3, 1, 2), (1, 1), (2, 0)])
def test_repeat_grad_of_a_masked_array(sizes):
    rng = np.random.default_rng(10)
    _check(lambda x: la.tile(x[_mask()], sizes), [_f32(rng, 6, 3)])


def test_repeat_grad_with_two_unknown_dims():
    rng = np.random.default_rng(11)
    cols = np.array([0, 1, 1, 1, 0], bool)

    def fn(x):
        y = la.transpose(la.transpose(x[_mask()])[_mask(cols)])  # (None, None)
        return la.tile(y, (2, 3))

    _check(fn, [_f32(rng, 6, 5)])


@pytest.mark.parametrize("axis", [0, 1])
def test_concatenate_grad_with_masked_inputs(axis):
    rng = np.random.default_rng(12)
    if axis == 0:
        def fn(a, b, c):
            return la.concatenate([a[_mask()], b, c[_mask(~MASK6)]], axis=0)

        shapes = ((6, 3), (2, 3), (6, 3))
    else:
        def fn(a, b, c):
            t = la.transpose
            return la.concatenate([t(a[_mask()]), b, t(c[_mask(~MASK6)]), t(a[_mask()])], axis=1)

        shapes = ((6, 3), (3, 2), (6, 3))
    _check(fn, [_f32(rng, *s) for s in shapes])


def test_concatenate_grad_with_one_masked_input_in_the_middle():
    rng = np.random.default_rng(13)
    _check(lambda a, b, c: la.concatenate([a, b[_mask()], c]), [_f32(rng, 2, 3), _f32(rng, 6, 3), _f32(rng, 1, 3)])


# -- conv2d ---------------------------------------------------------------------------------------
def test_conv2d_grad_with_masked_filters_and_a_known_bias():
    # The shape rule compared the bias (4,) with an unknown filter count and refused it.
    rng = np.random.default_rng(14)
    _check(lambda x, w, b: la.nn.conv2d(x, w[_mask()], b, padding=(1, 1)),
           [_f32(rng, 2, 2, 4, 4), _f32(rng, 6, 2, 3, 3), _f32(rng, 4)], rtol=1e-4)


def test_conv2d_grad_of_a_masked_batch():
    rng = np.random.default_rng(15)
    _check(lambda x, w, b: la.nn.conv2d(x[_mask()], w, b), [_f32(rng, 6, 2, 4, 4), _f32(rng, 3, 2, 2, 2), _f32(rng, 3)],
           rtol=1e-4)


# -- the ops the gradients above use -------------------------------------------------------------
def test_size_counts_a_data_dependent_dim_when_it_runs():
    x = la.array(np.zeros((6, 3, 2), np.float32))
    with la.deferred():
        n_all, n_rows = la.size(x[_mask()], dtype="float32"), la.size(x[_mask()], axis=0)
        assert n_all.is_lazy and n_all.static_shape == () and n_rows.dtype == np.int64
    assert n_all.asnumpy() == np.float32(24) and n_rows.asnumpy() == 4


def test_slice_like_and_one_hot_like_read_sizes_when_they_run():
    x = la.array(np.arange(12.0).reshape(6, 2))
    with la.deferred():
        head = la.slice_like(x, x[_mask()])
        tail = la.slice_like(x, x[_mask()], drop=True)
        classes = la.transpose(la.transpose(la.zeros((3, 5)))[_mask(MASK6[1:])])  # (3, None): 3 kept
        hot = la.nn.one_hot_like(la.array(np.array([2, 0, 1])), classes)
        assert head.static_shape == (None, 2) and tail.static_shape == (None, 2) and hot.static_shape == (3, None)
    np.testing.assert_array_equal(head.asnumpy(), np.arange(8.0).reshape(4, 2))
    np.testing.assert_array_equal(tail.asnumpy(), np.arange(8.0, 12.0).reshape(2, 2))
    np.testing.assert_array_equal(hot.asnumpy(), np.eye(3)[[2, 0, 1]])
