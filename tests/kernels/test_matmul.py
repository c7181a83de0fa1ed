"""matmul's implementations (``kernels/matmul.py``): ``one_blas_thread`` holds BLAS at one thread
for products too small to share when several threads are set, and computes the reference's values;
the chooser names it, ``explain()`` and ``la.profile()`` show it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.caches import NamedCache
from lazyarray.kernels import blas_rows, blas_threads
from lazyarray.kernels import matmul as kmatmul
from lazyarray.ops import registry

RNG = np.random.default_rng(0)
REFERENCE = registry.get("matmul").kernel

# (a shape, b shape): a mid-size product (2 MFLOP, Swin's batch-8 block), stacks, vectors, empty dims
SHAPES = [((8, 64, 32), (32, 64)), ((512, 32), (32, 64)), ((4, 2, 65, 16), (4, 2, 16, 65)),
          ((2, 300, 40), (1, 40, 50)), ((64,), (64, 300)), ((300, 64), (64,)), ((0, 64, 32), (32, 64)),
          ((8, 64, 0), (0, 64))]


def _pair(sa, sb, dtype):
    return RNG.standard_normal(sa).astype(dtype), RNG.standard_normal(sb).astype(dtype)


def _reference_as(impl, a, b):
    """The reference's values as ``impl`` computes them: ``one_blas_thread`` is the reference's call
    with BLAS held at one thread, and some BLAS builds round a product differently on one thread and
    on several (OpenBLAS 0.3.31's Haswell kernels on an AMD EPYC split the sums of (512, 32) @ (32, 64)
    in float32 by thread), so its values are the reference's at one BLAS thread (``small_calls_threaded``
    pins the probe that decides whether it switches at all)."""
    if impl not in (kmatmul.ONE_BLAS_THREAD, kmatmul.ROW_BLOCKS):  # (row_blocks: one BLAS thread's values)
        return REFERENCE(np, a, b)
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1, "blas"):
        return REFERENCE(np, a, b)


@pytest.fixture
def small_calls_threaded(monkeypatch):
    """``blas_threads.small_calls_serial`` answering False (as the probe finds on a quiet machine here),
    so ``one_blas_thread`` holds every product it takes at one thread, whatever the probe saw under load."""
    answer = NamedCache("test probe", 1)
    answer.put(None, False)
    monkeypatch.setattr(blas_threads, "PROBE", answer)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", SHAPES, ids=[f"{a}@{b}" for a, b in SHAPES])
def test_every_implementation_equals_the_reference(sa, sb, dtype, two_threads, small_calls_threaded):
    a, b = _pair(sa, sb, dtype)
    for impl in kmatmul.IMPLS:
        np.testing.assert_array_equal(impl.run(np, a, b), _reference_as(impl, a, b))
    view = np.asfortranarray(a)[..., ::1]  # another memory order
    chosen = kernels.choose("matmul", np, view, b).impl
    np.testing.assert_array_equal(kmatmul.run_matmul(np, view, b), _reference_as(chosen, view, b))
    want = _reference_as(kernels.choose("matmul", np, a, b).impl, a, b)
    out = np.full(want.shape, np.nan, dtype)
    assert kmatmul.run_matmul(np, a, b, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_the_chooser_holds_mid_size_products_on_one_thread_only_where_threads_are_set(two_threads):
    a, b = _pair((8, 64, 32), (32, 64), np.float32)  # 2 MFLOP: OpenBLAS would split it
    assert kernels.choose("matmul", np, a, b).impl is kmatmul.ONE_BLAS_THREAD
    small = _pair((8, 8), (8, 8), np.float32)
    big = _pair((512, 512), (512, 512), np.float32)  # 268 MFLOP: worth both threads
    assert kernels.choose("matmul", np, *small).impl is kmatmul.BLAS
    assert kernels.choose("matmul", np, *big).impl is kmatmul.BLAS  # (row blocks off by default)
    with la.tuning(blas_row_blocks=True):
        want = kmatmul.ROW_BLOCKS if blas_rows.exact(np.dtype(np.float32)) else kmatmul.BLAS
        assert kernels.choose("matmul", np, *big).impl is want  # (kernels/blas_rows.py: where its cuts keep the bits)
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


def test_explain_and_profile_name_it(two_threads, small_calls_threaded):
    class Net(la.blocks.HybridBlock):
        def forward(self, x, w):
            return la.matmul(x, w)

    net = Net()
    net.hybridize()
    a, b = _pair((8, 64, 32), (32, 64), np.float32)
    xa, wa = la.array(a), la.array(b)
    np.testing.assert_array_equal(net(xa, wa).asnumpy(), _reference_as(kmatmul.ONE_BLAS_THREAD, a, b))
    assert "matmul[one_blas_thread]" in str(net.explain(xa, wa))
    with la.profile() as prof:
        net(xa, wa)
    assert [e.impl for e in prof.events if e.name.endswith("matmul")] == ["one_blas_thread"]


@pytest.fixture(params=[True, False], ids=["small-calls-serial", "small-calls-threaded"])
def probe(request, monkeypatch):
    """What ``blas_threads.small_calls_serial`` found (set here: both answers on any machine)."""
    answer = NamedCache("test probe", 1)
    answer.put(None, request.param)
    monkeypatch.setattr(blas_threads, "PROBE", answer)
    return request.param


def test_a_product_blas_runs_on_one_thread_anyway_is_left_alone(two_threads, probe):
    """The MLP backward's (64, 10) @ (10, 512) (0.66 MFLOP, 0.33 M multiply-adds in one call): in
    float32 OpenBLAS's small-matrix kernels run it on one thread whatever the setting, so where the
    probe saw that, ``blas`` runs it with no switch; float64, or where small calls were seen shared,
    it is held at one thread."""
    a, b = _pair((64, 10), (10, 512), np.float32)
    assert kernels.choose("matmul", np, a, b).impl is (kmatmul.BLAS if probe else kmatmul.ONE_BLAS_THREAD)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert kernels.choose("matmul", np, a64, b64).impl is kmatmul.ONE_BLAS_THREAD
    big = _pair((64, 100), (100, 200), np.float32)  # 1.28 M multiply-adds: over SMALL_PRODUCT
    assert kernels.choose("matmul", np, *big).impl is kmatmul.ONE_BLAS_THREAD


@pytest.mark.parametrize("sa,sb", [((1024, 10), (10, 512)), ((10, 1024), (1024, 512)), ((64, 784), (784, 128))])
def test_products_of_max_flops_and_more_share_blas_threads(two_threads, sa, sb):
    """The MLP backward's 10.5 MFLOP products at batch 1024 (and a 12.8 MFLOP dense-like one) run on
    both threads, as before ``one_blas_thread`` existed: they took about 0.6x their one-thread time."""
    a, b = _pair(sa, sb, np.float32)
    assert 2 * sa[0] * sa[1] * sb[1] >= kmatmul.MAX_FLOPS
    assert kernels.choose("matmul", np, a, b).impl is kmatmul.BLAS


def _mlp_training_step(batch):
    """benchmarks/training_loop.py's step: a hybridized MLP, the loss, backward, the trainer."""
    B = la.blocks
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu", in_units=784), B.Dense(512, activation="relu", in_units=512),
            B.Dense(10, in_units=512))
    net.initialize()
    net.hybridize()
    loss_fn = B.SoftmaxCrossEntropyLoss()
    trainer = B.Trainer(net.collect_params(), B.SGD(learning_rate=0.01))
    x = la.array(RNG.standard_normal((batch, 784)).astype("float32"))
    y = la.array(RNG.integers(0, 10, batch))

    def step():
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    return step


