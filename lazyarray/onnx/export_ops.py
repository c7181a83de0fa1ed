"""The ONNX export table: registry op name -> the function that writes it as ONNX nodes.

Each converter is ``f(g, node, ins) -> [tensor name per output]``: ``g`` is the graph being
built (``export._Graph``: ``g.op(...)`` adds an ONNX node, ``g.ints``/``g.scalar`` add constants,
``g.cast`` converts a dtype), ``node`` our graph node (its params and recorded avals), ``ins``
the ONNX tensor names of its inputs. ONNX operators ask every input of an elementwise op to have
one dtype, where our ops promote like NumPy: converters cast inputs to the dtype the op's rule
gave its output (``compute``) first.

Grouped by op family, as the registry (``lazyarray/ops/*.py``) is.
"""
from __future__ import annotations

import math

import numpy as np

from ..dim import has_symbols, is_symbolic
from ..ops.reshape_codes import resolve_reshape
from ..ops.shape import section_bounds
from .export_base import (  # noqa: F401 (EXPORT_AVALS, TRAINING_OPS, is_training_node: importable here as before)
    EXPORT_AVALS,
    INT64_MAX,
    INT64_MIN,
    TRAINING_OPS,
    compute,
    fail,
    in_dtype,
    input_rank,
    input_shape,
    is_training_node,
    out_dtype,
)

# nn layers; sorting, searching, set functions and data-dependent indexing; linear algebra, running
# products, shifts (their own files, which use the helpers in export_base.py; added to the table below)
from .export_index import CONVERTERS as _INDEX_CONVERTERS
from .export_linalg import CONVERTERS as _LINALG_CONVERTERS
from .export_linalg import NO_ONNX_FORM  # noqa: F401 (export quotes the reasons)
from .export_nn import CONVERTERS as _NN_CONVERTERS
from .export_scatter import CONVERTERS as _SCATTER_CONVERTERS
from .export_sizes import CONVERTERS as _SIZE_CONVERTERS
from .image import export_image_decode
from .narrow import export_round


def _sizes(values) -> list:
    """Size parameters as ints, symbolic ones kept (``g.ints`` computes them from the inputs)."""
    return [v if is_symbolic(v) else int(v) for v in values]


def _axes(axis) -> list[int]:
    return [int(a) for a in axis] if isinstance(axis, (tuple, list)) else [int(axis)]


# -- elementwise ------------------------------------------------------------------------------
def _unary(op_type: str, int_identity: bool = False):
    """An elementwise ONNX op computing in the output dtype (ints in, float out: cast first)."""
    def convert(g, node, ins):
        if int_identity and out_dtype(node).kind in "iub":
            return [g.op("Identity", ins)]
        return [g.op(op_type, compute(g, node, ins))]
    return convert


def _binary(op_type: str, **attrs):
    def convert(g, node, ins):
        return [g.op(op_type, compute(g, node, ins), **attrs)]
    return convert


def _compare(op_type: str, negate: bool = False):
    """A comparison: both sides in their common dtype, a bool result."""
    def convert(g, node, ins):
        common = np.result_type(in_dtype(node, 0), in_dtype(node, 1))
        y = g.op(op_type, compute(g, node, ins, common))
        return [g.op("Not", [y]) if negate else y]
    return convert


def _logical(op_type: str):
    def convert(g, node, ins):
        return [g.op(op_type, compute(g, node, ins, np.dtype(bool)))]
    return convert


def _bitwise(op_type: str, bool_type: str):
    """Bitwise ops take integers in ONNX; on bools they are the logical ops."""
    def convert(g, node, ins):
        return [g.op(bool_type if out_dtype(node).kind == "b" else op_type, compute(g, node, ins))]
    return convert


def _float_test(op_type: str):
    """IsNaN / IsInf take floats; an integer is never NaN nor infinite, so test it as a float."""
    def convert(g, node, ins):
        dt = in_dtype(node, 0)
        x = ins[0] if dt.kind == "f" else g.cast(ins[0], dt, np.dtype("float32"))
        return [g.op(op_type, [x])]
    return convert


def _identity(g, node, ins):
    return [g.op("Identity", ins[:1])]


