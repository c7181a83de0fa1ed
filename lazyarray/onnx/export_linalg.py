"""ONNX export of linear algebra, running products, bit shifts and real-valued complex helpers.

Converters in ``export_ops``' convention, joining its ``CONVERTERS`` table:

* ``det``: ONNX ``Det``. ``matrix_power``: repeated squaring with ``MatMul`` (``n = 0``: the
  identity broadcast to x's stack); a negative power needs an inverse, which the default domain
  lacks, so it is refused. ``trace`` / ``diagonal``: a ``Gather`` of the flat indices of the offset
  diagonal of the last two (static) axes. ``cross``: ``Gather``s of the rotated components.
  ``matrix_norm``: Frobenius, 1, -1, inf, -inf norms as reductions (2, -2, nuc need singular values).
* ``cumulative_prod``: ONNX ``CumProd`` from opset 26; below that a ``Scan`` multiplying slice by
  slice along the axis (exact for integers too, unlike exp of a log cumsum).
* ``bitwise_left_shift`` / ``bitwise_right_shift``: ONNX's ``BitShift`` takes unsigned integers, so
  signed ones are cast to the unsigned type of their width (two's complement: the left shift wraps as
  NumPy's does) and the right shift of a negative number is ``~((~a) >> b)``, NumPy's arithmetic shift.
* ``real`` / ``conj`` / ``imag`` of a real array: identity, identity, zeros.
* ``signbit`` / ``copysign``: the sign bit read through ``BitCast`` to a signed integer (opset 26 and
  up; below, refused: no other operator tells -0.0 or -nan from +). ``atan2``: ``Atan(y / x)`` with
  NumPy's quadrant rules: +-pi added for x < 0 by the sign of y, x = +-0 and both-infinite cases
  chosen explicitly, a zero's sign read as the sign of its reciprocal (1 / -0 = -inf).

``NO_ONNX_FORM`` says, for the registry ops that have no ONNX form, why: the export error quotes it.
"""
from __future__ import annotations

import numpy as np

from .export_base import compute, elem_type, fail, in_dtype, input_rank, input_shape, out_dtype

I64 = np.dtype("int64")

_COMPLEX = ("ONNX runtimes implement no complex tensors (DFT works on (..., 2) real pairs and no operator "
            "makes or reads a complex tensor); keep FFTs outside the exported model")
_DECOMP = "ONNX's default domain has no matrix decomposition or solver operator"
NO_ONNX_FORM = {
    **{op: _COMPLEX for op in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft",
                               "ihfft")},
    **{op: _DECOMP for op in ("cholesky", "eigh", "eigvalsh", "qr", "svd", "svdvals", "solve", "inv", "pinv",
                              "slogdet", "matrix_rank")},
    "nextafter": "ONNX has no operator stepping to the next representable float",
    **{op: "made by an inference rewrite of a compiled graph from ops that export (graph/passes/); export the "
           "recorded graph (a block's or symbol's own ops)" for op in ("fused_attention", "rms_norm")},
}
_SIGN_BIT = "ONNX reads a float's sign bit (of -0.0 and -nan) only with BitCast, from opset 26: export with opset=26"


def _static2(g, node, what: str):
    s = input_shape(node)
    if s is None or len(s) < 2 or s[-2] is None or s[-1] is None:
        raise fail(g, node, f"{what} needs the last two axes static, got {s}")
    return int(s[-2]), int(s[-1])


# -- linear algebra ---------------------------------------------------------------------------------------
def _det(g, node, ins):
    return [g.op("Det", compute(g, node, ins))]


def _matrix_power(g, node, ins):
    n = int(node.params.get("n", 1))
    x, = compute(g, node, ins)
    if n < 0:
        raise fail(g, node, f"matrix_power with n={n} needs a matrix inverse; {_DECOMP}")
    if n == 0:
        m, _ = _static2(g, node, "matrix_power(x, 0)")
        return [g.op("Expand", [g.const(np.eye(m, dtype=out_dtype(node))), g.op("Shape", [x])])]
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else g.op("MatMul", [result, base])
        n >>= 1
        if n:
            base = g.op("MatMul", [base, base])
    return [g.op("Identity", [result]) if result == x else result]


def _diagonal_of(g, node, x, offset: int):
    """The offset diagonal of the last two axes: a Gather of its flat positions."""
    m, n = _static2(g, node, "diagonal")
    rows = np.arange(max(0, -offset), min(m, n - offset)) if m and n else np.arange(0)
    flat = g.op("Reshape", [x, g.ints([0] * (input_rank(g, node) - 2) + [m * n])])
    return g.op("Gather", [flat, g.const((rows * n + rows + offset).astype(np.int64))], axis=-1)


