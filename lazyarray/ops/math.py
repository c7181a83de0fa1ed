"""The rest of the Array API's elementwise functions: rounding, tests for NaN / inf, more
exponentials, logarithms and trigonometry, integer division and remainder, logical and bitwise
ops.

Op names are the standard's (``asin``, ``atan2``, ``bitwise_invert``); kernels are the NumPy /
CuPy ufuncs of the same meaning (``arcsin``, ``arctan2``, ``invert``), so dtypes are NumPy's own
(the registry asks NumPy once per dtype combination) and the eager hot path applies. Gradients
are written with other registered ops, as in ``elementwise.py``.
"""
from __future__ import annotations

import numpy as np

from ..errors import AutogradError
from .registry import OpDef, register

_ZERO1 = lambda F, ins, y, g: [None]  # noqa: E731  (piecewise constant: zero gradient)
_ZERO2 = lambda F, ins, y, g: [None, None]  # noqa: E731


def _unary(name, kernel, grad, doc, inplace=((0, 0),)):
    return register(OpDef(name, ("x",), kernel, grad=grad, inplace=inplace, elementwise=True, doc=doc))


def _binary(name, kernel, grad, doc, inplace=((0, 0), (1, 0))):
    return register(OpDef(name, ("a", "b"), kernel, grad=grad, inplace=inplace, elementwise=True, doc=doc))


def _times(F, g, t):
    return [F.multiply(g, t)]


def _round(xp, x, out=None):
    return xp.round(x)  # (not numpy.rint: that turns integers into floats)


# -- rounding and sign (piecewise constant: zero gradient) ------------------------------------------
for _name, _doc in (("floor", "largest integer <= x"), ("ceil", "smallest integer >= x"),
                    ("trunc", "x rounded toward zero"), ("round", "x rounded to the nearest integer, "
                                                                  "halves to even")):
    _unary(_name, _name if _name != "round" else _round, _ZERO1, _doc + " (integers unchanged)")

# -- tests (bool results) -----------------------------------------------------------------------------
for _name, _doc in (("isnan", "x is NaN"), ("isinf", "x is +inf or -inf"), ("isfinite", "x is not NaN or inf"),
                    ("signbit", "the sign bit of x is set (true for -0.0)")):
    _unary(_name, _name, _ZERO1, _doc + ", as bool", inplace=())

# -- exponentials and logarithms ----------------------------------------------------------------------
def _expm1(xp, x, out=None):
    if x.dtype.kind != "c":
        return xp.expm1(x, out=out)
    # NumPy's complex expm1 gives NaN at infinities; the standard's special cases are C99's cexp(z) - 1
    with np.errstate(invalid="ignore"):
        res = xp.expm1(x)
        bad = ~xp.isfinite(x)
        if bad.any():
            res = xp.where(bad, xp.exp(x) - 1, res)
        res = xp.where(x == 0, x - x.real, res)  # expm1(-0 + bj) is +0 + bj for b = +-0 (x - x.real: -0 -> +0)
    if out is None:
        return res
    out[...] = res
    return out


register(OpDef("expm1", ("x",), _expm1, grad=lambda F, ins, y, g: _times(F, g, F.add(y, 1)), inplace=((0, 0),),
               elementwise=True, dtype=lambda dtypes: np.expm1(np.zeros((), dtypes[0])).dtype,  # NumPy's: ints -> float64
               doc="e ** x - 1, accurate near 0"))
_unary("log1p", "log1p", lambda F, ins, y, g: [F.divide(g, F.add(ins[0], 1))], "log(1 + x), accurate near 0")
_unary("log2", "log2", lambda F, ins, y, g: [F.divide(g, F.multiply(ins[0], 0.6931471805599453))],
       "base-2 logarithm")
_unary("log10", "log10", lambda F, ins, y, g: [F.divide(g, F.multiply(ins[0], 2.302585092994046))],
       "base-10 logarithm")