def _square(g, node, ins):
    x, = compute(g, node, ins)
    return [g.op("Mul", [x, x])]


def _with_scalar(op_type: str, value: float, first: str):
    """``first(x)`` then ``op_type`` with a number: expm1 = exp(x) - 1, log1p = log(x + 1), ..."""
    def convert(g, node, ins):
        x, = compute(g, node, ins)
        dt = out_dtype(node)
        if first == "Log1p":
            return [g.op("Log", [g.op("Add", [x, g.scalar(1, dt)])])]
        y = g.op(first, [x])
        return [g.op(op_type, [y, g.scalar(value, dt)])]
    return convert


def _trunc(g, node, ins):
    if out_dtype(node).kind in "iub":
        return [g.op("Identity", ins)]
    x, = compute(g, node, ins)
    neg = g.op("Less", [x, g.scalar(0, out_dtype(node))])
    return [g.op("Where", [neg, g.op("Ceil", [x]), g.op("Floor", [x])])]


def _isfinite(g, node, ins):
    bad = g.op("Or", [g.op("IsNaN", ins), g.op("IsInf", ins)])
    return [g.op("Not", [bad])]


def _remainder(g, node, ins):
    a, b = compute(g, node, ins)
    if out_dtype(node).kind in "iu":
        return [g.op("Mod", [a, b], fmod=0)]  # integer Mod with fmod=0 has Python's (divisor's) sign
    # numpy.remainder of floats (npy_divmod): C fmod, moved by one divisor where its sign differs
    # from the divisor's; a zero takes the divisor's sign. fmod keeps a finite dividend under an
    # infinite divisor (2 % inf == 2, -2 % inf == inf) where a - floor(a / b) * b gives nan; x % 0,
    # inf % b and nans stay nan (fmod's nan is neither zero nor signed).
    dt = out_dtype(node)
    zero = g.scalar(0, dt)
    m = g.op("Mod", [a, b], fmod=1)
    b_neg = g.op("Less", [b, zero])
    move = g.op("Xor", [b_neg, g.op("Less", [m, zero])])
    move = g.op("And", [move, g.op("Not", [g.op("Equal", [m, zero])])])
    r = g.op("Where", [move, g.op("Add", [m, b]), m])
    signed_zero = g.op("Where", [b_neg, g.scalar(-0.0, dt), zero])
    return [g.op("Where", [g.op("Equal", [m, zero]), signed_zero, r])]


def _floor_divide(g, node, ins):
    a, b = compute(g, node, ins)
    if out_dtype(node).kind in "iu":  # ONNX Div truncates: (a - a mod b) / b floors exactly
        return [g.op("Div", [g.op("Sub", [a, g.op("Mod", [a, b], fmod=0)]), b])]
    return [g.op("Floor", [g.op("Div", [a, b])])]


def _hypot(g, node, ins):
    a, b = compute(g, node, ins)
    return [g.op("Sqrt", [g.op("Add", [g.op("Mul", [a, a]), g.op("Mul", [b, b])])])]


def _logaddexp(g, node, ins):
    a, b = compute(g, node, ins)
    dt = out_dtype(node)
    m = g.op("Max", [a, b])
    d = g.op("Neg", [g.op("Abs", [g.op("Sub", [a, b])])])
    return [g.op("Add", [m, g.op("Log", [g.op("Add", [g.op("Exp", [d]), g.scalar(1, dt)])])])]


def _heaviside(g, node, ins):
    x, h = compute(g, node, ins)
    dt = out_dtype(node)
    pos = g.op("Where", [g.op("Greater", [x, g.scalar(0, dt)]), g.scalar(1, dt), h])
    return [g.op("Where", [g.op("Less", [x, g.scalar(0, dt)]), g.scalar(0, dt), pos])]


def _where(g, node, ins):
    c = g.cast(ins[0], in_dtype(node, 0), np.dtype(bool))
    x = g.cast(ins[1], in_dtype(node, 1), out_dtype(node))
    y = g.cast(ins[2], in_dtype(node, 2), out_dtype(node))
    return [g.op("Where", [c, x, y])]


