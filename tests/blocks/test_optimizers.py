"""Optimizers by name (``lazyarray/blocks/optimizers/``) against NumPy references of their documented
update formulas (torch.optim's for sgd nag adam adamw rmsprop adagrad adadelta adamax nadam; Gluon's
for lamb lars signum ftrl), written here in float64 independently of the implementation; the
multi-tensor path against the per-parameter one; state files round trips; lr_mult / wd_mult;
multi_precision; hyper-parameter errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks import multi_tensor
from lazyarray.blocks.optimizer import OPTIMIZERS

SHAPES = [(4, 3), (3,), (2, 2, 2)]
BATCH = 2
STEPS = 4


# -- references: one step of one parameter (w, g: float64; g already divided by the batch) ------------
def _sgd(s, w, g, st, t):
    lr, mom, damp, wd = s["learning_rate"], s.get("momentum", 0.0), s.get("dampening", 0.0), s.get("wd", 0.0)
    g = g + wd * w
    if mom:
        st["b"] = g.copy() if t == 1 else mom * st["b"] + (1 - damp) * g
        g = g + mom * st["b"] if s.get("nesterov") else st["b"]
    return w - lr * g


def _nag(s, w, g, st, t):
    return _sgd({**s, "nesterov": True, "momentum": s.get("momentum", 0.9)}, w, g, st, t)


def _adam(s, w, g, st, t, decoupled=False):
    lr, b1, b2, eps, wd = s["learning_rate"], s.get("beta1", 0.9), s.get("beta2", 0.999), s.get("epsilon", 1e-8), \
        s.get("wd", 0.01 if decoupled else 0.0)
    if decoupled:
        w = w * (1 - lr * wd)
    else:
        g = g + wd * w
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    v = st["v"]
    if s.get("amsgrad"):  # (torch's implementation: the maximum of the raw second moments)
        v = st["vmax"] = np.maximum(st.get("vmax", 0), st["v"])
    m_hat = st["m"] / (1 - b1 ** t)
    return w - lr * m_hat / (np.sqrt(v / (1 - b2 ** t)) + eps)


def _adamw(s, w, g, st, t):
    return _adam(s, w, g, st, t, decoupled=True)


def _adamax(s, w, g, st, t):
    lr, b1, b2, eps = s["learning_rate"], s.get("beta1", 0.9), s.get("beta2", 0.999), s.get("epsilon", 1e-8)
    g = g + s.get("wd", 0.0) * w
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["u"] = np.maximum(b2 * st.get("u", 0), np.abs(g) + eps)
    return w - lr / (1 - b1 ** t) * st["m"] / st["u"]


def _nadam(s, w, g, st, t):
    lr, b1, b2, eps = s["learning_rate"], s.get("beta1", 0.9), s.get("beta2", 0.999), s.get("epsilon", 1e-8)
    psi = s.get("momentum_decay", 4e-3)
    g = g + s.get("wd", 0.0) * w
    mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
    st["prod"] = st.get("prod", 1.0) * mu
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    denom = np.sqrt(st["v"] / (1 - b2 ** t)) + eps
    return w - lr * (1 - mu) / (1 - st["prod"]) * g / denom - lr * mu_next / (1 - st["prod"] * mu_next) * st["m"] / denom


def _rmsprop(s, w, g, st, t):
    lr, rho, eps, mom = s["learning_rate"], s.get("rho", 0.99), s.get("epsilon", 1e-8), s.get("momentum", 0.0)
    g = g + s.get("wd", 0.0) * w
    st["v"] = rho * st.get("v", 0) + (1 - rho) * g * g
    v = st["v"]
    if s.get("centered"):
        st["a"] = rho * st.get("a", 0) + (1 - rho) * g
        v = v - st["a"] ** 2
    step = g / (np.sqrt(v) + eps)
    if mom:
        st["b"] = mom * st.get("b", 0) + step
        step = st["b"]
    return w - lr * step


def _adagrad(s, w, g, st, t):
    lr, decay, eps = s["learning_rate"], s.get("lr_decay", 0.0), s.get("epsilon", 1e-10)
    g = g + s.get("wd", 0.0) * w
    st["s"] = st.get("s", s.get("initial_accumulator_value", 0.0)) + g * g
    return w - lr / (1 + (t - 1) * decay) * g / (np.sqrt(st["s"]) + eps)


def _adadelta(s, w, g, st, t):
    lr, rho, eps = s.get("learning_rate", 1.0), s.get("rho", 0.9), s.get("epsilon", 1e-6)
    g = g + s.get("wd", 0.0) * w
    st["v"] = rho * st.get("v", 0) + (1 - rho) * g * g
    delta = np.sqrt(st.get("u", 0) + eps) / np.sqrt(st["v"] + eps) * g
    st["u"] = rho * st.get("u", 0) + (1 - rho) * delta * delta
    return w - lr * delta


def _lamb(s, w, g, st, t):
    lr, b1, b2, eps, wd = s["learning_rate"], s.get("beta1", 0.9), s.get("beta2", 0.999), s.get("epsilon", 1e-6), \
        s.get("wd", 0.0)
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    m, v = st["m"], st["v"]
    if s.get("bias_correction", True):
        m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
    r = m / (np.sqrt(v) + eps) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(r)
    if s.get("lower_bound") is not None:
        r1 = max(r1, s["lower_bound"])
    if s.get("upper_bound") is not None:
        r1 = min(r1, s["upper_bound"])
    ratio = r1 / r2 if r1 and r2 else 1.0
    return w - lr * ratio * r


def _lars(s, w, g, st, t):
    lr, mom, eta, eps, wd = s["learning_rate"], s.get("momentum", 0.0), s.get("eta", 0.001), \
        s.get("epsilon", 1e-8), s.get("wd", 0.0)
    wn, gn = np.linalg.norm(w), np.linalg.norm(g)
    ratio = eta * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
    step = lr * ratio * (g + wd * w)
    if not mom:
        return w - step
    st["v"] = mom * st.get("v", 0) - step
    return w + st["v"]


def _signum(s, w, g, st, t):
    lr, mom, wd_lh = s["learning_rate"], s.get("momentum", 0.9), s.get("wd_lh", 0.0)
    g = g + s.get("wd", 0.0) * w
    if mom:
        st["m"] = mom * st.get("m", 0) - (1 - mom) * g
        return (1 - lr * wd_lh) * w + lr * np.sign(st["m"])
    return (1 - lr * wd_lh) * w - lr * np.sign(g)


def _ftrl(s, w, g, st, t):
    lr, l1, beta, wd = s.get("learning_rate", 0.1), s.get("lamda1", 0.01), s.get("beta", 1.0), s.get("wd", 0.0)
    n = st.get("n", 0)
    st["z"] = st.get("z", 0) + g - (np.sqrt(n + g * g) - np.sqrt(n)) * w / lr
    st["n"] = n + g * g
    z = st["z"]
    return np.where(np.abs(z) > l1, (np.sign(z) * l1 - z) / ((beta + np.sqrt(st["n"])) / lr + wd), 0.0)


REFERENCES = {"sgd": _sgd, "nag": _nag, "adam": _adam, "adamw": _adamw, "adamax": _adamax, "nadam": _nadam,
              "rmsprop": _rmsprop, "adagrad": _adagrad, "adadelta": _adadelta, "lamb": _lamb, "lars": _lars,
              "signum": _signum, "ftrl": _ftrl}

CASES = [
    ("sgd", {"learning_rate": 0.1}),
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}),
    ("sgd", {"learning_rate": 0.05, "momentum": 0.8, "dampening": 0.3, "wd": 0.02}),
    ("sgd", {"learning_rate": 0.05, "momentum": 0.7, "nesterov": True, "wd": 0.01}),
    ("nag", {"learning_rate": 0.05, "momentum": 0.8, "wd": 0.01}),
    ("adam", {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.95, "wd": 0.01}),
    ("adam", {"learning_rate": 0.01, "amsgrad": True, "epsilon": 1e-3}),
    ("adamw", {"learning_rate": 0.01}),
    ("adamw", {"learning_rate": 0.02, "wd": 0.1, "amsgrad": True, "beta1": 0.7}),
    ("adamax", {"learning_rate": 0.02, "wd": 0.01}),
    ("nadam", {"learning_rate": 0.01, "wd": 0.01}),
    ("nadam", {"learning_rate": 0.02, "beta1": 0.8, "momentum_decay": 0.1}),
    ("rmsprop", {"learning_rate": 0.01, "wd": 0.01}),
    ("rmsprop", {"learning_rate": 0.01, "rho": 0.9, "momentum": 0.5}),
    ("rmsprop", {"learning_rate": 0.01, "rho": 0.9, "centered": True, "momentum": 0.7, "epsilon": 1e-4}),
    ("adagrad", {"learning_rate": 0.1, "lr_decay": 0.1, "initial_accumulator_value": 0.5, "wd": 0.01}),
    ("adadelta", {"learning_rate": 1.0, "rho": 0.8, "wd": 0.01}),
    ("adadelta", {"learning_rate": 0.5, "epsilon": 1e-3}),
    ("lamb", {"learning_rate": 0.01, "wd": 0.01}),
    ("lamb", {"learning_rate": 0.01, "bias_correction": False, "lower_bound": 0.5, "upper_bound": 1.5}),
    ("lars", {"learning_rate": 0.1, "eta": 0.01, "wd": 0.01}),
    ("lars", {"learning_rate": 0.1, "momentum": 0.9, "eta": 0.02, "wd": 0.001}),
    ("signum", {"learning_rate": 0.01, "wd": 0.01}),
    ("signum", {"learning_rate": 0.01, "momentum": 0.0, "wd_lh": 0.1}),
    ("ftrl", {"learning_rate": 0.1, "lamda1": 0.01, "wd": 0.01}),
    ("ftrl", {"learning_rate": 0.5, "lamda1": 0.3, "beta": 0.5}),
]
IDS = [f"{k}-{'-'.join(s)}" for k, s in CASES]


def _params(dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k, shape in enumerate(SHAPES):
        p = B.Parameter(f"p{k}", shape=shape, dtype=dtype)
        p.initialize()
        p.set_data(rng.standard_normal(shape).astype(dtype))
        out.append(p)
    return out


def _backward(params, step):
    """Gradients ``2 * w * c``, ``c`` drawn per step."""
    rng = np.random.default_rng(100 + step)
    with la.autograd.record():
        loss = None
        for p in params:
            c = la.array(rng.standard_normal(p.shape).astype(p.dtype))
            term = (p.data() * p.data() * c).sum()
            loss = term if loss is None else loss + term
    loss.backward()


def _run_against_reference(kind, settings, dtype, rtol, atol):
    params = _params(dtype)
    trainer = B.Trainer(params, kind, dict(settings))
    ref = [p.data().asnumpy().astype(np.float64) for p in params]
    states = [{} for _ in params]
    for t in range(1, STEPS + 1):
        _backward(params, t)
        grads = [p.grad().asnumpy().astype(np.float64) / BATCH for p in params]
        trainer.step(BATCH)
        ref = [REFERENCES[kind](settings, w, g, st, t) for w, g, st in zip(ref, grads, states)]
        for p, w in zip(params, ref):
            np.testing.assert_allclose(p.data().asnumpy(), w, rtol=rtol, atol=atol, err_msg=f"{kind} step {t}")
    return trainer


def test_every_registered_name_is_tested():
    assert set(OPTIMIZERS) == set(REFERENCES) == {k for k, _ in CASES}
    assert set(OPTIMIZERS) == set("sgd nag adam adamw rmsprop adagrad adadelta adamax nadam lamb lars signum "
                                  "ftrl".split())


@pytest.mark.parametrize("kind,settings", CASES, ids=IDS)
def test_float64_against_the_documented_formulas(kind, settings):
    trainer = _run_against_reference(kind, settings, "float64", 1e-6, 1e-12)
    assert type(trainer.optimizer) is OPTIMIZERS[kind]
    # the multi-tensor path where the optimizer has one (not for the per-parameter norms of lamb, lars)
    assert bool(trainer._groups) == (kind not in ("lamb", "lars"))


@pytest.mark.parametrize("kind,settings", CASES[1::2], ids=IDS[1::2])
def test_float32_against_the_documented_formulas(kind, settings):
    _run_against_reference(kind, settings, "float32", 1e-5, 1e-6)


def _per_param(cls):
    """``cls`` with ``update`` overridden: the trainer then updates one parameter at a time."""
    return type(f"PerParam{cls.__name__}", (cls,), {"update": lambda self, *a, **k: cls.update(self, *a, **k)})


@pytest.mark.parametrize("kind,settings", [c for c in CASES if c[0] not in ("lamb", "lars")],
                         ids=[i for c, i in zip(CASES, IDS) if c[0] not in ("lamb", "lars")])
def test_flat_groups_equal_the_per_parameter_update_bit_for_bit(kind, settings, monkeypatch):
    monkeypatch.setattr(multi_tensor, "CHUNK_ELEMENTS", 7)  # parameters cut across chunks
    flat, single = _params("float32"), _params("float32")
    tf = B.Trainer(flat, kind, dict(settings))
    ts = B.Trainer(single, _per_param(OPTIMIZERS[kind])(**settings))
    for t in range(1, STEPS):
        _backward(flat, t)
        _backward(single, t)
        tf.step(BATCH)
        ts.step(BATCH)
    assert tf._groups and not ts._groups
    for p, q in zip(flat, single):
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())


@pytest.mark.parametrize("kind,settings", CASES, ids=IDS)
def test_save_and_load_states_resume_bit_for_bit(kind, settings, tmp_path):
    a, b = _params("float32"), _params("float32")
    ta, tb = B.Trainer(a, kind, dict(settings)), B.Trainer(b, kind.upper(), {})
    for t in (1, 2):
        _backward(a, t)
        ta.step(BATCH)
    path = str(tmp_path / "s.states")
    ta.save_states(path)
    for p, q in zip(a, b):
        q.set_data(p.data())
    tb.load_states(path)
    for name in type(ta.optimizer).hyper_params:
        assert getattr(tb.optimizer, name) == getattr(ta.optimizer, name)
    tb.save_states(str(tmp_path / "again.states"))
    with open(path, "rb") as f, open(str(tmp_path / "again.states"), "rb") as g:
        assert f.read() == g.read()
    for t in (3, 4):
        _backward(a, t)
        _backward(b, t)
        ta.step(BATCH)
        tb.step(BATCH)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())


def test_lr_mult_and_wd_mult_scale_each_parameter():
    settings = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.05}
    params = _params()
    params[0].lr_mult, params[1].wd_mult = 0.5, 0.0
    params[2].lr_mult, params[2].wd_mult = 2.0, 3.0
    trainer = B.Trainer(params, "sgd", settings)
    ref = [p.data().asnumpy() for p in params]
    states = [{} for _ in params]
    for t in range(1, STEPS + 1):
        _backward(params, t)
        grads = [p.grad().asnumpy() / BATCH for p in params]
        trainer.step(BATCH)
        ref = [_sgd({**settings, "learning_rate": 0.1 * p.lr_mult, "wd": 0.05 * p.wd_mult}, w, g, st, t)
               for p, w, g, st in zip(params, ref, grads, states)]
        for p, w in zip(params, ref):
            np.testing.assert_allclose(p.data().asnumpy(), w, rtol=1e-6, atol=1e-12)
    assert len(trainer._groups) == 3  # one flat group per (dtype, device, lr_mult, wd_mult)
    params[2].lr_mult = 0.0  # a change after steps: the next step regroups (frozen through the rate)
    before = params[2].data().asnumpy().copy()
    _backward(params, 9)
    trainer.step(BATCH)
    np.testing.assert_array_equal(params[2].data().asnumpy(), before)
    assert len(trainer._groups) == 3


def test_lr_and_wd_mult_are_checked():
    p = B.Parameter("w", shape=(2,))
    assert (p.lr_mult, p.wd_mult) == (1.0, 1.0)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(la.ParamValueError, match="'w': lr_mult must be a finite number >= 0"):
            p.lr_mult = bad
    with pytest.raises(la.ParamError, match="wd_mult must be a number"):
        B.Parameter("v", shape=(2,), wd_mult="0.5")


@pytest.mark.parametrize("kind,settings", [("adam", {"learning_rate": 0.01}),
                                           ("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
                                           ("lamb", {"learning_rate": 0.01})])
def test_multi_precision_keeps_float32_master_weights(kind, settings, tmp_path):
    half = _params("float16")
    trainer = B.Trainer(half, kind, {**settings, "multi_precision": True})
    master = [p.data().asnumpy().astype(np.float32) for p in half]
    ref = B.Trainer([_as_param(m, k) for k, m in enumerate(master)], kind, dict(settings))
    for t in range(1, STEPS + 1):
        _backward(half, t)
        for p, q in zip(half, ref._params):  # the same float16 gradients, in float32
            _set_grad(q, p.grad().asnumpy().astype(np.float32))
        trainer.step(BATCH)
        ref.step(BATCH)
    for p, q in zip(half, ref._params):
        state = trainer._states[id(p)]
        assert state[0].dtype == np.float32 and p.data().dtype == np.float16
        np.testing.assert_array_equal(state[0], q.data().asnumpy())
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy().astype(np.float16))
    path = str(tmp_path / "mp.states")
    trainer.save_states(path)
    other = B.Trainer(half, kind, {**settings, "multi_precision": True})
    other.load_states(path)
    for p in half:
        for x, y in zip(trainer._states[id(p)], other._states[id(p)]):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def _as_param(value, k):
    p = B.Parameter(f"m{k}", shape=value.shape, dtype="float32")
    p.initialize()
    p.set_data(value)
    return p


def _set_grad(p, g):
    """Make ``p``'s gradient ``g`` through a backward (``sum(w * g)``)."""
    with la.autograd.record():
        loss = (p.data() * la.array(g)).sum()
    loss.backward()


