"""ONNX signal operators -> registry ops: DFT and STFT on the ``fft`` ops, the window functions
(BlackmanWindow, HammingWindow, HannWindow) and MelWeightMatrix as constants.

ONNX carries a complex signal as a real tensor with a last axis of 2 (real, imaginary), a real
one with a last axis of 1; DFT and STFT return the (real, imaginary) form. The windows and the mel
matrix depend only on scalars ONNX passes as tensors; they are read at load time (a
data-dependent size is refused with the node's name) and computed in double precision, then cast
to ``output_datatype``.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, axis_key, constant, dtype_of, np_dtype


def _scalar(n: OnnxNode, i: int, what: str) -> float:
    v = n.const(i, f"{n.op} {what}")
    if v is None:
        n.fail(f"{n.op} needs its {what} input")
    return np.asarray(v).reshape(-1)[0].item()


def _out_dtype(n: OnnxNode, default: int = 1) -> np.dtype:
    return np_dtype(int(n.attr("output_datatype", default)), n.where)


# -- windows ---------------------------------------------------------------------------------------
def _window(coeffs: tuple[float, ...]):
    """A generalized cosine window sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1."""
    def convert(n: OnnxNode) -> list:
        n.arity(1)
        size = int(_scalar(n, 0, "size"))
        if size < 0:
            n.fail(f"{n.op} size must be >= 0, got {size}")
        denom = size if int(n.attr("periodic", 1)) else size - 1
        k = np.arange(size, dtype=np.float64) * (2 * np.pi / denom) if denom > 0 else np.zeros(size)
        w = sum((-1) ** j * a * np.cos(j * k) for j, a in enumerate(coeffs))
        return [constant(np.asarray(w).astype(_out_dtype(n)))]
    return convert


# -- DFT / STFT ------------------------------------------------------------------------------------
def _as_complex(n: OnnxNode, x, rank: int):
    """The complex (or real) signal of an ONNX [..., 1] / [..., 2] tensor, without that last axis."""
    last = n.shape(0)[-1]
    if last == 1:
        return S.squeeze(x, axis=rank - 1)
    if last != 2:
        n.fail(f"{n.op} input's last axis must be 1 (real) or 2 (real, imaginary), got {last}")
    re = S.getitem(x, key=(Ellipsis, 0))
    im = S.getitem(x, key=(Ellipsis, 1))
    cdt = "complex128" if np.dtype(dtype_of(x)) == np.float64 else "complex64"
    return S.add(S.cast(re, dtype=cdt), S.multiply(S.cast(im, dtype=cdt), constant(np.array(1j, dtype=cdt))))


def _as_pairs(y, dtype):
    """(real, imaginary) stacked on a new last axis, in ``dtype``."""
    return S.cast(S.stack([S.real(y), S.imag(y)], axis=-1), dtype=dtype)


def dft(n: OnnxNode) -> list:
    n.arity(1, 3)
    x = n.inputs[0]
    rank = n.rank(0, "DFT")
    if n.opset >= 20:
        ax = n.ints(2, "DFT axis")
        axis = -2 if ax is None else ax[0]
    else:
        axis = int(n.attr("axis", 1))
    axis %= rank
    if axis == rank - 1:
        n.fail("DFT axis must not be the last axis (it holds the real/imaginary parts)")
    length = n.ints(1, "DFT dft_length")
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    size = n.known_shape(0, "DFT")[axis]
    length = length[0] if length else (2 * (size - 1) if inverse and onesided else size)
    z = _as_complex(n, x, rank)
    if inverse and onesided:
        return [S.cast(S.expand_dims(S.fft.irfft(z, n=length, axis=axis), axis=-1), dtype=dtype_of(x))]
    y = (S.fft.ifft if inverse else S.fft.fft)(z, n=length, axis=axis)
    if onesided:
        y = S.getitem(y, key=axis_key(axis, slice(0, length // 2 + 1), rank - 1))
    return [_as_pairs(y, dtype_of(x))]


def stft(n: OnnxNode) -> list:
    n.arity(2, 4)
    x, window = n.inputs[0], n.input(2)
    shape = n.known_shape(0, "STFT")
    if len(shape) != 3:
        n.fail(f"STFT signal must be [batch, length, 1 or 2], got shape {shape}")
    step = int(_scalar(n, 1, "frame_step"))
    flen = n.ints(3, "STFT frame_length")
    if flen:
        flen = flen[0]
    elif window is not None:
        flen = n.known_shape(2, "STFT")[0]
    else:
        flen = shape[1]
    if step < 1 or not 1 <= flen <= shape[1]:
        n.fail(f"STFT frame_step {step} and frame_length {flen} do not fit a signal of length {shape[1]}")
    if window is not None and n.known_shape(2, "STFT")[0] != flen:
        n.fail(f"STFT window of length {n.shape(2)[0]} for frames of {flen}")
    z = _as_complex(n, x, 3)  # [batch, length]
    frames = [S.getitem(z, key=(slice(None), slice(i * step, i * step + flen)))
              for i in range(1 + (shape[1] - flen) // step)]
    f = S.stack(frames, axis=1)  # [batch, frames, flen]
    if window is not None:
        f = S.multiply(f, S.cast(window, dtype=dtype_of(f)) if dtype_of(window) != dtype_of(f) else window)
    y = S.fft.fft(f, axis=-1)
    if int(n.attr("onesided", 1)):
        y = S.getitem(y, key=(Ellipsis, slice(0, flen // 2 + 1)))
    return [_as_pairs(y, dtype_of(x))]


# -- MelWeightMatrix -------------------------------------------------------------------------------
def mel_weight_matrix(n: OnnxNode) -> list:
    """Triangular filters with peak 1 between mel-spaced edge bins (mel(f) = 2595 log10(1 + f / 700))."""
    n.arity(5)
    bins, length, rate = (int(_scalar(n, i, w)) for i, w in enumerate(("num_mel_bins", "dft_length",
                                                                        "sample_rate")))
    lo, hi = float(_scalar(n, 3, "lower_edge_hertz")), float(_scalar(n, 4, "upper_edge_hertz"))
    if bins < 1 or length < 1 or rate < 1:
        n.fail(f"MelWeightMatrix needs positive num_mel_bins, dft_length, sample_rate; got {bins}, {length}, {rate}")
    mel_lo, mel_hi = 2595 * np.log10(1 + lo / 700), 2595 * np.log10(1 + hi / 700)
    mels = mel_lo + np.arange(bins + 2) * ((mel_hi - mel_lo) / (bins + 2))
    edges = ((length + 1) * (700 * (10 ** (mels / 2595) - 1)) // rate).astype(np.int64)
    w = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        left, mid, right = edges[i], edges[i + 1], edges[i + 2]
        if mid == left:
            w[mid, i] = 1.0
        else:
            w[left:mid + 1, i] = (np.arange(left, mid + 1) - left) / (mid - left)
        if right > mid:
            w[mid:right, i] = (right - np.arange(mid, right)) / (right - mid)
    return [constant(w.astype(_out_dtype(n)), owned=True)]


SIGNAL_CONVERTERS: dict[str, Converter] = {
    "BlackmanWindow": _window((0.42, 0.5, 0.08)), "HammingWindow": _window((25 / 46, 21 / 46)),
    "HannWindow": _window((0.5, 0.5)), "DFT": dft, "STFT": stft, "MelWeightMatrix": mel_weight_matrix}
