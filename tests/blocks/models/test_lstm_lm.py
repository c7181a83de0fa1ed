"""lstm_lm: shapes, the layers it is made of, hybridized == imperative (outputs and gradients), export and
import, and training on a periodic token sequence (the loss must fall below stated values)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

VOCAB, UNITS, SEQ, BATCH = 30, 32, 12, 4


def tokens(seed=0, batch=BATCH, seq=SEQ):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, seq))


def make(seed=0, **kwargs):
    la.random.seed(seed)
    net = B.models.lstm_lm(VOCAB, **{"units": UNITS, **kwargs})
    net.initialize()
    return net


def reference_logits(net, ids):
    """Embedding rows, an LSTM loop over time in NumPy, then the decoder (float64)."""
    p = {k: v.data().asnumpy().astype(np.float64) for k, v in net.collect_params().items()}
    x = p["embedding.weight"][ids].transpose(1, 0, 2)  # (seq, batch, units)
    for k in range(net.lstm.num_layers):
        w = [p[f"lstm.l{k}_{n}"] for n in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]
        h = c = np.zeros((x.shape[1], UNITS))
        outs = []
        for xt in x:
            i, f, g, o = np.split(xt @ w[0].T + w[2] + h @ w[1].T + w[3], 4, axis=-1)
            c = 1 / (1 + np.exp(-f)) * c + 1 / (1 + np.exp(-i)) * np.tanh(g)
            h = 1 / (1 + np.exp(-o)) * np.tanh(c)
            outs.append(h)
        x = np.stack(outs)
    return x.transpose(1, 0, 2) @ p["decoder.weight"].T + p["decoder.bias"]


def test_layers_and_logits_per_position():
    net = make()
    ids = tokens()
    out = net(la.array(ids))
    assert out.shape == (BATCH, SEQ, VOCAB)
    assert isinstance(net.lstm, B.LSTM) and net.lstm.layout == "NTC" and net.lstm.num_layers == 2
    assert net.embedding.weight.shape == (VOCAB, UNITS) and net.decoder.weight.shape == (VOCAB, UNITS)
    np.testing.assert_allclose(out.asnumpy(), reference_logits(net, ids), rtol=1e-4, atol=1e-5)
    assert "lstm_lm" in B.models.__all__
    with pytest.raises(la.ParamValueError, match="lstm_lm: units"):
        B.models.lstm_lm(VOCAB, units=0)


def _step(net, ids, labels):
    with la.autograd.record():
        loss = B.SoftmaxCrossEntropyLoss()(net(la.array(ids)), la.array(labels)).mean()
    loss.backward()
    return float(loss.item()), {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}


def test_hybridized_equals_imperative_outputs_and_gradients():
    ids, labels = tokens(1), tokens(2)
    imp, hyb = make(), make()
    hyb.hybridize()
    np.testing.assert_allclose(hyb(la.array(ids)).asnumpy(), imp(la.array(ids)).asnumpy(), rtol=1e-5, atol=1e-6)
    (l_imp, g_imp), (l_hyb, g_hyb) = _step(imp, ids, labels), _step(hyb, ids, labels)
    assert l_hyb == pytest.approx(l_imp, rel=1e-5)
    assert set(g_hyb) == set(g_imp) and len(g_imp) == 11
    for k in g_imp:
        assert np.abs(g_imp[k]).sum() > 0, k
        np.testing.assert_allclose(g_hyb[k], g_imp[k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert [n.op.name for n in hyb.cached_op.sym.topo() if n.op is not None].count("foreach") == 2


def test_export_and_import_give_the_same_logits(tmp_path):
    net = make(num_layers=1)
    net.hybridize()
    x = la.array(tokens(3))
    want = net(x).asnumpy()
    sym_file, param_file = net.export(str(tmp_path / "lm"))
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_allclose(back(x).asnumpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(back(la.array(tokens(4, batch=2, seq=20))).asnumpy(),
                               net(la.array(tokens(4, batch=2, seq=20))).asnumpy(), rtol=1e-6, atol=1e-6)


def periodic_batches(seed=0, period=7, batch=BATCH, seq=SEQ):
    """Windows of one repeated random pattern of ``period`` tokens, at random offsets: the next token is
    a function of the last few, so a model that learns the pattern drives the loss towards 0."""
    rng = np.random.default_rng(seed)
    pattern = rng.permutation(VOCAB)[:period]
    while True:
        idx = (rng.integers(0, period, batch)[:, None] + np.arange(seq + 1)) % period
        s = pattern[idx]
        yield s[:, :-1], s[:, 1:]


def train(net, steps, lr=0.01):
    trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
    loss_fn = B.SoftmaxCrossEntropyLoss()
    losses = []
    for _, (x, y) in zip(range(steps), periodic_batches()):
        with la.autograd.record():
            loss = loss_fn(net(la.array(x)), la.array(y)).mean()
        loss.backward()
        trainer.step(1)
        losses.append(float(loss.item()))
    return losses


def test_training_on_a_periodic_sequence_drives_the_loss_down_quickly():
    net = make()
    net.hybridize()
    losses = train(net, 120)
    assert losses[0] > 3.0  # about log(30): a guess
    assert min(losses[-10:]) < 0.2, losses[-10:]


@pytest.mark.slow
def test_longer_training_hybridized_learns_the_pattern_and_imperative_follows_the_same_path():
    losses = {}
    for hybrid, steps in ((True, 400), (False, 100)):
        net = make(seed=5)
        if hybrid:
            net.hybridize()
        losses[hybrid] = train(net, steps)
    assert max(losses[True][-20:]) < 0.02, losses[True][-20:]
    np.testing.assert_allclose(losses[False], losses[True][:100], rtol=2e-3, atol=1e-4)
