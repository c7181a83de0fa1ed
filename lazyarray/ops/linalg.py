"""The Array API ``linalg`` extension: ``la.linalg.inv``, ``det``, ``solve``, ``cholesky``, ``qr``,
``svd``, ``eigh``, norms, ... as registry ops of namespace ``"linalg"`` (kernels: ``xp.linalg``).

Every op works on stacks of matrices (the last two axes). Gradients are written with other
registered ops for ``inv``, ``det``, ``solve`` and ``cholesky`` (the standard formulas); the
decompositions with several outputs (``qr``, ``svd``, ``eigh``, ``slogdet``), ``pinv`` and the norms
have none: ``backward`` through them raises ``AutogradError`` naming the op.
``linalg.matmul``, ``tensordot``, ``vecdot``, ``matrix_transpose`` and ``outer`` are the top-level
functions (compositions of registry ops), bound in ``la.linalg`` by ``lazyarray/linalg.py``.
"""
from __future__ import annotations

import numpy as np

from ..dim import dim_max, dim_min
from ..errors import ParamValueError, ShapeError, fmt_shape
from .params import AXIS, BOOL, FLOAT, INT, ORD, Param, choice
from .registry import OpDef, broadcast_shapes, normalize_axis, register


def _square(op):
    """Shape rule helper: ``shapes[0]`` is a stack of square matrices."""
    def check(shape):
        if len(shape) < 2 or (None not in shape[-2:] and shape[-1] != shape[-2]):
            raise ShapeError(f"linalg.{op}: needs a stack of square matrices (..., M, M), got {fmt_shape(shape)}")
        return shape
    return check


def _mT(F, t):
    """The last two axes of a graph entry swapped."""
    n = t.aval.ndim
    return F.transpose(t, axes=tuple(range(n - 2)) + (n - 1, n - 2))


_VECTOR_OPS = frozenset({"cross", "vector_norm"})  # the ops whose first input need not be a matrix


def _lin(name, inputs, kernel, shape, dtype=None, grad=None, params=(), num_outputs=1, doc=""):
    if name not in _VECTOR_OPS:
        shape = _on_matrices(name, shape)
    return register(OpDef(name, inputs, kernel, params=params, shape=shape, dtype=dtype, grad=grad,
                          num_outputs=num_outputs, namespace="linalg", doc=doc))


def _on_matrices(name, shape_rule):
    """``shape_rule`` after the check every matrix op shares: its first input has at least 2 dims."""
    def rule(shapes, **params):
        if shapes[0] is not None and len(shapes[0]) < 2:
            raise ShapeError(f"linalg.{name}: needs a matrix or a stack of matrices (..., M, N), got shape "
                             f"{fmt_shape(shapes[0])}; make a 1-D array a row with la.reshape(x, (1, -1))")
        return shape_rule(shapes, **params)
    return rule


def _float_dtype(dtypes, **params):
    """Integer inputs compute in float64 (NumPy's linalg); float / complex dtypes stay."""
    return dtypes[0] if dtypes[0].kind in "fc" else np.dtype("float64")


def _real_dtype(dtypes, **params):
    """Norms, singular values, eigenvalues of Hermitian matrices: real."""
    return np.empty(0, _float_dtype(dtypes)).real.dtype


# -- inverse, determinant, solve -------------------------------------------------------------------
def _inv_grad(F, ins, y, g):
    yt = _mT(F, y)
    return [F.negative(F.matmul(F.matmul(yt, g), yt))]


_lin("inv", ("x",), lambda xp, x, out=None: xp.linalg.inv(x), lambda s: _square("inv")(s[0]), _float_dtype,
     _inv_grad, doc="the inverse of each square matrix")


def _det_grad(F, ins, y, g):
    scale = F.expand_dims(F.expand_dims(F.multiply(g, y), axis=-1), axis=-1)
    return [F.multiply(scale, _mT(F, F.inv(ins[0])))]


_lin("det", ("x",), lambda xp, x, out=None: xp.asarray(xp.linalg.det(x)),
     lambda s: _square("det")(s[0])[:-2], _float_dtype, _det_grad, doc="the determinant of each square matrix")


def _slogdet(xp, x, out=None):
    sign, logabs = xp.linalg.slogdet(x)
    return xp.asarray(sign), xp.asarray(logabs)


