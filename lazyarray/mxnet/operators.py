"""MXNet 1.x operators -> graphs of our registry ops, with MXNet's attribute semantics.

``CONVERTERS`` maps an MXNet op name to a function ``(node: MxNode) -> list[Symbol]`` (the node's
visible outputs). Each builds with ``la.sym`` functions, so every node of the result is a
registry op and the graph runs, differentiates, prints and exports like any other. Operators
our registry lacks are composed here (sum pooling, and pooling geometries our pooling ops refuse,
from padded strided slices; LayerNorm from reductions), and MXNet's ``Reshape``
codes are resolved into a concrete ``reshape`` from the shapes known at load time.

The table of what is covered lives in ``docs/mxnet.md``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .. import sym as S
from ..errors import GraphFormatError
from ..graph.symbol import Symbol
from ..ops.reshape_codes import resolve_reshape
from .attrs import Attrs

# Attributes that never change what an op computes in inference (tuning hints, layouts checked apart).
IGNORED = frozenset({"cudnn_tune", "cudnn_off", "workspace", "num_args", "ctx", "name"})


@dataclass
class MxNode:
    """One MXNet node being converted: its inputs (single-output symbols), attributes and label."""

    op: str
    name: str
    inputs: list[Symbol]
    attrs: Attrs
    where: str

    def fail(self, msg: str):
        raise GraphFormatError(f"{self.where}: {msg}")

    def arity(self, *counts: int) -> None:
        if len(self.inputs) not in counts:
            want = " or ".join(map(str, counts))
            self.fail(f"takes {want} inputs, got {len(self.inputs)}")


def shape_of(s: Symbol) -> tuple | None:
    e = s.outputs[0]
    return e.node.avals[e.index].shape


def ndim_of(n: MxNode, s: Symbol, why: str) -> int:
    shape = shape_of(s)
    if shape is None:
        n.fail(f"{why} needs the rank of its input, which is unknown here; give the model's input shapes "
               "(la.mxnet.load(..., input_shapes={name: shape}) or SymbolBlock.imports(..., input_shapes=...))")
    return len(shape)


# -- dense, convolution, normalization ------------------------------------------------------------
def fully_connected(n: MxNode) -> list[Symbol]:
    no_bias = n.attrs.bool("no_bias", False)
    n.arity(2 if no_bias else 3)
    x = n.inputs[0]
    if n.attrs.bool("flatten", True):
        x = S.flatten(x)
    return [S.dense(x, *n.inputs[1:])]


def _pair(n: MxNode, name: str, default: tuple) -> tuple[int, int]:
    v = n.attrs.ints(name, default)
    if v is None or v == ():
        v = default
    if len(v) == 1:
        v = (v[0], v[0])
    if len(v) != 2 or None in v:
        n.fail(f"{name}={v}: only 2-D convolution and pooling (NCHW) are supported")
    return v


def convolution(n: MxNode) -> list[Symbol]:
    kernel = n.attrs.ints("kernel")
    if kernel is None or len(kernel) != 2:
        n.fail(f"kernel={kernel}: only 2-D convolution (NCHW) is supported")
    if n.attrs.choice("layout", "None", ("None", "NCHW")) not in ("None", "NCHW"):
        n.fail("only the NCHW layout is supported")
    stride, dilate, pad = _pair(n, "stride", (1, 1)), _pair(n, "dilate", (1, 1)), _pair(n, "pad", (0, 0))
    groups = n.attrs.int("num_group", 1)
    no_bias = n.attrs.bool("no_bias", False)
    n.arity(2 if no_bias else 3)
    x, w = n.inputs[0], n.inputs[1]
    bias = None if no_bias else n.inputs[2]
    num_filter = n.attrs.int("num_filter", None)
    if groups < 1 or (num_filter is not None and num_filter % groups):
        n.fail(f"num_group={groups} must divide num_filter {num_filter}")
    args = (x, w) if bias is None else (x, w, bias)
    return [S.conv2d(*args, stride=stride, padding=pad, dilation=dilate, groups=groups)]


def deconvolution(n: MxNode) -> list[Symbol]:
    kernel = n.attrs.ints("kernel")
    if kernel is None or len(kernel) != 2:
        n.fail(f"kernel={kernel}: only 2-D deconvolution (NCHW) is supported")
    if n.attrs.choice("layout", "None", ("None", "NCHW")) not in ("None", "NCHW"):
        n.fail("only the NCHW layout is supported")
    if n.attrs.ints("target_shape", ()) not in ((), None, (0, 0)):
        n.fail("target_shape is not supported; give pad and adj instead")
    stride, dilate, pad = _pair(n, "stride", (1, 1)), _pair(n, "dilate", (1, 1)), _pair(n, "pad", (0, 0))
    adj = _pair(n, "adj", (0, 0))
    groups = n.attrs.int("num_group", 1)
    num_filter = n.attrs.int("num_filter", None)
    if groups < 1 or (num_filter is not None and num_filter % groups):
        n.fail(f"num_group={groups} must divide num_filter {num_filter}")
    no_bias = n.attrs.bool("no_bias", True)  # Deconvolution's default, unlike Convolution's
    n.arity(2 if no_bias else 3)
    return [S.conv2d_transpose(*n.inputs, stride=stride, padding=pad, output_padding=adj, dilation=dilate,
                               groups=groups)]


def batch_norm(n: MxNode) -> list[Symbol]:
    n.arity(5)
    x, gamma, beta, mean, var = n.inputs
    if n.attrs.bool("fix_gamma", True):  # MXNet's default: gamma is treated as ones
        gamma = S.ones_like(gamma)
    n.attrs.bool("use_global_stats", False)  # inference always uses the moving statistics
    n.attrs.float("momentum", 0.9)  # training only
    axis = n.attrs.int("axis", 1)
    return [S.batch_norm(x, gamma, beta, mean, var, eps=n.attrs.float("eps", 1e-3), axis=axis)]


def layer_norm(n: MxNode) -> list[Symbol]:
    n.arity(3)
    x, gamma, beta = n.inputs
    axis, eps = n.attrs.int("axis", -1), n.attrs.float("eps", 1e-5)
    if n.attrs.bool("output_mean_var", False):
        n.fail("output_mean_var=True is not supported")
    mean = S.mean(x, axis=axis, keepdims=True)
    centered = x - mean
    var = S.mean(S.square(centered), axis=axis, keepdims=True)
    y = centered * S.power(var + eps, -0.5)
    if axis != -1:
        nd = ndim_of(n, x, f"LayerNorm over axis {axis}")
        trailing = tuple(range(1, nd - axis % nd))
        if trailing:
            gamma, beta = S.expand_dims(gamma, axis=trailing), S.expand_dims(beta, axis=trailing)
    return [y * gamma + beta]


# -- activations --------------------------------------------------------------------------------
def _softrelu(x):
    return S.maximum(x, 0.0) + S.log(S.exp(S.negative(S.abs(x))) + 1.0)  # log(1 + e^x), no overflow


def _softsign(x):
    return x / (S.abs(x) + 1.0)


_ACTS: dict[str, Callable] = {"relu": S.relu, "sigmoid": S.sigmoid, "tanh": S.tanh,
                              "softrelu": _softrelu, "softsign": _softsign}


def activation(n: MxNode) -> list[Symbol]:
    n.arity(1)
    act = n.attrs.choice("act_type", None, tuple(_ACTS))
    return [_ACTS[act](n.inputs[0])]


_SELU_ALPHA, _SELU_LAMBDA = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def leaky_relu(n: MxNode) -> list[Symbol]:
    act = n.attrs.choice("act_type", "leaky", ("leaky", "prelu", "elu", "selu", "gelu"))
    slope = n.attrs.float("slope", 0.25)
    n.arity(2 if act == "prelu" else 1)
    x = n.inputs[0]
    pos, neg = S.maximum(x, 0.0), S.minimum(x, 0.0)
    if act == "leaky":
        return [pos + neg * slope]
    if act == "prelu":
        gamma = n.inputs[1]
        nd = ndim_of(n, x, "prelu")
        if nd > 2:
            gamma = S.expand_dims(gamma, axis=tuple(range(1, nd - 1)))
        return [pos + neg * gamma]
    if act == "elu":
        return [pos + (S.exp(neg) - 1.0) * slope]
    if act == "selu":
        return [(pos + (S.exp(neg) - 1.0) * _SELU_ALPHA) * _SELU_LAMBDA]
    # gelu: MXNet 1.9 computes x * (1 + erf(x / sqrt(2))) / 2 (checked against its output)
    return [x * (_erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5]


def _erf(x):
    """erf(x) from exp: Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, float32's own
    resolution near 1), since the registry has no erf."""
    a = S.abs(x)
    t = S.divide(1.0, a * 0.3275911 + 1.0)
    poly = t * (t * (t * (t * (t * 1.061405429 - 1.453152027) + 1.421413741) - 0.284496736) + 0.254829592)
    return S.sign(x) * (1.0 - poly * S.exp(S.negative(a * a)))


# -- pooling ------------------------------------------------------------------------------------------
def pooling(n: MxNode) -> list[Symbol]:
    n.arity(1)
    x = n.inputs[0]
    kind = n.attrs.choice("pool_type", "max", ("max", "avg", "sum"))
    if n.attrs.choice("layout", "None", ("None", "NCHW")) not in ("None", "NCHW"):
        n.fail("only the NCHW layout is supported")
    if n.attrs.bool("global_pool", False):
        red = {"max": S.max, "avg": S.mean, "sum": S.sum}[kind]
        return [red(x, axis=(2, 3), keepdims=True)]
    kernel = _pair(n, "kernel", (1, 1))
    stride, pad = _pair(n, "stride", (1, 1)), _pair(n, "pad", (0, 0))
    full = n.attrs.choice("pooling_convention", "valid", ("valid", "full")) == "full"
    count_pad = n.attrs.bool("count_include_pad", True)
    shape = shape_of(x)
    if kind != "sum" and 2 * pad[0] <= kernel[0] and 2 * pad[1] <= kernel[1] and \
            not (full and _outside_window(shape, kernel, stride, pad)):
        if kind == "max":
            return [S.max_pool2d(x, kernel=kernel, stride=stride, padding=pad, ceil_mode=full)]
        return [S.avg_pool2d(x, kernel=kernel, stride=stride, padding=pad, ceil_mode=full,
                             count_include_pad=count_pad)]
    # 'full' rounds the output size up: extra padding at the end makes the last, partial window
    extra = (0, 0)
    if full:
        if shape is None or len(shape) != 4 or None in shape[2:]:
            n.fail("pooling_convention='full' needs the input's height and width; pass input_shapes")
        extra = tuple(_full_extra(shape[2 + a], kernel[a], stride[a], pad[a]) for a in (0, 1))
    if kind == "max":
        if extra == (0, 0) and 2 * pad[0] <= kernel[0] and 2 * pad[1] <= kernel[1]:
            return [S.max_pool2d(x, kernel=kernel, stride=stride, padding=pad)]
        widths = ((0, 0), (0, 0), (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]))
        xp = S.pad(x, pad_width=widths, constant_values=-math.inf)
        return [S.max_pool2d(xp, kernel=kernel, stride=stride)]
    total = _window_sum(x, kernel, stride, pad, extra)
    if kind == "sum":
        return [total]
    if count_pad and extra == (0, 0):
        return [total * (1.0 / (kernel[0] * kernel[1]))]
    # the count of each window: input pixels (count_include_pad=False), or input and padding
    # pixels but not the extra 'full' ones (MXNet clips the window at input + pad)
    ones = S.ones_like(x)
    if count_pad:
        widths = ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1]))
        ones = S.pad(ones, pad_width=widths, constant_values=1.0)
        count = _window_sum(ones, kernel, stride, (0, 0), extra)
    else:
        count = _window_sum(ones, kernel, stride, pad, extra)
    return [total / count]


def _outside_window(shape, kernel, stride, pad) -> bool:
    """Whether a 'full' pooling has a last window lying wholly in the padding (MXNet computes it;
    our ops refuse it), so the composed form is needed. Unknown sizes: assume not."""
    if shape is None or len(shape) != 4:
        return False
    for size, k, s, p in zip(shape[2:], kernel, stride, pad):
        if size is not None and (-(-(size + 2 * p - k) // s)) * s >= size + p:
            return True
    return False


def _full_extra(size: int, k: int, s: int, p: int) -> int:
    out_full = -(-(size + 2 * p - k) // s) + 1
    return max(0, (out_full - 1) * s + k - (size + 2 * p))


def _window_sum(x, kernel, stride, pad, extra):
    """The sum over each pooling window, zero padded (a sum of kh * kw strided slices)."""
    widths = ((0, 0), (0, 0), (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]))
    if widths != ((0, 0),) * 4:
        x = S.pad(x, pad_width=widths)
    kh, kw = kernel
    y = None
    for i in range(kh):
        for j in range(kw):
            key = (slice(None), slice(None), slice(i, -(kh - 1 - i) or None, stride[0]),
                   slice(j, -(kw - 1 - j) or None, stride[1]))
            win = S.getitem(x, key=key)
            y = win if y is None else y + win
    return y


# -- softmax family -----------------------------------------------------------------------------
def softmax(n: MxNode, log: bool = False) -> list[Symbol]:
    n.arity(1)
    x = n.inputs[0]
    if n.attrs.bool("use_length", False):
        n.fail("use_length=True is not supported")
    t = n.attrs.float("temperature", None)
    if t is not None and t != 1.0:
        x = x * (1.0 / t)
    axis = n.attrs.int("axis", -1)
    return [(S.log_softmax if log else S.softmax)(x, axis=axis)]


def softmax_output(n: MxNode) -> list[Symbol]:
    x = n.inputs[0]  # the label input (training only) is dropped
    if n.attrs.bool("multi_output", False):
        return [S.softmax(x, axis=1)]
    if n.attrs.bool("preserve_shape", False):
        return [S.softmax(x, axis=-1)]
    shape = shape_of(x)
    if shape is not None and len(shape) == 2:
        return [S.softmax(x, axis=1)]
    return [S.reshape_like(S.softmax(S.flatten(x), axis=1), x)]


def softmax_activation(n: MxNode) -> list[Symbol]:
    n.arity(1)
    x = n.inputs[0]
    mode = n.attrs.choice("mode", "instance", ("instance", "channel"))
    return [S.softmax(x, axis=1 if mode == "channel" else -1)]  # instance: MXNet's FlatTo2D keeps the last axis


# -- elementwise ----------------------------------------------------------------------------------
def _binary(fn):
    def convert(n: MxNode) -> list[Symbol]:
        n.arity(2)
        return [fn(n.inputs[0], n.inputs[1])]
    return convert


def _scalar(fn):
    def convert(n: MxNode) -> list[Symbol]:
        n.arity(1)
        if n.attrs.bool("is_int", False):
            n.fail("integer scalars (is_int=True) are not supported")
        return [fn(n.inputs[0], n.attrs.float("scalar"))]
    return convert


def _unary(fn):
    def convert(n: MxNode) -> list[Symbol]:
        n.arity(1)
        return [fn(n.inputs[0])]
    return convert


def clip(n: MxNode) -> list[Symbol]:
    n.arity(1)
    return [S.minimum(S.maximum(n.inputs[0], n.attrs.float("a_min")), n.attrs.float("a_max"))]


def dropout(n: MxNode) -> list[Symbol]:
    n.arity(1)
    if n.attrs.choice("mode", "training", ("training", "always")) == "always":
        return [S.dropout(n.inputs[0], p=n.attrs.float("p", 0.5), training=True)]
    return [n.inputs[0]]  # identity in inference


def cast(n: MxNode) -> list[Symbol]:
    n.arity(1)
    dtype = n.attrs.choice("dtype", None, ("float16", "float32", "float64", "uint8", "int8", "int32", "int64",
                                           "bool"))
    return [S.cast(n.inputs[0], dtype=dtype)]


# -- shapes ---------------------------------------------------------------------------------------
def concat(n: MxNode) -> list[Symbol]:
    if not n.inputs:
        n.fail("takes at least one input")
    return [S.concatenate(list(n.inputs), axis=n.attrs.int("dim", 1))]


def reshape(n: MxNode) -> list[Symbol]:
    n.arity(1)
    x = n.inputs[0]
    codes = n.attrs.ints("shape", ())
    if codes is None or None in codes:
        n.fail(f"shape={codes} is not a tuple of integers")
    shape = shape_of(x)
    if all(c > 0 or c == -1 for c in codes) and codes.count(-1) <= 1:
        return [S.reshape(x, shape=codes)]  # no special codes: any input shape
    reverse = n.attrs.bool("reverse", False)
    if shape is not None and None not in shape and all(isinstance(d, int) for d in shape):
        try:
            out = resolve_reshape(tuple(shape), codes, reverse)
        except ValueError as exc:
            n.fail(f"cannot reshape {tuple(shape)} with shape={codes}: {exc}")
        return [S.reshape(x, shape=out)]
    # sizes not known when loading: the codes are resolved against each call's shape (as MXNet binds)
    return [S.reshape_codes(x, codes=tuple(codes), reverse=reverse)]


def transpose(n: MxNode) -> list[Symbol]:
    n.arity(1)
    axes = n.attrs.ints("axes", ())
    return [S.transpose(n.inputs[0], axes=tuple(axes) if axes else None)]


def slice_axis(n: MxNode) -> list[Symbol]:
    n.arity(1)
    axis, begin, end = n.attrs.int("axis"), n.attrs.int("begin"), n.attrs.int("end", None)
    sl = slice(begin, end)
    key = (Ellipsis, sl) + (slice(None),) * (-axis - 1) if axis < 0 else (slice(None),) * axis + (sl,)
    return [S.getitem(n.inputs[0], key=key)]


def expand_dims(n: MxNode) -> list[Symbol]:
    n.arity(1)
    return [S.expand_dims(n.inputs[0], axis=n.attrs.int("axis"))]


def embedding(n: MxNode) -> list[Symbol]:
    n.arity(2)
    x, w = n.inputs
    rows = n.attrs.int("input_dim")
    # MXNet clips out-of-range indices to [0, input_dim - 1]
    idx = S.cast(S.minimum(S.maximum(x, 0.0), float(rows - 1)), dtype="int64")
    return [S.take(w, idx, axis=0)]


def _reduce(fn):
    def convert(n: MxNode) -> list[Symbol]:
        n.arity(1)
        x = n.inputs[0]
        axis = n.attrs.ints("axis", None)
        keepdims = n.attrs.bool("keepdims", False)
        if axis is not None and None in axis:
            n.fail(f"axis={axis} is not a tuple of integers")
        if axis == ():
            axis = None
        if n.attrs.bool("exclude", False):
            nd = ndim_of(n, x, "exclude=True")
            chosen = set() if axis is None else {a % nd for a in axis}
            axis = tuple(a for a in range(nd) if a not in chosen)
        y = fn(x, axis=axis, keepdims=keepdims)
        shape = shape_of(x)
        if not keepdims and (axis is None or (shape is not None and len({a % len(shape) for a in axis})
                                              == len(shape))):
            y = S.reshape(y, shape=(1,))  # MXNet 1.x: reducing every axis gives shape (1,), not ()
        return [y]
    return convert


def batch_dot(n: MxNode) -> list[Symbol]:
    n.arity(2)
    a, b = n.inputs
    if n.attrs.bool("transpose_a", False):
        a = S.transpose(a, axes=(0, 2, 1))
    if n.attrs.bool("transpose_b", False):
        b = S.transpose(b, axes=(0, 2, 1))
    return [S.matmul(a, b)]


def dot(n: MxNode) -> list[Symbol]:
    n.arity(2)
    a, b = n.inputs
    if n.attrs.bool("transpose_a", False):
        a = S.transpose(a)
    if n.attrs.bool("transpose_b", False):
        b = S.transpose(b)
    return [S.matmul(a, b)]


def slice_op(n: MxNode) -> list[Symbol]:
    n.arity(1)
    begin, end = n.attrs.ints("begin"), n.attrs.ints("end")
    step = n.attrs.ints("step", ()) or ()
    if begin is None or end is None or len(begin) != len(end) or (step and len(step) != len(begin)):
        n.fail(f"begin={begin}, end={end}, step={step} must be tuples of one length")
    step = step or (None,) * len(begin)
    if any(s is not None and s < 1 for s in step):
        n.fail(f"step={step}: only positive steps are supported")
    return [S.getitem(n.inputs[0], key=tuple(slice(b, e, s) for b, e, s in zip(begin, end, step)))]


def pad(n: MxNode) -> list[Symbol]:
    n.arity(1)
    mode = n.attrs.choice("mode", "constant", ("constant", "edge", "reflect"))
    widths = n.attrs.ints("pad_width")
    if widths is None or len(widths) % 2 or None in widths:
        n.fail(f"pad_width={widths} must hold two integers per axis")
    pairs = tuple((widths[k], widths[k + 1]) for k in range(0, len(widths), 2))
    if mode != "constant":
        return [S.pad(n.inputs[0], pad_width=pairs, mode=mode)]
    return [S.pad(n.inputs[0], pad_width=pairs, constant_values=n.attrs.float("constant_value", 0.0))]


def take(n: MxNode) -> list[Symbol]:
    n.arity(2)
    a, idx = n.inputs
    axis = n.attrs.int("axis", 0)
    mode = n.attrs.choice("mode", "clip", ("clip", "raise"))
    shape = shape_of(a)
    if mode == "clip":
        if shape is None or len(shape) <= axis or shape[axis] is None:
            n.fail(f"mode='clip' needs the size of axis {axis} of the data")
        idx = S.minimum(S.maximum(idx, 0.0), float(shape[axis] - 1))
    return [S.take(a, S.cast(idx, dtype="int64"), axis=axis)]


def _swap(fn):
    return lambda x, s: fn(s, x)


_BINARY = {"add": S.add, "sub": S.subtract, "mul": S.multiply, "div": S.divide, "maximum": S.maximum,
           "minimum": S.minimum, "power": S.power}
_SCALAR = {"_plus_scalar": S.add, "_minus_scalar": S.subtract, "_rminus_scalar": _swap(S.subtract),
           "_mul_scalar": S.multiply, "_div_scalar": S.divide, "_rdiv_scalar": _swap(S.divide),
           "_power_scalar": S.power, "_rpower_scalar": _swap(S.power), "_maximum_scalar": S.maximum,
           "_minimum_scalar": S.minimum}
_UNARY = {"relu": S.relu, "sigmoid": S.sigmoid, "tanh": S.tanh, "exp": S.exp, "log": S.log, "sqrt": S.sqrt,
          "square": S.square, "abs": S.abs, "negative": S.negative, "sin": S.sin, "cos": S.cos, "sign": S.sign,
          "_copy": S.copy, "identity": S.copy, "BlockGrad": S.stop_gradient, "stop_gradient": S.stop_gradient,
          "Flatten": S.flatten, "flatten": S.flatten, "softsign": _softsign,
          "rsqrt": lambda x: S.power(x, -0.5), "reciprocal": lambda x: S.divide(1.0, x)}

CONVERTERS: dict[str, Callable[[MxNode], list[Symbol]]] = {
    "FullyConnected": fully_connected, "Convolution": convolution, "Deconvolution": deconvolution, "BatchNorm": batch_norm,
    "LayerNorm": layer_norm, "Activation": activation, "LeakyReLU": leaky_relu, "Pooling": pooling,
    "Dropout": dropout, "softmax": softmax, "log_softmax": lambda n: softmax(n, log=True),
    "SoftmaxOutput": softmax_output, "Softmax": softmax_output, "SoftmaxActivation": softmax_activation,
    "clip": clip, "Cast": cast, "cast": cast, "Concat": concat, "concat": concat, "Reshape": reshape,
    "reshape": reshape, "transpose": transpose, "slice_axis": slice_axis, "expand_dims": expand_dims,
    "Embedding": embedding, "mean": _reduce(S.mean), "sum": _reduce(S.sum), "max": _reduce(S.max),
    "min": _reduce(S.min), "batch_dot": batch_dot, "dot": dot, "slice": slice_op, "pad": pad, "Pad": pad,
    "take": take, "ones_like": _unary(S.ones_like), "zeros_like": _unary(S.zeros_like),
    "reshape_like": _binary(S.reshape_like),
    **{op: _scalar(fn) for op, fn in _SCALAR.items()},
    **{op: _unary(fn) for op, fn in _UNARY.items()},
}
for _name, _fn in _BINARY.items():
    CONVERTERS[f"broadcast_{_name}"] = _binary(_fn)
    CONVERTERS[f"elemwise_{_name}"] = _binary(_fn)
    CONVERTERS[f"_{_name}"] = _binary(_fn)
for _alias, _name in (("_plus", "add"), ("_Plus", "add"), ("broadcast_plus", "add"), ("_minus", "sub"),
                      ("_Minus", "sub"), ("broadcast_minus", "sub"), ("_Mul", "mul"), ("_Div", "div"),
                      ("_Maximum", "maximum"), ("_Minimum", "minimum"), ("_Power", "power")):
    CONVERTERS[_alias] = _binary(_BINARY[_name])

# Ops whose MXNet node has more outputs than the inference graph uses (BatchNorm's mean and var).
HIDDEN_OUTPUTS = {"BatchNorm": 3, "LayerNorm": 3, "Dropout": 2, "SoftmaxOutput": 1}
# Inputs the inference graph never reads (labels of loss layers): not graph inputs after loading.
DROPPED_INPUTS = {"SoftmaxOutput": (1,), "Softmax": (1,)}
