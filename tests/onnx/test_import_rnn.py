"""ONNX RNN, GRU and LSTM unrolled into registry ops (``onnx/import_rnn.py``) against onnxruntime
(``onnx.reference`` for layout=1, which onnxruntime refuses) beyond ONNX's node cases: both
directions, per-entry sequence lengths, initial states, biases, clipping, peepholes, coupled
input/forget gates, linear_before_reset and non-default activations with their alpha/beta."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(17)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_inputs(op, steps=4, batch=3, size=5, hidden=6, dirs=1, bias=True, lens=None, init=False, peep=False,
               layout=0):
    g = GATES[op]

    def r(*shape):
        return (RNG.standard_normal(shape) * 0.5).astype(np.float32)
    x = r(batch, steps, size) if layout else r(steps, batch, size)
    ins = {"X": x, "W": r(dirs, g * hidden, size), "R": r(dirs, g * hidden, hidden),
           "B": r(dirs, 2 * g * hidden) if bias else None,
           "L": None if lens is None else np.array(lens, np.int32)}
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    ins["H0"] = r(*state) if init else None
    if op == "LSTM":
        ins["C0"] = r(*state) if init else None
        ins["P"] = r(dirs, 3 * hidden) if peep else None
    return ins


def outputs(op):
    return 3 if op == "LSTM" else 2


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens,init", [(None, False), ([4, 2, 1], True)])
def test_recurrent_layers_match_onnxruntime(op, direction, lens, init):
    ins = rnn_inputs(op, dirs=2 if direction == "bidirectional" else 1, lens=lens, init=init, peep=op == "LSTM")
    model = node_model(op, ins, n_outputs=outputs(op), opset=14, hidden_size=6, direction=direction)
    check_node(model, ins, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("RNN", {"activations": ["Relu"], "clip": 0.7}),
    ("RNN", {"activations": ["LeakyRelu", "Elu"], "activation_alpha": [0.2, 0.5], "direction": "bidirectional"}),
    ("GRU", {"linear_before_reset": 1}),
    ("GRU", {"activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.3], "activation_beta": [0.4]}),
    ("GRU", {"activations": ["Sigmoid", "ScaledTanh"], "activation_alpha": [1.5], "activation_beta": [0.8],
             "clip": 1.0}),
    ("LSTM", {"input_forget": 1}),
    ("LSTM", {"activations": ["Sigmoid", "Softplus", "ThresholdedRelu"], "activation_alpha": [0.1]}),
    ("LSTM", {"activations": ["Sigmoid", "Affine", "Tanh"], "activation_alpha": [0.5], "activation_beta": [0.1],
              "clip": 0.5}),
])
def test_recurrent_attributes_match_onnxruntime(op, attrs):
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    ins = rnn_inputs(op, dirs=dirs, init=True, lens=[4, 3, 4])
    model = node_model(op, ins, n_outputs=outputs(op), opset=14, hidden_size=6, **attrs)
    check_node(model, ins, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_batch_major_layout_matches_reference(op):
    ins = rnn_inputs(op, dirs=2, init=True, layout=1, bias=False)
    model = node_model(op, ins, n_outputs=outputs(op), opset=14, hidden_size=6, layout=1,
                       direction="bidirectional")
    check_node(model, ins, runtime="reference", rtol=1e-4, atol=1e-5)


def test_an_unknown_activation_is_a_graph_format_error():
    ins = rnn_inputs("RNN")
    model = node_model("RNN", ins, n_outputs=2, opset=14, infer=False, hidden_size=6, activations=["Gelu"])
    with pytest.raises(GraphFormatError, match="RNN activation 'Gelu' is not supported"):
        run_lazyarray(model, ins)
