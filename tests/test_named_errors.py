"""Calls that returned silently, wrote NaN, or failed with a bare builtin (AttributeError, ValueError,
MemoryError, ...) raise lazyarray's named errors, with messages that name the function, the bad
value and the fix."""
from __future__ import annotations

import math
import os
import re
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.distributed import pieces, worker


@pytest.fixture
def x2():
    return la.ones((2, 3))


# -- moveaxis: axes out of range or repeated (NumPy raises AxisError; % ndim wrapped them) ---------
@pytest.mark.parametrize("source,destination,match", [
    (0, 2, "destination axis 2 is out of range for an array of 2 dims"),
    (-3, 0, "source axis -3 is out of range"),
    ((0, 1), (1, 1), r"destination \(1, 1\) repeats an axis"),
    ((0, 0), (0, 1), r"source \(0, 0\) repeats an axis"),
    ((0, 1), (1,), "the same number of axes"),
    (0.5, 0, "source must be an int or a sequence of ints"),
])
def test_moveaxis_checks_its_axes(x2, source, destination, match):
    with pytest.raises(la.AxisError, match=match):
        la.moveaxis(x2, source, destination)
    with pytest.raises((ValueError, TypeError)):
        np.moveaxis(np.ones((2, 3)), source, destination)  # (the NumPy behaviour it mirrors)


def test_moveaxis_still_moves():
    a = np.arange(24.0).reshape(2, 3, 4)
    for s, d in [(0, 2), (-1, 0), ((0, 1), (2, 0)), (np.int64(1), -1)]:
        np.testing.assert_array_equal(la.moveaxis(la.asarray(a), s, d).asnumpy(), np.moveaxis(a, s, d))


# -- Trainer.step(batch_size): NaN reached every weight, 0 was a ZeroDivisionError -----------------
@pytest.mark.parametrize("batch_size,error", [
    (math.nan, la.ParamValueError), (0, la.ParamValueError), (-4, la.ParamValueError),
    (math.inf, la.ParamValueError), (1e-320, la.ParamValueError), (np.float32("nan"), la.ParamValueError),
    ("4", la.ParamError), (None, la.ParamError), (True, la.ParamError),
])
def test_trainer_step_needs_a_finite_positive_batch_size(batch_size, error):
    net = B.Dense(2, in_units=3)
    net.initialize()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    before = {n: p.data().asnumpy().copy() for n, p in net.collect_params().items()}
    for _ in range(2):  # the second step takes the planned path (trainer._plan)
        with la.autograd.record():
            loss = B.L2Loss()(net(la.ones((4, 3))), la.zeros((4, 2)))
        loss.backward()
        with pytest.raises(error, match="Trainer.step: batch_size must be"):
            trainer.step(batch_size)
        for n, p in net.collect_params().items():
            np.testing.assert_array_equal(p.data().asnumpy(), before[n])
        trainer.step(4)
        before = {n: p.data().asnumpy().copy() for n, p in net.collect_params().items()}
        assert all(np.isfinite(v).all() for v in before.values())
    assert trainer._plan is not None
    with la.autograd.record():
        loss = B.L2Loss()(net(la.ones((4, 3))), la.zeros((4, 2)))
    loss.backward()
    with pytest.raises(error):
        trainer.step(batch_size)  # refused on the planned path too
    trainer.step(np.int64(4))


