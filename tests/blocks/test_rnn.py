"""LSTM and GRU layers against a NumPy reference written as a Python loop over time (Gluon / cuDNN
gate order), imperative == hybridized (outputs and gradients), export and import, and the graph: one
foreach per layer and direction, whose size does not grow with the sequence length."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

RNG = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# -- the NumPy reference -------------------------------------------------------------------------------
def lstm_cell(x, states, wi, wh, bi, bh):
    h, c = states
    i, f, g, o = np.split(x @ wi.T + bi + h @ wh.T + bh, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return [sigmoid(o) * np.tanh(c), c]


def gru_cell(x, states, wi, wh, bi, bh):
    h = states[0]
    r_i, z_i, n_i = np.split(x @ wi.T + bi, 3, axis=-1)
    r_h, z_h, n_h = np.split(h @ wh.T + bh, 3, axis=-1)
    r, z = sigmoid(r_i + r_h), sigmoid(z_i + z_h)
    n = np.tanh(n_i + r * n_h)
    return [(1 - z) * n + z * h]


def reference(layer, x, states=None):
    """The layer's output and final states, in float64, as a Python loop over time."""
    cell, n_states = (lstm_cell, 2) if isinstance(layer, B.LSTM) else (gru_cell, 1)
    params = {k: v.data().asnumpy().astype(np.float64) for k, v in layer.collect_params().items()}
    x = x.astype(np.float64)
    if layer.layout == "NTC":
        x = x.transpose(1, 0, 2)
    steps, batch, _ = x.shape
    dirs = ("l", "r") if layer.bidirectional else ("l",)
    hidden = layer.hidden_size
    if states is None:
        states = [np.zeros((layer.num_layers * len(dirs), batch, hidden))] * n_states
    finals: list[list] = [[] for _ in range(n_states)]
    for k in range(layer.num_layers):
        outs = []
        for j, d in enumerate(dirs):
            s = [st[k * len(dirs) + j].astype(np.float64) for st in states]
            w = [params[f"{d}{k}_{p}"] for p in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]
            order = range(steps - 1, -1, -1) if d == "r" else range(steps)
            ys = [None] * steps
            for t in order:
                s = cell(x[t], s, *w)
                ys[t] = s[0]
            outs.append(np.stack(ys))
            for m in range(n_states):
                finals[m].append(s[m])
        x = np.concatenate(outs, axis=-1)
    if layer.layout == "NTC":
        x = x.transpose(1, 0, 2)
    return x, [np.stack(f) for f in finals]


def make(cls, *args, seed=0, **kwargs):
    la.random.seed(seed)
    layer = cls(*args, **kwargs)
    layer.initialize(la.init.Uniform(0.5))
    return layer


CASES = [
    (B.LSTM, dict(num_layers=1)),
    (B.LSTM, dict(num_layers=2)),
    (B.LSTM, dict(num_layers=2, bidirectional=True, layout="NTC")),
    (B.LSTM, dict(num_layers=1, bidirectional=True)),
    (B.GRU, dict(num_layers=1, layout="NTC")),
    (B.GRU, dict(num_layers=2)),
    (B.GRU, dict(num_layers=2, bidirectional=True)),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, kw in CASES]


def data_shape(kwargs, steps=5, batch=3, features=4):
    return (batch, steps, features) if kwargs.get("layout") == "NTC" else (steps, batch, features)


@pytest.mark.parametrize("cls,kwargs", CASES, ids=IDS)
@pytest.mark.parametrize("hybrid", [False, True])
def test_matches_the_numpy_loop_over_time(cls, kwargs, hybrid):
    layer = make(cls, 6, **kwargs)
    if hybrid:
        layer.hybridize()
    x = arr(*data_shape(kwargs))
    out = layer(la.array(x))
    want, _ = reference(layer, x)
    dirs = 2 if kwargs.get("bidirectional") else 1
    assert out.shape == want.shape == data_shape(kwargs)[:2] + (6 * dirs,)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls,kwargs", CASES, ids=IDS)