# -- errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,setting,value,err", [
    ("sgd", "learning_rate", -0.1, la.ParamValueError),
    ("adam", "beta1", 1.0, la.ParamValueError),
    ("adamw", "beta2", -0.5, la.ParamValueError),
    ("nadam", "epsilon", math.nan, la.ParamValueError),
    ("rmsprop", "rho", 1.5, la.ParamValueError),
    ("adagrad", "lr_decay", math.inf, la.ParamValueError),
    ("ftrl", "learning_rate", 0.0, la.ParamValueError),
    ("lamb", "lower_bound", -1.0, la.ParamValueError),
    ("adam", "amsgrad", 1, la.ParamError),
    ("lars", "eta", "0.1", la.ParamError),
    ("signum", "momentum", None, la.ParamError),
])
def test_bad_hyper_parameters_name_the_optimizer_setting_and_value(kind, setting, value, err):
    name = OPTIMIZERS[kind].__name__
    with pytest.raises(err, match=rf"{name}: {setting} must be .*got {value!r}" if value == value else "nan"):
        B.Trainer(_params(), kind, {setting: value})
    opt = OPTIMIZERS[kind]()
    with pytest.raises(err, match=f"{name}: {setting}"):  # assignments are checked too
        setattr(opt, setting, value)


def test_names_are_case_insensitive_and_unknown_ones_listed():
    assert type(B.Trainer(_params(), "AdamW", {}).optimizer).__name__ == "AdamW"
    assert type(B.Trainer(_params(), "RMSProp", {}).optimizer).__name__ == "RMSProp"
    with pytest.raises(la.ParamValueError, match="unknown optimizer 'adamx'.*adamax.*signum"):
        B.Trainer(_params(), "adamx", {})
    with pytest.raises(la.ParamValueError, match="'nadam'.*momentum_decay"):
        B.Trainer(_params(), "nadam", {"momentum": 0.9})


