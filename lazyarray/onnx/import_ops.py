"""ONNX operators -> graphs of our registry ops, with the ONNX spec's semantics (opset 13 and up).

``CONVERTERS`` maps an ONNX ``op_type`` to a function ``(node: OnnxNode) -> list[Symbol | None]``
(one entry per output the node declares; ``None`` for an output we cannot produce, which is an
error only when the graph reads it). Every converter builds with ``la.sym`` functions, so the
result is made of registry ops and runs, differentiates, prints and exports like any other graph.
Inputs that ONNX passes as tensors but our ops take as parameters (shapes, axes, pads, scales) are
read at load time from initializers, ``Constant`` nodes or sub-graphs of them (``OnnxNode.const``);
a data-dependent one is refused with the node's name. Operators the registry lacks are composed
here, as the MXNet importer does (grouped/dilated convolution reuse its per-tap helpers).

The families: elementwise and math, reductions, shapes, nn (``import_nn.py``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import sym as S
from ..aval import Aval, check_alloc
from ..device import current_device
from ..dim import dim_max, is_symbolic
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


def _axis_key(axis: int, sl, rank: int | None):
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
        y = S.getitem(y, key=_axis_key(axis, slice(0, -1), None))
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


# -- shapes ----------------------------------------------------------------------------------------
def reshape(n: OnnxNode) -> list:
    n.arity(2)
    x = n.inputs[0]
    target = n.ints(1, "shape")
    allowzero = bool(n.attr("allowzero", 0))
    if allowzero and 0 in target and -1 in target:
        n.fail(f"shape={target}: allowzero=1 forbids 0 and -1 together")
    if target.count(-1) > 1:
        n.fail(f"shape={target} has more than one -1")
    out: list = []
    for k, d in enumerate(target):
        if d == 0 and not allowzero:  # 0 copies the input's dim
            shape = n.shape(0)
            if shape is None or k >= len(shape):
                n.fail(f"shape={target}: 0 at position {k} copies an input dim, but the input's shape is {shape}")
            out.append(shape[k])
        elif d < -1:
            n.fail(f"shape={target}: negative size {d}")
        else:
            out.append(d)
    if None in out:
        if -1 in out or out.count(None) > 1:
            n.fail(f"shape={target} of an input shaped {n.shape(0)} leaves more than one dim unknown; give the "
                   "model's input shapes")
        out = [-1 if d is None else d for d in out]
    return [S.reshape(x, shape=tuple(out))]


def transpose(n: OnnxNode) -> list:
    n.arity(1)
    perm = n.attr("perm")
    return [S.transpose(n.inputs[0], axes=tuple(perm) if perm else None)]


def _axes_in(n: OnnxNode, since: int = 13) -> list[int] | None:
    if n.opset >= since:
        return n.ints(1, "axes")
    return n.attr("axes")


def squeeze(n: OnnxNode) -> list:
    n.arity(1, 2)
    axes = _axes_in(n)
    return [S.squeeze(n.inputs[0], axis=None if not axes else tuple(axes))]


def unsqueeze(n: OnnxNode) -> list:
    n.arity(1, 2)
    axes = _axes_in(n)
    if not axes:
        n.fail("needs axes")
    if len(set(axes)) != len(axes):
        n.fail(f"axes={axes} repeats an axis")
    return [S.expand_dims(n.inputs[0], axis=tuple(axes))]


def flatten(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    axis = int(n.attr("axis", 1))
    shape = n.shape(0)
    if shape is None:
        n.fail("needs the rank of its input; give the model's input shapes")
    if axis < 0:
        axis += len(shape)
    lead, rest = shape[:axis], shape[axis:]
    if None not in lead:
        return [S.reshape(x, shape=(math.prod(lead), -1))]
    if None not in rest:
        return [S.reshape(x, shape=(-1, math.prod(rest)))]
    return n.fail(f"axis={axis} of an input shaped {shape} leaves both sides unknown")


def concat(n: OnnxNode) -> list:
    if not n.inputs or any(x is None for x in n.inputs):
        n.fail("takes one or more inputs")
    return [S.concatenate(list(n.inputs), axis=int(n.attr("axis")))]


def split(n: OnnxNode) -> list:
    n.arity(1, 2)
    x = n.inputs[0]
    axis = int(n.attr("axis", 0))
    sizes = n.ints(1, "split") if n.opset >= 13 else n.attr("split")
    count = n.n_outputs
    if not sizes:
        dim = n.known_shape(0, "Split without sizes")[axis]
        parts = int(n.attr("num_outputs", count))
        if parts != count:
            n.fail(f"num_outputs={parts} but the node declares {count} outputs")
        step = -(-dim // parts)  # opset 18: the last chunk may be smaller
        sizes = [min(step, dim - k * step) for k in range(parts)]
    if len(sizes) != count:
        n.fail(f"split={sizes} gives {len(sizes)} parts for {count} outputs")
    outs, start = [], 0
    for s in sizes:
        outs.append(S.getitem(x, key=_axis_key(axis, slice(start, start + s), None)))
        start += s
    return outs


def slice_op(n: OnnxNode) -> list:
    n.arity(3, 5)
    x = n.inputs[0]
    starts, ends = n.ints(1, "starts"), n.ints(2, "ends")
    axes = n.ints(3, "axes") or list(range(len(starts)))
    steps = n.ints(4, "steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        n.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    if 0 in steps:
        n.fail("a step of 0")
    rank = n.rank(0, "Slice")
    axes = [a % rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes) or any(a >= rank for a in axes):
        n.fail(f"axes {axes} repeat an axis or exceed the rank {rank}")
    key = [slice(None)] * rank
    for a, b, e, s in zip(axes, starts, ends, steps):  # Python slices clamp the same way ONNX does
        key[a] = slice(b, e, s)
    return [S.getitem(x, key=tuple(key))]


def gather(n: OnnxNode) -> list:
    n.arity(2)
    x, idx = n.inputs
    axis = int(n.attr("axis", 0))
    return [S.take(x, S.cast(idx, dtype="int64") if dtype_of(idx) != np.int64 else idx, axis=axis)]


def gather_elements(n: OnnxNode) -> list:
    n.arity(2)
    x, idx = n.inputs
    axis = int(n.attr("axis", 0))
    dim = n.known_shape(0, "GatherElements")[axis]
    idx = S.cast(idx, dtype="int64")
    idx = S.where(S.less(idx, 0), S.add(idx, dim), idx)
    return [S.take_along_axis(x, idx, axis=axis)]


def expand(n: OnnxNode) -> list:
    n.arity(2)
    x = n.inputs[0]
    target = tuple(n.ints(1, "shape"))
    shape = n.shape(0)
    if shape is None:
        n.fail("needs the rank of its input; give the model's input shapes")
    rank = max(len(shape), len(target))
    a = (1,) * (rank - len(shape)) + tuple(shape)
    b = (1,) * (rank - len(target)) + target
    out = []
    for k, (p, q) in enumerate(zip(a, b)):  # bidirectional: each side may stretch a 1
        if p is None:
            if q != 1:
                out.append(q)
            else:
                n.fail(f"dim {k} of the input is unknown and shape={target} keeps it; give the input shapes")
        elif p == q or q == 1:
            out.append(p)
        elif p == 1:
            out.append(q)
        elif is_symbolic(p) or is_symbolic(q):  # equal or one of them 1 at run time: the larger
            out.append(dim_max(p, q))
        else:
            n.fail(f"input shape {tuple(shape)} cannot broadcast with shape={target}")
    return [S.broadcast_to(x, shape=tuple(out))]


def tile(n: OnnxNode) -> list:
    n.arity(2)
    reps = n.ints(1, "repeats")
    if n.rank(0, "Tile") != len(reps):
        n.fail(f"repeats={reps} must have one entry per input dim ({n.rank(0, 'Tile')})")
    return [S.repeat(n.inputs[0], sizes=tuple(reps))]


def pad(n: OnnxNode) -> list:
    n.arity(2, 4)
    x = n.inputs[0]
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        n.fail(f"mode={mode!r}: expected constant, reflect, edge or wrap")
    pads = n.ints(1, "pads")
    value = n.const(2, "constant_value")
    rank = n.rank(0, "Pad")
    axes = n.ints(3, "axes")
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    if len(pads) != 2 * len(axes):
        n.fail(f"pads={pads} needs two entries per padded axis ({len(axes)})")
    begin, end = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        begin[a], end[a] = pads[k], pads[k + len(axes)]
    if any(p < 0 for p in begin + end):  # negative pads crop
        x = S.getitem(x, key=tuple(slice(-min(b, 0), min(e, 0) or None) for b, e in zip(begin, end)))
        begin, end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
    widths = tuple(zip(begin, end))
    if mode == "wrap":  # the registry's pad has no wrap: concatenate the far ends
        shape = n.known_shape(0, "Pad mode='wrap'")
        for a, (b, e) in enumerate(widths):
            if b > shape[a] or e > shape[a]:
                n.fail(f"mode='wrap' pads axis {a} of size {shape[a]} by ({b}, {e}), more than the axis holds")
            parts = ([S.getitem(x, key=_axis_key(a, slice(shape[a] - b, None), None))] if b else []) + [x] + (
                [S.getitem(x, key=_axis_key(a, slice(0, e), None))] if e else [])
            x = S.concatenate(parts, axis=a) if len(parts) > 1 else x
        return [x]
    if mode != "constant":
        return [S.pad(x, pad_width=widths, mode=mode)]
    fill = 0.0 if value is None or np.asarray(value).size == 0 else np.asarray(value).reshape(-1)[0].item()
    return [S.pad(x, pad_width=widths, constant_values=fill)]


def shape_op(n: OnnxNode) -> list:
    n.arity(1)
    shape = n.known_shape(0, "Shape")
    start, end = int(n.attr("start", 0)), n.attr("end")
    return [constant(np.array(shape[slice(start, None if end is None else int(end))], dtype=np.int64))]


def size_op(n: OnnxNode) -> list:
    n.arity(1)
    return [constant(np.array(math.prod(n.known_shape(0, "Size")), dtype=np.int64))]


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


def constant_of_shape(n: OnnxNode) -> list:
    n.arity(1)
    shape = n.ints(0, "shape")
    value = n.attr("value")
    value = np.zeros((1,), np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        n.fail(f"value must hold one element, got {value.size}")
    fill = value.reshape(-1)[0]
    if any(is_symbolic(d) for d in shape):  # a size the graph reads from its inputs: filled per call
        return [S.fill(shape=tuple(shape), value=fill.item(), dtype=value.dtype, device=current_device())]
    shape, nbytes = check_size(n, shape, value.dtype)
    if not foldable(nbytes):  # computed when the graph runs, not while loading
        return [S.fill(shape=shape, value=fill.item(), dtype=value.dtype, device=current_device())]
    return [constant(np.full(shape, fill, dtype=value.dtype), owned=True)]


def constant_op(n: OnnxNode) -> list:
    n.arity(0)
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in n.attrs:
            v = n.attrs[key]
            dtype = np.float32 if "float" in key else np.int64 if "int" in key else None
            return [constant(np.asarray(v, dtype=dtype))]
    return n.fail(f"only tensor and number values are supported (attributes: {sorted(n.attrs)})")


def range_op(n: OnnxNode) -> list:
    n.arity(3)
    start, limit, delta = (np.asarray(n.const(i, what)) for i, what in enumerate(("start", "limit", "delta")))
    if any(v.dtype == object for v in (start, limit, delta)):  # symbolic bounds (Range(0, batch))
        bounds = tuple(v.reshape(-1)[0] for v in (start, limit, delta))
        if any(isinstance(b, (float, np.floating)) for b in bounds):
            n.fail("a Range over float bounds computed from dynamic sizes is not supported")
        bounds = tuple(b if is_symbolic(b) else int(b) for b in bounds)
        if not is_symbolic(bounds[2]) and bounds[2] == 0:
            n.fail("delta is 0: a Range needs a non-zero step")
        return [S.iota(bounds=bounds, dtype="int64", device=current_device())]
    dtype = start.dtype
    if any(v.size != 1 for v in (start, limit, delta)):
        n.fail(f"start, limit and delta must be scalars, got shapes {start.shape}, {limit.shape}, {delta.shape}")
    # one-element tensors are read as their scalar, as ONNX's reference does (AffineGrid's expansion gives such)
    start, limit, delta = (v.reshape(()) for v in (start, limit, delta))
    if dtype.kind in "fc" and not all(np.isfinite(v) for v in (start, limit, delta)):
        n.fail(f"start={start}, limit={limit}, delta={delta}: a Range needs finite bounds and step")
    if delta == 0:
        n.fail(f"delta is 0 (start={start}, limit={limit}): a Range needs a non-zero step")
    if dtype.kind in "iub":  # exact: Python ints
        s0, s1, d = int(start), int(limit), int(delta)
        count = max(-((s0 - s1) // d), 0)
    else:
        count = max(int(np.ceil((limit - start) / delta)), 0)
    _, nbytes = check_size(n, (count,), dtype)
    if foldable(nbytes):
        return [constant((start + np.arange(count) * delta).astype(dtype))]
    # computed when the graph runs, as the fold computes it: start + i * delta
    dev = current_device()
    if dtype.kind in "iu":
        return [S.iota(bounds=(s0, s0 + count * d, d), dtype=dtype, device=dev)]
    i = S.iota(bounds=(0, count, 1), dtype="int64", device=dev)
    work = np.result_type(np.int64, dtype)
    y = S.add(S.multiply(S.cast(i, dtype=work), constant(delta.astype(work))), constant(start.astype(work)))
    return [y if work == dtype else S.cast(y, dtype=dtype)]


def trilu(n: OnnxNode) -> list:
    n.arity(1, 2)
    k = n.ints(1, "k")
    k = 0 if not k else k[0]
    fn = S.triu if n.attr("upper", 1) else S.tril
    return [fn(n.inputs[0], k=k)]


def _blocksize(n: OnnxNode) -> int:
    s = n.attr("blocksize")
    if not isinstance(s, (int, np.integer)) or s < 1:
        n.fail(f"blocksize={s!r}: must be an integer >= 1")
    return int(s)


def depth_to_space(n: OnnxNode) -> list:
    n.arity(1)
    b, c, h, w = _rank4(n, "DepthToSpace")
    s = _blocksize(n)
    if isinstance(c, int) and c % (s * s):
        n.fail(f"the input has {c} channels, not a multiple of blocksize**2 = {s * s}")
    x = n.inputs[0]
    if n.attr("mode", "DCR") == "DCR":
        y = S.transpose(S.reshape(x, shape=(b, s, s, c // s // s, h, w)), axes=(0, 3, 4, 1, 5, 2))
    else:
        y = S.transpose(S.reshape(x, shape=(b, c // s // s, s, s, h, w)), axes=(0, 1, 4, 2, 5, 3))
    return [S.reshape(y, shape=(b, c // s // s, h * s, w * s))]


def space_to_depth(n: OnnxNode) -> list:
    n.arity(1)
    b, c, h, w = _rank4(n, "SpaceToDepth")
    s = _blocksize(n)
    if any(isinstance(d, int) and d % s for d in (h, w)):
        n.fail(f"the input's height and width {h}, {w} must be multiples of blocksize={s}")
    order = (0, 3, 5, 1, 2, 4) if n.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = S.transpose(S.reshape(n.inputs[0], shape=(b, c, h // s, s, w // s, s)), axes=order)
    return [S.reshape(y, shape=(b, c * s * s, h // s, w // s))]


def _rank4(n: OnnxNode, why: str) -> tuple:
    shape = n.known_shape(0, why)
    if len(shape) != 4:
        n.fail(f"takes a 4-D (N, C, H, W) input, got shape {shape}")
    return shape


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
    "Reshape": reshape, "Transpose": transpose, "Squeeze": squeeze, "Unsqueeze": unsqueeze, "Flatten": flatten,
    "Concat": concat, "Split": split, "Slice": slice_op, "Gather": gather, "GatherElements": gather_elements,
    "Expand": expand, "Tile": tile, "Pad": pad, "Shape": shape_op, "Size": size_op, "Identity": identity,
    "Cast": cast, "CastLike": cast_like, "ConstantOfShape": constant_of_shape, "Constant": constant_op,
    "Range": range_op, "Trilu": trilu, "DepthToSpace": depth_to_space, "SpaceToDepth": space_to_depth,
}