# -- bare TypeError / ValueError / AttributeError before --------------------------------------------
@pytest.mark.parametrize("call,error,match", [
    (lambda x: la.repeat(x, 2.5, axis=0), la.ParamError, r"repeats must be an int.*got 2.5; round"),
    (lambda x: la.repeat(x, [1, 2.0], axis=0), la.ParamError, "repeats must be an int"),
    (lambda x: la.repeat(x, "2", axis=0), la.ParamError, "repeats must be an int"),
    (lambda x: la.tensordot(x, x, axes=3), la.AxisError, "axes=3 contracts 3 axes.*pass at most 2"),
    (lambda x: la.tensordot(x, x, axes=-1), la.ParamValueError, "axes must be >= 0"),
    (lambda x: la.tensordot(x, x, axes=([0], [5])), la.AxisError, "axis 5 is out of range for x2"),
    (lambda x: la.tensordot(x, x, axes=([0, 0], [0, 1])), la.AxisError, "repeat an axis of x1"),
    (lambda x: la.tensordot(x, x, axes=([0], [0, 1])), la.AxisError, "name 1 axes of x1 but 2 of x2"),
    (lambda x: la.tensordot(x, x, axes="ab"), la.ParamError, "axes must be an int or a pair"),
    (lambda x: la.tensordot(x, x, axes=([0], [1])), la.ShapeError, "differ in size"),
    (lambda x: la.set_num_threads(0), la.ParamValueError, "set_num_threads: n must be >= 1"),
    (lambda x: la.set_num_threads(2.5), la.ParamError, "set_num_threads: n must be an int"),
    (lambda x: la.set_num_threads("2"), la.ParamError, "set_num_threads: n must be an int"),
    (lambda x: la.compute("x"), la.ParamError, "compute: argument 0 is str 'x'"),
    (lambda x: la.compute(x, [x]), la.ParamError, r"compute: argument 1 is list.*la.compute\(\*arrays\)"),
    (lambda x: la.from_dlpack(3), la.ParamError, "from_dlpack: int 3 is not a DLPack producer"),
    (lambda x: la.ones(3, device=3), la.DeviceError, "device must be a device such as la.cpu"),
    (lambda x: la.ones(3, device="tpu"), la.DeviceError, "device 'tpu'"),
    (lambda x: -la.array([True, False]), la.DTypeError, r"negative: not defined for dtypes \(bool\).*`~`"),
    (lambda x: la.negative(la.array([True])), la.DTypeError, "negative: not defined for dtypes"),
])
def test_named_errors(x2, call, error, match):
    with pytest.raises(error, match=match):
        call(x2)


def test_the_good_forms_still_work(x2):
    assert la.repeat(x2, np.int64(2), axis=0).shape == (4, 3)
    assert la.repeat(x2, np.array([1, 2]), axis=0).shape == (3, 3)
    assert la.repeat(x2, la.asarray([1, 2]), axis=0).shape == (3, 3)
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    for axes in (0, 1, ([1], [0]), (1, 0), ([-1], [0])):
        np.testing.assert_allclose(la.tensordot(la.asarray(a), la.asarray(b), axes=axes).asnumpy(),
                                   np.tensordot(a, b, axes=axes))
    np.testing.assert_allclose(la.tensordot(la.asarray(a), la.asarray(a), axes=2).asnumpy(), np.tensordot(a, a, 2))
    la.set_num_threads(np.int64(1))
    np.testing.assert_array_equal((-la.array([1.0, -2.0])).asnumpy(), [-1.0, 2.0])
    with la.deferred():  # deferred compute named the bool negation already; eager now says the same
        with pytest.raises(la.DTypeError, match=r"negative: not defined for dtypes \(bool\)"):
            -la.array([True])


def test_cached_op_cache_size_is_a_named_error():
    x = la.ones((2,))
    with la.deferred():
        y = x * 2
    sym = la.get_symbol(y, inputs={"x": x})
    with pytest.raises(la.ParamValueError, match="CachedOp: cache_size must be a positive int.*got 0"):
        la.CachedOp(sym, cache_size=0)
    with pytest.raises(la.ParamError, match="got True"):
        la.CachedOp(sym, cache_size=True)
    assert la.CachedOp(sym, cache_size=2)(x).asnumpy().tolist() == [2.0, 2.0]


# -- string devices ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,device", [("cpu", la.cpu(0)), ("cpu(1)", la.cpu(1)), (" cpu(2) ", la.cpu(2))])
def test_a_cpu_device_may_be_given_as_a_string(text, device):
    assert la.ones(3, device=text).device is device
    assert la.zeros((2,), device=text).device is device
    assert la.array([1.0], device=text).device is device


@pytest.mark.skipif(la.gpu_available(), reason="checks the error without a usable GPU")
@pytest.mark.parametrize("text", ["gpu", "gpu(0)"])
def test_a_gpu_string_without_a_gpu_is_a_device_error(text):
    with pytest.raises(la.DeviceError, match=rf"device '{re.escape(text)}'.*la.cpu\(\)"):
        la.ones(3, device=text)


