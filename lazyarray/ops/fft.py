"""The Array API ``fft`` extension: ``la.fft.fft``, ``ifft``, ``fftn``, ``ifftn``, ``rfft``, ``irfft``,
``rfftn``, ``irfftn``, ``hfft``, ``ihfft``, ``fftshift``, ``ifftshift`` as registry ops of namespace
``"fft"`` (kernels: ``xp.fft``; ``fftfreq`` / ``rfftfreq`` make constants and live in ``lazyarray/fft.py``).

Single precision stays single (float32 / complex64 in, complex64 / float32 out), double stays double;
integer and bool inputs compute in double precision, as NumPy does. ``n`` / ``s`` pad with zeros or
truncate the input along the transformed axes before the transform (``-1`` in ``s``: the input's size).

Gradients follow the real-loss convention (PyTorch's): for ``y = fft(x, n, axis, norm)`` and
``g = dL/dRe(y) + i dL/dIm(y)``, ``dL/dx`` is the adjoint ``ifft(g)`` with the dual norm
(``"backward"`` <-> ``"forward"``, ``"ortho"`` <-> ``"ortho"``), truncated / zero-padded back to x's
length; its real part for real x. ``rfft`` / ``rfftn`` pad ``g`` to the full spectrum first. The
real-output and Hermitian transforms (``irfft``, ``irfftn``, ``hfft``, ``ihfft``) have no gradient:
``backward`` through them raises ``AutogradError`` naming the op.
"""
from __future__ import annotations

import numpy as np

from ..errors import AutogradError, DTypeError, ParamValueError, ShapeError, fmt_shape
from .params import INT, OPT_INT, OPT_INTS, Param, choice
from .registry import OpDef, normalize_axis, register

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _check_n(n, op):
    if n is not None and n < 1:
        raise ParamValueError(f"fft.{op}: n must be a positive int or None, got {n}")


def _check_s(s, op):
    if s is not None and any(v < 1 and v != -1 for v in s):
        raise ParamValueError(f"fft.{op}: each entry of s must be a positive int or -1 (the input's size), got {s}")


_NORM = Param("norm", choice("backward", "ortho", "forward"), "backward",
              doc="'backward': no scaling forward, 1/n inverse; 'ortho': 1/sqrt(n) both ways; 'forward': 1/n forward")
_N_AXIS = (Param("n", OPT_INT, None, check=_check_n, doc="transform length (pad with zeros or truncate); None: x's"),
           Param("axis", INT, -1), _NORM)
_S_AXES = (Param("s", OPT_INTS, None, check=_check_s, doc="transform lengths per axis; -1 or None: x's sizes"),
           Param("axes", OPT_INTS, None, doc="axes to transform; None: all (s must then be None)"), _NORM)


# -- dtype rules --------------------------------------------------------------------------------------------
def _complex_dtype(op, real_only=False):
    def rule(dtypes, **params):
        dt = dtypes[0]
        if real_only and dt.kind == "c":
            raise DTypeError(f"fft.{op}: needs a real input, got {dt}; take la.real(x) first, or use fft.fft")
        return np.dtype("complex64") if dt in (np.float32, np.complex64) else np.dtype("complex128")
    return rule


def _real_dtype(dtypes, **params):
    return np.dtype("float32") if dtypes[0] in (np.float32, np.complex64) else np.dtype("float64")


# -- shape rules ----------------------------------------------------------------------------------------------
def _n_axis(op, out_len):
    """Shape rule of a 1-D transform: ``out_len(n, size)`` is the output length along ``axis``."""
    def rule(shapes, n=None, axis=-1, norm="backward"):
        shape = shapes[0]
        if not shape:
            raise ShapeError(f"fft.{op}: needs an array of at least 1 dim, got a 0-d array")
        ax = normalize_axis(axis, len(shape), f"fft.{op}")
        return shape[:ax] + (out_len(n, shape[ax]),) + shape[ax + 1:]
    return rule


def _same(n, size):
    return size if n is None else n


def _half(n, size):
    m = size if n is None else n
    return None if m is None else m // 2 + 1


def _full(n, size):
    if n is not None:
        return n
    return None if size is None else 2 * (size - 1)