def _clip(g, node, ins):
    x, lo, hi = compute(g, node, ins)  # numpy.clip: minimum(maximum(x, lo), hi), broadcasting
    return [g.op("Min", [g.op("Max", [x, lo]), hi])]


def _smooth_l1(g, node, ins):
    x, = compute(g, node, ins)
    dt = out_dtype(node)
    s2 = float(node.params["scalar"]) ** 2
    ax = g.op("Abs", [x])
    quad = g.op("Mul", [g.op("Mul", [x, x]), g.scalar(0.5 * s2, dt)])
    lin = g.op("Sub", [ax, g.scalar(0.5 / s2, dt)])
    return [g.op("Where", [g.op("Less", [ax, g.scalar(1.0 / s2, dt)]), quad, lin])]


def _quadratic(g, node, ins):
    x, = compute(g, node, ins)
    dt = out_dtype(node)
    p = node.params
    ax_b = g.op("Add", [g.op("Mul", [x, g.scalar(p["a"], dt)]), g.scalar(p["b"], dt)])
    return [g.op("Add", [g.op("Mul", [ax_b, x]), g.scalar(p["c"], dt)])]


def _cast(g, node, ins):
    return [g.cast(ins[0], in_dtype(node, 0), out_dtype(node), force=True)]


def _fill_like(value_of):
    def convert(g, node, ins):
        dt = out_dtype(node)
        value = np.array([value_of(node)], dtype=dt)
        return [g.op("ConstantOfShape", [g.op("Shape", ins[:1])], value=g.tensor(value))]
    return convert


# -- reductions -------------------------------------------------------------------------------
def _reduce_inputs(g, node, x):
    axis = node.params.get("axis")
    return [x] if axis is None else [x, g.ints(_axes(axis))]


def _reduce(op_type: str, cast_in=True):
    def convert(g, node, ins):
        axis = node.params.get("axis")
        keep = int(bool(node.params.get("keepdims", False)))
        x = compute(g, node, ins)[0] if cast_in else ins[0]
        if axis == ():
            return [g.op("Identity", [x])]
        return [g.op(op_type, _reduce_inputs(g, node, x), keepdims=keep)]
    return convert


def _all_any(op_type: str):
    def convert(g, node, ins):
        axis = node.params.get("axis")
        x = g.cast(g.cast(ins[0], in_dtype(node, 0), np.dtype(bool)), np.dtype(bool), np.dtype("int32"))
        if axis == ():
            return [g.cast(x, np.dtype("int32"), np.dtype(bool))]
        y = g.op(op_type, _reduce_inputs(g, node, x), keepdims=int(bool(node.params.get("keepdims"))))
        return [g.cast(y, np.dtype("int32"), np.dtype(bool))]
    return convert


def _count_nonzero(g, node, ins):
    nz = g.op("Not", [g.op("Equal", [ins[0], g.scalar(0, in_dtype(node, 0))])])
    x = g.cast(nz, np.dtype(bool), out_dtype(node))
    if node.params.get("axis") == ():
        return [x]
    return [g.op("ReduceSum", _reduce_inputs(g, node, x), keepdims=int(bool(node.params.get("keepdims"))))]


def _arg(op_type: str):
    def convert(g, node, ins):
        axis, keep = node.params.get("axis"), bool(node.params.get("keepdims"))
        x = ins[0]
        if axis is None:
            y = g.op(op_type, [g.op("Reshape", [x, g.ints([-1])])], axis=0, keepdims=0)
            if keep:
                y = g.op("Reshape", [y, g.ints([1] * input_rank(g, node))])
        else:
            y = g.op(op_type, [x], axis=int(axis), keepdims=int(keep))
        return [g.cast(y, np.dtype("int64"), out_dtype(node))]
    return convert