@pytest.mark.parametrize("batch", [64, 1024])
def test_the_mlp_training_step_runs_what_it_should(two_threads, probe, batch):
    """The paths of the MLP training step (issue #34: the step was 8% slower than at b166d05): at
    batch 64 both dense + relu layers of the forward run ``units_major`` (their values stored
    (units, rows)), and the backward's two small products run ``blas`` where small float32 calls
    stay on one thread (no switch of BLAS's threads); at batch 1024 they are 10.5 MFLOP and share
    both threads; the large products run ``blas`` (``row_blocks`` is off by default)."""
    step = _mlp_training_step(batch)
    step()
    step()  # (the first run of each program takes the NumPy kernels: jit.first_run; compiled ones load here)
    with la.profile() as prof:
        step()
    compiled = [e for e in prof.events if e.where == "compiled"]
    dense = "units_major" if batch == 64 else "gemm"
    assert [e.impl for e in compiled if e.name == "nn.dense+relu"] == [dense] * 2
    small = {((batch, 10), (10, 512)), ((10, batch), (batch, 512))}
    products = {e.shapes: e.impl for e in compiled if e.name == "matmul"}
    assert set(products) >= small and len(products) == 5
    for shapes, impl in products.items():
        assert impl == ("one_blas_thread" if shapes in small and batch == 64 and not probe else "blas"), shapes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_stack_times_a_matrix_binds_where_its_memory_order_cannot_decide(dtype):
    """On one thread a stack times a matrix is ``blas`` whatever the stack's memory order: its step
    binds that choice (``bind_matmul``). With several threads set it binds where the shapes decide
    (a small float product, a float64 one: ``order_decides``) and keeps the per-call runner only for
    a float32 stack whose size puts its largest BLAS call's memory order in the choice. The bound
    call's values are the reference's (C-ordered and strided stacks, an empty stack)."""
    la.set_num_threads(1)
    stacks = (_pair((2, 5, 8), (8, 3), dtype)[0], _pair((5, 2, 8), (8, 3), dtype)[0].transpose(1, 0, 2),
              np.zeros((2, 0, 8), dtype))
    b = _pair((2, 5, 8), (8, 3), dtype)[1]
    for a in stacks:
        bound = kmatmul.bind_matmul(np, a, b)
        assert bound is not None and bound.choice.impl.name == "blas"
        np.testing.assert_array_equal(bound.fn(a, b), REFERENCE(np, a, b))
    mid_a, mid_b = _pair((2, 256, 64), (64, 64), dtype)  # (4.2 MFLOP: between SERIAL_ANYWAY and MAX_FLOPS)
    try:
        la.set_num_threads(2)
        for a in stacks:
            bound = kmatmul.bind_matmul(np, a, b)
            assert bound is not None and bound.choice is kmatmul.choose_matmul(np, a, b)
            np.testing.assert_array_equal(bound.fn(a, b), REFERENCE(np, a, b))
        for a in (mid_a, np.ascontiguousarray(mid_a.transpose(1, 0, 2)).transpose(1, 0, 2)):
            bound = kmatmul.bind_matmul(np, a, mid_b)
            if dtype == "float32":
                assert bound is None
            else:
                assert bound.choice is kmatmul.choose_matmul(np, a, mid_b)
    finally:
        la.set_num_threads(1)