def _diagonal(g, node, ins):
    return [_diagonal_of(g, node, ins[0], int(node.params.get("offset", 0)))]


def _trace(g, node, ins):
    d = _diagonal_of(g, node, ins[0], int(node.params.get("offset", 0)))
    d = g.cast(d, in_dtype(node, 0), out_dtype(node))
    return [g.op("ReduceSum", [d, g.ints([-1])], keepdims=0)]


def _cross(g, node, ins):
    a, b = compute(g, node, ins)
    rank = len(node.avals[0].shape)
    ax = int(node.params.get("axis", -1)) % rank

    def rot(t, i, order):
        local = ax - (rank - input_rank(g, node, i))  # the axis in this input (it may have fewer dims)
        return g.op("Gather", [t, g.ints(order)], axis=local)
    yzx, zxy = [1, 2, 0], [2, 0, 1]
    return [g.op("Sub", [g.op("Mul", [rot(a, 0, yzx), rot(b, 1, zxy)]),
                         g.op("Mul", [rot(a, 0, zxy), rot(b, 1, yzx)])])]


def _matrix_norm(g, node, ins):
    x, = compute(g, node, ins)
    ord_ = node.params.get("ord", "fro")
    keep = bool(node.params.get("keepdims"))
    last2 = g.ints([-2, -1])
    if ord_ == "fro":
        y = g.op("Sqrt", [g.op("ReduceSumSquare", [x, last2], keepdims=1)])
    elif ord_ in (1, -1, float("inf"), float("-inf")):
        a = g.op("Abs", [x])
        inner, outer = (-2, -1) if ord_ in (1, -1) else (-1, -2)
        s = g.op("ReduceSum", [a, g.ints([inner])], keepdims=1)
        y = g.op("ReduceMax" if ord_ in (1, float("inf")) else "ReduceMin", [s, g.ints([outer])], keepdims=1)
    else:
        raise fail(g, node, f"matrix_norm ord={ord_!r} needs singular values; {_DECOMP}")
    return [y if keep else g.op("Squeeze", [y, last2])]


# -- running products ------------------------------------------------------------------------------------
def _cumulative_prod(g, node, ins):
    x, = compute(g, node, ins)
    dt = out_dtype(node)
    axis = node.params.get("axis")
    rank = 1 if axis is None else input_rank(g, node)
    axis = 0 if axis is None else int(axis) % rank
    shape = input_shape(node)
    if shape is not None and shape[axis] == 0:  # nothing to multiply (a Scan over no slices fails)
        y = g.op("Identity", [x])
    elif g.opset >= 26:
        y = g.op("CumProd", [x, g.ints([axis], scalar=True)])
    else:
        y = _scan_product(g, x, dt, axis, rank)
    if node.params.get("include_initial"):
        pads = [0] * (2 * rank)
        pads[axis] = 1
        y = g.op("Pad", [y, g.ints(pads), g.scalar(1, dt)], mode="constant")
    return [y]


def _scan_product(g, x: str, dt, axis: int, rank: int) -> str:
    helper = g.ctx.onnx.helper
    keep = [a for a in range(rank) if a != axis]
    one_shape = g.op("Gather", [g.op("Shape", [x]), g.ints(keep)])
    start = g.op("ConstantOfShape", [one_shape], value=g.tensor(np.ones(1, dt)))
    names = [g.ctx.fresh(f"{g._hint}_{k}") for k in ("acc", "slice", "prod", "acc_out", "y")]
    acc, sl, prod, acc_out, y = names
    body = helper.make_graph(
        [helper.make_node("Mul", [acc, sl], [prod], name=g.ctx.fresh(f"{g._hint}/Mul")),
         helper.make_node("Identity", [prod], [acc_out], name=g.ctx.fresh(f"{g._hint}/Identity")),
         helper.make_node("Identity", [prod], [y], name=g.ctx.fresh(f"{g._hint}/Identity"))],
        g.ctx.fresh(f"{g._hint}_body"),
        [helper.make_tensor_value_info(acc, elem_type(dt), None), helper.make_tensor_value_info(sl, elem_type(dt), None)],
        [helper.make_tensor_value_info(acc_out, elem_type(dt), None), helper.make_tensor_value_info(y, elem_type(dt), None)])
    _, out = g.op("Scan", [start, x], n_out=2, body=body, num_scan_inputs=1, scan_input_axes=[axis],
                  scan_output_axes=[axis])
    return out


# -- bit shifts -------------------------------------------------------------------------------------------
def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{dt.itemsize * 8}")


