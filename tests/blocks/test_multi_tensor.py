"""Multi-tensor updates (``blocks/multi_tensor.py``): ``Trainer.step`` updating a whole group of
parameters in flat calls gives bit for bit the weights of the one-by-one update and of a NumPy
reference written op by op, over several steps, for every optimizer and setting."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks import multi_tensor
from lazyarray.lr_scheduler import FactorScheduler

SHAPES = [(5, 4), (4,), (3, 5), (3,), (2, 2, 3)]


class PerParamSGD(B.SGD):
    """Overrides ``update``: the trainer then updates parameter by parameter (the reference path)."""

    def update(self, *args, **kwargs):
        return super().update(*args, **kwargs)


class PerParamAdam(B.Adam):
    def update(self, *args, **kwargs):
        return super().update(*args, **kwargs)


def _params(dtypes=None, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k, shape in enumerate(SHAPES):
        dtype = "float32" if dtypes is None else dtypes[k % len(dtypes)]
        p = B.Parameter(f"p{k}", shape=shape, dtype=dtype)
        p.initialize()
        p.set_data(rng.standard_normal(shape).astype(dtype))
        out.append(p)
    return out


def _backward(params, step, skip=()):
    """Gradients ``2 * w * c`` with ``c`` drawn per step (the same for every copy of the setup)."""
    rng = np.random.default_rng(100 + step)
    with la.autograd.record():
        loss = None
        for k, p in enumerate(params):
            c = la.array(rng.standard_normal(p.shape).astype(p.dtype) * 3)
            if k in skip:
                continue
            term = (p.data() * p.data() * c).sum()
            loss = term if loss is None else loss + term
    loss.backward()


def _reference(kind, settings, w, g, state, step, rescale):
    """The update op by op in NumPy, as the per-parameter optimizer wrote it before multi-tensor."""
    t = w.dtype.type
    g = g * t(rescale)
    clip = settings.get("clip_gradient")
    if clip is not None:
        g = np.clip(g, -clip, clip, out=g)
    if settings.get("wd"):
        g += t(settings["wd"]) * w
    if kind == "sgd":
        lr = t(settings["learning_rate"])
        if not settings.get("momentum"):
            g *= lr
            w -= g
        else:  # torch's buffer: b = momentum * b + g; w -= lr * b
            state *= t(settings["momentum"])
            state += g
            w -= state * lr
        return
    b1, b2 = settings.get("beta1", 0.9), settings.get("beta2", 0.999)
    mean, var = state
    mean *= t(b1)
    mean += t(1 - b1) * g
    var *= t(b2)
    var += t(1 - b2) * g * g
    c2 = math.sqrt(1 - b2 ** step)  # (torch's bias correction of v folded into the rate and epsilon)
    denom = np.sqrt(var) + t(settings.get("epsilon", 1e-8) * c2)
    w -= (mean / denom) * t(settings["learning_rate"] * c2 / (1 - b1 ** step))


CASES = [
    ("sgd", {"learning_rate": 0.1}),
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
    ("sgd", {"learning_rate": 0.05, "momentum": 0.5, "wd": 0.01, "clip_gradient": 0.3}),
    ("adam", {"learning_rate": 0.01}),
    ("adam", {"learning_rate": 0.02, "beta1": 0.8, "beta2": 0.9, "wd": 0.02, "clip_gradient": 0.5}),
]


def _trainers(kind, settings, params, per_param):
    cls = {"sgd": (B.SGD, PerParamSGD), "adam": (B.Adam, PerParamAdam)}[kind][per_param]
    return B.Trainer(params, cls(**settings))


@pytest.mark.parametrize("kind,settings", CASES, ids=[f"{k}-{'-'.join(s)}" for k, s in CASES])
@pytest.mark.parametrize("dtypes", [None, ("float32", "float64", "float16")], ids=["float32", "mixed"])
@pytest.mark.parametrize("chunk", [None, 7], ids=["one-chunk", "chunks-of-7"])
@pytest.mark.parametrize("batch", [3, 64])  # 64: plain SGD folds the rate into the rescale (exact)
def test_flat_update_equals_per_parameter_and_numpy(kind, settings, dtypes, chunk, batch, monkeypatch):
    if chunk is not None:  # parameters cut across chunks, chunks holding pieces of several
        monkeypatch.setattr(multi_tensor, "CHUNK_ELEMENTS", chunk)
    flat, single = _params(dtypes), _params(dtypes)
    tf, ts = _trainers(kind, settings, flat, False), _trainers(kind, settings, single, True)
    ref = [p.data().asnumpy().copy() for p in flat]
    make = (lambda w: w * 0) if kind == "sgd" else (lambda w: (w * 0, w * 0))
    states = [make(w) for w in ref]
    for step in range(1, 5):
        _backward(flat, step)
        _backward(single, step)
        grads = [p.grad().asnumpy().copy() for p in flat]
        tf.step(batch)
        ts.step(batch)
        for w, g, s in zip(ref, grads, states):
            _reference(kind, settings, w, g, s, step, 1 / batch)
        for p, q, w in zip(flat, single, ref):
            np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())
            np.testing.assert_array_equal(p.data().asnumpy(), w)
    # one flat group per dtype, every parameter in one
    assert sorted(str(g.dtype) for g in tf._groups) == sorted({str(p.dtype) for p in flat})
    assert not tf._single and not ts._groups
    if chunk is not None:
        assert all(len(g.chunks) == -(-g.size // chunk) for g in tf._groups)


def test_states_are_views_of_one_flat_buffer_and_save_load_continues(tmp_path):
    settings = {"learning_rate": 0.01, "beta1": 0.8}
    a = _params()
    ta = B.Trainer(a, "adam", settings)
    for step in range(1, 3):
        _backward(a, step)
        ta.step(2)
    (group,) = ta._groups
    for p in a:
        mean, var = ta._states[id(p)]
        assert np.shares_memory(mean, group.state[0]) and np.shares_memory(var, group.state[1])
    ta.save_states(str(tmp_path / "t.states"))
    b = _params()
    for p, q in zip(a, b):
        q.set_data(p.data())
    tb = B.Trainer(b, "adam", settings)
    tb.load_states(str(tmp_path / "t.states"))
    for step in range(3, 6):
        _backward(a, step)
        _backward(b, step)
        ta.step(2)
        tb.step(2)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())
    assert np.shares_memory(tb._states[id(b[0])][0], tb._groups[0].state[0])


def test_skipped_frozen_and_sparse_parameters_match_the_per_parameter_path():
    """A parameter without a gradient this step (ignore_stale_grad), a frozen one (grad_req='null'),
    then a change of grad_req between steps (the layout is rebuilt, states carried over)."""
    flat, single = _params(), _params()
    for ps in (flat, single):
        ps[3].grad_req = "null"
    settings = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.1}
    tf, ts = _trainers("sgd", settings, flat, False), _trainers("sgd", settings, single, True)
    frozen = flat[3].data().asnumpy().copy()
    for step in range(1, 6):
        skip = (1,) if step in (2, 3) else ()
        if step == 4:
            for ps in (flat, single):
                ps[0].grad_req = "null"
        _backward(flat, step, skip)
        _backward(single, step, skip)
        tf.step(4, ignore_stale_grad=True)
        ts.step(4, ignore_stale_grad=True)
        for p, q in zip(flat, single):
            np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())
    np.testing.assert_array_equal(flat[3].data().asnumpy(), frozen)
    assert [p.name for p in tf._groups[0].params] == ["p1", "p2", "p4"]


def test_lr_schedule_and_shared_parameters():
    def net():
        la.random.seed(0)
        a = B.HybridSequential()
        a.add(B.Dense(4, in_units=3, activation="relu"), B.Dense(4, in_units=4))
        b = B.HybridSequential()
        b.add(B.Dense(4, in_units=3, activation="relu"), B.Dense(4, in_units=4))
        b.share_parameters(a.collect_params())
        a.initialize()
        b.initialize()
        return a, b

    (a1, b1), (a2, b2) = net(), net()
    for p, q in zip(a1.collect_params().values(), a2.collect_params().values()):
        q.set_data(p.data())
    params1 = list(a1.collect_params().values()) + list(b1.collect_params().values())
    params2 = list(a2.collect_params().values()) + list(b2.collect_params().values())
    t1 = B.Trainer(params1, B.SGD(momentum=0.9, lr_scheduler=FactorScheduler(1, 0.5, base_lr=0.2)))
    t2 = B.Trainer(params2, PerParamSGD(momentum=0.9, lr_scheduler=FactorScheduler(1, 0.5, base_lr=0.2)))
    assert len(t1._params) == 4  # shared parameters are updated once
    x = la.array(np.random.default_rng(1).standard_normal((6, 3)).astype("float32"))
    for _ in range(4):
        for a, b, t in ((a1, b1, t1), (a2, b2, t2)):
            with la.autograd.record():
                loss = (a(x) * b(x * 2)).sum()
            loss.backward()
            t.step(6)
    for p, q in zip(a1.collect_params().values(), a2.collect_params().values()):
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())


def test_parameters_on_several_devices_and_row_sparse_gradients():
    def model():
        la.random.seed(0)
        emb = B.Embedding(10, 3, sparse_grad=True)
        dense = B.Dense(2, in_units=3)
        emb.initialize()
        dense.initialize(device=[la.cpu(0), la.cpu(1)])
        return emb, dense

    runs = []
    for per_param in (False, True):
        emb, dense = model()
        params = list(emb.collect_params().values()) + list(dense.collect_params().values())
        trainer = B.Trainer(params, PerParamAdam(learning_rate=0.05) if per_param else B.Adam(learning_rate=0.05))
        idx = la.array(np.array([[1, 4], [4, 7]]))
        for _ in range(3):
            with la.autograd.record():
                losses = [dense(emb(idx).mean(axis=1).to(d)).sum() for d in (la.cpu(0), la.cpu(1))]
            for loss in losses:
                loss.backward()
            trainer.step(2)
        if not per_param:
            assert [p.name for p in trainer._single] == [emb.weight.name]
            assert len(trainer._groups) == 1 and len(trainer._groups[0].params) == 2
        runs.append([emb.weight.data().asnumpy()] + [c.asnumpy() for p in dense.collect_params().values()
                                                     for c in p.list_data()])
    for x, y in zip(*runs):
        np.testing.assert_array_equal(x, y)


def test_a_non_contiguous_weight_is_updated_one_by_one():
    """A weight whose flat view would be a copy (here: a transposed array set as the value) takes the
    per-parameter path with the same math."""
    ps, ref = _params(), _params()
    for group in (ps, ref):
        group[0]._data._value = np.asfortranarray(group[0]._data._value)
    tf, ts = _trainers("sgd", CASES[2][1], ps, False), _trainers("sgd", CASES[2][1], ref, True)
    for step in range(1, 4):
        _backward(ps, step)
        _backward(ref, step)
        tf.step(2)
        ts.step(2)
    assert not ps[0]._data._value.flags.c_contiguous
    for p, q in zip(ps, ref):
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())


def test_optimizer_with_its_own_update_runs_one_by_one():
    class Halve(B.Optimizer):
        def update(self, weight, grad, state, step, rescale=1.0, xp=None, lr_mult=1.0, wd_mult=1.0):
            weight *= weight.dtype.type(0.5)

    ps = _params()
    trainer = B.Trainer(ps, Halve())
    before = [p.data().asnumpy().copy() for p in ps]
    _backward(ps, 1)
    trainer.step(1)
    assert not trainer._groups
    for p, w in zip(ps, before):
        np.testing.assert_array_equal(p.data().asnumpy(), w * np.float32(0.5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_plain_sgd_folds_the_rate_only_when_exact(dtype):
    """``SGD.scale``: the rate joins the rescale (one pass less) only for plain SGD and a power-of-two
    batch, where ``g * (r * lr)`` is ``(g * r) * lr`` bit for bit; checked here on gradients spread
    over many binades."""
    dt = np.dtype(dtype)
    t = dt.type
    rng = np.random.default_rng(3)
    g = (rng.standard_normal(4096) * np.exp2(rng.integers(-20, 20, 4096))).astype(dt)
    for batch in (1, 2, 64, 1024):
        factor, folded = B.SGD(learning_rate=0.01).scale(1 / batch, dt)
        assert folded and factor.dtype == dt
        np.testing.assert_array_equal(g * factor, (g * t(1 / batch)) * t(0.01))
    for opt, batch in ((B.SGD(learning_rate=0.01), 3), (B.SGD(learning_rate=0.01, momentum=0.9), 64),
                       (B.SGD(learning_rate=0.01, wd=0.1), 64), (B.SGD(learning_rate=0.01, clip_gradient=1.0), 64),
                       (B.Adam(), 64)):
        factor, folded = opt.scale(1 / batch, dt)
        assert not folded and factor == t(1 / batch)
    assert not B.SGD(learning_rate=0.01).scale(1 / 64, np.dtype("float16"))[1]  # subnormal within reach


def test_the_folded_factor_follows_changed_settings():
    opt = B.SGD(learning_rate=0.01)
    f32 = np.dtype("float32")
    assert opt.scale(1 / 64, f32) == (np.float32(0.01) * np.float32(1 / 64), True)
    opt.learning_rate = 0.5  # (a schedule sets it every step)
    assert opt.scale(1 / 64, f32) == (np.float32(0.5) * np.float32(1 / 64), True)
    opt.momentum = 0.9
    assert opt.scale(1 / 64, f32) == (np.float32(1 / 64), False)