def _moments(std: bool):
    def convert(g, node, ins):
        x, = compute(g, node, ins)
        dt = out_dtype(node)
        axis, keep = node.params.get("axis"), int(bool(node.params.get("keepdims")))
        m = g.op("ReduceMean", _reduce_inputs(g, node, x), keepdims=1)
        d = g.op("Sub", [x, m])
        v = g.op("ReduceMean", _reduce_inputs(g, node, g.op("Mul", [d, d])), keepdims=keep)
        corr = float(node.params.get("correction", 0.0))
        if corr:
            shape = input_shape(node)
            axes = range(len(shape)) if axis is None else [a % len(shape) for a in _axes(axis)]
            sizes = [shape[a] for a in axes]
            if any(s is None for s in sizes):
                raise fail(g, node, "a correction over an axis of unknown size")
            n = math.prod(sizes)
            v = g.op("Mul", [v, g.scalar(n / max(n - corr, 0.0) if n > corr else float("inf"), dt)])
        return [g.op("Sqrt", [v]) if std else v]
    return convert


def _vector_norm(g, node, ins):
    x, = compute(g, node, ins)
    dt = out_dtype(node)
    ord_ = node.params.get("ord", 2)
    keep = int(bool(node.params.get("keepdims")))
    a = g.op("Abs", [x])
    if node.params.get("axis") == ():
        return [a]
    if ord_ == 2:
        return [g.op("Sqrt", [g.op("ReduceSumSquare", _reduce_inputs(g, node, x), keepdims=keep)])]
    if ord_ == 1:
        return [g.op("ReduceL1", _reduce_inputs(g, node, x), keepdims=keep)]
    if ord_ == float("inf"):
        return [g.op("ReduceMax", _reduce_inputs(g, node, a), keepdims=keep)]
    if ord_ == float("-inf"):
        return [g.op("ReduceMin", _reduce_inputs(g, node, a), keepdims=keep)]
    if ord_ == 0:
        nz = g.cast(g.op("Not", [g.op("Equal", [x, g.scalar(0, dt)])]), np.dtype(bool), dt)
        return [g.op("ReduceSum", _reduce_inputs(g, node, nz), keepdims=keep)]
    p = float(ord_)
    s = g.op("ReduceSum", _reduce_inputs(g, node, g.op("Pow", [a, g.scalar(p, dt)])), keepdims=keep)
    return [g.op("Pow", [s, g.scalar(1.0 / p, dt)])]


def _cumulative_sum(g, node, ins):
    x, = compute(g, node, ins)
    axis = node.params.get("axis")
    if axis is None:
        x, axis = g.op("Reshape", [x, g.ints([-1])]), 0
    y = g.op("CumSum", [x, g.ints([int(axis)], scalar=True)])
    if node.params.get("include_initial"):
        rank = 1 if node.params.get("axis") is None else input_rank(g, node)
        pads = [0] * (2 * rank)
        pads[int(axis) % rank] = 1
        y = g.op("Pad", [y, g.ints(pads)], mode="constant")
    return [y]


# -- shape ------------------------------------------------------------------------------------
def _reshape(g, node, ins):
    shape = _sizes(node.params["shape"])
    return [g.op("Reshape", [ins[0], g.ints(shape)], allowzero=int(0 in shape))]


def _reshape_codes(g, node, ins):
    """MXNet's codes resolved against x's shape: its recorded sizes, symbolic ones computed when the
    model runs; a dynamic axis of a traced graph has no size to resolve against."""
    rec = node.inputs[0].aval.shape
    shape = rec if rec is not None and has_symbols(rec) and None not in rec else input_shape(node)
    if shape is None or None in shape:
        raise fail(g, node, "MXNet Reshape codes need the input's sizes; export with the axis static")
    out = resolve_reshape(tuple(shape), tuple(node.params["codes"]), node.params.get("reverse", False))
    return [g.op("Reshape", [ins[0], g.ints(_sizes(out))])]


def _reshape_like(g, node, ins):
    return [g.op("Reshape", [ins[0], g.op("Shape", [ins[1]])])]


def _transpose(g, node, ins):
    axes = node.params.get("axes")
    if axes is None:
        return [g.op("Transpose", ins)]
    rank = input_rank(g, node)
    return [g.op("Transpose", ins, perm=[int(a) % rank for a in axes])]


def _expand_dims(g, node, ins):
    return [g.op("Unsqueeze", [ins[0], g.ints(_axes(node.params["axis"]))])]


def _squeeze(g, node, ins):
    axis = node.params.get("axis")
    return [g.op("Squeeze", ins if axis is None else [ins[0], g.ints(_axes(axis))])]


