"""linalg ops (ops/linalg.py) through the registry-driven checks, plus the Array API result types."""
import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("linalg",))


def test_decompositions_return_the_standards_named_tuples():
    a = la.asarray(np.array([[4.0, 1.0], [1.0, 3.0]]))
    q, r = la.linalg.qr(a)
    np.testing.assert_allclose((q @ r).asnumpy(), a.asnumpy(), atol=1e-12)
    res = la.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose((res.U * res.S) @ res.Vh, a.asnumpy(), atol=1e-12)
    eig = la.linalg.eigh(a)
    np.testing.assert_allclose(eig.eigenvalues.asnumpy(), np.linalg.eigvalsh(a.asnumpy()))
    sl = la.linalg.slogdet(a)
    assert float(sl.sign) == 1.0 and float(sl.logabsdet) == pytest.approx(np.log(11.0))


def test_linalg_namespace_has_the_standards_names():
    names = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
             "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
             "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]
    assert [n for n in names if not hasattr(la.linalg, n)] == []
    np.testing.assert_array_equal(la.linalg.outer(la.asarray([1, 2]), la.asarray([3, 4, 5])).asnumpy(),
                                  np.outer([1, 2], [3, 4, 5]))
    assert la.linalg.matrix_rank(la.asarray(np.ones((3, 3))), rtol=0.1).item() == 1


def test_a_decomposition_without_a_gradient_names_the_op():
    a = la.asarray(np.array([[4.0, 1.0], [1.0, 3.0]]))
    a.attach_grad()
    with la.autograd.record():
        y = la.linalg.svdvals(a).sum()
    with pytest.raises(la.LazyArrayError, match="svdvals"):
        y.backward()


def test_linalg_records_lazily_and_builds_graphs_in_sym():
    a = la.asarray(np.array([[2.0, 0.0], [0.0, 4.0]]))
    with la.deferred():
        d = la.linalg.det(la.linalg.inv(a))
    assert d.is_lazy and d.static_shape == ()
    assert d.item() == pytest.approx(0.125)
    s = la.sym.linalg.det(la.sym.var("x", shape=(3, 3), dtype="float64"))
    assert s.infer_shape(x=(3, 3))[1] == [()]