_lin("slogdet", ("x",), _slogdet, lambda s: [_square("slogdet")(s[0])[:-2]] * 2,
     lambda dtypes: [_float_dtype(dtypes), _real_dtype(dtypes)], num_outputs=2,
     doc="(sign, log|det|) of each square matrix")


def _solve_shape(shapes):
    a, b = _square("solve")(shapes[0]), shapes[1]
    if len(b) == 1:
        if None not in (a[-1], b[0]) and a[-1] != b[0]:
            raise ShapeError(f"linalg.solve: x1 {fmt_shape(a)} and the vector x2 {fmt_shape(b)} disagree")
        return a[:-1]
    if len(b) < 2 or (None not in (a[-1], b[-2]) and a[-1] != b[-2]):
        raise ShapeError(f"linalg.solve: x1 {fmt_shape(a)} needs x2 shaped (..., {a[-1]}, K) or ({a[-1]},), "
                         f"got {fmt_shape(b)}")
    return broadcast_shapes(a[:-2], b[:-2]) + tuple(b[-2:])  # (unknown and symbolic dims kept)


def _solve_grad(F, ins, y, g):
    a = ins[0]
    gb = F.solve(_mT(F, a), g)
    if ins[1].aval.ndim == 1:
        ga = F.negative(F.multiply(F.expand_dims(gb, axis=-1), F.expand_dims(y, axis=-2)))
    else:
        ga = F.negative(F.matmul(gb, _mT(F, y)))
    return [ga, gb]


_lin("solve", ("x1", "x2"), lambda xp, a, b, out=None: xp.linalg.solve(a, b), _solve_shape,
     lambda dtypes: np.result_type(_float_dtype(dtypes[:1]), _float_dtype(dtypes[1:])), _solve_grad,
     doc="x such that x1 @ x = x2 (x2 a vector when 1-D)")


# -- decompositions ------------------------------------------------------------------------------------
def _cholesky(xp, x, upper=False, out=None):
    lo = xp.linalg.cholesky(x)
    return xp.conj(xp.swapaxes(lo, -1, -2)) if upper else lo


def _cholesky_grad(F, ins, y, g, upper=False):
    # L = chol(A), A = L L^T (NumPy reads the lower triangle of A only). With P = tril(L^T gL) with a
    # halved diagonal, S = L^-T P L^-1 and Abar = (S + S^T) / 2 for a symmetric perturbation; a
    # function of the lower triangle gets 2 Abar below the diagonal, Abar on it, 0 above.
    lo, gl = (_mT(F, y), _mT(F, g)) if upper else (y, g)
    p = F.tril(F.matmul(_mT(F, lo), gl))
    p = F.subtract(p, F.multiply(F.tril(F.triu(p)), 0.5))
    linv = F.inv(lo)
    s = F.matmul(F.matmul(_mT(F, linv), p), linv)
    sym = F.multiply(F.add(s, _mT(F, s)), 0.5)
    return [F.subtract(F.multiply(F.tril(sym), 2.0), F.tril(F.triu(sym)))]


_lin("cholesky", ("x",), _cholesky, lambda s, upper=False: _square("cholesky")(s[0]), _float_dtype,
     _cholesky_grad, params=(Param("upper", BOOL, False),),
     doc="the Cholesky factor of each symmetric positive-definite matrix (lower, or upper=True)")


def _qr_shape(shapes, mode="reduced"):
    *batch, m, n = shapes[0]
    k = None if None in (m, n) else dim_min(m, n)
    if mode == "complete":
        return [(*batch, m, m), (*batch, m, n)]
    return [(*batch, m, k), (*batch, k, n)]


_lin("qr", ("x",), lambda xp, x, mode="reduced", out=None: tuple(xp.linalg.qr(x, mode=mode)), _qr_shape,
     lambda dtypes, **p: [_float_dtype(dtypes)] * 2, params=(Param("mode", choice("reduced", "complete"), "reduced"),),
     num_outputs=2, doc="(Q, R) of each matrix")


def _svd_shape(shapes, full_matrices=True):
    *batch, m, n = shapes[0]
    k = None if None in (m, n) else dim_min(m, n)
    if full_matrices:
        return [(*batch, m, m), (*batch, k), (*batch, n, n)]
    return [(*batch, m, k), (*batch, k), (*batch, k, n)]


