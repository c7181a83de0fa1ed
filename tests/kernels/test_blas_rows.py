"""kernels/blas_rows.py: products of MIN_PARALLEL_FLOPS or more in row blocks over the pool, each on one
BLAS thread (dense[row_blocks], matmul[row_blocks]). Their values are one BLAS thread's, bit for bit,
on one thread set, on two, and while the contention guard's window is open; against the reference
matmul on one BLAS thread, float32 and float64, views and empty dims. No timing is asserted."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import threads
from lazyarray.kernels import blas_rows, contention, dense, matmul
from lazyarray.kernels.blas_threads import MIN_PARALLEL_FLOPS, SMALL_PRODUCT
from lazyarray.ops import registry
from lazyarray.tuning_table import current

FLOATS = (np.float32, np.float64)
SHAPES = [(512, 64, 256), (777, 129, 301), (250, 1000, 200), (3, 100, 96, 700)]  # (rows..., k, units)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def guard(monkeypatch):
    """The guard on, fresh, on a fake clock, row blocks switched on (off by default); the thread count
    restored after."""
    monkeypatch.setattr(la.config, "contention_guard", True)
    monkeypatch.setattr(la.config, "blas_row_blocks", True)
    contention.reset()
    wall = Clock()
    contention.guard().clock = wall
    yield wall
    contention.reset()
    la.set_num_threads(os.cpu_count() or 1)


def _cuts_exact(dtype):
    """Skip unless this machine's BLAS gives a product cut at ``ROW_ALIGN`` rows the whole one's bits in
    ``dtype`` (``blas_rows.exact``, the probe): elsewhere row blocks decline and the product runs whole
    (``test_aligned_cuts_keep_the_bits_or_row_blocks_decline``; OpenBLAS's SkylakeX kernels round float32
    products cut so otherwise)."""
    if not blas_rows.exact(np.dtype(dtype)):
        pytest.skip(f"{np.dtype(dtype)} products cut at ROW_ALIGN rows round otherwise here: row blocks decline")


def _exact_dtype():
    """A float dtype whose cut products keep their bits here (float32 first), else skip (``_cuts_exact``)."""
    for dtype in FLOATS:
        if blas_rows.exact(np.dtype(dtype)):
            return dtype
    _cuts_exact(FLOATS[-1])


def _operands(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    *rows, k, units = shape
    x = rng.standard_normal((*rows, k)).astype(dtype)
    w = rng.standard_normal((units, k)).astype(dtype)
    b = rng.standard_normal(units).astype(dtype)
    return x, w, b


def _dense_three_ways(guard, x, w, b, out_like=False):
    """dense on one thread, on two, on two while contended: (values, choices)."""
    vals, names = [], []
    for n, contended in ((1, False), (2, False), (2, True)):
        la.set_num_threads(n)
        if contended:
            contention.stalled()
            assert contention.contended()
        out = np.empty(x.shape[:-1] + (w.shape[0],), x.dtype) if out_like else None
        names.append(dense.choose_dense(np, x, w, out, current()).impl.name)
        vals.append(dense.run_dense(np, x, w, b, out=out))
        guard.t += 10.0  # (the window is over)
    return vals, names


def test_cuts_are_aligned_cover_the_rows_and_depend_on_the_shape_alone():
    for rows, k, n in [(512, 64, 256), (1024, 768, 768), (200, 1000, 1000), (1576, 192, 768), (193, 5000, 300)]:
        blocks = blas_rows.cuts(rows, k, n)
        assert blocks is not None and 2 <= len(blocks) <= blas_rows.PARTS
        assert blocks[0][0] == 0 and blocks[-1][1] == rows
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        assert all(lo % blas_rows.ROW_ALIGN == 0 for lo, _ in blocks)
        assert all((hi - lo) * k * n > SMALL_PRODUCT for lo, hi in blocks)
        sizes = [hi - lo for lo, hi in blocks[:-1]]
        assert max(sizes) - min(sizes) <= blas_rows.ROW_ALIGN  # (as even as whole units allow)
    assert blas_rows.cuts(140, 10000, 10000) is None  # (fewer than MIN_UNITS units: BLAS's threads)
    assert blas_rows.cuts(64, 784, 512) is None  # (the MLP's batch-64 layer)
    assert blas_rows.cuts(400, 10, 10) is None  # (no two blocks above SMALL_PRODUCT)


@pytest.mark.parametrize("dtype", FLOATS)
def test_aligned_cuts_keep_the_bits_or_row_blocks_decline(guard, dtype):
    """Where the probe says cuts keep the bits, they do on other products too (the dense layers of the
    tests below: cuts at every aligned row); where it says not, dense and matmul run the product whole."""
    la.set_num_threads(2)
    x, w, _ = _operands((600, 300, 256), dtype)
    if not blas_rows.exact(np.dtype(dtype)):
        assert dense.choose_dense(np, x, w, None, current()).impl.name == "gemm"
        assert matmul.choose_matmul(np, x, w.T).impl.name == "blas"
        return
    with threads.blas_one_thread():
        whole = x @ w.T
        for cut in range(blas_rows.ROW_ALIGN, x.shape[0], blas_rows.ROW_ALIGN):
            parts = np.concatenate([x[:cut] @ w.T, x[cut:] @ w.T])
            assert np.array_equal(parts, whole), cut


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_dense_one_thread_two_and_contended_give_the_same_bits(guard, dtype, shape):
    _cuts_exact(dtype)
    x, w, b = _operands(shape, dtype)
    vals, names = _dense_three_ways(guard, x, w, b, out_like=x.ndim > 2)
    assert names[1:] == ["row_blocks", "row_blocks"] and names[0] != "row_blocks"
    assert np.array_equal(vals[0], vals[1]) and np.array_equal(vals[0], vals[2])
    k = x.shape[-1]
    with threads.blas_one_thread():  # (one product over all the rows on one BLAS thread, then the bias)
        ref = (x.reshape(-1, k) @ w.T).reshape(vals[1].shape) + b
        op_ref = registry.get("dense").kernel(np, x, w, b)  # (a stack: NumPy's product per leading index)
    assert vals[1].shape == ref.shape and np.array_equal(vals[1], ref)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(vals[1], op_ref, rtol=tol, atol=tol * np.abs(op_ref).max())
    if x.ndim == 2:
        assert np.array_equal(vals[1], op_ref)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("view", ["rows", "columns", "transposed"])
def test_dense_views_take_row_blocks_with_the_same_bits(guard, dtype, view):
    _cuts_exact(dtype)
    x, w, b = _operands((1200, 300, 256), dtype, seed=1)
    if view == "rows":
        x = x[::2]  # (600, 300): every other row
    elif view == "columns":
        x = np.repeat(x, 2, axis=1)[:, ::2]  # (1200, 300), a column stride of 2
    else:
        x = np.ascontiguousarray(x.T).T  # F-ordered
    vals, names = _dense_three_ways(guard, x, w, b)
    assert names[1] == "row_blocks"
    assert np.array_equal(vals[0], vals[1]) and np.array_equal(vals[0], vals[2])
    with threads.blas_one_thread():
        assert np.array_equal(vals[1], np.ascontiguousarray(x) @ w.T + b)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(0, 300, 256), (600, 0, 256), (600, 300, 0), (2, 0, 300, 256)])
def test_empty_dims_are_not_row_blocks_and_stay_right(guard, dtype, shape):
    x, w, b = _operands(shape, dtype)
    la.set_num_threads(2)
    assert dense.choose_dense(np, x, w, None, current()).impl.name != "row_blocks"
    y = dense.run_dense(np, x, w, b)
    assert y.shape == x.shape[:-1] + (w.shape[0],) and np.array_equal(y, x @ w.T + b)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", ["matrix", "stack", "transposed b", "into F-ordered out"])
def test_matmul_row_blocks_one_thread_two_and_contended(guard, dtype, case):
    _cuts_exact(dtype)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 150, 200) if case == "stack" else (600, 200)).astype(dtype)
    b = rng.standard_normal((200, 300)).astype(dtype)
    if case == "transposed b":
        b = np.ascontiguousarray(b.T).T
    vals, names = [], []
    for n, contended in ((1, False), (2, False), (2, True)):
        la.set_num_threads(n)
        if contended:
            contention.stalled()
        out = np.empty((600, 300), dtype, order="F") if case == "into F-ordered out" else None
        names.append(matmul.choose_matmul(np, a, b).impl.name)
        vals.append(matmul.run_matmul(np, a, b, out=out))
        guard.t += 10.0
    assert names == ["blas", "row_blocks", "row_blocks"]
    assert np.array_equal(vals[0], vals[1]) and np.array_equal(vals[0], vals[2])
    assert matmul.order_decides(np, a, b) == (case == "stack")


def test_a_stack_that_is_not_c_ordered_is_not_row_blocks(guard):
    a = np.ones((150, 4, 200), np.float32).transpose(1, 0, 2)
    b = np.ones((200, 300), np.float32)
    la.set_num_threads(2)
    assert matmul.choose_matmul(np, a, b).impl.name == "blas"


def test_small_products_one_thread_ints_and_the_switch_are_not_row_blocks(guard, monkeypatch):
    la.set_num_threads(2)
    dtype = _exact_dtype()
    x, w, _ = _operands((512, 64, 64), dtype)  # (4.2 MFLOP: below MIN_PARALLEL_FLOPS)
    assert 2 * 512 * 64 * 64 < MIN_PARALLEL_FLOPS
    assert dense.choose_dense(np, x, w, None, current()).impl.name != "row_blocks"
    xi, wi = np.ones((600, 300), np.int64), np.ones((256, 300), np.int64)
    assert dense.choose_dense(np, xi, wi, None, current()).impl.name != "row_blocks"
    x, w, b = _operands((600, 300, 256), dtype)
    assert dense.choose_dense(np, x, w, None, current()).impl.name == "row_blocks"
    monkeypatch.setattr(la.config, "blas_row_blocks", False)
    assert dense.choose_dense(np, x, w, None, current()).impl.name == "gemm"
    assert matmul.choose_matmul(np, x, w.T).impl.name == "blas"
    la.set_num_threads(1)
    monkeypatch.setattr(la.config, "blas_row_blocks", True)
    assert dense.choose_dense(np, x, w, None, current()).impl.name == "gemm"


def test_a_probe_that_finds_other_bits_turns_row_blocks_off(guard, monkeypatch):
    la.set_num_threads(2)
    x, w, _ = _operands((600, 300, 256), np.float32)
    monkeypatch.setattr(blas_rows, "EXACT", blas_rows.EXACT.__class__("test exact cuts", 4))
    blas_rows.EXACT.put(np.dtype(np.float32), False)
    assert dense.choose_dense(np, x, w, None, current()).impl.name == "gemm"
    assert matmul.choose_matmul(np, x, w.T).impl.name == "blas"


def test_explain_names_row_blocks_in_a_compiled_layer(guard):
    _cuts_exact(np.float32)
    la.set_num_threads(2)
    net = B.Dense(256, in_units=300)
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(3).standard_normal((600, 300)).astype(np.float32))
    y2 = net(x).asnumpy()
    assert "dense[row_blocks]" in str(net.explain(x))
    la.set_num_threads(1)
    assert np.array_equal(net(x).asnumpy(), y2)  # (one thread: gemm, the same bits)
