"""matmul's implementations (``kernels/matmul.py``): ``one_blas_thread`` holds BLAS at one thread
for products too small to share when several threads are set, and computes the reference's values;
the chooser names it, ``explain()`` and ``la.profile()`` show it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels, threads
from lazyarray.kernels import matmul as kmatmul
from lazyarray.ops import registry

RNG = np.random.default_rng(0)
REFERENCE = registry.get("matmul").kernel

# (a shape, b shape): a mid-size product (2 MFLOP, Swin's batch-8 block), stacks, vectors, empty dims
SHAPES = [((8, 64, 32), (32, 64)), ((512, 32), (32, 64)), ((4, 2, 65, 16), (4, 2, 16, 65)),
          ((2, 300, 40), (1, 40, 50)), ((64,), (64, 300)), ((300, 64), (64,)), ((0, 64, 32), (32, 64)),
          ((8, 64, 0), (0, 64))]


@pytest.fixture
def two_threads():
    before = threads.num_threads()
    la.set_num_threads(2)
    yield
    la.set_num_threads(before)


def _pair(sa, sb, dtype):
    return RNG.standard_normal(sa).astype(dtype), RNG.standard_normal(sb).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", SHAPES, ids=[f"{a}@{b}" for a, b in SHAPES])
def test_every_implementation_equals_the_reference(sa, sb, dtype, two_threads):
    a, b = _pair(sa, sb, dtype)
    want = REFERENCE(np, a, b)
    for impl in kmatmul.IMPLS:
        np.testing.assert_array_equal(impl.run(np, a, b), want)
    view = np.asfortranarray(a)[..., ::1]  # another memory order
    np.testing.assert_array_equal(kmatmul.run_matmul(np, view, b), REFERENCE(np, view, b))
    out = np.full(want.shape, np.nan, dtype)
    assert kmatmul.run_matmul(np, a, b, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_the_chooser_holds_mid_size_products_on_one_thread_only_where_threads_are_set(two_threads):
    a, b = _pair((8, 64, 32), (32, 64), np.float32)  # 2 MFLOP: OpenBLAS would split it
    assert kernels.choose("matmul", np, a, b).impl is kmatmul.ONE_BLAS_THREAD
    small = _pair((8, 8), (8, 8), np.float32)
    big = _pair((512, 512), (512, 512), np.float32)  # 268 MFLOP: worth both threads
    assert kernels.choose("matmul", np, *small).impl is kmatmul.BLAS
    assert kernels.choose("matmul", np, *big).impl is kmatmul.BLAS
    assert kernels.choose("matmul", np, a.astype(np.int64), b.astype(np.int64)).impl is kmatmul.BLAS
    la.set_num_threads(1)
    assert kernels.choose("matmul", np, a, b).impl is kmatmul.BLAS


def test_the_product_runs_with_blas_on_one_thread(two_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    seen = []

    class Spy(np.ndarray):
        def __array_ufunc__(self, ufunc, method, *inputs, **kw):
            seen.append(max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))
            return super().__array_ufunc__(ufunc, method, *(np.asarray(x) for x in inputs), **kw)

    a, b = _pair((8, 64, 32), (32, 64), np.float64)
    kmatmul.ONE_BLAS_THREAD.run(np, a.view(Spy), b)
    assert seen == [1]
    seen.clear()
    kmatmul.BLAS.run(np, a.view(Spy), b)
    assert seen == [2]


def test_explain_and_profile_name_it(two_threads):
    class Net(la.blocks.HybridBlock):
        def forward(self, x, w):
            return la.matmul(x, w)

    net = Net()
    net.hybridize()
    a, b = _pair((8, 64, 32), (32, 64), np.float32)
    xa, wa = la.array(a), la.array(b)
    np.testing.assert_array_equal(net(xa, wa).asnumpy(), REFERENCE(np, a, b))
    assert "matmul[one_blas_thread]" in str(net.explain(xa, wa))
    with la.profile() as prof:
        net(xa, wa)
    assert [e.impl for e in prof.events if e.name.endswith("matmul")] == ["one_blas_thread"]