def _flatten(g, node, ins):
    if input_rank(g, node) == 0:
        return [g.op("Reshape", [ins[0], g.ints([1, 1])])]
    return [g.op("Flatten", ins, axis=1)]


def _broadcast_to(g, node, ins):
    return [g.op("Expand", [ins[0], g.ints(_sizes(node.params["shape"]))])]


def _broadcast_like(g, node, ins):
    return [g.op("Expand", [ins[0], g.op("Shape", [ins[1]])])]


def _expand(g, node, ins):
    # PyTorch's expand: -1 keeps x's size; ONNX Expand broadcasts, so a 1 there does the same
    sizes = [1 if s == -1 else s for s in _sizes(node.params["sizes"])]
    return [g.op("Expand", [ins[0], g.ints(sizes)])]


def _repeat(g, node, ins):
    sizes = _sizes(node.params["sizes"])
    rank = input_rank(g, node)
    x = ins[0]
    if len(sizes) > rank:  # PyTorch's repeat: new leading axes of size 1 first
        x = g.op("Unsqueeze", [x, g.ints(list(range(len(sizes) - rank)))])
    sizes = [1] * (rank - len(sizes)) + sizes  # fewer sizes than axes: the leading axes once (numpy.tile)
    return [g.op("Tile", [x, g.ints(sizes)])]


def _repeat_elements(g, node, ins):
    """numpy.repeat as a Gather with the index of every output element (sizes are static)."""
    axis, repeats = node.params.get("axis"), [int(r) for r in node.params["repeats"]]
    x = ins[0]
    shape = input_shape(node)
    if shape is None:
        raise fail(g, node, "the input's shape is unknown")
    if axis is None:
        x, n, axis = g.op("Reshape", [x, g.ints([-1])]), math.prod(shape), 0
    else:
        n = shape[axis]
    if n is None:
        raise fail(g, node, f"axis {axis} has no static size")
    idx = np.repeat(np.arange(n, dtype=np.int64), repeats if len(repeats) > 1 else repeats[0])
    return [g.op("Gather", [x, g.const(idx)], axis=int(axis))]


def _slice_bounds(k: slice, n):
    """ONNX Slice's (start, end, step) for the slice ``k`` of an axis of ``n`` elements (None: not
    static), and the axis size below which a negative start selects nothing (0: never).

    ONNX clamps a negative-step start into [0, n - 1] where NumPy makes a start below -n select
    nothing (``x[-6::-2]`` of 5 elements is empty, not ``x[0]``); every other bound it clamps as
    NumPy does. A static axis gets NumPy's own bounds (``slice.indices``), an empty selection as
    the empty range 0:0 and an end before the first element as INT64_MIN (ONNX reads -1 as the
    last). On a dynamic axis, or with bounds that are symbolic sizes (computed when the model
    runs), the bounds stay as given and the caller empties the range (end 0) when the axis is
    shorter than the size returned."""
    step = 1 if k.step is None else int(k.step)
    if isinstance(n, (int, np.integer)) and not is_symbolic(n) and not has_symbols((k.start, k.stop)):
        start, stop, step = k.indices(int(n))
        if not len(range(start, stop, step)):
            return 0, 0, 1, 0
        return start, (stop if stop >= 0 else INT64_MIN), step, 0
    lo, hi = (INT64_MAX, INT64_MIN) if step < 0 else (0, INT64_MAX)
    start = lo if k.start is None else k.start
    below = -int(start) if step < 0 and not is_symbolic(start) and start < 0 else 0
    return start, (hi if k.stop is None else k.stop), step, below