@pytest.mark.parametrize("hybrid", [False, True])
def test_given_states_give_the_final_states(cls, kwargs, hybrid):
    layer = make(cls, 5, **kwargs)
    if hybrid:
        layer.hybridize()
    shape = data_shape(kwargs)
    batch = shape[0] if kwargs.get("layout") == "NTC" else shape[1]
    x = arr(*shape)
    states = [arr(*info["shape"]) for info in layer.state_info(batch)]
    out, new = layer(la.array(x), [la.array(s) for s in states])
    want, want_states = reference(layer, x, states)
    assert isinstance(new, list) and len(new) == len(states) == (2 if cls is B.LSTM else 1)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-5)
    for got, w in zip(new, want_states):
        assert got.shape == w.shape
        np.testing.assert_allclose(got.asnumpy(), w, rtol=1e-5, atol=1e-5)


def test_gru_takes_one_state_array_as_well_as_a_list():
    layer = make(B.GRU, 4)
    x, h = arr(3, 2, 5), arr(1, 2, 4)
    out, (h1,) = layer(la.array(x), la.array(h))
    np.testing.assert_allclose(h1.asnumpy(), reference(layer, x, [h])[1][0], rtol=1e-5, atol=1e-5)


def test_begin_state_is_zeros_and_equals_no_states():
    layer = make(B.LSTM, 4, num_layers=2, bidirectional=True)
    x = la.array(arr(3, 2, 5))
    begin = layer.begin_state(2)
    assert [s.shape for s in begin] == [(4, 2, 4)] * 2 and not any(s.asnumpy().any() for s in begin)
    np.testing.assert_allclose(layer(x, begin)[0].asnumpy(), layer(x).asnumpy())


# -- parameters ---------------------------------------------------------------------------------------
def test_parameters_are_named_and_shaped_as_gluon():
    layer = make(B.LSTM, 6, num_layers=2, bidirectional=True)
    layer(la.array(arr(3, 2, 5)))
    shapes = {k: p.shape for k, p in layer.collect_params().items()}
    assert list(shapes)[:4] == ["l0_i2h_weight", "l0_h2h_weight", "l0_i2h_bias", "l0_h2h_bias"]
    assert shapes["l0_i2h_weight"] == shapes["r0_i2h_weight"] == (24, 5)
    assert shapes["l0_h2h_weight"] == shapes["r1_h2h_weight"] == (24, 6)
    assert shapes["l1_i2h_weight"] == (24, 12)  # both directions of layer 0 feed layer 1
    assert shapes["r1_i2h_bias"] == shapes["l1_h2h_bias"] == (24,)
    assert len(shapes) == 16
    gru = make(B.GRU, 3, input_size=7)
    assert {k: p.shape for k, p in gru.collect_params().items()} == {
        "l0_i2h_weight": (9, 7), "l0_h2h_weight": (9, 3), "l0_i2h_bias": (9,), "l0_h2h_bias": (9,)}


def test_input_size_is_learned_at_the_first_call_and_checked_after():
    layer = make(B.LSTM, 3)
    assert layer.l0_i2h_weight.shape == (12, 0)
    layer(la.array(arr(2, 2, 7)))
    assert layer.l0_i2h_weight.shape == (12, 7)
    with pytest.raises(la.ShapeError, match="7"):
        layer(la.array(arr(2, 2, 5)))


def test_bad_arguments_are_named():
    with pytest.raises(la.ParamValueError, match="layout"):
        B.LSTM(4, layout="NCT")
    with pytest.raises(la.ParamValueError, match="num_layers"):
        B.GRU(4, num_layers=0)
    with pytest.raises(la.ParamValueError, match="dropout"):
        B.LSTM(4, dropout=1.5)
    layer = make(B.LSTM, 4)
    with pytest.raises(la.ShapeError, match=r"LSTM: the input must be a 3-d array laid out 'TNC'"):
        layer(la.array(arr(3, 4)))
    x = la.array(arr(3, 2, 5))
    with pytest.raises(la.ShapeError, match=r"expected 2 begin state\(s\) \(\[h, c\]\), got 1"):
        layer(x, [la.array(arr(1, 2, 4))])
    with pytest.raises(la.ShapeError, match=r"\(1, 2, 4\), got \(1, 3, 4\); make them with layer.begin_state"):
        layer(x, [la.array(arr(1, 3, 4))] * 2)


