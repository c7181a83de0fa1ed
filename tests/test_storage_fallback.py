"""Storage fallback: sparse inputs to ops without a sparse kernel are densified, with a
``StorageFallbackWarning`` once per (op, storage types); the environment variable silences it."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray.ops import registry

DENSE = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]], dtype=np.float32)


pytestmark = pytest.mark.usefixtures("fresh_fallback_warnings")


def _csr():
    return la.array(DENSE).tostype("csr")


def test_sparse_input_is_densified_with_a_warning_once_per_op_and_stypes():
    x = _csr()
    with pytest.warns(la.StorageFallbackWarning, match=r"exp: no kernel for storage types \(csr\)") as rec:
        y = la.exp(x)
    assert len(rec) == 1 and "tostype('default')" in str(rec[0].message)
    assert y.stype == "default"
    np.testing.assert_allclose(y.asnumpy(), np.exp(DENSE))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        la.exp(x)  # same (op, stypes): silent
    with pytest.warns(la.StorageFallbackWarning, match=r"maximum: no kernel for storage types \(csr, default\)"):
        la.maximum(x, la.ones((2, 3)))
    with pytest.warns(la.StorageFallbackWarning, match=r"exp: .*\(row_sparse\)"):
        la.exp(la.array(DENSE).tostype("row_sparse"))


def test_warning_points_at_the_callers_line():
    with pytest.warns(la.StorageFallbackWarning) as rec:
        la.mean(_csr())
    with pytest.warns(la.StorageFallbackWarning) as rec2:
        _csr() + 2.0
    with la.deferred():
        y = la.nn.softmax(_csr())
    with pytest.warns(la.StorageFallbackWarning) as rec3:
        y.asnumpy()
    assert rec[0].filename == rec2[0].filename == rec3[0].filename == __file__


def test_fallback_results_equal_dense_results():
    x = _csr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", la.StorageFallbackWarning)
        np.testing.assert_allclose(la.sum(x, axis=0).asnumpy(), DENSE.sum(axis=0))
        np.testing.assert_allclose((x @ la.ones((3, 2))).asnumpy(), DENSE @ np.ones((3, 2)))


def test_fallback_in_deferred_compute_warns_when_computed():
    x = _csr()
    with la.deferred():
        y = la.exp(x)
    assert y.static_shape == (2, 3) and y.stype == "default"
    with pytest.warns(la.StorageFallbackWarning, match="exp"):
        np.testing.assert_allclose(y.asnumpy(), np.exp(DENSE))


def test_the_tuning_setting_silences_the_warning():
    # (LAZYARRAY_STORAGE_FALLBACK_WARN=0 at import sets it: tests/test_tuning_table.py)
    with la.tuning(storage_fallback_warn=False), warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(la.exp(_csr()).asnumpy(), np.exp(DENSE))
    assert not registry.STORAGE_FALLBACK_WARNED


def test_ops_with_a_sparse_kernel_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = la.quadratic(_csr(), a=1.0, b=2.0)
        assert y.stype == "csr"
        assert _csr().tostype("default").stype == "default"
