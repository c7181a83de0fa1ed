"""``la.fft``: the Array API ``fft`` extension (2024.12).

The transforms are the registry ops of namespace ``"fft"`` (``ops/fft.py``), so they run eagerly,
record under ``la.deferred()``, build graphs in ``la.sym.fft`` and differentiate (``fft``, ``ifft``,
``fftn``, ``ifftn``, ``rfft``, ``rfftn``, ``fftshift``, ``ifftshift``). The functions here give them the
standard's signatures (``x`` positional-only, the rest keyword-only); ``fftfreq`` and ``rfftfreq`` make
constant arrays, like ``la.arange``.

>>> import lazyarray as la
>>> x = la.asarray([1.0, 2.0, 3.0, 4.0])
>>> la.fft.fft(x).asnumpy().tolist()
[(10+0j), (-2+2j), (-2+0j), (-2-2j)]
>>> la.fft.irfft(la.fft.rfft(x), n=4).asnumpy().tolist()
[1.0, 2.0, 3.0, 4.0]
>>> la.fft.fftfreq(4, d=0.5).asnumpy().tolist()
[0.0, 0.5, -1.0, -0.5]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from .aval import as_dtype, check_alloc
from .device import Device, as_device, current_device
from .errors import DTypeError, ParamValueError
from .functions import namespace
from .ndarray import NDArray, array_from, make_array

_OPS = namespace("fft")

_N_ARGS = ("Args:\n    x (NDArray): the input array.\n"
           "    n (int | None, keyword-only, default None): the transform length along axis (x is padded with "
           "zeros or truncated); None: {default}.\n"
           "    axis (int, keyword-only, default -1): the axis to transform.\n"
           "    norm (str, keyword-only, default 'backward'): 'backward' (no scaling forward, 1/n inverse), "
           "'ortho' (1/sqrt(n) both ways) or 'forward' (1/n forward).\n\nReturns:\n    NDArray: the result.")
_S_ARGS = ("Args:\n    x (NDArray): the input array.\n"
           "    s (Sequence[int] | None, keyword-only, default None): the transform length per axis in axes "
           "(-1: {default}); None: {default} along every axis. Needs axes.\n"
           "    axes (Sequence[int] | None, keyword-only, default None): the axes to transform; None: all "
           "axes (s must then be None).\n"
           "    norm (str, keyword-only, default 'backward'): 'backward', 'ortho' or 'forward' (as for fft).\n"
           "\nReturns:\n    NDArray: the result.")


def _doc(name, args, default="x's size"):
    def deco(f):
        f.__doc__ = f"{_OPS[name].op.doc[0].upper()}{_OPS[name].op.doc[1:]} (the registry op ``fft.{name}``).\n\n" \
            + args.format(default=default)
        return f
    return deco


@_doc("fft", _N_ARGS)
def fft(x: NDArray, /, *, n: int | None = None, axis: int = -1, norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["fft"](x, n=n, axis=axis, norm=norm)


@_doc("ifft", _N_ARGS)
def ifft(x: NDArray, /, *, n: int | None = None, axis: int = -1, norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["ifft"](x, n=n, axis=axis, norm=norm)


@_doc("fftn", _S_ARGS)
def fftn(x: NDArray, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["fftn"](x, s=s, axes=axes, norm=norm)


@_doc("ifftn", _S_ARGS)
def ifftn(x: NDArray, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["ifftn"](x, s=s, axes=axes, norm=norm)


@_doc("rfft", _N_ARGS)
def rfft(x: NDArray, /, *, n: int | None = None, axis: int = -1, norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["rfft"](x, n=n, axis=axis, norm=norm)


@_doc("irfft", _N_ARGS, "2 * (m - 1) for an input of m entries")
def irfft(x: NDArray, /, *, n: int | None = None, axis: int = -1, norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["irfft"](x, n=n, axis=axis, norm=norm)


@_doc("rfftn", _S_ARGS)
def rfftn(x: NDArray, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["rfftn"](x, s=s, axes=axes, norm=norm)


@_doc("irfftn", _S_ARGS, "x's size, 2 * (m - 1) along the last axis")
def irfftn(x: NDArray, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["irfftn"](x, s=s, axes=axes, norm=norm)


@_doc("hfft", _N_ARGS, "2 * (m - 1) for an input of m entries")
def hfft(x: NDArray, /, *, n: int | None = None, axis: int = -1, norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["hfft"](x, n=n, axis=axis, norm=norm)


@_doc("ihfft", _N_ARGS)
def ihfft(x: NDArray, /, *, n: int | None = None, axis: int = -1, norm: Literal["backward", "ortho", "forward"] = "backward") -> NDArray:
    return _OPS["ihfft"](x, n=n, axis=axis, norm=norm)


_SHIFT_ARGS = ("Args:\n    x (NDArray): the input array.\n    axes (int | Sequence[int] | None, keyword-only, "
               "default None): the axes to shift; None: all axes.\n\nReturns:\n    NDArray: the shifted array.")


@_doc("fftshift", _SHIFT_ARGS)
def fftshift(x: NDArray, /, *, axes: int | Sequence[int] | None = None) -> NDArray:
    return _OPS["fftshift"](x, axes=axes)


@_doc("ifftshift", _SHIFT_ARGS)
def ifftshift(x: NDArray, /, *, axes: int | Sequence[int] | None = None) -> NDArray:
    return _OPS["ifftshift"](x, axes=axes)


def _freq(name, n, d, dtype, device, values):
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParamValueError(f"fft.{name}: n must be a positive int, got {n!r}")
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, float, np.number)) or d == 0:
        raise ParamValueError(f"fft.{name}: d (the sample spacing) must be a nonzero real number, got {d!r}")
    dt = np.dtype("float32") if dtype is None else as_dtype(dtype, f"fft.{name}")
    if dt.kind != "f":
        raise DTypeError(f"fft.{name}: dtype must be a real floating dtype (float32 or float64), got {dt}")
    dev = current_device() if device is None else as_device(device, f"fft.{name}")
    check_alloc(f"fft.{name}", (int(n),), dt)  # (before NumPy makes the float64 values)
    v = values(int(n), float(d))
    v = v.astype(dt)
    return array_from(v, dev, None) if dev.kind != "cpu" else make_array(v, None, dev)


def fftfreq(n: int, /, *, d: float = 1.0, dtype: DTypeLike | None = None, device: Device | str | None = None) -> NDArray:
    """The sample frequencies of an ``fft`` of length n: ``[0, 1, ..., n//2 - 1 (or (n-1)//2), -n//2, ..., -1]
    / (d * n)`` (NumPy's ``numpy.fft.fftfreq``).

    Args:
        n (int): the window length.
        d (float, keyword-only, default 1.0): the sample spacing.
        dtype (DTypeLike | None, keyword-only, default None): a real floating dtype; None: float32 (the
            default real floating dtype).
        device (Device | str | None, keyword-only, default None): where the result lives; None: the current
            device.

    Returns:
        NDArray: the n frequencies.

    >>> import lazyarray as la
    >>> la.fft.fftfreq(5).asnumpy().tolist()
    [0.0, 0.20000000298023224, 0.4000000059604645, -0.4000000059604645, -0.20000000298023224]
    """
    return _freq("fftfreq", n, d, dtype, device, lambda n, d: np.fft.fftfreq(n, d))


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: DTypeLike | None = None, device: Device | str | None = None) -> NDArray:
    """The sample frequencies of an ``rfft`` of length n: ``[0, 1, ..., n//2] / (d * n)``
    (NumPy's ``numpy.fft.rfftfreq``).

    Args:
        n (int): the window length.
        d (float, keyword-only, default 1.0): the sample spacing.
        dtype (DTypeLike | None, keyword-only, default None): a real floating dtype; None: float32.
        device (Device | str | None, keyword-only, default None): where the result lives; None: the current
            device.

    Returns:
        NDArray: the n // 2 + 1 frequencies.

    >>> import lazyarray as la
    >>> la.fft.rfftfreq(4).asnumpy().tolist()
    [0.0, 0.25, 0.5]
    """
    return _freq("rfftfreq", n, d, dtype, device, lambda n, d: np.fft.rfftfreq(n, d))


__all__ = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft",
           "irfftn", "rfft", "rfftfreq", "rfftn"]
