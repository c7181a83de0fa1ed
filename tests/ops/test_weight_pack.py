"""Packed dense weights (ops/weight_pack.py): used only while provably equal to ``weight.T``."""
import gc

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import tuning_table
from lazyarray.ops import derived, weight_pack


@pytest.fixture(autouse=True)
def fresh_table():
    weight_pack.clear()
    yield
    weight_pack.clear()


def _mlp(units=64):
    net = B.HybridSequential()
    net.add(B.Dense(units, activation="relu"), B.Dense(10))
    net.initialize()
    net.hybridize()
    return net


def _by_hand(net, x):
    w1, b1, w2, b2 = [p.data().asnumpy() for p in net.collect_params().values()]
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def _x(rows, k=128, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, k)).astype("float32")


def test_packs_at_the_second_call_of_an_unchanged_weight():
    w = np.random.default_rng(1).standard_normal((64, 128)).astype("float32")
    assert weight_pack.transposed(w, 8).base is w  # first call: the view
    assert weight_pack.packed_count() == 0
    p = weight_pack.transposed(w, 8)
    assert p.base is None and p.flags.c_contiguous and not p.flags.writeable
    np.testing.assert_array_equal(p, w.T)
    assert weight_pack.packed_count() == 1 and weight_pack.packed_bytes() == w.nbytes
    assert weight_pack.transposed(w, 8) is p  # the same copy while unchanged


@pytest.mark.parametrize("rows,units", [(1, 64), (8, 10)])
def test_no_pack_where_the_view_is_as_fast(rows, units):
    w = np.ones((units, 512), "float32")
    for _ in range(3):
        assert weight_pack.transposed(w, rows).base is w
    assert weight_pack.packed_count() == 0


def test_views_and_foreign_arrays_are_never_packed():
    owner = np.ones((64, 256), "float32")
    view = owner[:, :128]
    for _ in range(3):
        assert weight_pack.transposed(view, 8).base is not None
    assert weight_pack.packed_count() == 0


@pytest.mark.parametrize("rows", [1, 2, 64])
def test_dense_equals_numpy_with_packed_weights(rows):
    net = _mlp()
    x = _x(rows)
    for _ in range(3):
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    assert weight_pack.packed_count() == (1 if rows >= 2 else 0)  # the 10-unit head stays a view


def test_dense_of_a_stack_packs_by_its_rows():
    x = np.random.default_rng(2).standard_normal((3, 50, 80)).astype("float32")  # (not lean: 150 rows)
    w = la.array(np.random.default_rng(3).standard_normal((64, 80)).astype("float32"))
    for _ in range(3):
        np.testing.assert_allclose(la.nn.dense(la.array(x), w).asnumpy(), x @ w.asnumpy().T, rtol=1e-5, atol=1e-5)
    assert weight_pack.packed_count() == 1


def _packed_then(net, x, change):
    """Call twice (the first layer packs), change the weights, and check the next call uses them."""
    for _ in range(2):
        net(la.array(x))
    assert weight_pack.packed_count() == 1
    before = net(la.array(x)).asnumpy()
    change()
    after = net(la.array(x)).asnumpy()
    assert weight_pack.packed_count() == 0  # the stale copy is dropped at the first call after the write
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, _by_hand(net, x), rtol=1e-5, atol=1e-5)
    net(la.array(x))
    assert weight_pack.packed_count() == 1  # and packed again once the weight holds still
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)


def test_an_in_place_write_is_seen_by_the_next_call():
    net = _mlp()

    def write():
        w = net[0].weight.data()
        w[:] = w * 2

    _packed_then(net, _x(8), write)


def test_set_data_is_seen_by_the_next_call():
    net = _mlp()
    p = net[0].weight
    _packed_then(net, _x(8), lambda: p.set_data(p.data().asnumpy() + 1))


@pytest.mark.parametrize("alias", ["asarray", "dlpack"])
def test_writes_through_a_numpy_or_dlpack_alias_are_seen(alias):
    """np.asarray(w) and a DLPack export share the live buffer, and writes through them bump no
    version: the weight counts as exposed and runs through the view from then on."""
    net = _mlp()
    x = _x(8)
    for _ in range(2):
        net(la.array(x))
    assert weight_pack.packed_count() == 1
    w = net[0].weight.data()
    view = np.asarray(w) if alias == "asarray" else np.from_dlpack(w)
    view *= 3  # NumPy's in-place write: lazyarray never hears of it
    for _ in range(3):
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    assert np.shares_memory(view, np.asarray(w))


def test_copies_handed_out_do_not_expose_the_weight():
    net = _mlp()
    x = _x(8)
    net(la.array(x))  # (shapes are known at the first call)
    w = net[0].weight.data()
    w.asnumpy()
    np.array(w, dtype="float64")
    np.array(w, copy=True)
    for _ in range(3):
        net(la.array(x))
    assert weight_pack.packed_count() == 1


def test_a_trainer_step_is_seen_by_the_next_call():
    net = _mlp()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    x, y = _x(8), np.arange(8) % 10
    loss_fn = B.SoftmaxCrossEntropyLoss()

    def step():
        with la.autograd.record():
            loss = loss_fn(net(la.array(x)), la.array(y))
        loss.backward()
        trainer.step(8)

    _packed_then(net, x, step)


