"""ONNX's training-mode forms of BatchNormalization and Dropout, composed of registry ops.

* ``BatchNormalization`` with ``training_mode=1`` normalizes with the batch's statistics (mean and
  population variance over every axis but the channel axis 1) and returns the running statistics
  updated with ``momentum``: ``running = input * momentum + batch * (1 - momentum)``.
* ``Dropout`` with ``training_mode=True`` keeps each element with probability ``1 - ratio`` and
  scales the kept ones by ``1 / (1 - ratio)``; the second output is the keep mask. ONNX leaves the
  generator to the runtime. With a ``seed`` attribute the mask is the one ONNX's reference
  implementation draws (NumPy's legacy ``RandomState(seed)``: ``uniform(0, 1, shape) >= ratio``), so
  the node cases' outputs are reproduced; it is drawn once at load and the same on every run, as the
  reference's is for a given seed (onnxruntime draws with its own generator: its masks differ).
  Without a seed the mask is drawn on every run (``random_uniform``, lazyarray's generator).
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import OnnxNode, constant, dtype_of


def batch_norm_training(n: OnnxNode) -> list:
    x, scale, b, mean, var = n.inputs
    rank = n.rank(0, "BatchNormalization")
    eps = float(n.attr("epsilon", 1e-5))
    momentum = float(n.attr("momentum", 0.9))
    axes = (0,) + tuple(range(2, rank))
    chan = (1, -1) + (1,) * (rank - 2)
    batch_mean = S.mean(x, axis=axes, keepdims=True)
    centered = S.subtract(x, batch_mean)
    batch_var = S.mean(S.square(centered), axis=axes, keepdims=True)
    inv = S.divide(S.reshape(scale, shape=chan), S.sqrt(S.add(batch_var, eps)))
    y = S.add(S.multiply(centered, inv), S.reshape(b, shape=chan))
    outs = [y]
    for running, batch in ((mean, batch_mean), (var, batch_var)):
        r = S.add(S.multiply(running, momentum), S.multiply(S.reshape(batch, shape=(-1,)), 1.0 - momentum))
        outs.append(r if dtype_of(r) == dtype_of(running) else S.cast(r, dtype=dtype_of(running)))
    return outs


def dropout_training(n: OnnxNode) -> list:
    x = n.inputs[0]
    ratio = n.const(1, "ratio")
    ratio = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    if not 0.0 <= ratio < 1.0:
        n.fail(f"ratio={ratio}: expected 0 <= ratio < 1")
    shape = n.known_shape(0, "Dropout with training_mode=True")
    if ratio == 0.0:
        return [x, S.ones_like(x, dtype="bool")]
    seed = n.attr("seed")
    if seed is not None:  # the mask ONNX's reference draws for this seed (see the module docstring)
        keep = constant(np.random.RandomState(int(seed)).uniform(0.0, 1.0, shape) >= ratio)
    else:
        keep = S.greater_equal(S.random_uniform(shape=shape, dtype="float64"), ratio)
    y = S.multiply(S.where(keep, x, S.zeros_like(x)), 1.0 / (1.0 - ratio))
    return [y, keep]