@pytest.mark.skipif(not la.gpu_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("text", ["gpu", "gpu(0)"])
def test_a_gpu_string_makes_a_gpu_array(text):
    a = la.ones(3, device=text)
    assert a.device == la.gpu(0) and a.asnumpy().tolist() == [1.0, 1.0, 1.0]


# -- blocks called with None -----------------------------------------------------------------------
@pytest.mark.parametrize("make,match", [
    (lambda: B.Dense(3), r"Dense: the input must be an array \(its shape sets the unknown dims of weight\), got None"),
    (lambda: B.Dense(3, in_units=2), "Dense: the input must be an array, got NoneType None"),
    (lambda: B.Conv2D(3, 3), "Conv2D: the input must be an array"),
])
@pytest.mark.parametrize("hybridize", [False, True])
def test_a_block_called_with_none_is_a_param_error(make, match, hybridize):
    net = make()
    net.initialize()
    if hybridize:
        net.hybridize()
    with pytest.raises(la.ParamError, match=match):
        net(None)


# -- a parameter larger than memory --------------------------------------------------------------------
def test_a_parameter_larger_than_memory_is_an_out_of_memory_error():
    with pytest.raises(la.OutOfMemoryError, match=r"Parameter 'weight': value float32\[1099511627776,2\] needs "
                       r"8796093022208 bytes \(8 TiB\)"):
        B.Dense(2**40, in_units=2, use_bias=False).initialize()
    net = B.Dense(2**40, use_bias=False)
    net.initialize()  # (the shape is known at the first call)
    with pytest.raises(la.OutOfMemoryError, match="Parameter 'weight'"):
        net(la.ones((1, 2)))
    with pytest.raises(la.OutOfMemoryError, match=r"Normal\(sigma=0.01\): value float32"):
        la.init.Normal()((2**40, 2))


# -- softmax cross-entropy: a label of -1 picked the last class ------------------------------------
@pytest.mark.parametrize("label", [-1, 3, -4])
@pytest.mark.parametrize("call", [
    lambda z, y: la.nn.softmax_cross_entropy(z, y),
    lambda z, y: la.nn.softmax_cross_entropy_rows(z, y),
    lambda z, y: B.SoftmaxCrossEntropyLoss()(z, y),  # (compiled: the loss hybridizes itself)
])
def test_a_label_outside_the_classes_is_a_named_error(call, label):
    z, y = la.zeros((2, 3)), la.array(np.array([0, label]))
    with pytest.raises(la.OpIndexError, match=rf"label {label} is outside \[0, 3\).*negative labels do not count"):
        call(z, y).asnumpy()


def test_a_negative_label_is_refused_in_a_compiled_training_step():
    net = B.Dense(3, in_units=2)
    net.initialize()
    net.hybridize()
    loss_fn = B.SoftmaxCrossEntropyLoss()
    with pytest.raises(la.OpIndexError, match=r"label -1 is outside \[0, 3\)"):
        with la.autograd.record():
            loss = loss_fn(net(la.ones((2, 2))), la.array(np.array([2, -1])))
        loss.backward()
    with la.autograd.record():
        loss = loss_fn(net(la.ones((2, 2))), la.array(np.array([2, 0])))
    loss.backward()
    assert np.isfinite(loss.asnumpy()).all()


# -- a distributed region given names that are not its inputs: a bare KeyError before --------------
@pytest.mark.parametrize("names", [("x",), ("in0", "zz"), ()])
def test_a_region_given_other_names_lists_its_inputs(names):
    x = la.sym.var("x", shape=(6, 4))
    ann = la.sym.sum(la.sym.exp(x) * 2.0, axis=0).infer_sbp(pieces=2, x=la.sbp.split(0))
    region = next(item for kind, item in pieces.regions(ann) if kind == "region")
    arrays = [np.ones((3, 4), np.float32)] * len(names)
    with pytest.raises(la.GraphError, match=r"a region's inputs are 'in0', got shapes for .*name the pieces"):
        worker.run_region(region.symbol.to_json(), names, *arrays)
    with pytest.raises(la.GraphError, match="a region's inputs are 'in0'"):
        pieces.localize(region.symbol, {n: (3, 4) for n in names})
    assert worker.run_region(region.symbol.to_json(), ("in0",), *[np.ones((3, 4), np.float32)])[0].shape == (4,)


# -- la.foreach over 0-d data: a bare IndexError eagerly ---------------------------------------------
@pytest.mark.parametrize("deferred", [False, True])
def test_foreach_over_0d_data_is_a_shape_error(deferred):
    def scan():
        return la.foreach(lambda x, s: (s + x, s + x), la.array(1.0), la.array(0.0))
    with pytest.raises(la.ShapeError, match=r"la.foreach: data is 0-d \(float32\[\]\), but foreach scans axis 0 "
                       "and needs data of at least 1 dim; pass x.reshape"):
        if deferred:
            with la.deferred():
                scan()
        else:
            scan()
    with pytest.raises(la.ShapeError, match=r"data\[1\] is 0-d"):
        la.foreach(lambda x, s: (s, s), [la.ones(2), la.array(1.0)], la.array(0.0))


# -- a sized op run after the allocation limit was lowered: the memoized rules did not check again ----
@pytest.mark.parametrize("make,match", [
    (lambda: la.sym.fill(shape=(1000, 1000), value=1.0, dtype="float32"),
     r"fill: result float32\[1000,1000\] needs 4000000 bytes .*allocation limit of 1000 bytes"),
    (lambda: la.sym.iota(bounds=(0, 10**6, 1)), r"iota: result int64\[1000000\] needs 8000000 bytes"),
    (lambda: la.sym.iota(bounds=(10, -10**6, -3)), r"iota: result int64\[333337\] needs"),
])
def test_a_sized_op_checks_the_allocation_limit_when_it_runs(make, match, monkeypatch):
    op = la.CachedOp(make())
    op()
    monkeypatch.setattr(la.config, "max_alloc_bytes", 1000)
    with pytest.raises(la.OutOfMemoryError, match=match):
        op()
    with pytest.raises(la.OutOfMemoryError, match=match):
        la.CachedOp(make())()  # compiled anew: the rules' answer was memoized before the limit changed
    monkeypatch.setattr(la.config, "max_alloc_bytes", None)
    assert op().size >= 10**5


# -- every file loader refuses what is not a regular file (the CLI checked; direct calls did not) -------
def _load_block(path, tmp_path):
    prefix = str(tmp_path / "blk")
    os.symlink(path, prefix + "-model.json")  # (Block.load reads <prefix>-model.json)
    B.Dense(2, in_units=2).load(prefix)


_LOADERS = {
    "la.mxnet.read_json": lambda p, tmp: la.mxnet.read_json(p),
    "la.mxnet.load_params": lambda p, tmp: la.mxnet.load_params(p),
    "Block.load_parameters": lambda p, tmp: B.Dense(2, in_units=2).load_parameters(p),
    "la.Symbol.load": lambda p, tmp: la.Symbol.load(p),
    "Block.load": _load_block,
}


def _special_file(kind, tmp_path) -> str:
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(tmp_path / "pipe")
        return str(tmp_path / "pipe")
    if kind == "dir":
        os.mkdir(tmp_path / "folder")
        return str(tmp_path / "folder")
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    return "/dev/zero"


@pytest.mark.parametrize("kind,said", [("fifo", "a FIFO"), ("/dev/zero", "a character device"), ("dir", "a directory")])
@pytest.mark.parametrize("loader", list(_LOADERS))
def test_file_loaders_refuse_what_is_not_a_regular_file(loader, kind, said, tmp_path):
    """Refused before opening (a FIFO blocks the open, /dev/zero never ends). Run in a thread that the
    test unblocks, so a loader that opened the FIFO fails the test instead of hanging it."""
    path = _special_file(kind, tmp_path)
    raised: list = []

    def call():
        try:
            _LOADERS[loader](path, tmp_path)
        except BaseException as exc:  # noqa: BLE001 (handed to the test thread)
            raised.append(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive() and kind == "fifo":  # it opened the FIFO: a writer that closes at once ends the read
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join(5)
        pytest.fail(f"{loader} opened a FIFO")
    assert len(raised) == 1
    assert isinstance(raised[0], la.GraphFormatError), repr(raised[0])
    assert re.search(rf"^cannot read [^:]*: it is {said}[^:]*, not a regular file", str(raised[0])), str(raised[0])
