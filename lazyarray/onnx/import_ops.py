"""ONNX operators -> graphs of our registry ops, with the ONNX spec's semantics (opset 13 and up).

``CONVERTERS`` maps an ONNX ``op_type`` to a function ``(node: OnnxNode) -> list[Symbol | None]``
(one entry per output the node declares; ``None`` for an output we cannot produce, which is an
error only when the graph reads it). Every converter builds with ``la.sym`` functions, so the
result is made of registry ops and runs, differentiates, prints and exports like any other graph.
Inputs that ONNX passes as tensors but our ops take as parameters (shapes, axes, pads, scales) are
read at load time from initializers, ``Constant`` nodes or sub-graphs of them (``OnnxNode.const``);
a data-dependent one is refused with the node's name. Operators the registry lacks are composed
here, as the MXNet importer does (grouped/dilated convolution reuse its per-tap helpers).

The families: elementwise and math, reductions, casts and constants here; shapes (``import_shape.py``),
nn (``import_nn.py``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import sym as S
from ..aval import Aval, check_alloc
from ..device import current_device
from ..dim import is_symbolic
from ..errors import GraphFormatError, LazyArrayError, OutOfMemoryError
from ..graph.node import Entry, const_node
from ..graph.symbol import Symbol
from ..mxnet.operators import _erf
from .narrow import narrow_format

Converter = Callable[["OnnxNode"], list]


class NotKnownWhenLoading(GraphFormatError):
    """A value a converter must know when loading (a shape, a position) depends on a graph input."""


class LoadSizeError(GraphFormatError, OutOfMemoryError):
    """A model whose sizes ask for more memory than lazyarray allows (``la.OutOfMemoryError``: a
    result above ``aval.max_alloc_bytes()``, or a value it must compute while loading above
    ``MAX_FOLD_BYTES``), found while loading it (``GraphFormatError``)."""


# The most bytes the loader computes for one value while loading (a ConstantOfShape, a Range,
# OneHot's positions, Resize's index tables, a shape a converter reads). A larger ConstantOfShape,
# Range, OneHot or EyeLike is left in the graph as ops (``fill``, ``iota``) computed when the graph
# runs, where the executor's memory plan counts them and its allocation check applies; what cannot
# wait (a shape the graph is built from) raises ``LoadSizeError``. A few hundred bytes of model can
# so never make the loader allocate terabytes. Read at each use (tests lower it).
MAX_FOLD_BYTES = 64 << 20


def foldable(nbytes: int) -> bool:
    """Whether a value of ``nbytes`` is computed while loading (else it is left to run time)."""
    return nbytes <= MAX_FOLD_BYTES


def iota_along(size: int, axis: int, rank: int, dtype) -> object:
    """``0 .. size - 1`` along ``axis`` of a rank-``rank`` array: a constant, or an ``iota`` op computed
    when the graph runs when it would take more than ``import_ops.MAX_FOLD_BYTES`` (or ``size`` is symbolic)."""
    shape = [1] * rank
    shape[axis] = size
    if isinstance(size, int) and foldable(size * np.dtype(dtype).itemsize):
        return constant(np.arange(size, dtype=dtype).reshape(shape))
    return S.reshape(S.iota(bounds=(0, size, 1), dtype=dtype, device=current_device()), shape=tuple(shape))


def check_fold(s: Symbol, what: str) -> int:
    """The bytes the op nodes of ``s`` compute (outputs of known size), checked against
    ``MAX_FOLD_BYTES`` before ``load.Conversion._evaluate`` computes them while loading: a value the
    loader must know (a shape, a count) is never worth more than that, so a model cannot make the
    loader allocate what its graph would allocate when run (``LoadSizeError``)."""
    total, largest = 0, None
    for node in s.topo():
        if node.op is None:  # initializers, given inputs and constants: already in memory
            continue
        for a in node.avals:
            nbytes = a.nbytes if a.shape is not None and a.dtype is not None else None
            if nbytes:
                total += nbytes
                if largest is None or nbytes > largest[0]:
                    largest = (nbytes, node, a)
    if not foldable(total):
        nbytes, node, a = largest
        raise LoadSizeError(f"{what} must be computed while loading, which takes {total} bytes (the largest step "
                            f"{node.op.name} -> {a.dtype}{list(a.shape)}, {nbytes} bytes), more than the "
                            f"{MAX_FOLD_BYTES} bytes lazyarray computes when loading a model "
                            "(lazyarray.onnx.import_ops.MAX_FOLD_BYTES); check the sizes in the model")
    return total


def check_size(n: OnnxNode, shape, dtype, what: str = "output") -> tuple[tuple, int]:
    """``(shape, nbytes)`` of a dense ``dtype`` array of the concrete ``shape`` a converter is about
    to make or build, checked before anything is allocated: ``GraphFormatError`` for a negative
    dim or a size no array can have, ``LoadSizeError`` (an ``OutOfMemoryError``) above the
    allocation limit (``aval.max_alloc_bytes()``)."""
    try:
        shape = check_alloc(n.where, shape, dtype, what)
    except OutOfMemoryError as exc:
        raise LoadSizeError(f"{exc}; the model asks for it (a size in the file or computed from it)") from None
    except LazyArrayError as exc:
        raise GraphFormatError(str(exc)) from None
    return shape, math.prod(shape) * np.dtype(dtype).itemsize


def fold_too_large(n: OnnxNode, nbytes: int, what: str) -> None:
    """``LoadSizeError`` when ``what`` (computed while loading, not deferrable) takes more than
    ``MAX_FOLD_BYTES``."""
    if not foldable(nbytes):
        raise LoadSizeError(f"{n.where}: {what} would take {nbytes} bytes while loading, more than the "
                            f"{MAX_FOLD_BYTES} bytes lazyarray computes when loading a model "
                            "(lazyarray.onnx.import_ops.MAX_FOLD_BYTES); check the sizes in the model")


@dataclass
class OnnxNode:
    """One ONNX node being converted: its inputs (``None`` where omitted), attributes, opset."""

    op: str
    name: str
    inputs: list  # list[Symbol | None]
    attrs: dict
    opset: int
    where: str
    n_outputs: int
    const_of: Callable = field(repr=False, default=None)  # (input position) -> np.ndarray
    subgraph: Callable = field(repr=False, default=None)  # (graph attribute, [(shape, dtype)]) -> import_control.Body
    # (graph attribute, input values) -> its outputs: the body converted in place, reading enclosing names directly
    inline: Callable = field(repr=False, default=None)
    evaluate: Callable = field(repr=False, default=None)  # (Symbol, what) -> its value known at load time
    in_types: tuple = ()  # ONNX element types of the inputs where known (0: unknown); narrow.py

    def fail(self, msg: str):
        raise GraphFormatError(f"{self.where}: {msg}")

    def arity(self, lo: int, hi: int | None = None) -> None:
        hi = lo if hi is None else hi
        if not lo <= len(self.inputs) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            self.fail(f"takes {want} inputs, got {len(self.inputs)}")

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def input(self, i: int) -> Symbol | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def const(self, i: int, what: str) -> np.ndarray | None:
        """The value of input ``i`` known at load time (``None`` when the input is omitted)."""
        if self.input(i) is None:
            return None
        return self.const_of(i, what)

    def ints(self, i: int, what: str) -> list[int] | None:
        """Input ``i`` as a list of sizes known when loading: ints, or ``la.Dim`` expressions where the
        model computes them from dynamic dims (``Shape`` of a dynamic batch)."""
        v = self.const(i, what)
        return None if v is None else [t if is_symbolic(t) else int(t) for t in np.asarray(v).reshape(-1)]

    def shape(self, i: int = 0) -> tuple | None:
        return shape_of(self.inputs[i])

    def known_shape(self, i: int, why: str) -> tuple:
        s = self.shape(i)
        if s is None or None in s:
            self.fail(f"{why} needs the full shape of input {i}, which is {s} here; give the model's input "
                      "shapes (la.onnx.load(path, input_shapes={name: shape}))")
        return tuple(s)

    def rank(self, i: int, why: str) -> int:
        s = self.shape(i)
        if s is None:
            self.fail(f"{why} needs the rank of input {i}, which is unknown here; give the model's input "
                      "shapes (la.onnx.load(path, input_shapes={name: shape}))")
        return len(s)


def np_dtype(elem_type: int, where: str) -> np.dtype:
    """The NumPy dtype of an ONNX ``TensorProto`` element type (``GraphFormatError`` for others)."""
    dt = _DTYPES.get(elem_type)
    if dt is None:
        raise GraphFormatError(f"{where}: ONNX element type {elem_type} ({_TYPE_NAMES.get(elem_type, 'unknown')}) "
                               "is not supported; supported: " + ", ".join(str(np.dtype(d)) for d in _DTYPES.values()))
    return np.dtype(dt)


# TensorProto element types with a NumPy dtype our backends handle (strings, bfloat16, float8 are not)
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64, 14: np.complex64,
           15: np.complex128}
_TYPE_NAMES = {0: "UNDEFINED", 8: "STRING", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ",
               19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
               24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2"}


def shape_of(s: Symbol) -> tuple | None:
    e = s.outputs[0]
    shape = e.node.avals[e.index].shape
    return None if shape is None else tuple(shape)


def dtype_of(s: Symbol):
    e = s.outputs[0]
    return e.node.avals[e.index].dtype


def constant(value, name: str | None = None, owned: bool = False) -> Symbol:
    """A read-only constant node holding ``value`` (a NumPy array), optionally named. ``owned``: the
    caller made ``value`` for this node and holds no other reference, so it is not copied (the
    ConstantOfShape weights of some models are hundreds of MB)."""
    dev = current_device()
    arr = dev.xp.asarray(np.array(value, order="C", copy=None if owned else True))
    return Symbol([Entry(const_node(arr, Aval(tuple(arr.shape), arr.dtype, dev), name=name))])


def axis_key(axis: int, sl, rank: int | None):
    """A ``getitem`` key applying ``sl`` on ``axis`` (negative axes count from the end)."""
    if axis < 0:
        return (Ellipsis, sl) + (slice(None),) * (-axis - 1)
    return (slice(None),) * axis + (sl,)


def _norm_axes(n: OnnxNode, axes, rank: int | None, why: str) -> tuple:
    if any(a < 0 for a in axes):
        rank = n.rank(0, why) if rank is None else rank
        return tuple(a % rank for a in axes)
    return tuple(axes)


# -- elementwise -----------------------------------------------------------------------------------
def _unary(fn):
    def convert(n: OnnxNode) -> list:
        n.arity(1)
        return [fn(n.inputs[0])]
    return convert


def _binary(fn):
    def convert(n: OnnxNode) -> list:
        n.arity(2)
        return [fn(n.inputs[0], n.inputs[1])]
    return convert


def _variadic(fn):
    def convert(n: OnnxNode) -> list:
        if not n.inputs or any(x is None for x in n.inputs):
            n.fail("takes one or more inputs")
        y = n.inputs[0]
        for x in n.inputs[1:]:
            y = fn(y, x)
        return [y]
    return convert


def _is_int(s: Symbol) -> bool:
    dt = dtype_of(s)
    return dt is not None and np.dtype(dt).kind in "iu"


def div(n: OnnxNode) -> list:
    n.arity(2)
    a, b = n.inputs
    if _is_int(a) and _is_int(b):  # ONNX integer division truncates toward zero
        return [S.cast(S.trunc(S.divide(a, b)), dtype=dtype_of(a))]
    return [S.divide(a, b)]


def mod(n: OnnxNode) -> list:
    n.arity(2)
    a, b = n.inputs
    if n.attr("fmod", 0):  # C fmod: the sign of the dividend
        if _is_int(a):
            return [S.subtract(a, S.multiply(S.cast(S.trunc(S.divide(a, b)), dtype=dtype_of(a)), b))]
        return [S.subtract(a, S.multiply(S.trunc(S.divide(a, b)), b))]
    return [S.remainder(a, b)]  # the sign of the divisor, as Python's %


def power(n: OnnxNode) -> list:
    n.arity(2)
    a, b = n.inputs
    y = S.power(a, b)
    if dtype_of(y) != dtype_of(a):  # ONNX: the result has the base's type
        y = S.cast(y, dtype=dtype_of(a))
    return [y]


def _mean(n: OnnxNode) -> list:
    y = _variadic(S.add)(n)[0]
    return [S.divide(y, float(len(n.inputs))) if not _is_int(y) else y]


def clip(n: OnnxNode) -> list:
    n.arity(1, 3)
    x = n.inputs[0]
    lo, hi = n.input(1), n.input(2)
    if lo is not None:
        x = S.maximum(x, lo)
    if hi is not None:
        x = S.minimum(x, hi)
    return [x]


def _f(n: OnnxNode, name: str, default: float) -> float:
    return float(n.attr(name, default))


def leaky_relu(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    return [S.where(S.less(x, 0.0), S.multiply(x, _f(n, "alpha", 0.01)), x)]


def prelu(n: OnnxNode) -> list:
    n.arity(2)
    x, slope = n.inputs
    return [S.where(S.less(x, 0.0), S.multiply(x, slope), x)]


def elu(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    return [S.where(S.less(x, 0.0), S.multiply(S.expm1(x), _f(n, "alpha", 1.0)), x)]


def celu(n: OnnxNode) -> list:
    n.arity(1)
    x, a = n.inputs[0], _f(n, "alpha", 1.0)
    return [S.add(S.maximum(x, 0.0), S.minimum(S.multiply(S.expm1(S.divide(x, a)), a), 0.0))]


def selu(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    alpha, gamma = _f(n, "alpha", 1.67326319217681884765625), _f(n, "gamma", 1.05070102214813232421875)
    return [S.multiply(S.where(S.less_equal(x, 0.0), S.multiply(S.expm1(x), alpha), x), gamma)]


def _softplus(x):
    return S.add(S.maximum(x, 0.0), S.log1p(S.exp(S.negative(S.abs(x)))))  # log(1 + e^x), no overflow


def hard_sigmoid(n: OnnxNode, alpha: float = 0.2, beta: float = 0.5) -> Symbol:
    x = n.inputs[0]
    return S.maximum(S.minimum(S.add(S.multiply(x, _f(n, "alpha", alpha)), _f(n, "beta", beta)), 1.0), 0.0)


def hard_swish(n: OnnxNode) -> list:
    n.arity(1)
    return [S.multiply(n.inputs[0], hard_sigmoid(n, 1.0 / 6.0, 0.5))]


def thresholded_relu(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    return [S.where(S.greater(x, _f(n, "alpha", 1.0)), x, S.zeros_like(x))]


def shrink(n: OnnxNode) -> list:
    n.arity(1)
    x, b, lam = n.inputs[0], _f(n, "bias", 0.0), _f(n, "lambd", 0.5)
    zero = S.zeros_like(x)
    return [S.where(S.less(x, -lam), S.add(x, b), S.where(S.greater(x, lam), S.subtract(x, b), zero))]


def gelu(n: OnnxNode) -> list:
    n.arity(1)
    approx = n.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        n.fail(f"approximate={approx!r}: expected 'none' or 'tanh'")
    return [S.nn.gelu(n.inputs[0], approximation=approx)]


def erf(n: OnnxNode) -> list:
    n.arity(1)
    return [_erf(n.inputs[0])]


def is_inf(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    pos, neg = n.attr("detect_positive", 1), n.attr("detect_negative", 1)
    inf = S.isinf(x)
    if pos and neg:
        return [inf]
    if pos:
        return [S.logical_and(inf, S.greater(x, 0.0))]
    if neg:
        return [S.logical_and(inf, S.less(x, 0.0))]
    return [S.logical_and(inf, S.logical_not(inf))]


def bit_shift(n: OnnxNode) -> list:
    n.arity(2)
    direction = n.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        n.fail(f"direction={direction!r}: expected 'LEFT' or 'RIGHT'")
    fn = S.bitwise_left_shift if direction == "LEFT" else S.bitwise_right_shift
    return [fn(n.inputs[0], n.inputs[1])]


def where(n: OnnxNode) -> list:
    n.arity(3)
    return [S.where(*n.inputs)]


def cum_sum(n: OnnxNode, fn=S.cumulative_sum, identity=0) -> list:
    """CumSum (and CumProd with ``fn``/``identity``): ``exclusive`` shifts in the identity, ``reverse``
    runs from the end."""
    n.arity(2)
    x = n.inputs[0]
    axis = n.ints(1, "axis")[0]
    if n.attr("reverse", 0):
        x = S.flip(x, axis=axis)
    y = fn(x, axis=axis, include_initial=bool(n.attr("exclusive", 0)))
    if n.attr("exclusive", 0):  # drop the last running value: the exclusive result keeps the length
        y = S.getitem(y, key=axis_key(axis, slice(0, -1), None))
    if n.attr("reverse", 0):
        y = S.flip(y, axis=axis)
    if dtype_of(y) != dtype_of(n.inputs[0]):  # the Array API's cumulative ops widen small integers
        y = S.cast(y, dtype=dtype_of(n.inputs[0]))
    return [y]


# -- reductions ------------------------------------------------------------------------------------
def _reduce(kind: str, axes_input_since: int = 18):
    def convert(n: OnnxNode) -> list:
        n.arity(1, 2)
        x = n.inputs[0]
        if n.opset >= axes_input_since:
            axes = n.ints(1, "axes")
            if "axes" in n.attrs:
                n.fail(f"axes is an input since opset {axes_input_since}, not an attribute")
        else:
            if len(n.inputs) > 1:
                n.fail(f"axes is an attribute before opset {axes_input_since}")
            axes = n.attr("axes")
        keep = bool(n.attr("keepdims", 1))
        if not axes:
            if n.attr("noop_with_empty_axes", 0):
                return [x]
            axis = None
        else:
            axis = _norm_axes(n, axes, None, f"{kind} over negative axes")
        empty = _EMPTY.get(kind)
        shape = n.shape(0)
        if empty is not None and shape is not None and None not in shape and any(
                shape[a] == 0 for a in (range(len(shape)) if axis is None else axis)):
            # an empty reduction has the op's identity (NumPy refuses max/min of nothing)
            red = set(range(len(shape)) if axis is None else axis)
            out = tuple(1 if a in red else d for a, d in enumerate(shape) if keep or a not in red)
            dt = np.dtype(dtype_of(x))
            value = (dt.type(empty > 0) if dt == np.bool_ else empty) if dt.kind in "fb" else \
                (np.iinfo(dt).max if empty > 0 else np.iinfo(dt).min)
            return [constant(np.full(out, value, dtype=dt))]
        return [_REDUCERS[kind](x, axis, keep)]
    return convert


def _sum_of(f):
    return lambda x, axis, keep: S.sum(f(x), axis=axis, keepdims=keep)


def _log_sum_exp(x, axis, keep):
    m = S.stop_gradient(S.max(x, axis=axis, keepdims=True))
    m = S.where(S.isfinite(m), m, S.zeros_like(m))
    y = S.add(S.log(S.sum(S.exp(S.subtract(x, m)), axis=axis, keepdims=True)), m)
    return y if keep else S.squeeze(y, axis=axis)


_EMPTY = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceLogSumExp": -np.inf}
_REDUCERS: dict[str, Callable] = {
    "ReduceSum": lambda x, axis, keep: S.sum(x, axis=axis, keepdims=keep),
    "ReduceMean": lambda x, axis, keep: S.mean(x, axis=axis, keepdims=keep),
    "ReduceMax": lambda x, axis, keep: S.max(x, axis=axis, keepdims=keep),
    "ReduceMin": lambda x, axis, keep: S.min(x, axis=axis, keepdims=keep),
    "ReduceProd": lambda x, axis, keep: S.prod(x, axis=axis, keepdims=keep),
    "ReduceL1": _sum_of(S.abs),
    "ReduceL2": lambda x, axis, keep: S.sqrt(S.sum(S.square(x), axis=axis, keepdims=keep)),
    "ReduceSumSquare": _sum_of(S.square),
    "ReduceLogSum": lambda x, axis, keep: S.log(S.sum(x, axis=axis, keepdims=keep)),
    "ReduceLogSumExp": _log_sum_exp,
}


def _arg(fn):
    def convert(n: OnnxNode) -> list:
        n.arity(1)
        x = n.inputs[0]
        axis = int(n.attr("axis", 0))
        keep = bool(n.attr("keepdims", 1))
        if n.attr("select_last_index", 0):  # the last extreme: search the flipped axis
            size = n.known_shape(0, "select_last_index=1")[axis]
            i = fn(S.flip(x, axis=axis), axis=axis, keepdims=keep)
            return [S.subtract(S.cast(constant(np.int64(size - 1)), dtype="int64"), S.cast(i, dtype="int64"))]
        return [S.cast(fn(x, axis=axis, keepdims=keep), dtype="int64")]
    return convert


# -- casts, identity, constants -------------------------------------------------------------------
def identity(n: OnnxNode) -> list:
    n.arity(1)
    return [n.inputs[0]]


def cast(n: OnnxNode) -> list:
    n.arity(1)
    return [_cast_to(n, int(n.attr("to")))]


def cast_like(n: OnnxNode) -> list:
    n.arity(2)
    target = n.in_types[1] if len(n.in_types) > 1 else 0
    if narrow_format(target):
        return [_cast_to(n, target)]
    return [S.cast(n.inputs[0], dtype=dtype_of(n.inputs[1]))]


def _cast_to(n: OnnxNode, elem_type: int):
    """Cast ``x`` to an ONNX element type; narrow formats round once from ``x`` (narrow.py)."""
    fmt = narrow_format(elem_type)
    if fmt is None:
        return S.cast(n.inputs[0], dtype=np_dtype(elem_type, n.where))
    return S.round_to_format(n.inputs[0], format=fmt, saturate=bool(n.attr("saturate", 1)),
                             round_mode=n.attr("round_mode", "up"))


def constant_op(n: OnnxNode) -> list:
    n.arity(0)
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in n.attrs:
            v = n.attrs[key]
            dtype = np.float32 if "float" in key else np.int64 if "int" in key else None
            return [constant(np.asarray(v, dtype=dtype))]
    return n.fail(f"only tensor and number values are supported (attributes: {sorted(n.attrs)})")


def _logical(fn):
    return _binary(fn)


_UNARY = {"Abs": S.abs, "Neg": S.negative, "Exp": S.exp, "Log": S.log, "Sqrt": S.sqrt, "Relu": S.relu,
          "Sigmoid": S.sigmoid, "Tanh": S.tanh, "Floor": S.floor, "Ceil": S.ceil, "Round": S.round,
          "Sign": S.sign, "Reciprocal": S.reciprocal, "Sin": S.sin, "Cos": S.cos, "Tan": S.tan,
          "Asin": S.asin, "Acos": S.acos, "Atan": S.atan, "Sinh": S.sinh, "Cosh": S.cosh, "Asinh": S.asinh,
          "Acosh": S.acosh, "Atanh": S.atanh, "Not": S.logical_not, "IsNaN": S.isnan,
          "BitwiseNot": S.bitwise_invert, "Softplus": _softplus,
          "Softsign": lambda x: S.divide(x, S.add(S.abs(x), 1.0)),
          "Mish": lambda x: S.multiply(x, S.tanh(_softplus(x)))}
_BINARY = {"Add": S.add, "Sub": S.subtract, "Mul": S.multiply, "Equal": S.equal, "Less": S.less,
           "Greater": S.greater, "LessOrEqual": S.less_equal, "GreaterOrEqual": S.greater_equal,
           "And": S.logical_and, "Or": S.logical_or, "Xor": S.logical_xor, "BitwiseAnd": S.bitwise_and,
           "BitwiseOr": S.bitwise_or, "BitwiseXor": S.bitwise_xor}

CONVERTERS: dict[str, Converter] = {
    **{op: _unary(fn) for op, fn in _UNARY.items()},
    **{op: _binary(fn) for op, fn in _BINARY.items()},
    "Div": div, "Mod": mod, "Pow": power, "Max": _variadic(S.maximum), "Min": _variadic(S.minimum),
    "Sum": _variadic(S.add), "Mean": _mean, "Clip": clip, "Where": where, "LeakyRelu": leaky_relu,
    "PRelu": prelu, "Elu": elu, "Celu": celu, "Selu": selu, "HardSigmoid": lambda n: [hard_sigmoid(n)],
    "HardSwish": hard_swish, "ThresholdedRelu": thresholded_relu, "Shrink": shrink, "Gelu": gelu, "Erf": erf,
    "IsInf": is_inf, "BitShift": bit_shift, "CumSum": cum_sum,
    **{op: _reduce(op, 13 if op == "ReduceSum" else 18) for op in _REDUCERS},
    "ArgMax": _arg(S.argmax), "ArgMin": _arg(S.argmin),
    "Identity": identity, "Cast": cast, "CastLike": cast_like, "Constant": constant_op,
}  # (the shape operators: import_shape.SHAPE_CONVERTERS)