def _getitem(g, node, ins):
    """Basic indexing: one Slice for the slices and ints, Squeeze for the ints, Unsqueeze for None."""
    key = node.params["key"]
    key = key if isinstance(key, tuple) else (key,)
    rank = input_rank(g, node)
    shape = input_shape(node)
    n_index = sum(1 for k in key if k is not None and k is not Ellipsis)
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (rank - n_index) + key[at + 1:]
    else:
        key = key + (slice(None),) * (rank - n_index)
    starts, ends, axes, steps, drop, new, below = [], [], [], [], [], [], []
    axis = out_pos = 0
    for k in key:
        if k is None:
            new.append(out_pos)
            out_pos += 1
            continue
        if isinstance(k, slice):
            if k != slice(None):
                start, end, step, least = _slice_bounds(k, shape[axis])
                starts.append(start)
                ends.append(end)
                axes.append(axis)
                steps.append(step)
                below.append(least)
            out_pos += 1
        else:
            i = int(k)
            starts.append(i)
            ends.append(INT64_MAX if i == -1 else i + 1)
            axes.append(axis)
            steps.append(1)
            below.append(0)
            drop.append(axis)
        axis += 1
    x = ins[0]
    if axes:
        end = g.ints(ends)
        if any(below):  # a dynamic axis shorter than -start: end at the first element, which empties
            # the negative-step range ONNX starts there (NumPy selects nothing)
            sizes = g.op("Gather", [g.op("Shape", [x]), g.ints(axes)], axis=0)
            end = g.op("Where", [g.op("Less", [sizes, g.ints(below)]), g.ints([0] * len(axes)), end])
        x = g.op("Slice", [x, g.ints(starts), end, g.ints(axes), g.ints(steps)])
    if drop:
        x = g.op("Squeeze", [x, g.ints(drop)])
    if new:
        x = g.op("Unsqueeze", [x, g.ints(new)])
    return [x if x != ins[0] else g.op("Identity", [x])]


def _split_section(g, node, ins):
    p = node.params
    shape = input_shape(node)
    ax = p["axis"] % len(shape)
    if shape[ax] is None:
        raise fail(g, node, f"split along axis {ax}, whose size is not static (a dynamic axis)")
    lo, hi = section_bounds(shape[ax], p["sections"], p["index"])
    return [g.op("Slice", [ins[0], g.ints([lo]), g.ints([hi]), g.ints([ax])])]


def _take(g, node, ins):
    return [g.op("Gather", ins, axis=int(node.params.get("axis", 0)))]


def _take_along_axis(g, node, ins):
    """GatherElements wants x and the indices of one shape but along ``axis``: numpy broadcasts them.
    The broadcast shape is computed from both shapes when the model runs (dynamic axes stay dynamic)."""
    xs, js = input_shape(node, 0), input_shape(node, 1)
    if xs is None or js is None or len(xs) != len(js):
        raise fail(g, node, "x and the indices need shapes of one known rank")
    ax = int(node.params.get("axis", -1)) % len(xs)
    if list(xs) == list(js) and None not in xs:  # nothing to broadcast
        return [g.op("GatherElements", ins, axis=ax)]
    sx, sj = g.op("Shape", [ins[0]]), g.op("Shape", [ins[1]])
    common = g.op("Max", [sx, sj])
    at_axis = g.const(np.arange(len(xs)) == ax)
    x = g.op("Expand", [ins[0], g.op("Where", [at_axis, sx, common])])
    j = g.op("Expand", [ins[1], g.op("Where", [at_axis, sj, common])])
    return [g.op("GatherElements", [x, j], axis=ax)]


def _concatenate(g, node, ins):
    return [g.op("Concat", compute(g, node, ins), axis=int(node.params.get("axis", 0)))]


def _stack(g, node, ins):
    axis = g.ints([int(node.params.get("axis", 0))])
    return [g.op("Concat", [g.op("Unsqueeze", [x, axis]) for x in compute(g, node, ins)],
                 axis=int(node.params.get("axis", 0)))]


def _pad(g, node, ins):
    rank = input_rank(g, node)
    if rank == 0:  # numpy.pad of a 0-d array returns it
        return [g.op("Identity", ins[:1])]
    pw = node.params["pad_width"]
    pw = np.asarray(pw, dtype=np.int64)
    pw = np.broadcast_to(pw, (rank, 2))  # numpy.pad's forms: n, (before, after), ((b0, a0), ...), ((n0,), ...)
    mode = node.params.get("mode", "constant")
    if mode == "reflect":
        shape = input_shape(node)
        over = [a for a in range(rank) if shape[a] is None or max(pw[a]) > shape[a] - 1]
        if over:
            raise fail(g, node, f"reflect padding {pw.tolist()} of {shape}: ONNX's Pad reflects once, so each pad "
                                 f"must be below its axis' (static) size; axes {over} are not (numpy reflects again)")
    args = [ins[0], g.ints(list(pw[:, 0]) + list(pw[:, 1]))]
    if mode == "constant":
        args.append(g.scalar(node.params.get("constant_values", 0.0), in_dtype(node, 0)))
    return [g.op("Pad", args, mode=mode)]


