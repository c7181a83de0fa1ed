"""ONNX export of the nn ops: dense/matmul/dot, softmax, one-hot, dropout, convolution, pooling and
the normalizations, GELU.

The converters follow ``export_ops``' convention (``f(g, node, ins) -> [tensor names]``) and join
its ``CONVERTERS`` table. ONNX forms: ``dense`` is one ``Gemm`` for 2-D inputs (``MatMul`` + ``Add``
otherwise); ``conv2d``/``conv2d_transpose``/pools map attribute for attribute (``avg_pool2d`` with
both ``ceil_mode`` and ``count_include_pad`` is refused: runtimes disagree on a partial window's
divisor); ``batch_norm`` and ``layer_norm`` use ``BatchNormalization`` / ``LayerNormalization``
on their usual axis and are written out op by op on another; ``gelu`` is one ``Gelu`` from opset 20;
dropout is the identity in inference graphs.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import GraphError
from .export_base import compute, fail, in_dtype, input_rank, out_dtype, training_error


def _dense(g, node, ins):
    ins = compute(g, node, ins)
    if input_rank(g, node) == 2:  # Gemm: y = x W^T + b in one op
        return [g.op("Gemm", ins, transB=1)]
    y = g.op("MatMul", [ins[0], g.op("Transpose", [ins[1]], perm=[1, 0])])
    return [g.op("Add", [y, ins[2]]) if len(ins) == 3 else y]


def _matmul(g, node, ins):
    return [g.op("MatMul", compute(g, node, ins))]


def _dot(g, node, ins):
    a, b = compute(g, node, ins)
    ra, rb = input_rank(g, node, 0), input_rank(g, node, 1)
    if node.params.get("transpose_a"):
        if ra != 2:
            raise fail(g, node, f"transpose_a of a {ra}-D array")
        a = g.op("Transpose", [a], perm=[1, 0])
    if ra == 0 or rb == 0:
        return [g.op("Mul", [a, b])]
    if node.params.get("transpose_a") and rb == 1:
        # b as a row times a, not Transpose + MatMul: onnxruntime 1.32's extended optimizer fuses that
        # pair into a FusedMatMul that computes a 1-D b wrongly
        a = ins[0] if in_dtype(node, 0) == out_dtype(node) else g.cast(ins[0], in_dtype(node, 0), out_dtype(node))
        return [g.op("Squeeze", [g.op("MatMul", [g.op("Unsqueeze", [b, g.ints([0])]), a]), g.ints([0])])]
    if rb > 2:
        raise fail(g, node, f"numpy.dot of a {ra}-D and a {rb}-D array (no batch broadcasting) has no "
                             "ONNX operator; use matmul")
    return [g.op("MatMul", [a, b])]


def _softmax(op_type: str):
    def convert(g, node, ins):
        return [g.op(op_type, ins, axis=int(node.params.get("axis", -1)))]
    return convert


def _masked_softmax(g, node, ins):
    x, mask = ins
    dt = out_dtype(node)
    axis = g.ints([int(node.params.get("axis", -1))])
    mask = g.cast(mask, in_dtype(node, 1), np.dtype(bool))
    e = g.op("Where", [mask, x, g.scalar(-np.inf, dt)])
    m = g.op("ReduceMax", [e, axis], keepdims=1)
    m = g.op("Where", [g.op("IsInf", [m], detect_positive=0), g.scalar(0, dt), m])  # a row all masked
    e = g.op("Exp", [g.op("Sub", [e, m])])
    s = g.op("ReduceSum", [e, axis], keepdims=1)
    s = g.op("Where", [g.op("Equal", [s, g.scalar(0, dt)]), g.scalar(1, dt), s])
    return [g.op("Div", [e, s])]


def _one_hot(g, node, ins):
    dt = out_dtype(node)
    values = g.const(np.array([0, 1], dtype=dt))
    idx = g.cast(ins[0], in_dtype(node, 0), np.dtype("int64"))  # the index type onnxruntime implements
    return [one_hot_of(g, node, idx, g.ints([int(node.params["depth"])]), values)]


def _sce_rows(g, node, ins):
    """``-log_softmax(logits)`` at each row's label: LogSoftmax, GatherElements on the last axis
    (which counts a negative label from the end where the kernel refuses it: ONNX has no check to
    export), Squeeze, Neg."""
    idx = g.cast(ins[1], in_dtype(node, 1), np.dtype("int64"))
    logp = g.op("LogSoftmax", [ins[0]], axis=-1)
    picked = g.op("GatherElements", [logp, g.op("Unsqueeze", [idx, g.ints([-1])])], axis=-1)
    return [g.op("Neg", [g.op("Squeeze", [picked, g.ints([-1])])])]


def _class_labels(g, node, ins):
    """The labels cast to int64: the range and whole-number checks have no ONNX form (as in
    ``_sce_rows``), an inference graph takes the labels as they are."""
    return [g.cast(ins[0], in_dtype(node, 0), np.dtype("int64"), force=True)]


def one_hot_of(g, node, idx, depth, values):
    """OneHot, whose indices must have a dim: a 0-d index is made 1-d and its row taken back."""
    if input_rank(g, node) == 0:
        y = g.op("OneHot", [g.op("Reshape", [idx, g.ints([1])]), depth, values], axis=-1)
        return g.op("Squeeze", [y, g.ints([0])])
    return g.op("OneHot", [idx, depth, values], axis=-1)


def _dropout(g, node, ins):
    if node.params.get("training"):
        raise training_error(g.label, [node])
    return [g.op("Identity", ins)]


def _pair2(v, default):
    v = [int(x) for x in (default if v is None else v)]
    return v * (2 // len(v))


def _conv2d(g, node, ins):
    p = node.params
    pad = _pair2(p.get("padding"), (0, 0))
    return [g.op("Conv", compute(g, node, ins), strides=_pair2(p.get("stride"), (1, 1)), pads=pad + pad,
                 dilations=_pair2(p.get("dilation"), (1, 1)), group=int(p.get("groups", 1)))]


def _conv2d_transpose(g, node, ins):
    # the weight is (C_in, C_out / groups, kh, kw) in both; ONNX crops pads from the full output
    p = node.params
    pad = _pair2(p.get("padding"), (0, 0))
    return [g.op("ConvTranspose", compute(g, node, ins), strides=_pair2(p.get("stride"), (1, 1)), pads=pad + pad,
                 output_padding=_pair2(p.get("output_padding"), (0, 0)),
                 dilations=_pair2(p.get("dilation"), (1, 1)), group=int(p.get("groups", 1)))]


def _pool_attrs(node):
    p = node.params
    k = _pair2(p.get("kernel"), (2, 2))
    s = [ki if si == 0 else si for ki, si in zip(k, _pair2(p.get("stride"), (0, 0)))]
    pad = _pair2(p.get("padding"), (0, 0))
    return dict(kernel_shape=k, strides=s, pads=pad + pad, ceil_mode=int(bool(p.get("ceil_mode", False))))


def _max_pool2d(g, node, ins):
    # ceil_mode: the output size ceil((H + 2p - k) / s) + 1 in both; a partial last window is clipped
    return [g.op("MaxPool", ins, **_pool_attrs(node))]


def _max_pool2d_relu(g, node, ins):
    """MaxPool, then Relu (the recorded ops)."""
    return [g.op("Relu", _max_pool2d(g, node, ins))]


def _avg_pool2d(g, node, ins):
    attrs = _pool_attrs(node)
    include = bool(node.params.get("count_include_pad", True))
    if attrs["ceil_mode"] and include:
        # ours divides a partial last window by its size clipped to the padded input; ONNX runtimes
        # differ on that divisor, so this combination is refused rather than exported approximately
        raise GraphError(f"cannot export to ONNX: avg_pool2d (node {g.label(node)!r}) with ceil_mode=True and "
                         "count_include_pad=True: ONNX runtimes disagree with us on the divisor of a partial "
                         "last window; use count_include_pad=False or ceil_mode=False for an exported model")
    return [g.op("AveragePool", ins, count_include_pad=int(include), **attrs)]


def _per_axis(g, node, t, i, ax, rank):
    """Input ``i`` (a vector along axis ``ax``) reshaped to broadcast against a rank-``rank`` array."""
    shape = [1] * rank
    shape[ax] = -1
    return g.op("Reshape", [g.cast(t, in_dtype(node, i), out_dtype(node)), g.ints(shape)])


def _batch_norm(g, node, ins):
    rank = input_rank(g, node)
    ax = node.params.get("axis", 1) % rank
    eps = float(node.params.get("eps", 1e-5))
    if ax == 1:  # ONNX BatchNormalization (inference form: the running statistics)
        return [g.op("BatchNormalization", compute(g, node, ins), epsilon=eps)]
    x = g.cast(ins[0], in_dtype(node, 0), out_dtype(node))
    gamma, beta, mean, var = (_per_axis(g, node, t, i + 1, ax, rank) for i, t in enumerate(ins[1:]))
    dt = out_dtype(node)
    y = g.op("Div", [g.op("Sub", [x, mean]), g.op("Sqrt", [g.op("Add", [var, g.scalar(eps, dt)])])])
    return [g.op("Add", [g.op("Mul", [y, gamma]), beta])]


def _batch_norm_relu(g, node, ins):
    """The batch norm as ``batch_norm`` exports it, then Relu."""
    return [g.op("Relu", _batch_norm(g, node, ins))]


def _bn_max_pool2d(g, node, ins):
    """The recorded order (the op's kernel may pool first: equal values), one dtype throughout."""
    x = g.op("Relu", [ins[0]]) if node.params.get("relu", False) else ins[0]
    bn = g.op("BatchNormalization", [x, *ins[1:]], epsilon=float(node.params.get("eps", 1e-5)))
    return [g.op("MaxPool", [bn], **_pool_attrs(node))]


def _conv2d_act(g, node, ins):
    """Conv, then Relu / HardSigmoid / HardSwish (ONNX's hard ones compute the same ops, alpha 1/6 for HardSwish)."""
    y = _conv2d(g, node, ins)[0]
    act, p = node.params.get("act", "relu"), node.params
    if act == "relu":
        return [g.op("Relu", [y])]
    if act == "hardswish" and p.get("alpha", 0.2) == float(out_dtype(node).type(1 / 6)) and p.get("beta", 0.5) == 0.5:
        return [g.op("HardSwish", [y])]
    h = g.op("HardSigmoid", [y], alpha=float(p.get("alpha", 0.2)), beta=float(p.get("beta", 0.5)))
    return [h] if act == "hardsigmoid" else [g.op("Mul", [y, h])]


def _conv2d_add_relu(g, node, ins):
    """Conv (x, weight[, bias]), then Add of the residual, then Relu."""
    x, w, r, *b = compute(g, node, ins)
    p = node.params
    pad = _pair2(p.get("padding"), (0, 0))
    y = g.op("Conv", [x, w, *b], strides=_pair2(p.get("stride"), (1, 1)), pads=pad + pad,
             dilations=_pair2(p.get("dilation"), (1, 1)), group=int(p.get("groups", 1)))
    return [g.op("Relu", [g.op("Add", [y, r])])]


def _layer_scale_residual(g, node, ins):
    """Mul of gamma and y, Transpose by the op's axes, then Add of the residual."""
    y, gamma, r = compute(g, node, ins)
    axes = tuple(int(a) for a in node.params.get("axes", (0, 3, 1, 2)))
    perm = [a % len(axes) for a in axes]
    return [g.op("Add", [r, g.op("Transpose", [g.op("Mul", [gamma, y])], perm=perm)])]


def _squeeze_excite(g, node, ins):
    """The recorded pattern: GlobalAveragePool, Conv, Relu, Conv, HardSigmoid, then Mul with x."""
    x, w1, b1, w2, b2 = compute(g, node, ins)
    h = g.op("Relu", [g.op("Conv", [g.op("GlobalAveragePool", [x]), w1, b1])])
    p = node.params
    gate = g.op("HardSigmoid", [g.op("Conv", [h, w2, b2])], alpha=float(p.get("alpha", 0.2)),
                beta=float(p.get("beta", 0.5)))
    return [g.op("Mul", [x, gate])]


def _channel_shuffle(g, node, ins):
    """The recorded pattern: Concat along axis 1 (of several inputs), Reshape (N, g, C / g, ...), Transpose
    of the two group axes, Reshape back to the concatenation's shape (the batch and trailing sizes read from
    it when the model runs: a dynamic batch, or an empty one, stays right)."""
    xs = compute(g, node, ins)
    x = g.op("Concat", xs, axis=1) if len(xs) > 1 else xs[0]
    shape, groups = node.avals[0].shape, int(node.params.get("groups", 2))
    sizes = g.op("Shape", [x])
    split = g.op("Concat", [g.op("Slice", [sizes, g.ints([0]), g.ints([1])]), g.ints([groups, int(shape[1]) // groups]),
                            g.op("Slice", [sizes, g.ints([2]), g.ints([len(shape)])])], axis=0)
    t = g.op("Transpose", [g.op("Reshape", [x, split])], perm=[0, 2, 1] + list(range(3, len(shape) + 1)))
    return [g.op("Reshape", [t, sizes])]


def _layer_norm(g, node, ins):
    rank = input_rank(g, node)
    ax = node.params.get("axis", -1) % rank
    eps = float(node.params.get("eps", 1e-5))
    if ax == rank - 1:  # LayerNormalization (opset 17) normalizes the axes from `axis` on
        return [g.op("LayerNormalization", compute(g, node, ins), axis=-1, epsilon=eps)]
    x = g.cast(ins[0], in_dtype(node, 0), out_dtype(node))
    dt = out_dtype(node)
    axes = g.ints([ax])
    d = g.op("Sub", [x, g.op("ReduceMean", [x, axes], keepdims=1)])
    v = g.op("ReduceMean", [g.op("Mul", [d, d]), axes], keepdims=1)
    y = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [v, g.scalar(eps, dt)])])])
    gamma, beta = (_per_axis(g, node, t, i + 1, ax, rank) for i, t in enumerate(ins[1:]))
    return [g.op("Add", [g.op("Mul", [y, gamma]), beta])]