_lin("svd", ("x",), lambda xp, x, full_matrices=True, out=None: tuple(xp.linalg.svd(x, full_matrices=full_matrices)),
     _svd_shape, lambda dtypes, **p: [_float_dtype(dtypes), _real_dtype(dtypes), _float_dtype(dtypes)],
     params=(Param("full_matrices", BOOL, True),), num_outputs=3, doc="(U, S, Vh) of each matrix")


def _k_shape(shapes):
    *batch, m, n = shapes[0]
    return (*batch, None if None in (m, n) else dim_min(m, n))


_lin("svdvals", ("x",), lambda xp, x, out=None: xp.linalg.svd(x, compute_uv=False), _k_shape, _real_dtype,
     doc="the singular values of each matrix, descending")
_lin("eigh", ("x",), lambda xp, x, out=None: tuple(xp.linalg.eigh(x)),
     lambda s: [_square("eigh")(s[0])[:-1], s[0]], lambda dtypes: [_real_dtype(dtypes), _float_dtype(dtypes)],
     num_outputs=2, doc="(eigenvalues ascending, eigenvectors) of each symmetric / Hermitian matrix")
_lin("eigvalsh", ("x",), lambda xp, x, out=None: xp.linalg.eigvalsh(x), lambda s: _square("eigvalsh")(s[0])[:-1],
     _real_dtype, doc="the eigenvalues of each symmetric / Hermitian matrix, ascending")


def _rtol_default(xp, x, rtol):
    return max(x.shape[-2:]) * np.finfo(x.dtype if x.dtype.kind in "fc" else np.float64).eps if rtol < 0 else rtol


def _pinv(xp, x, rtol=-1.0, out=None):
    xf = x if x.dtype.kind in "fc" else x.astype(np.float64)
    return xp.linalg.pinv(xf, rcond=_rtol_default(xp, xf, rtol))


def _matrix_rank(xp, x, rtol=-1.0, out=None):
    xf = x if x.dtype.kind in "fc" else x.astype(np.float64)
    s = xp.linalg.svd(xf, compute_uv=False)
    tol = s.max(axis=-1, keepdims=True, initial=0.0) * _rtol_default(xp, xf, rtol)
    return xp.count_nonzero(s > tol, axis=-1).astype(np.int64)


_RTOL = (Param("rtol", FLOAT, -1.0, doc="relative tolerance; negative: max(M, N) * eps"),)
_lin("pinv", ("x",), _pinv, lambda s, rtol=-1.0: (*s[0][:-2], s[0][-1], s[0][-2]), _float_dtype, params=_RTOL,
     doc="the Moore-Penrose pseudo-inverse of each matrix")
_lin("matrix_rank", ("x",), _matrix_rank, lambda s, rtol=-1.0: s[0][:-2], lambda dtypes, **p: np.dtype("int64"),
     params=_RTOL, doc="the rank of each matrix (singular values above rtol * the largest), as int64")
_lin("matrix_power", ("x",), lambda xp, x, n=1, out=None: xp.linalg.matrix_power(x, n),
     lambda s, n=1: _square("matrix_power")(s[0]), lambda dtypes, n=1: _float_dtype(dtypes) if n < 0 else dtypes[0],
     params=(Param("n", INT, 1),), doc="each square matrix raised to the integer power n (n < 0: of the inverse)")


# -- reductions over matrices and vectors ------------------------------------------------------------------
def _trace(xp, x, offset=0, out=None):
    return xp.asarray(xp.trace(x, offset=offset, axis1=-2, axis2=-1))


def _trace_dtype(dtypes, offset=0):
    return np.trace(np.zeros((1, 1), dtypes[0])).dtype if dtypes[0].kind in "bi" else dtypes[0]


def _matrix_shape(op):
    def rule(shapes, **params):
        if len(shapes[0]) < 2:
            raise ShapeError(f"linalg.{op}: needs a stack of matrices (..., M, N), got {fmt_shape(shapes[0])}")
        return shapes[0][:-2]
    return rule


