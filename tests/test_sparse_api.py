"""``la.sparse`` and the sparse face of ``NDArray``: construction, accessors, scipy round trips,
conversions, autograd with row_sparse gradients and the lazy optimizer updates."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import lazyarray as la

DENSE = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [2.0, 0.0, 3.0, 0.0]], dtype=np.float32)


@pytest.fixture(autouse=True)
def no_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("error", la.StorageFallbackWarning)
        yield


def test_csr_matrix_from_triple_has_the_accessors():
    x = la.sparse.csr_matrix(([1.0, 2.0, 3.0], [1, 0, 2], [0, 1, 1, 3]), shape=(3, 4))
    assert x.stype == "csr" and x.shape == (3, 4) and x.dtype == np.float32
    np.testing.assert_array_equal(x.asnumpy(), DENSE)
    np.testing.assert_array_equal(np.asarray(x), DENSE)
    assert x.data.asnumpy().tolist() == [1.0, 2.0, 3.0]
    assert x.indices.asnumpy().tolist() == [1, 0, 2]
    assert x.indptr.asnumpy().tolist() == [0, 1, 1, 3]
    assert "stype=csr" in repr(x)


def test_csr_matrix_puts_the_triple_in_canonical_form():
    # unsorted columns and a duplicate in row 0
    x = la.sparse.csr_matrix(([1.0, 2.0, 5.0], [3, 1, 3], [0, 3]), shape=(1, 4))
    assert x.indices.asnumpy().tolist() == [1, 3]
    assert x.data.asnumpy().tolist() == [2.0, 6.0]


@pytest.mark.parametrize("bad", [
    (([1.0], [5], [0, 1]), (1, 4)),        # column out of range
    (([1.0, 2.0], [0], [0, 1]), (1, 4)),   # data and indices lengths differ
    (([1.0], [0], [0, 1, 1]), (1, 4)),     # indptr too long for the rows
])
def test_csr_matrix_rejects_inconsistent_triples(bad):
    arg, shape = bad
    with pytest.raises(la.ShapeError, match="csr_matrix"):
        la.sparse.csr_matrix(arg, shape=shape)


def test_csr_matrix_needs_a_shape_for_a_triple():
    with pytest.raises(la.ShapeError, match="shape="):
        la.sparse.csr_matrix(([1.0], [0], [0, 1]))


def test_scipy_round_trip():
    m = sp.random(30, 20, density=0.1, format="csr", dtype=np.float64, random_state=3)
    x = la.sparse.from_scipy(m)
    assert x.stype == "csr" and x.dtype == np.float64
    np.testing.assert_array_equal(x.asnumpy(), m.toarray())
    back = x.asscipy()
    assert sp.issparse(back) and (back != m).nnz == 0
    # coo and csc are converted; a dense array too
    np.testing.assert_array_equal(la.sparse.csr_matrix(m.tocoo()).asnumpy(), m.toarray())
    np.testing.assert_array_equal(la.sparse.csr_matrix(m.toarray()).asnumpy(), m.toarray())
    with pytest.raises(TypeError, match="asscipy"):
        la.array(DENSE).asscipy()


def test_row_sparse_array():
    x = la.sparse.row_sparse_array(([[1.0, 2.0], [3.0, 4.0]], [3, 1]), shape=(5, 2))
    assert x.stype == "row_sparse" and x.shape == (5, 2)
    assert x.indices.asnumpy().tolist() == [1, 3]  # sorted
    want = np.zeros((5, 2), np.float32)
    want[3], want[1] = [1, 2], [3, 4]
    np.testing.assert_array_equal(x.asnumpy(), want)
    with pytest.raises(AttributeError, match="indptr"):
        _ = x.indptr
    with pytest.raises(la.ShapeError, match="data has shape"):
        la.sparse.row_sparse_array(([[1.0, 2.0]], [0, 1]), shape=(5, 2))
    with pytest.raises(la.ParamValueError, match="unique"):
        la.sparse.row_sparse_array(([[1.0], [2.0]], [1, 1]), shape=(5, 1))
    with pytest.raises(la.ShapeError, match="row indices"):
        la.sparse.row_sparse_array(([[1.0]], [9]), shape=(5, 1))


def test_dense_arrays_have_no_sparse_parts():
    with pytest.raises(AttributeError, match="tostype"):
        _ = la.array(DENSE).data


@pytest.mark.parametrize("src", ["default", "csr", "row_sparse"])
@pytest.mark.parametrize("dst", ["default", "csr", "row_sparse"])
def test_tostype_round_trips(src, dst):
    x = la.array(DENSE).tostype(src)
    y = x.tostype(dst)
    assert y.stype == dst
    np.testing.assert_array_equal(y.asnumpy(), DENSE)
    np.testing.assert_array_equal(y.tostype("default").asnumpy(), DENSE)


def test_sparse_zeros():
    for st in ("csr", "row_sparse"):
        z = la.sparse.zeros(st, (3, 4))
        assert z.stype == st
        np.testing.assert_array_equal(z.asnumpy(), np.zeros((3, 4), np.float32))
        np.testing.assert_array_equal(la.relu(z).asnumpy(), np.zeros((3, 4), np.float32))


def test_copy_to_another_device_keeps_the_storage():
    x = la.array(DENSE).tostype("csr")
    y = x.to(la.cpu(1))
    assert y.stype == "csr" and y.device == la.cpu(1)
    np.testing.assert_array_equal(y.asnumpy(), DENSE)


# -- autograd ------------------------------------------------------------------------------------
def test_dot_csr_gives_w_a_row_sparse_gradient_when_asked():
    x = la.array(DENSE).tostype("csr")
    w_np = np.arange(8, dtype=np.float32).reshape(4, 2)
    og = np.ones((3, 2), np.float32)
    for stype in ("row_sparse", "default"):
        w = la.array(w_np)
        w.attach_grad(stype=stype)
        with la.autograd.record():
            y = la.dot(x, w)
        y.backward(out_grad=la.array(og))
        assert w.grad.stype == stype
        np.testing.assert_allclose(w.grad.asnumpy(), DENSE.T @ og)
    assert w.grad.stype == "default"
    # only the columns x stores (0, 1, 2) are rows of the gradient
    w = la.array(w_np)
    w.attach_grad(stype="row_sparse")
    with la.autograd.record():
        y = la.dot(x, w)
    y.backward()
    assert w.grad.indices.asnumpy().tolist() == [0, 1, 2]


def test_take_sparse_grad_accumulates_repeated_rows():
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    w = la.array(table)
    w.attach_grad(stype="row_sparse")
    idx = la.array(np.array([[4, 1], [4, 4]]))
    with la.autograd.record():
        y = la.take(w, idx, sparse_grad=True)
    y.backward()
    g = w.grad
    assert g.stype == "row_sparse" and g.indices.asnumpy().tolist() == [1, 4]
    want = np.zeros_like(table)
    want[1], want[4] = 1, 3
    np.testing.assert_array_equal(g.asnumpy(), want)


def test_row_sparse_gradients_of_two_uses_add_up_row_sparse():
    w = la.array(np.ones((5, 2), np.float32))
    w.attach_grad(stype="row_sparse")
    with la.autograd.record():
        y = la.take(w, la.array(np.array([0])), sparse_grad=True).sum() + \
            la.take(w, la.array(np.array([3, 0])), sparse_grad=True).sum()
    y.backward()
    assert w.grad.stype == "row_sparse" and w.grad.indices.asnumpy().tolist() == [0, 3]
    np.testing.assert_array_equal(w.grad.asnumpy()[:, 0], [2, 0, 0, 1, 0])


def test_grad_req_add_accumulates_sparse_gradients():
    w = la.array(np.ones((5, 2), np.float32))
    w.attach_grad(grad_req="add", stype="row_sparse")
    for rows in ([1], [3]):
        with la.autograd.record():
            y = la.take(w, la.array(np.array(rows)), sparse_grad=True).sum()
        y.backward()
    np.testing.assert_array_equal(w.grad.asnumpy()[:, 0], [0, 1, 0, 1, 0])


def test_sparse_gradients_inside_deferred_compute():
    x = la.array(DENSE).tostype("csr")
    w = la.array(np.ones((4, 2), np.float32))
    w.attach_grad(stype="row_sparse")
    with la.deferred():
        with la.autograd.record():
            y = (la.dot(x, w) ** 2).sum()
        y.backward()
        assert w.grad.is_lazy and w.grad.stype == "row_sparse"
    np.testing.assert_allclose(w.grad.asnumpy(), DENSE.T @ (2 * DENSE @ np.ones((4, 2))))


# -- lazy optimizer updates -------------------------------------------------------------------
def _rsp_grad():
    return la.sparse.row_sparse_array(([[1.0, -2.0], [0.5, 0.5]], [1, 3]), shape=(5, 2))


def test_sgd_update_touches_only_the_stored_rows():
    w0 = np.arange(10, dtype=np.float32).reshape(5, 2)
    w = la.array(w0)
    g = _rsp_grad()
    la.sparse.sgd_update(w, g, lr=0.1, wd=0.01, rescale_grad=0.5)
    want = w0.copy()
    gd = g.asnumpy()
    want[[1, 3]] -= 0.1 * (0.5 * gd[[1, 3]] + 0.01 * w0[[1, 3]])
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-6)
    # lazy_update=False: the dense rule (weight decay on every row)
    w = la.array(w0)
    la.sparse.sgd_update(w, g, lr=0.1, wd=0.01, rescale_grad=0.5, lazy_update=False)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.1 * (0.5 * gd + 0.01 * w0), rtol=1e-6)


def test_sgd_update_with_momentum_and_clipping():
    w0 = np.ones((5, 2), np.float32)
    w, mom = la.array(w0), la.zeros((5, 2))
    g = _rsp_grad()
    for _ in range(2):
        la.sparse.sgd_update(w, g, lr=0.1, momentum=0.9, mom=mom, clip_gradient=1.0)
    gd = np.clip(g.asnumpy(), -1, 1)
    m1 = -0.1 * gd
    m2 = 0.9 * m1 - 0.1 * gd
    np.testing.assert_allclose(w.asnumpy(), w0 + m1 + m2, rtol=1e-6)
    np.testing.assert_array_equal(mom.asnumpy()[[0, 2, 4]], 0)


def test_adam_update_is_lazy_and_matches_dense_on_the_touched_rows():
    w0 = np.arange(10, dtype=np.float32).reshape(5, 2) / 10
    g = _rsp_grad()
    w, m, v = la.array(w0), la.zeros((5, 2)), la.zeros((5, 2))
    la.sparse.adam_update(w, g, m, v, lr=0.01, wd=0.1)
    wd_, md, vd = la.array(w0), la.zeros((5, 2)), la.zeros((5, 2))
    la.sparse.adam_update(wd_, g.tostype("default"), md, vd, lr=0.01, wd=0.1)
    rows, other = [1, 3], [0, 2, 4]
    np.testing.assert_allclose(w.asnumpy()[rows], wd_.asnumpy()[rows], rtol=1e-6)
    np.testing.assert_array_equal(w.asnumpy()[other], w0[other])
    np.testing.assert_array_equal(m.asnumpy()[other], 0)
    assert not np.array_equal(wd_.asnumpy()[other], w0[other])  # dense decays every row


def test_updates_reject_lazy_weights():
    with la.deferred():
        w = la.ones((5, 2)) * 2
    with pytest.raises(la.ParamValueError, match="in place"):
        la.sparse.sgd_update(w, _rsp_grad(), lr=0.1)


@pytest.mark.skipif(not la.gpu_available(), reason="needs CuPy and a GPU")
def test_sparse_kernels_on_the_gpu_match_the_cpu():
    x = la.array(DENSE).tostype("csr")
    w = la.array(np.arange(8, dtype=np.float32).reshape(4, 2))
    g = la.array(np.ones((3, 2), np.float32))
    xg, wg, gg = x.to(la.gpu()), w.to(la.gpu()), g.to(la.gpu())
    assert xg.stype == "csr" and xg.device == la.gpu()
    for f in (lambda a, b, c: la.relu(a * 2.0), lambda a, b, c: la.dot(a, b),
              lambda a, b, c: la.dot(a, c, transpose_a=True), lambda a, b, c: la.sum(a, axis=0),
              lambda a, b, c: a[1:3], lambda a, b, c: a.tostype("row_sparse")):
        cpu, gpu = f(x, w, g), f(xg, wg, gg)
        assert cpu.stype == gpu.stype
        np.testing.assert_allclose(gpu.asnumpy(), cpu.asnumpy(), rtol=1e-6)


def test_csr_matmul_operator_takes_the_sparse_kernel_without_a_fallback_warning():
    """``csr @ dense`` reaches the sparse product, as ``la.dot(csr, dense)`` does: no dense fallback."""
    dense = np.array([[1.0, 0, 2], [0, 0, 3]], np.float32)
    a = la.sparse.csr_matrix(dense)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback warns: it must not happen
        got = (a @ la.array(b)).asnumpy()
        vec = (a @ la.array(np.ones(3, np.float32))).asnumpy()
        with la.deferred():
            lazy = a @ la.array(b)
        lazy = lazy.asnumpy()
    np.testing.assert_allclose(got, dense @ b)
    np.testing.assert_allclose(lazy, dense @ b)
    np.testing.assert_allclose(vec, dense @ np.ones(3, np.float32))
