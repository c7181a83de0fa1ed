"""``la.linalg``: the Array API ``linalg`` extension.

The registry ops of namespace ``"linalg"`` (``inv``, ``det``, ``solve``, ``cholesky``, ``qr``, ``svd``,
``eigh``, norms, ...; see ``ops/linalg.py``), plus the standard's linalg spellings of top-level
functions: ``matmul``, ``tensordot``, ``vecdot``, ``matrix_transpose`` and ``outer``.

>>> import lazyarray as la
>>> a = la.asarray([[2.0, 0.0], [0.0, 4.0]])
>>> la.linalg.inv(a).asnumpy().tolist(), float(la.linalg.det(a))
([[0.5, 0.0], [0.0, 0.25]], 8.0)
"""
from __future__ import annotations

from typing import NamedTuple

from numpy.typing import DTypeLike

from .args import number_arg
from .array_api import accumulate_as, array_in, matrix_transpose, tensordot, vecdot
from .dispatch import apply
from .errors import ShapeError
from .functions import namespace
from .ndarray import NDArray, make_array
from .ops import registry

_OPS = namespace("linalg")
globals().update(_OPS)
matmul = namespace("")["matmul"]


class SlogdetResult(NamedTuple):
    sign: NDArray
    logabsdet: NDArray


class QRResult(NamedTuple):
    Q: NDArray
    R: NDArray


class SVDResult(NamedTuple):
    U: NDArray
    S: NDArray
    Vh: NDArray


class EighResult(NamedTuple):
    eigenvalues: NDArray
    eigenvectors: NDArray


def slogdet(x: NDArray, /) -> SlogdetResult:
    """``(sign, logabsdet)`` of each square matrix (the registry op ``slogdet``)."""
    return SlogdetResult(*_OPS["slogdet"](x))


def qr(x: NDArray, /, *, mode: str = "reduced") -> QRResult:
    """``(Q, R)`` of each matrix (the registry op ``qr``)."""
    return QRResult(*_OPS["qr"](x, mode=mode))


def svd(x: NDArray, /, *, full_matrices: bool = True) -> SVDResult:
    """``(U, S, Vh)`` of each matrix (the registry op ``svd``)."""
    return SVDResult(*_OPS["svd"](x, full_matrices=full_matrices))


def eigh(x: NDArray, /) -> EighResult:
    """``(eigenvalues, eigenvectors)`` of each symmetric / Hermitian matrix (the registry op ``eigh``)."""
    return EighResult(*_OPS["eigh"](x))


def _rtol(f):
    def g(x: NDArray, /, *, rtol: float | None = None) -> NDArray:
        if rtol is not None:
            rtol = number_arg(rtol, f"linalg.{f.__name__}", "rtol", lo=0)
        return f(x, rtol=-1.0 if rtol is None else rtol)
    g.__name__ = f.__name__
    g.__doc__ = (f"{f.op.doc[0].upper()}{f.op.doc[1:]} (the registry op ``{f.__name__}``).\n\nArgs:\n"
                 "    x (NDArray): a matrix or a stack of matrices (..., M, N).\n"
                 "    rtol (float | None, keyword-only, default None): relative tolerance for small singular "
                 "values; None: max(M, N) * eps of the dtype.\n\nReturns:\n    NDArray: the result.")
    return g


pinv, matrix_rank = _rtol(_OPS["pinv"]), _rtol(_OPS["matrix_rank"])


def outer(x1: NDArray, x2: NDArray, /) -> NDArray:
    """The outer product of two 1-D arrays (``x1[:, None] * x2``, recorded as registry ops)."""
    x1, x2 = array_in(x1, "linalg.outer", "x1"), array_in(x2, "linalg.outer", "x2")
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(f"linalg.outer: needs two 1-D arrays, got {x1.ndim}-D and {x2.ndim}-D; flatten them "
                         "with la.reshape(x, (-1,))")
    col = apply(registry.get("expand_dims"), (x1,), {"axis": -1}, make_array)
    return apply(registry.get("multiply"), (col, x2), {}, make_array)


def trace(x: NDArray, /, *, offset: int = 0, dtype: DTypeLike | None = None) -> NDArray:
    """The sum of each matrix's diagonal (``offset`` > 0: above the main diagonal), with ``la.sum``'s
    dtype rules (``dtype=`` accumulates in that dtype); the registry op ``linalg.trace``.

    >>> import lazyarray as la
    >>> la.linalg.trace(la.asarray([[1, 2], [3, 4]])).item()
    5
    """
    return accumulate_as("trace", x, dtype, None, offset=offset)


__all__ = sorted(namespace("linalg")) + ["matmul", "matrix_transpose", "outer", "tensordot", "vecdot"]