def _plan(op, shape, s=None, axes=None, last_full=False):
    """(axes, lengths) of an n-D transform of an array of ``shape`` (``None`` lengths: unknown dims).

    The standard's reading: ``axes`` None -> all axes (``s`` then must be None too); ``s`` None or ``-1`` ->
    the input's size, except the last axis of ``irfftn`` (``last_full``), whose default is ``2 * (size - 1)``.
    """
    nd = len(shape)
    if axes is None:
        if s is not None:
            raise ParamValueError(f"fft.{op}: s {tuple(s)} needs axes too (the standard leaves s without axes "
                                  f"undefined); pass axes=tuple(range(-{len(s)}, 0)) for the last {len(s)} axes")
        axes = tuple(range(nd))
    axes = tuple(normalize_axis(a, nd, f"fft.{op}") for a in axes)
    if len(set(axes)) != len(axes):
        raise ParamValueError(f"fft.{op}: axes {axes} repeat an axis; give each axis once")
    if s is not None and len(s) != len(axes):
        raise ShapeError(f"fft.{op}: s {tuple(s)} and axes {axes} have different lengths; give one size per axis")
    if not axes:
        raise ShapeError(f"fft.{op}: no axes to transform in an array of shape {fmt_shape(shape)}")
    lengths = []
    for i, a in enumerate(axes):
        v = -1 if s is None else s[i]
        if v == -1:
            v = _full(None, shape[a]) if (last_full and i == len(axes) - 1) else shape[a]
        lengths.append(v)
    return axes, tuple(lengths)


def _s_axes(op, real=False, last_full=False):
    def rule(shapes, s=None, axes=None, norm="backward"):
        shape = list(shapes[0])
        axes_, lengths = _plan(op, shapes[0], s, axes, last_full)
        for a, v in zip(axes_, lengths):
            shape[a] = v
        if real:
            shape[axes_[-1]] = None if lengths[-1] is None else lengths[-1] // 2 + 1
        return tuple(shape)
    return rule


# -- kernels --------------------------------------------------------------------------------------------------
def _kernel_1d(fname, out_dtype):
    def kernel(xp, x, n=None, axis=-1, norm="backward", out=None):
        res = getattr(xp.fft, fname)(x, n=n, axis=axis, norm=norm)
        return res.astype(out_dtype([x.dtype]), copy=False)
    kernel.__name__ = f"_{fname}"
    return kernel


def _kernel_nd(fname, out_dtype, last_full=False):
    def kernel(xp, x, s=None, axes=None, norm="backward", out=None):
        axes_, lengths = _plan(fname, x.shape, s, axes, last_full)
        res = getattr(xp.fft, fname)(x, s=lengths, axes=axes_, norm=norm)
        return res.astype(out_dtype([x.dtype]), copy=False)
    kernel.__name__ = f"_{fname}"
    return kernel


def _shift_kernel(fname):
    def kernel(xp, x, axes=None, out=None):
        return getattr(xp.fft, fname)(x, axes=axes)  # (a roll: always a new array)
    kernel.__name__ = f"_{fname}"
    return kernel


# -- gradients ---------------------------------------------------------------------------------------------------
def _resize_back(F, g, op, x, axes, lengths):
    """The adjoint of "pad with zeros / truncate x to ``lengths`` along ``axes``": g truncated / zero-padded
    back to x's sizes."""
    shape = x.aval.shape
    for a, n in zip(axes, lengths):
        size = shape[a]
        if size is None:
            raise AutogradError(f"fft.{op}: the gradient needs x's size along axis {a}, unknown in {fmt_shape(shape)}")
        if size > n:
            pad = tuple((0, size - n) if i == a else (0, 0) for i in range(len(shape)))
            g = F.pad(g, pad_width=pad)
        elif size < n:
            g = F.getitem(g, key=(slice(None),) * a + (slice(0, size),))
    return g


def _real_if(F, g, x):
    return g if x.aval.dtype.kind == "c" else F.real(g)


def _grad_1d(inverse):
    def grad(F, ins, y, g, n=None, axis=-1, norm="backward"):
        x = ins[0]
        ax = normalize_axis(axis, x.aval.ndim, "fft")
        adj = (F.fft if inverse else F.ifft)(g, axis=ax, norm=_DUAL[norm])
        length = x.aval.shape[ax] if n is None else n
        return [_real_if(F, _resize_back(F, adj, "ifft" if inverse else "fft", x, (ax,), (length,)), x)]
    return grad


def _grad_nd(inverse):
    def grad(F, ins, y, g, s=None, axes=None, norm="backward"):
        x = ins[0]
        op = "ifftn" if inverse else "fftn"
        axes_, lengths = _plan(op, x.aval.shape, s, axes)
        adj = (F.fftn if inverse else F.ifftn)(g, axes=axes_, norm=_DUAL[norm])
        return [_real_if(F, _resize_back(F, adj, op, x, axes_, lengths), x)]
    return grad