def _flip(g, node, ins):
    rank = input_rank(g, node)
    axis = node.params.get("axis")
    axes = list(range(rank)) if axis is None else [a % rank for a in _axes(axis)]
    n = len(axes)
    if n == 0:  # a 0-d array: nothing to reverse
        return [g.op("Identity", ins)]
    return [g.op("Slice", [ins[0], g.ints([-1] * n), g.ints([INT64_MIN] * n), g.ints(axes), g.ints([-1] * n)])]


def _tri(upper: int):
    def convert(g, node, ins):
        x = ins[0]
        if input_rank(g, node) == 1:  # numpy.tril of a vector: the vector as every row of a square matrix
            x = g.op("Expand", [x, g.op("Concat", [g.op("Shape", [x])] * 2, axis=0)])
        return [g.op("Trilu", [x, g.ints([int(node.params.get("k", 0))], scalar=True)], upper=upper)]
    return convert


# -- graphs: control flow and sub-graph calls ---------------------------------------------------
def _inline(param: str):
    """``call``/``fused``: the sub-graph's nodes written in place, its inputs bound to ours."""
    def convert(g, node, ins):
        sub = node.params[param]
        return g.inline(sub, ins)
    return convert


def _cond(g, node, ins):
    pred = g.cast(ins[0], in_dtype(node, 0), np.dtype(bool))
    pred = g.op("Reshape", [pred, g.ints([])])  # If takes a single-element condition
    p = node.params
    then_b = g.body(p["then_graph"], bind=ins[1:], name="then")
    else_b = g.body(p["else_graph"], bind=ins[1:], name="else")
    return g.op("If", [pred], n_out=len(node.avals), then_branch=then_b, else_branch=else_b, as_list=True)


def _while_loop(g, node, ins):
    """Loop: the loop vars carried; the condition evaluated once before, then at the end of each body."""
    p = node.params
    n = p["n_vars"]
    state, free = ins[:n], ins[n:]
    first = g.inline(p["cond_graph"], state + free)[0]
    first = g.cast(first, p["cond_graph"].avals[0].dtype, np.dtype(bool))
    first = g.op("Reshape", [first, g.ints([])])
    body = g.loop_body(p["body_graph"], p["cond_graph"], node, n, free)
    m = g.ints([p["max_iterations"]], scalar=True) if p["max_iterations"] >= 0 else ""
    return g.op("Loop", [m, first, *state], n_out=n, body=body, as_list=True)


def _foreach(g, node, ins):
    """Scan over axis 0: the states carried, the data sliced; saved states are extra scan outputs."""
    p = node.params
    nd, ns = p["n_data"], p["n_states"]
    data, states, free = ins[:nd], ins[nd:nd + ns], ins[nd + ns:]
    body, n_scan_out = g.scan_body(p["body"], node, nd, ns, free, p["save_states"])
    outs = g.op("Scan", [*states, *data], n_out=ns + n_scan_out, body=body, num_scan_inputs=nd, as_list=True)
    final, scanned = outs[:ns], outs[ns:]
    n_y = p["body"].n_outputs - ns
    return scanned[:n_y] + final + scanned[n_y:]