_unary("reciprocal", "reciprocal", lambda F, ins, y, g: [F.negative(F.multiply(g, F.square(y)))],
       "1 / x (integers: NumPy's integer reciprocal)")
_unary("positive", "positive", lambda F, ins, y, g: [g], "+x (a copy)")

# -- trigonometry -----------------------------------------------------------------------------------------
_unary("tan", "tan", lambda F, ins, y, g: _times(F, g, F.add(F.square(y), 1)), "tangent")
_unary("sinh", "sinh", lambda F, ins, y, g: _times(F, g, F.cosh(ins[0])), "hyperbolic sine")
_unary("cosh", "cosh", lambda F, ins, y, g: _times(F, g, F.sinh(ins[0])), "hyperbolic cosine")
_unary("asin", "arcsin", lambda F, ins, y, g: [F.divide(g, F.sqrt(F.subtract(1, F.square(ins[0]))))],
       "inverse sine (numpy.arcsin)")
_unary("acos", "arccos", lambda F, ins, y, g: [F.negative(F.divide(g, F.sqrt(F.subtract(1, F.square(ins[0])))))],
       "inverse cosine (numpy.arccos)")
_unary("atan", "arctan", lambda F, ins, y, g: [F.divide(g, F.add(F.square(ins[0]), 1))],
       "inverse tangent (numpy.arctan)")
_unary("asinh", "arcsinh", lambda F, ins, y, g: [F.divide(g, F.sqrt(F.add(F.square(ins[0]), 1)))],
       "inverse hyperbolic sine (numpy.arcsinh)")
_unary("acosh", "arccosh", lambda F, ins, y, g: [F.divide(g, F.sqrt(F.subtract(F.square(ins[0]), 1)))],
       "inverse hyperbolic cosine (numpy.arccosh)")
_unary("atanh", "arctanh", lambda F, ins, y, g: [F.divide(g, F.subtract(1, F.square(ins[0])))],
       "inverse hyperbolic tangent (numpy.arctanh)")


def _atan2_grad(F, ins, y, g):
    a, b = ins
    r2 = F.add(F.square(a), F.square(b))
    return [F.divide(F.multiply(g, b), r2), F.negative(F.divide(F.multiply(g, a), r2))]


_binary("atan2", "arctan2", _atan2_grad, "the angle of the point (b, a): atan(a / b) in the right quadrant "
                                         "(numpy.arctan2)")
_binary("hypot", "hypot", lambda F, ins, y, g: [F.divide(F.multiply(g, ins[0]), y), F.divide(F.multiply(g, ins[1]), y)],
        "sqrt(a**2 + b**2) without overflow")


def _logaddexp_grad(F, ins, y, g):
    return [F.multiply(g, F.exp(F.subtract(ins[0], y))), F.multiply(g, F.exp(F.subtract(ins[1], y)))]


_binary("logaddexp", "logaddexp", _logaddexp_grad, "log(e**a + e**b) without overflow")
_binary("copysign", "copysign",
        lambda F, ins, y, g: [F.multiply(g, F.multiply(F.sign(ins[0]), F.sign(y))), None],
        "|a| with the sign of b")
_binary("nextafter", "nextafter", _ZERO2, "the next float after a toward b", inplace=())

# -- integer division --------------------------------------------------------------------------------------
def _floor_divide(xp, a, b, out=None):
    if xp.result_type(a, b).kind != "f":
        res = xp.floor_divide(a, b)
        return res if out is None else _write(xp, out, res)
    # The Array API standard defines a // b on floats as floor(a / b) where NumPy (and Python) differ:
    # an infinite a over a finite b is +-inf (NumPy: NaN, with a warning), and a finite a over an
    # infinite b is a signed zero (NumPy: -1.0 when the signs differ). Only those elements are replaced.
    odd = xp.isinf(a) != xp.isinf(b)
    if not odd.any():
        res = xp.floor_divide(a, b)  # (a new array even for out=: a and out may be the same buffer)
        return res if out is None else _write(xp, out, res)
    with np.errstate(invalid="ignore", divide="ignore"):
        res = xp.where(odd, xp.floor(xp.true_divide(a, b)), xp.floor_divide(a, b))
    return res if out is None else _write(xp, out, res)