def _rfft_grad(F, ins, y, g, n=None, axis=-1, norm="backward"):
    # y = keep the first n//2+1 entries of fft(x): the adjoint pads g with zeros to n, then ifft (dual norm)
    x = ins[0]
    ax = normalize_axis(axis, x.aval.ndim, "fft.rfft")
    length = x.aval.shape[ax] if n is None else n
    full = _pad_spectrum(F, g, ax, length)
    return [F.real(_resize_back(F, F.ifft(full, axis=ax, norm=_DUAL[norm]), "rfft", x, (ax,), (length,)))]


def _rfftn_grad(F, ins, y, g, s=None, axes=None, norm="backward"):
    x = ins[0]
    axes_, lengths = _plan("rfftn", x.aval.shape, s, axes)
    full = _pad_spectrum(F, g, axes_[-1], lengths[-1])
    adj = F.ifftn(full, axes=axes_, norm=_DUAL[norm])
    return [F.real(_resize_back(F, adj, "rfftn", x, axes_, lengths))]


def _pad_spectrum(F, g, ax, length):
    extra = length - (length // 2 + 1)
    if not extra:
        return g
    return F.pad(g, pad_width=tuple((0, extra) if i == ax else (0, 0) for i in range(g.aval.ndim)))


# -- registration ---------------------------------------------------------------------------------------------------
def _fft_op(name, kernel, shape, dtype, params, grad=None, doc=""):
    register(OpDef(name, ("x",), kernel, params=params, shape=shape, dtype=dtype, grad=grad, namespace="fft",
                   doc=doc))


_c, _cr = _complex_dtype("fft"), _complex_dtype("rfft", real_only=True)
_crn, _cih = _complex_dtype("rfftn", real_only=True), _complex_dtype("ihfft", real_only=True)
_fft_op("fft", _kernel_1d("fft", _c), _n_axis("fft", _same), _c, _N_AXIS, _grad_1d(False),
        "the 1-D discrete Fourier transform along axis")
_fft_op("ifft", _kernel_1d("ifft", _c), _n_axis("ifft", _same), _c, _N_AXIS, _grad_1d(True),
        "the 1-D inverse discrete Fourier transform along axis")
_fft_op("fftn", _kernel_nd("fftn", _c), _s_axes("fftn"), _c, _S_AXES, _grad_nd(False),
        "the n-D discrete Fourier transform over axes")
_fft_op("ifftn", _kernel_nd("ifftn", _c), _s_axes("ifftn"), _c, _S_AXES, _grad_nd(True),
        "the n-D inverse discrete Fourier transform over axes")
_fft_op("rfft", _kernel_1d("rfft", _cr), _n_axis("rfft", _half), _cr, _N_AXIS, _rfft_grad,
        "the 1-D discrete Fourier transform of a real x: the n//2+1 non-negative frequencies")
_fft_op("irfft", _kernel_1d("irfft", _real_dtype), _n_axis("irfft", _full), _real_dtype, _N_AXIS,
        doc="the inverse of rfft: a real signal of length n (default 2*(m-1)) from its half spectrum")
_fft_op("rfftn", _kernel_nd("rfftn", _crn), _s_axes("rfftn", real=True), _crn, _S_AXES, _rfftn_grad,
        "the n-D discrete Fourier transform of a real x (the last axis halved to s[-1]//2+1)")
_fft_op("irfftn", _kernel_nd("irfftn", _real_dtype, last_full=True), _s_axes("irfftn", last_full=True),
        _real_dtype, _S_AXES, doc="the inverse of rfftn (the last axis of length s[-1], default 2*(m-1))")
_fft_op("hfft", _kernel_1d("hfft", _real_dtype), _n_axis("hfft", _full), _real_dtype, _N_AXIS,
        doc="the real spectrum of a signal with Hermitian symmetry given by its first half")
_fft_op("ihfft", _kernel_1d("ihfft", _cih), _n_axis("ihfft", _half), _cih, _N_AXIS, doc="the inverse of hfft: the half spectrum of a real x")


def _shift_shape(op):
    def rule(shapes, axes=None):
        for a in axes or ():
            normalize_axis(a, len(shapes[0]), f"fft.{op}")
        return shapes[0]
    return rule


_SHIFT = (Param("axes", OPT_INTS, None, doc="axes to shift; None: all"),)
_fft_op("fftshift", _shift_kernel("fftshift"), _shift_shape("fftshift"), None, _SHIFT,
        lambda F, ins, y, g, axes=None: [F.ifftshift(g, axes=axes)],
        "x with the zero frequency moved to the centre of each axis in axes")
_fft_op("ifftshift", _shift_kernel("ifftshift"), _shift_shape("ifftshift"), None, _SHIFT,
        lambda F, ins, y, g, axes=None: [F.fftshift(g, axes=axes)], "the inverse of fftshift")