CONVERTERS = {
    # elementwise: arithmetic
    "add": _binary("Add"), "subtract": _binary("Sub"), "multiply": _binary("Mul"), "divide": _binary("Div"),
    "power": _binary("Pow"), "maximum": _binary("Max"), "minimum": _binary("Min"),
    "remainder": _remainder, "floor_divide": _floor_divide, "hypot": _hypot, "logaddexp": _logaddexp,
    "heaviside": _heaviside, "where": _where, "clip": _clip, "smooth_l1": _smooth_l1, "quadratic": _quadratic,
    "bitwise_and": _bitwise("BitwiseAnd", "And"), "bitwise_or": _bitwise("BitwiseOr", "Or"),
    "bitwise_xor": _bitwise("BitwiseXor", "Xor"), "bitwise_invert": _bitwise("BitwiseNot", "Not"),
    # elementwise: comparisons and logic
    "equal": _compare("Equal"), "not_equal": _compare("Equal", negate=True), "less": _compare("Less"),
    "less_equal": _compare("LessOrEqual"), "greater": _compare("Greater"),
    "greater_equal": _compare("GreaterOrEqual"),
    "logical_and": _logical("And"), "logical_or": _logical("Or"), "logical_xor": _logical("Xor"),
    "logical_not": _logical("Not"), "isnan": _float_test("IsNaN"), "isinf": _float_test("IsInf"), "isfinite": _isfinite,
    # elementwise: math
    **{name: _unary(t) for name, t in (
        ("abs", "Abs"), ("negative", "Neg"), ("sign", "Sign"), ("exp", "Exp"), ("log", "Log"), ("sqrt", "Sqrt"),
        ("sin", "Sin"), ("cos", "Cos"), ("tan", "Tan"), ("asin", "Asin"), ("acos", "Acos"), ("atan", "Atan"),
        ("sinh", "Sinh"), ("cosh", "Cosh"), ("tanh", "Tanh"), ("asinh", "Asinh"), ("acosh", "Acosh"),
        ("atanh", "Atanh"), ("reciprocal", "Reciprocal"), ("relu", "Relu"), ("sigmoid", "Sigmoid"))},
    **{name: _unary(t, int_identity=True) for name, t in (("floor", "Floor"), ("ceil", "Ceil"), ("round", "Round"))},
    "trunc": _trunc, "square": _square,
    "expm1": _with_scalar("Sub", 1.0, "Exp"), "log1p": _with_scalar("", 0.0, "Log1p"),
    "log2": _with_scalar("Div", math.log(2.0), "Log"), "log10": _with_scalar("Div", math.log(10.0), "Log"),
    "cast": _cast, "zeros_like": _fill_like(lambda n: 0), "ones_like": _fill_like(lambda n: 1),
    "full_like": _fill_like(lambda n: n.params["fill_value"]),
    # identities: copies, and the cross-device copy nodes (an ONNX model runs on one device)
    **{name: _identity for name in ("copy", "copy_to", "positive", "stop_gradient", "boxing", "cast_storage")},
    # reductions
    "sum": _reduce("ReduceSum"), "mean": _reduce("ReduceMean"), "prod": _reduce("ReduceProd"),
    "max": _reduce("ReduceMax", cast_in=False), "min": _reduce("ReduceMin", cast_in=False),
    "all": _all_any("ReduceMin"), "any": _all_any("ReduceMax"), "count_nonzero": _count_nonzero,
    "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"), "var": _moments(False), "std": _moments(True),
    "vector_norm": _vector_norm, "cumulative_sum": _cumulative_sum,
    # shape
    "reshape": _reshape, "reshape_codes": _reshape_codes, "reshape_like": _reshape_like, "transpose": _transpose, "expand_dims": _expand_dims,
    "squeeze": _squeeze, "flatten": _flatten, "broadcast_to": _broadcast_to, "broadcast_like": _broadcast_like,
    "expand": _expand, "repeat": _repeat, "repeat_elements": _repeat_elements, "getitem": _getitem,
    "split_section": _split_section, "take": _take, "take_along_axis": _take_along_axis,
    "concatenate": _concatenate, "stack": _stack, "pad": _pad, "flip": _flip, "tril": _tri(0), "triu": _tri(1),
    # graphs
    "call": _inline("graph"), "fused": _inline("graph"), "cond": _cond, "while_loop": _while_loop,
    "foreach": _foreach,
}


CONVERTERS.update(_NN_CONVERTERS)
CONVERTERS.update(_INDEX_CONVERTERS)
CONVERTERS.update(_LINALG_CONVERTERS)
CONVERTERS.update(_SCATTER_CONVERTERS)
CONVERTERS["round_to_format"] = export_round
CONVERTERS["image_decode"] = export_image_decode
CONVERTERS.update(_SIZE_CONVERTERS)