def _write(xp, out, res):
    xp.copyto(out, res, casting="same_kind")  # (x //= 2.5 on ints raises, as NumPy's ufunc does)
    return out


_binary("floor_divide", _floor_divide, _ZERO2,
        "floor(a / b) (Python's //; for floats, an infinite operand follows the Array API: inf // 2 is inf, "
        "-1 // inf is -0.0)")
_binary("remainder", "remainder",
        lambda F, ins, y, g: [g, F.negative(F.multiply(g, F.floor_divide(ins[0], ins[1])))],
        "a - floor(a / b) * b, the sign of b (Python's %)")

# -- logical (bool results) and bitwise (integers and bool) -----------------------------------------------
for _name, _doc in (("logical_and", "a and b"), ("logical_or", "a or b"), ("logical_xor", "a xor b")):
    _binary(_name, _name, None, f"{_doc}, elementwise, as bool", inplace=())
_unary("logical_not", "logical_not", None, "not x, elementwise, as bool", inplace=())
for _name, _kernel, _doc in (("bitwise_and", "bitwise_and", "a & b"), ("bitwise_or", "bitwise_or", "a | b"),
                             ("bitwise_xor", "bitwise_xor", "a ^ b"),
                             ("bitwise_left_shift", "left_shift", "a << b"),
                             ("bitwise_right_shift", "right_shift", "a >> b")):
    _binary(_name, _kernel, None, f"{_doc} of integers or bools")
_unary("bitwise_invert", "invert", None, "~x of integers or bools (numpy.invert)")

# -- complex numbers ------------------------------------------------------------------------------------
_unary("conj", "conjugate", lambda F, ins, y, g: [F.conj(g)], "the complex conjugate (real x unchanged)")


def _real_part(xp, x, out=None):
    return x.real.copy()  # (a copy: x.real is a view of x, or x itself for real x)


def _imag_part(xp, x, out=None):
    return x.imag.copy() if x.dtype.kind == "c" else xp.zeros_like(x)


def _part_dtype(dtypes, **params):
    """complex64 -> float32, complex128 -> float64; real dtypes stay."""
    return np.empty(0, dtypes[0]).real.dtype


def _real_grad(F, ins, y, g):
    if ins[0].aval.dtype.kind == "c":
        raise AutogradError("real: gradients with respect to complex inputs are not supported; lazyarray "
                            "differentiates real-valued functions of real inputs")
    return [g]


register(OpDef("real", ("x",), _real_part, dtype=_part_dtype, elementwise=True, grad=_real_grad,
               doc="the real part of x (as float32 / float64 for complex64 / complex128)"))
register(OpDef("imag", ("x",), _imag_part, dtype=_part_dtype, elementwise=True,
               doc="the imaginary part of x (zeros for real x)"))


# -- clip -----------------------------------------------------------------------------------------------------
def _clip(xp, x, lo, hi, out=None):
    res = xp.minimum(xp.maximum(x, lo), hi)
    return res.astype(x.dtype, copy=False)


def _clip_grad(F, ins, y, g):
    # y = minimum(maximum(x, lo), hi), ties going to the first operand (as maximum / minimum do)
    x, lo, hi = ins
    keep = F.less_equal(F.maximum(x, lo), hi)
    return [F.multiply(g, F.logical_and(keep, F.greater_equal(x, lo))),
            F.multiply(g, F.logical_and(keep, F.less(x, lo))), F.multiply(g, F.logical_not(keep))]


register(OpDef("clip", ("x", "lo", "hi"), _clip, grad=_clip_grad, dtype=lambda dtypes: dtypes[0],
               doc="x limited to [lo, hi] elementwise (broadcasting; the result keeps x's dtype); la.clip(x, "
                   "min=None, max=None) is the standard's function"))