def test_weights_updated_every_call_are_never_packed():
    net = _mlp()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x, y = _x(8), np.arange(8) % 10
    loss_fn = B.SoftmaxCrossEntropyLoss()
    for _ in range(4):
        with la.autograd.record():
            loss = loss_fn(net(la.array(x)), la.array(y))
        loss.backward()
        trainer.step(8)
    assert weight_pack.packed_count() == 0


def test_weights_computed_in_the_graph_are_never_packed():
    """A weight computed by the graph lives in a planned buffer the program rewrites at every run
    without a version bump: it must never be packed, and every call must use its new value."""
    x, w0 = la.sym.var("x"), la.sym.var("w")
    op = la.CachedOp(la.sym.nn.dense(x, w0 * 2.0))
    xs = _x(8)
    for k in range(4):
        w = np.random.default_rng(k).standard_normal((64, 128)).astype("float32")
        np.testing.assert_allclose(op(la.array(xs), la.array(w)).asnumpy(), xs @ (2 * w).T, rtol=1e-5, atol=1e-5)
    assert weight_pack.packed_count() == 0


def test_outputs_of_a_compiled_graph_are_never_packed():
    """A program hands its outputs out of memory it reuses once nobody holds them: such an
    array is a view of that memory, never packed, and a rewritten one is read afresh."""
    a = la.sym.var("a")
    make = la.CachedOp(a * 2.0)
    x = la.sym.var("x")
    use = la.CachedOp(la.sym.nn.dense(x, la.sym.var("w")))
    xs = _x(8)
    for k in range(4):
        wn = np.random.default_rng(k).standard_normal((64, 128)).astype("float32")
        w = make(la.array(wn))
        np.testing.assert_allclose(use(la.array(xs), w).asnumpy(), xs @ (2 * wn).T, rtol=1e-5, atol=1e-5)
        del w
    assert weight_pack.packed_count() == 0


def test_the_entry_dies_with_its_weight():
    w = np.ones((64, 128), "float32")
    weight_pack.transposed(w, 8)
    weight_pack.transposed(w, 8)
    assert weight_pack.packed_count() == 1
    del w
    gc.collect()
    assert weight_pack.packed_count() == 0 and not derived._ENTRIES


def test_packing_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(la.config, "keep_weights", False)
    net = _mlp()
    x = _x(8)
    for _ in range(3):
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    assert weight_pack.packed_count() == 0


def test_matmul_by_a_transposed_weight_packs_the_weight_and_sees_its_writes():
    """``x @ w.T`` (written by hand, or an imported ONNX Gemm with transB) packs ``w`` itself."""
    xs = _x(8)
    w = la.array(np.random.default_rng(4).standard_normal((64, 128)).astype("float32"))
    for _ in range(3):
        np.testing.assert_allclose(la.matmul(la.array(xs), w.T).asnumpy(), xs @ w.asnumpy().T, rtol=1e-5, atol=1e-5)
    assert weight_pack.packed_count() == 1
    w[:] = w * 3
    np.testing.assert_allclose(la.matmul(la.array(xs), w.T).asnumpy(), xs @ w.asnumpy().T, rtol=1e-5, atol=1e-5)


def test_matmul_by_a_part_of_a_weight_is_never_packed():
    xs = _x(8)
    w = la.array(np.random.default_rng(5).standard_normal((64, 128)).astype("float32"))
    for _ in range(3):
        part = w[:32].T  # (128, 32), F-ordered and a view of w, but not all of w: not w.T
        assert part.asnumpy().flags.f_contiguous
        np.testing.assert_allclose(la.matmul(la.array(xs), part).asnumpy(), xs @ w.asnumpy()[:32].T,
                                   rtol=1e-5, atol=1e-5)
    assert weight_pack.packed_count() == 0


def test_the_copies_stay_within_the_budget(monkeypatch):
    a = np.ones((64, 128), "float32")
    b = np.ones((64, 128), "float32") * 2
    monkeypatch.setattr(la.config, "keep_weights_budget", a.nbytes + a.nbytes // 2)  # room for one copy
    for _ in range(3):
        np.testing.assert_array_equal(weight_pack.transposed(a, 8), a.T)
        np.testing.assert_array_equal(weight_pack.transposed(b, 8), b.T)
    assert weight_pack.packed_count() == 1 and weight_pack.packed_bytes() == a.nbytes
    del a
    gc.collect()  # the first weight dies with its copy: the budget has room for the second
    assert weight_pack.packed_bytes() == 0
    weight_pack.transposed(b, 8)
    assert weight_pack.packed_count() == 1 and weight_pack.packed_bytes() == b.nbytes


def test_a_bad_budget_is_named():
    with pytest.raises(ValueError, match="LAZYARRAY_PACK_BUDGET_MB"):
        tuning_table.from_environment({"LAZYARRAY_PACK_BUDGET_MB": "lots"})
    assert tuning_table.from_environment({"LAZYARRAY_PACK_BUDGET_MB": "1.5"}).keep_weights_budget == 3 << 19
