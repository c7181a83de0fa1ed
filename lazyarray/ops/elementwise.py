"""Elementwise ops: binary arithmetic with NumPy broadcasting, comparisons, ``where`` and unary math.

Shapes follow the registry defaults (unary keeps the shape, binary broadcasts) and dtypes
are NumPy's own (the registry asks NumPy once per dtype combination), so a lazy array's
aval always matches what the eager kernel produces. Gradients return the full broadcast
shape; the gradient pass sums them back to each input's shape.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParamValueError, ShapeError, fmt_shape
from . import sparse_kernels as sk
from .params import FLOAT, Param
from .registry import OpDef, register


def _binary(name, kernel, grad, doc, inplace=((0, 0), (1, 0)), storage=None, sparse_kernel=None):
    return register(OpDef(name, ("a", "b"), kernel, grad=grad, inplace=inplace, elementwise=True, doc=doc,
                          storage=storage, sparse_kernel=sparse_kernel))


def _unary(name, kernel, grad, doc, params=(), inplace=((0, 0),), dtype=None, zero_preserving=False,
           writes_out=False):
    """``zero_preserving``: f(0) == 0, so csr / row_sparse inputs keep their storage and the
    kernel runs on the stored values only."""
    sparse = {"storage": sk.zero_preserving_storage, "sparse_kernel": sk.unary(kernel)} if zero_preserving else {}
    return register(OpDef(name, ("x",), kernel, params=params, grad=grad, inplace=inplace,
                          elementwise=True, dtype=dtype, writes_out=writes_out, doc=doc, **sparse))


def _like_exp(dtypes, **params):
    """The dtype NumPy gives a float function of x (ints -> float64, float16 stays)."""
    return np.exp.resolve_dtypes((dtypes[0], None))[-1]


def _times_float(dtypes, **params):
    """The dtype of x combined with a Python float (float32 stays, ints -> float64)."""
    return np.result_type(dtypes[0], 1.0)


# -- binary ------------------------------------------------------------------------
# Sparse: rsp+rsp -> rsp, csr+csr -> csr, sparse+dense -> dense (equal shapes); sparse * dense
# (a scalar, or broadcasting into the sparse shape) keeps the sparse storage.
_binary("add", "add", lambda F, ins, y, g: [g, g], "a + b",
        storage=sk.add_storage, sparse_kernel=sk.combine(1))
_binary("subtract", "subtract", lambda F, ins, y, g: [g, F.negative(g)], "a - b",
        storage=sk.add_storage, sparse_kernel=sk.combine(-1))
_binary("multiply", "multiply", lambda F, ins, y, g: [F.multiply(g, ins[1]), F.multiply(g, ins[0])], "a * b",
        storage=sk.multiply_storage, sparse_kernel=sk.multiply)
_binary("divide", "true_divide",
        lambda F, ins, y, g: [F.divide(g, ins[1]), F.negative(F.divide(F.multiply(g, y), ins[1]))],
        "a / b (true division: integers give floats)")


def _power_grad(F, ins, y, g):
    a, b = ins
    da = F.multiply(g, F.multiply(b, F.power(a, F.subtract(b, 1))))
    # d/db a**b = a**b * log(a); defined as 0 where a <= 0 (where the real power has no slope in b)
    safe = F.where(F.greater(a, 0), a, 1)
    db = F.multiply(g, F.multiply(y, F.log(safe)))
    return [da, db]


_binary("power", "power", _power_grad, "a ** b")
_binary("maximum", "maximum",
        lambda F, ins, y, g: [F.multiply(g, F.greater_equal(ins[0], ins[1])),
                              F.multiply(g, F.less(ins[0], ins[1]))],
        "elementwise max (ties send the gradient to a)")
_binary("minimum", "minimum",
        lambda F, ins, y, g: [F.multiply(g, F.less_equal(ins[0], ins[1])),
                              F.multiply(g, F.greater(ins[0], ins[1]))],
        "elementwise min (ties send the gradient to a)")
_binary("heaviside", "heaviside",
        lambda F, ins, y, g: [F.zeros_like(ins[0]), F.multiply(g, F.equal(ins[0], 0))],
        "0 where x < 0, y where x == 0, 1 where x > 0; d/dy = (x == 0), d/dx = 0")

# -- comparisons (bool results; no gradient flows through them) ----------------------
_NO_GRAD2 = lambda F, ins, y, g: [None, None]  # noqa: E731
for _name, _doc in (("equal", "=="), ("not_equal", "!="), ("less", "<"), ("less_equal", "<="),
                    ("greater", ">"), ("greater_equal", ">=")):
    _binary(_name, _name, _NO_GRAD2, f"a {_doc} b, elementwise, as bool", inplace=())

register(OpDef(
    "where", ("cond", "x", "y"), "where",
    grad=lambda F, ins, out, g: [None, F.where(ins[0], g, 0), F.where(ins[0], 0, g)],
    elementwise=True, dtype=lambda dtypes: np.result_type(dtypes[1], dtypes[2]),
    doc="x where cond is true, else y (broadcasting all three)",
))

# -- unary -------------------------------------------------------------------------
_unary("negative", "negative", lambda F, ins, y, g: [F.negative(g)], "-x", zero_preserving=True)
_unary("abs", "absolute", lambda F, ins, y, g: [F.multiply(g, F.sign(ins[0]))], "|x|", zero_preserving=True)
_unary("sign", "sign", lambda F, ins, y, g: [None], "-1, 0 or 1 (zero gradient)", zero_preserving=True)
_unary("exp", "exp", lambda F, ins, y, g: [F.multiply(g, y)], "e ** x")
_unary("log", "log", lambda F, ins, y, g: [F.divide(g, ins[0])], "natural logarithm")
_unary("sqrt", "sqrt", lambda F, ins, y, g: [F.divide(F.multiply(g, 0.5), y)], "square root", zero_preserving=True)
_unary("square", "square", lambda F, ins, y, g: [F.multiply(g, F.multiply(ins[0], 2))], "x * x", zero_preserving=True)
_unary("sin", "sin", lambda F, ins, y, g: [F.multiply(g, F.cos(ins[0]))], "sine", zero_preserving=True)
_unary("cos", "cos", lambda F, ins, y, g: [F.negative(F.multiply(g, F.sin(ins[0])))], "cosine")
_unary("tanh", "tanh", lambda F, ins, y, g: [F.multiply(g, F.subtract(1, F.square(y)))], "hyperbolic tangent", zero_preserving=True)


def _sigmoid(xp, x, out=None):
    # 1 / (1 + e^-x) written so that neither branch overflows: e^-|x| is in (0, 1].
    e = xp.exp(-xp.abs(x))
    pos = 1 / (1 + e)
    return xp.where(x >= 0, pos, e * pos)


_unary("sigmoid", _sigmoid,
       lambda F, ins, y, g: [F.multiply(g, F.multiply(y, F.subtract(1, y)))], "1 / (1 + e ** -x)",
       dtype=_like_exp)


def memory_order(a):
    """The axes of ``a`` from the largest stride to the smallest when ``a`` is contiguous in that
    order (C order: 0, 1, ...; a batch-last NCHW buffer: 1, 2, 3, 0), else None."""
    if a.flags.c_contiguous:
        return tuple(range(a.ndim))
    if a.ndim == 4 and a.strides[0] == a.itemsize and a.transpose(1, 2, 3, 0).flags.c_contiguous:
        return (1, 2, 3, 0)  # (the executor's batch-last buffers, without the sort)
    order = tuple(sorted(range(a.ndim), key=lambda i: -a.strides[i]))
    return order if a.transpose(order).flags.c_contiguous else None


def relu_kernel(xp, x, out=None):
    """The reference kernel: ``maximum(x, 0)`` (the kernels layer's ``elementwise.py`` runs faster
    ways for large float arrays: a compiled loop, a zero row, rows over threads)."""
    return xp.maximum(x, 0, out=out)


def relu_grad_kernel(xp, y, g, out=None):
    """The reference kernel: ``g * (y > 0)`` in two passes over one buffer: the comparison written
    as 1.0 / 0.0 in g's dtype, then the product (no boolean mask array, no mixed bool-float
    product); the kernels layer runs one compiled pass where numba is installed."""
    if out is None:
        out = xp.empty(g.shape, g.dtype)
    elif xp.may_share_memory(out, g):  # (a fused group's register: g's buffer reused for the result)
        return xp.multiply(g, xp.greater(y, 0), out=out)
    xp.greater(y, 0, out=out)
    return xp.multiply(g, out, out=out)


def _relu_grad_shape(shapes):
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise ShapeError(f"relu_grad: y {fmt_shape(shapes[0])} and g {fmt_shape(shapes[1])} must have one shape")
    return tuple(shapes[1])


register(OpDef("relu_grad", ("y", "g"), relu_grad_kernel, shape=_relu_grad_shape, dtype=lambda dtypes: dtypes[1],
               writes_out=True, elementwise=True, inplace=((1, 0), (0, 0)),  # (g's buffer first: a temporary)
               grad=lambda F, ins, out, gg: [None, F.relu_grad(ins[0], gg)],
               doc="relu's gradient from its output: g where y > 0, else 0 (g * (y > 0), bit for bit)"))


def _relu_grad(F, ins, y, g):
    a, b = y.aval, g.aval
    if a.stype == b.stype == "default" and a.dtype == b.dtype and a.dtype.kind == "f" and a.shape == b.shape \
            and a.shape is not None and None not in a.shape:
        return [F.relu_grad(y, g)]
    return [F.multiply(g, F.greater(y, 0))]  # sparse, mixed dtypes or unknown dims: as a product


# relu's gradient reads its output, not its input: the planner may free the input.
_unary("relu", relu_kernel, _relu_grad, "max(x, 0)",
       dtype=lambda dtypes: np.maximum.resolve_dtypes((dtypes[0], dtypes[0], None))[-1], zero_preserving=True,
       writes_out=True)


def _smooth_l1(xp, x, scalar=1.0, out=None):
    s2 = scalar * scalar
    ax = xp.abs(x)
    return xp.where(ax < 1.0 / s2, 0.5 * s2 * x * x, ax - 0.5 / s2)


def _smooth_l1_grad(F, ins, y, g, scalar=1.0):
    x = ins[0]
    s2 = scalar * scalar
    slope = F.where(F.less(F.abs(x), 1.0 / s2), F.multiply(x, s2), F.sign(x))
    return [F.multiply(g, slope)]


def _positive(v, op):
    if v <= 0:
        raise ParamValueError(f"{op}: scalar must be > 0, got {v}")


_unary("smooth_l1", _smooth_l1, _smooth_l1_grad,
       "MXNet smooth_l1: 0.5*(s*x)**2 if |x| < 1/s**2 else |x| - 0.5/s**2",
       params=(Param("scalar", FLOAT, 1.0, check=_positive),), inplace=(), dtype=_times_float)


def _quadratic(xp, x, a=0.0, b=0.0, c=0.0, out=None):
    return (a * x + b) * x + c


def _quadratic_sparse(xp, x, a=0.0, b=0.0, c=0.0, out=None):
    # c == 0 maps zeros to zeros: only the stored values change
    d = x.data
    return x.with_data(((a * d + b) * d).astype(_times_float([d.dtype])))


def _quadratic_storage(stypes, shapes, a=0.0, b=0.0, c=0.0):
    return [stypes[0]] if stypes[0] != "default" and c == 0.0 else None


register(OpDef(
    "quadratic", ("x",), _quadratic,
    params=(Param("a", FLOAT, 0.0), Param("b", FLOAT, 0.0), Param("c", FLOAT, 0.0)),
    storage=_quadratic_storage, sparse_kernel=_quadratic_sparse, dtype=_times_float, elementwise=True,
    grad=lambda F, ins, y, g, a=0.0, b=0.0, c=0.0: [F.multiply(g, F.add(F.multiply(ins[0], 2 * a), b))],
    doc="a*x**2 + b*x + c (keeps csr / row_sparse storage when c == 0)",
))