def test_repr_names_sizes_and_options():
    layer = make(B.GRU, 4, num_layers=2, bidirectional=True, layout="NTC", dropout=0.5)
    assert repr(layer) == "GRU(None -> 4, NTC, num_layers=2, bidirectional, dropout=0.5)"


def test_dropout_between_layers_only_in_training():
    layer = make(B.LSTM, 4, num_layers=2, dropout=0.5)
    x = arr(3, 2, 5)
    got = layer(la.array(x)).asnumpy()  # inference: no dropout
    want, _ = reference(layer, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with la.autograd.record():
        trained = layer(la.array(x)).asnumpy()
    assert not np.allclose(trained, want, atol=1e-4)


# -- gradients ----------------------------------------------------------------------------------------
def _grads(layer, x, states=None, deferred=False):
    xa = la.array(x)
    xa.attach_grad()
    sa = None if states is None else [la.array(s) for s in states]
    with la.autograd.record(), la.deferred(deferred):
        res = layer(xa) if sa is None else layer(xa, sa)
        out = res if sa is None else res[0]
        loss = (out * out).sum()
        if sa is not None:
            loss = loss + sum((s * 3.0).sum() for s in res[1])
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in layer.collect_params().items()}
    grads["data"] = xa.grad.asnumpy().copy()
    return float(loss.item()), grads


@pytest.mark.parametrize("cls,kwargs", CASES, ids=IDS)
@pytest.mark.parametrize("with_states", [False, True])
def test_hybridized_and_deferred_gradients_equal_imperative(cls, kwargs, with_states):
    shape = data_shape(kwargs, steps=4)
    x = arr(*shape)
    got = []
    for mode in ("imperative", "hybridized", "deferred"):  # deferred: one foreach node under autograd
        layer = make(cls, 5, **kwargs)
        if mode == "hybridized":
            layer.hybridize()
        batch = shape[0] if kwargs.get("layout") == "NTC" else shape[1]
        states = [np.random.default_rng(7 + i).standard_normal(info["shape"]).astype(np.float32)
                  for i, info in enumerate(layer.state_info(batch))] if with_states else None
        got.append(_grads(layer, x, states, deferred=mode == "deferred"))
    (l_imp, g_imp), *others = got
    for l_other, g_other in others:
        assert l_other == pytest.approx(l_imp, rel=1e-5)
        assert set(g_imp) == set(g_other)
        for k in g_imp:
            assert np.abs(g_imp[k]).sum() > 0, k
            np.testing.assert_allclose(g_other[k], g_imp[k], rtol=1e-4, atol=1e-5, err_msg=k)


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("cls", [B.LSTM, B.GRU])
@pytest.mark.parametrize("hybrid", [False, True])
def test_gradients_match_finite_differences_of_the_reference(cls, hybrid):
    layer = make(cls, 3, bidirectional=True, dtype="float64")
    x = arr(3, 2, 2, dtype=np.float64)
    if hybrid:
        layer.hybridize()
    _, grads = _grads(layer, x)

    def loss_of(name):
        def f(v):
            saved = layer.collect_params()[name].data().asnumpy().copy()
            layer.collect_params()[name].set_data(la.array(v))
            out, _ = reference(layer, x)
            layer.collect_params()[name].set_data(la.array(saved))
            return float((out * out).sum())
        return f

    for name in ("l0_h2h_weight", "r0_i2h_weight", "l0_h2h_bias", "r0_i2h_bias"):
        value = layer.collect_params()[name].data().asnumpy()
        np.testing.assert_allclose(grads[name], _numeric_grad(loss_of(name), value), rtol=1e-5, atol=1e-8,
                                   err_msg=name)
    want_x = _numeric_grad(lambda v: float((reference(layer, v)[0] ** 2).sum()), x)
    np.testing.assert_allclose(grads["data"], want_x, rtol=1e-5, atol=1e-8)


# -- the graph --------------------------------------------------------------------------------------------
def _nodes(layer, steps, kwargs):
    layer.hybridize()
    layer(la.array(arr(*data_shape(kwargs, steps=steps))))
    return layer.cached_op.sym


