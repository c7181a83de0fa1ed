"""foreach's ``inline_loop`` (``kernels/foreach.py``): the whole scan as one written-out function.
It equals the reference kernel (``steps``: the body's program once per step) on imported LSTM and
GRU cells and on bodies written with ``la.foreach``, in float32 and float64, with saved states
(the gradient's), an empty time axis and planned output buffers; bodies with other ops keep
``steps``; ``explain()`` and ``la.profile()`` name the choice."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import foreach as kforeach
from lazyarray.ops import registry

FOREACH = registry.get("foreach")
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "onnx_dynamic")
RNG = np.random.default_rng(0)


def _cell(x, states, w, u, b):
    """An LSTM cell in the ops the loop takes (matmul, add, getitem, sigmoid, tanh, multiply, subtract)."""
    h, c = states
    z = la.matmul(x, w) + la.matmul(h, u) + b
    n = h.shape[-1]
    i, f, g, o = (z[..., k * n:(k + 1) * n] for k in range(4))
    c2 = la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(g)
    h2 = la.sigmoid(o) * la.tanh(c2) - 0.5 * (1.0 - la.sigmoid(o))
    return h2, [h2, c2]


def _lstm_node(dtype, steps=5, batch=3, feat=4, hidden=6):
    """(the recorded foreach node, its operand values) of ``_cell`` scanned over ``steps`` steps."""
    arrays = [RNG.standard_normal(s).astype(dtype) for s in
              [(steps, batch, feat), (batch, hidden), (batch, hidden), (feat, 4 * hidden), (hidden, 4 * hidden),
               (4 * hidden,)]]
    x, h, c, w, u, b = (la.array(a) for a in arrays)
    with la.deferred():
        ys, _ = la.foreach(lambda xt, s: _cell(xt, s, w, u, b), x, [h, c])
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    return node, arrays


def _both(node, values, save_states=None, out=None):
    params = dict(node.params)
    if save_states is not None:
        params["save_states"] = save_states
    want = FOREACH.kernel(np, *values, **params)
    got = kforeach.run_inline_loop(np, *values, out=out, **params)
    assert got is not None
    want, got = (list(v) if isinstance(v, tuple) else [v] for v in (want, got))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)  # the same kernels in the same order: the same values
    return got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("save", [False, True], ids=["no-saved-states", "saved-states"])
def test_a_written_lstm_cell_equals_the_steps_kernel(dtype, save):
    node, arrays = _lstm_node(dtype)
    # the node's operands: data, states, then the weights the body closes over (lifted as free inputs)
    assert node.params["n_data"] == 1 and node.params["n_states"] == 2
    values = _operands(node, arrays)
    assert kernels.choose(FOREACH, np, *values, **node.params).impl is kforeach.LOOP
    _both(node, values, save_states=save)


def _operands(node, arrays):
    """The node's operand values: x, h, c, then the free inputs in the order the node lists them."""
    by_shape = {a.shape: a for a in arrays[3:]}
    free = [by_shape[e.aval.shape] for e in node.inputs[3:]]
    return arrays[:3] + free


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_empty_time_axis_and_planned_buffers(dtype):
    node, arrays = _lstm_node(dtype, steps=0)
    values = _operands(node, arrays)
    ys, h, c = _both(node, values, save_states=False)
    assert ys.shape[0] == 0
    np.testing.assert_array_equal(h, arrays[1])  # no step: the final states are the initial ones
    node, arrays = _lstm_node(dtype)
    values = _operands(node, arrays)
    shapes = FOREACH.shape([a.shape for a in values], **node.params)  # outputs, final states, saved states
    assert len(shapes) == 5
    outs = tuple(np.full(s, np.nan, dtype) for s in shapes[:4]) + \
        (np.full(shapes[4][::-1], np.nan, dtype).T,)  # the last planned buffer is not C-ordered: copied in
    got = _both(node, values, out=outs)
    assert all(g is o for g, o in zip(got, outs))


def test_a_body_with_another_op_keeps_the_steps_kernel():
    x = la.array(RNG.standard_normal((4, 3)).astype(np.float32))
    with la.deferred():
        ys, _ = la.foreach(lambda xt, s: (la.sum(xt * s), s + xt), x, la.array(np.zeros(3, np.float32)))
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    values = [x.asnumpy(), np.zeros(3, np.float32)]
    assert kforeach.plan(node.params["body"], 1, 1, False) is None
    assert kernels.choose(FOREACH, np, *values, **node.params).impl is kforeach.STEPS
    assert kforeach.run_inline_loop(np, *values, **node.params) is None


def test_the_loops_sigmoid_is_the_ops_sigmoid():
    op = registry.get("sigmoid").bind(np)
    for dtype in (np.float16, np.float32, np.float64):
        x = (RNG.standard_normal(2000) * 40).astype(dtype)
        x[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
        np.testing.assert_array_equal(kforeach.sigmoid_small(x.reshape(40, 50)), op(x).reshape(40, 50))


def test_gradients_through_the_loop_equal_the_eager_ones():
    arrays = [RNG.standard_normal(s) for s in [(4, 2, 3), (2, 5), (2, 5), (3, 20), (5, 20), (20,)]]
    w = la.array(arrays[3])

    def run(hybrid):
        xs = [la.array(a) for a in arrays]
        xs[3] = w
        for a in xs:
            a.attach_grad()
        with la.autograd.record():
            if hybrid:
                with la.deferred():
                    ys, _ = la.foreach(lambda xt, s: _cell(xt, s, xs[3], xs[4], xs[5]), xs[0], [xs[1], xs[2]])
            else:
                ys, _ = la.foreach(lambda xt, s: _cell(xt, s, xs[3], xs[4], xs[5]), xs[0], [xs[1], xs[2]])
            loss = (ys * ys).sum()
        loss.backward()
        return [a.grad.asnumpy() for a in xs]

    for g, want in zip(run(True), run(False)):
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["gru_time_major", "lstm_bidir"])
def test_imported_rnns_run_the_loop_equal_torch_and_explain_names_it(name):
    pytest.importorskip("onnx")
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    x, want = data["b3_s7/in/x"], data["b3_s7/out/0"]
    op = la.CachedOp(la.onnx.load(os.path.join(FIXTURES, name + ".onnx")))
    with la.tuning(foreach_jit_after=1 << 30):  # (the compiled cell's tier never comes: tests/kernels/test_rnn_cell.py)
        got = op(x=la.array(x))
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-3, atol=1e-4)
        assert "foreach[inline_loop]" in str(op.explain(x=la.array(x)))
        with la.profile() as prof:
            op(x=la.array(x))
    assert {e.impl for e in prof.events if e.name.endswith("foreach")} == {"inline_loop"}


def test_states_that_trade_values_and_a_state_passed_through():
    x = la.array(RNG.standard_normal((5, 3)))
    a, b, c = (la.array(RNG.standard_normal(3)) for _ in range(3))
    with la.deferred():
        ys, _ = la.foreach(lambda xt, s: (s[0] * xt, [s[1], s[0], s[2] + 0.0]), x, [a, b, c])
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    values = [x.asnumpy(), a.asnumpy(), b.asnumpy(), c.asnumpy()]
    assert kforeach.plan(node.params["body"], 1, 3, False) is not None
    ys, s0, s1, s2 = _both(node, values, save_states=False)
    np.testing.assert_array_equal(s2, values[3])