def _shift(direction: str):
    def convert(g, node, ins):
        a, b = compute(g, node, ins)
        dt = out_dtype(node)
        if dt.kind == "b" or dt.itemsize < 4 and dt.kind == "i":  # BitShift kernels: uint8/32/64
            raise fail(g, node, f"bit shifts of {dt} (cast to int32 or int64 first)")
        if dt.kind == "u":
            return [g.op("BitShift", [a, b], direction=direction)]
        u = _unsigned(dt)
        ub = g.cast(b, dt, u)
        if direction == "LEFT":
            return [g.cast(g.op("BitShift", [g.cast(a, dt, u), ub], direction="LEFT"), u, dt)]
        neg = g.op("Less", [a, g.scalar(0, dt)])
        pos = g.op("Where", [neg, g.op("BitwiseNot", [a]), a])  # ~a >= 0 for a < 0
        s = g.cast(g.op("BitShift", [g.cast(pos, dt, u), ub], direction="RIGHT"), u, dt)
        return [g.op("Where", [neg, g.op("BitwiseNot", [s]), s])]
    return convert


# -- complex helpers on real arrays -----------------------------------------------------------------------
def _real_only(kind: str):
    def convert(g, node, ins):
        if in_dtype(node, 0).kind == "c":
            raise fail(g, node, f"{node.op.name} of a complex array: {_COMPLEX}")
        if kind == "zeros":
            return [g.op("ConstantOfShape", [g.op("Shape", ins)], value=g.tensor(np.zeros(1, out_dtype(node))))]
        return [g.op("Identity", ins)]
    return convert


# -- float sign bits ----------------------------------------------------------------------------------------
def _negative_bit(g, node, x, dt):
    """Whether ``x``'s sign bit is set (bool): integers compare with 0, floats go through BitCast."""
    if dt.kind in "iu":
        return g.op("Less", [x, g.scalar(0, dt)])
    if g.opset < 26:
        raise fail(g, node, _SIGN_BIT)
    bits = g.op("BitCast", [x], to=_int_elem(dt))
    return g.op("Less", [bits, g.scalar(0, np.dtype(f"int{dt.itemsize * 8}"))])


def _int_elem(dt):
    return elem_type(np.dtype(f"int{dt.itemsize * 8}"))


def _signbit(g, node, ins):
    return [_negative_bit(g, node, ins[0], in_dtype(node, 0))]


def _copysign(g, node, ins):
    a, b = compute(g, node, ins)
    mag = g.op("Abs", [a])
    return [g.op("Where", [_negative_bit(g, node, b, out_dtype(node)), g.op("Neg", [mag]), mag])]


def _atan2(g, node, ins):
    y, x = compute(g, node, ins)
    dt = out_dtype(node)

    def c(v):
        return g.scalar(v, dt)
    zero = c(0)
    # a zero's sign: its reciprocal is -inf for -0.0
    y_neg = g.op("Or", [g.op("Less", [y, zero]), g.op("Less", [g.op("Reciprocal", [y]), zero])])
    x_neg = g.op("Or", [g.op("Less", [x, zero]), g.op("Less", [g.op("Reciprocal", [x]), zero])])
    r = g.op("Atan", [g.op("Div", [y, x])])
    r = g.op("Where", [g.op("Less", [x, zero]), g.op("Add", [r, g.op("Where", [y_neg, c(-np.pi), c(np.pi)])]), r])
    # x = +-0 (y not NaN): +-pi/2 for y != 0; for y = +-0: y itself (x = +0) or +-pi (x = -0)
    y_zero = g.op("Equal", [y, zero])
    at_zero = g.op("Where", [y_zero, g.op("Where", [x_neg, g.op("Where", [y_neg, c(-np.pi), c(np.pi)]), y]),
                             g.op("Where", [y_neg, c(-np.pi / 2), c(np.pi / 2)])])
    x_zero = g.op("And", [g.op("Equal", [x, zero]), g.op("Not", [g.op("IsNaN", [y])])])
    r = g.op("Where", [x_zero, at_zero, r])
    # both infinite: +-pi/4 (x = +inf) or +-3pi/4 (x = -inf)
    quarter = g.op("Where", [x_neg, c(3 * np.pi / 4), c(np.pi / 4)])
    both_inf = g.op("And", [g.op("IsInf", [x]), g.op("IsInf", [y])])
    return [g.op("Where", [both_inf, g.op("Where", [y_neg, g.op("Neg", [quarter]), quarter]), r])]


CONVERTERS = {
    "signbit": _signbit, "copysign": _copysign, "atan2": _atan2,
    "det": _det, "matrix_power": _matrix_power, "diagonal": _diagonal, "trace": _trace, "cross": _cross,
    "matrix_norm": _matrix_norm, "cumulative_prod": _cumulative_prod,
    "bitwise_left_shift": _shift("LEFT"), "bitwise_right_shift": _shift("RIGHT"),
    "real": _real_only("identity"), "conj": _real_only("identity"), "imag": _real_only("zeros"),
}