def _gelu(g, node, ins):
    approx = node.params.get("approximation", "none")
    x, = compute(g, node, ins)
    if g.opset >= 20:
        return [g.op("Gelu", [x], approximate=approx)]
    dt = out_dtype(node)
    if approx == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        inner = g.op("Add", [x, g.op("Mul", [g.op("Mul", [g.op("Mul", [x, x]), x]), g.scalar(0.044715, dt)])])
        t = g.op("Tanh", [g.op("Mul", [inner, g.scalar(math.sqrt(2 / math.pi), dt)])])
    else:  # 0.5 x (1 + erf(x / sqrt(2)))
        t = g.op("Erf", [g.op("Mul", [x, g.scalar(1 / math.sqrt(2), dt)])])
    return [g.op("Mul", [g.op("Mul", [x, g.scalar(0.5, dt)]), g.op("Add", [t, g.scalar(1, dt)])])]


CONVERTERS = {
    "dense": _dense, "matmul": _matmul, "dot": _dot, "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"), "masked_softmax": _masked_softmax, "one_hot": _one_hot, "softmax_cross_entropy_rows": _sce_rows,
    "class_labels": _class_labels,
    "dropout": _dropout, "conv2d": _conv2d, "conv2d_transpose": _conv2d_transpose, "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d, "batch_norm": _batch_norm, "layer_norm": _layer_norm, "gelu": _gelu,
    "batch_norm_max_pool2d": _bn_max_pool2d, "conv2d_act": _conv2d_act, "batch_norm_relu": _batch_norm_relu,
    "conv2d_add_relu": _conv2d_add_relu, "layer_scale_residual": _layer_scale_residual,
    "max_pool2d_relu": _max_pool2d_relu,
    "squeeze_excite": _squeeze_excite, "channel_shuffle": _channel_shuffle,
}