def test_nesterov_needs_momentum_and_no_dampening():
    with pytest.raises(la.ParamValueError, match="nesterov momentum requires momentum > 0"):
        B.Trainer(_params(), "sgd", {"nesterov": True})
    with pytest.raises(la.ParamValueError, match="dampening 0"):
        B.Trainer(_params(), "nag", {"dampening": 0.5})


def test_a_schedule_giving_a_negative_rate_is_refused():
    trainer = B.Trainer(_params(), "adam", {"lr_scheduler": lambda n: -0.1})
    _backward(trainer._params, 1)
    with pytest.raises(la.ParamValueError, match="Adam: learning_rate must be a finite number >= 0.0, got -0.1"):
        trainer.step(BATCH)


@pytest.mark.parametrize("settings", [{"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01},
                                      {"learning_rate": 0.1, "momentum": 0.8, "nesterov": True},
                                      {"learning_rate": 0.1, "momentum": 0.8, "dampening": 0.5}])
def test_row_sparse_sgd_momentum_is_the_dense_update_on_its_rows(settings):
    """Every row looked up at every step: the lazy update of the stored rows equals the dense one."""
    runs = []
    for sparse in (True, False):
        la.random.seed(0)
        emb = B.Embedding(4, 3, sparse_grad=sparse)
        emb.initialize()
        trainer = B.Trainer(emb.collect_params(), "sgd", dict(settings))
        idx = la.array(np.array([[0, 1], [2, 3], [1, 1]]))
        for t in range(1, STEPS + 1):
            with la.autograd.record():
                loss = (emb(idx) * la.array(np.full((3, 2, 3), float(t)))).sum() + (emb(idx) ** 2).sum()
            loss.backward()
            trainer.step(3)
        runs.append(emb.weight.data().asnumpy())
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-6, atol=1e-7)