_lin("trace", ("x",), _trace, _matrix_shape("trace"), _trace_dtype, params=(Param("offset", INT, 0),),
     doc="the sum of each matrix's offset diagonal")


def _diag_len(m, n, k):
    if None in (m, n):
        return None
    return dim_max(0, dim_min(m, n - k) if k >= 0 else dim_min(m + k, n))


_lin("diagonal", ("x",), lambda xp, x, offset=0, out=None: xp.diagonal(x, offset=offset, axis1=-2, axis2=-1).copy(),
     lambda s, offset=0: (*_matrix_shape("diagonal")(s), _diag_len(s[0][-2], s[0][-1], offset)),
     params=(Param("offset", INT, 0),), doc="the offset diagonal of each matrix")


def _cross_shape(shapes, axis=-1):
    a, b = shapes
    shape = broadcast_shapes(a, b)  # (unknown and symbolic dims kept)
    ax = normalize_axis(axis, len(shape), "linalg.cross")
    if isinstance(shape[ax], int) and shape[ax] != 3:  # (unknown or symbolic: checked when the sizes are)
        raise ShapeError(f"linalg.cross: axis {axis} must have size 3, got {fmt_shape(a)} and {fmt_shape(b)}")
    return tuple(shape)


_lin("cross", ("x1", "x2"), lambda xp, a, b, axis=-1, out=None: xp.cross(a, b, axis=axis), _cross_shape,
     lambda dtypes, **p: np.result_type(*dtypes), params=(Param("axis", INT, -1),),
     doc="the cross product of 3-vectors along axis")


def _vector_norm(xp, x, axis=None, keepdims=False, ord=2, out=None):
    dt = _real_dtype([x.dtype])
    if axis is None:
        res = xp.linalg.norm(x.reshape(-1), ord=ord)
        res = res.reshape((1,) * x.ndim) if keepdims else res
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        if len(axes) == 1:
            res = xp.linalg.norm(x, ord=ord, axis=axes[0], keepdims=keepdims)
        else:  # several axes: move them last and flatten them (numpy.linalg.norm takes 1 or 2 axes)
            axes = tuple(a % x.ndim for a in axes)
            rest = [a for a in range(x.ndim) if a not in axes]
            t = xp.transpose(x, rest + list(axes)).reshape([x.shape[a] for a in rest] + [-1])
            res = xp.linalg.norm(t, ord=ord, axis=-1)
            if keepdims:
                res = res.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
    return xp.asarray(res).astype(dt, copy=False)


def _vector_norm_shape(shapes, axis=None, keepdims=False, ord=2):
    s = shapes[0]
    axes = range(len(s)) if axis is None else [normalize_axis(a, len(s), "linalg.vector_norm")
                                                for a in ((axis,) if isinstance(axis, int) else axis)]
    return tuple(1 if i in axes else d for i, d in enumerate(s)) if keepdims else \
        tuple(d for i, d in enumerate(s) if i not in axes)


def _check_vector_ord(v, op):
    if isinstance(v, str):
        raise ParamValueError(f"{op}: ord must be a number (or inf, -inf) for a vector norm, got {v!r}")


_lin("vector_norm", ("x",), _vector_norm, _vector_norm_shape, lambda dtypes, **p: _real_dtype(dtypes),
     params=(Param("axis", AXIS, None),
             Param("keepdims", BOOL, False), Param("ord", ORD, 2, check=_check_vector_ord)),
     doc="the vector norm over axis (all axes when None) of order ord")


def _matrix_norm(xp, x, keepdims=False, ord="fro", out=None):
    dt = _real_dtype([x.dtype])
    xf = x if x.dtype.kind in "fc" else x.astype(np.float64)
    return xp.asarray(xp.linalg.norm(xf, ord=ord, axis=(-2, -1), keepdims=keepdims)).astype(dt, copy=False)


_lin("matrix_norm", ("x",), _matrix_norm,
     lambda s, keepdims=False, ord="fro": (*_matrix_shape("matrix_norm")(s), *((1, 1) if keepdims else ())),
     lambda dtypes, **p: _real_dtype(dtypes), params=(Param("keepdims", BOOL, False), Param("ord", ORD, "fro")),
     doc="the matrix norm of each matrix: 'fro', 'nuc', 1, 2, inf, -1, -2, -inf")