@pytest.mark.parametrize("cls,kwargs", CASES, ids=IDS)
def test_one_foreach_per_layer_and_direction_and_size_independent_of_the_length(cls, kwargs):
    layer = make(cls, 4, **kwargs)
    short = _nodes(layer, 5, kwargs)
    layer = make(cls, 4, **kwargs)
    long = _nodes(layer, 50, kwargs)
    assert len(short.topo()) == len(long.topo())
    ops = [n.op.name for n in long.topo() if n.op is not None]
    dirs = 2 if kwargs.get("bidirectional") else 1
    assert ops.count("foreach") == kwargs["num_layers"] * dirs
    assert ops.count("dense") == kwargs["num_layers"] * dirs  # one input projection outside each loop


def test_one_trace_serves_every_sequence_length_and_batch():
    layer = make(B.LSTM, 4, num_layers=2, layout="NTC")
    layer.hybridize()
    for steps, batch in ((5, 3), (9, 3), (2, 6)):
        x = arr(batch, steps, 3)
        np.testing.assert_allclose(layer(la.array(x)).asnumpy(), reference(layer, x)[0], rtol=1e-5, atol=1e-5)
    assert layer.trace_count == 1


@pytest.mark.parametrize("cls,kwargs", [CASES[2], CASES[6]], ids=[IDS[2], IDS[6]])
def test_export_and_import_give_the_same_outputs(tmp_path, cls, kwargs):
    layer = make(cls, 4, **kwargs)
    layer.hybridize()
    x = la.array(arr(*data_shape(kwargs)))
    want = layer(x).asnumpy()
    sym_file, param_file = layer.export(str(tmp_path / "rnn"))
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_allclose(back(x).asnumpy(), want, rtol=1e-6, atol=1e-6)


def test_export_with_states_takes_them_as_inputs(tmp_path):
    layer = make(B.LSTM, 4)
    layer.hybridize()
    x = la.array(arr(5, 2, 3))
    states = [la.array(arr(1, 2, 4)) for _ in range(2)]
    out, new = layer(x, states)
    sym_file, param_file = layer.export(str(tmp_path / "lstm"))
    back = B.SymbolBlock.imports(sym_file, ["data0", "data1", "data2"], param_file)
    got = back(x, *states)
    for g, w in zip(got, [out] + new):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6, atol=1e-6)


def test_one_trace_gives_imperative_gradients_for_every_length_and_batch():
    layers = [make(B.LSTM, 4, num_layers=2, bidirectional=True, input_size=3) for _ in range(2)]
    layers[1].hybridize()
    for shape in ((5, 2, 3), (7, 4, 3), (2, 1, 3)):
        x = arr(*shape)
        (l_imp, g_imp), (l_hyb, g_hyb) = _grads(layers[0], x), _grads(layers[1], x)
        assert l_hyb == pytest.approx(l_imp, rel=1e-5)
        for k in g_imp:
            np.testing.assert_allclose(g_hyb[k], g_imp[k], rtol=1e-4, atol=1e-5, err_msg=f"{shape} {k}")
    assert layers[1].trace_count == 1


def test_given_states_for_a_new_batch_size_reuse_the_trace():
    layer = make(B.GRU, 4, layout="NTC")
    layer.hybridize()
    for batch in (2, 5):
        x, h = arr(batch, 3, 6), arr(1, batch, 4)
        out, (h1,) = layer(la.array(x), [la.array(h)])
        want, (want_h,) = reference(layer, x, [h])
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(h1.asnumpy(), want_h, rtol=1e-5, atol=1e-5)
    assert layer.trace_count == 1


@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_one_trace_exports_time_and_batch_named_for_what_they_are(layout, tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    layer = make(B.GRU, 4, layout=layout)
    layer.hybridize()
    shape = (6, 2, 3) if layout == "TNC" else (2, 6, 3)
    layer(la.array(arr(*shape)))
    path = la.onnx.export(layer, str(tmp_path / "gru.onnx"))
    dims = [d.dim_param or d.dim_value for d in onnx.load(path).graph.input[0].type.tensor_type.shape.dim]
    assert dims == (["time", "batch", 3] if layout == "TNC" else ["batch", "time", 3])
    sess = ort.InferenceSession(path)
    for steps, batch in ((9, 5), (2, 1)):  # another length and batch: the file computes them
        x = arr(steps, batch, 3) if layout == "TNC" else arr(batch, steps, 3)
        np.testing.assert_allclose(sess.run(None, {"data": x})[0], layer(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-5)
    assert layer.trace_count == 1
