"""3-D ``Conv`` and ``ConvTranspose`` as sums of 2-D ones over the depth taps.

Our registry's convolutions are 2-D. A 3-D convolution is, for each depth tap ``kd`` of the kernel,
a 2-D convolution of the input depth slices that tap reads (strided by the depth stride, folded into
the batch: ``(N * D_out, C, H, W)``) with the kernel's 2-D slice ``w[:, :, kd]``; the output is the
sum over the ``KD`` taps. So a 3x3x3 kernel costs three calls of the 2-D kernel (im2col + one matmul
each) on ``D_out`` times the batch, instead of 27 per-tap products; the 2-D kernel's speed carries
over. The transposed convolution is the mirror image: each depth tap's 2-D transposed convolution
(``nn.conv2d_input_grad``) lands on output depths ``d * stride + kd * dilation``, placed by
interleaving zeros (reshape) and padding, then summed. Shapes must be static (given at load).
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import OnnxNode, constant, dtype_of


def _out_len(size: int, k: int, s: int, d: int, pb: int, pe: int) -> int:
    return (size + pb + pe - (k - 1) * d - 1) // s + 1


def conv3d(n: OnnxNode, x, w, bias, strides, dil, begin, end, groups: int):
    xs, ws = n.known_shape(0, "a 3-D Conv"), n.known_shape(1, "a 3-D Conv")
    (sd, sh, sw), (dd, dh, dw) = strides, dil
    kd = ws[2]
    if any(begin) or any(end):
        x = S.pad(x, pad_width=((0, 0), (0, 0)) + tuple(zip(begin, end)))
    dp, hp, wp = (size + b + e for size, b, e in zip(xs[2:], begin, end))
    do = _out_len(dp, kd, sd, dd, 0, 0)
    ho, wo = _out_len(hp, ws[3], sh, dh, 0, 0), _out_len(wp, ws[4], sw, dw, 0, 0)
    if min(do, ho, wo) < 1:
        n.fail(f"the kernel {ws[2:]} (dilations {dil}) is larger than the padded input {(dp, hp, wp)}")
    y = None
    for t in range(kd):
        sl = S.getitem(x, key=(slice(None), slice(None), slice(t * dd, t * dd + (do - 1) * sd + 1, sd)))
        sl = S.reshape(S.transpose(sl, axes=(0, 2, 1, 3, 4)), shape=(-1, xs[1], hp, wp))  # (N * Do, C, H, W)
        part = S.conv2d(sl, S.getitem(w, key=(slice(None), slice(None), t)), stride=(sh, sw), padding=(0, 0),
                        dilation=(dh, dw), groups=groups)
        y = part if y is None else S.add(y, part)
    y = S.transpose(S.reshape(y, shape=(-1, do, ws[0], ho, wo)), axes=(0, 2, 1, 3, 4))
    if bias is not None:
        y = S.add(y, S.reshape(bias, shape=(1, -1, 1, 1, 1)))
    return y


def conv_transpose3d_full(n: OnnxNode, x, w, xs, ws, strides, out_pad):
    """The full (uncropped) 3-D transposed convolution of one group: ``(N, C_out, D_f, H_f, W_f)``
    with ``D_f = (D - 1) * stride + KD`` (+ output padding)."""
    nb, c, d = xs[0], xs[1], xs[2]
    kd, cout = ws[2], ws[1]
    sd, sh, sw = strides
    hf, wf = ((size - 1) * s + k + o for size, s, k, o in zip(xs[3:], (sh, sw), ws[3:], out_pad[1:]))
    planes = S.reshape(S.transpose(x, axes=(0, 2, 1, 3, 4)), shape=(nb * d, c) + tuple(xs[3:]))
    like = S.broadcast_to(constant(np.zeros((), dtype_of(x))), shape=(nb * d, cout, hf, wf))
    span = (d - 1) * sd + 1
    y = None
    for t in range(kd):
        z = S.nn.conv2d_input_grad(planes, S.getitem(w, key=(slice(None), slice(None), t)), like, stride=(sh, sw))
        z = S.reshape(z, shape=(nb, d, 1, cout, hf, wf))
        if sd > 1:  # input depth i lands on output depth i * stride: interleave stride - 1 zero planes
            z = S.pad(z, pad_width=((0, 0), (0, 0), (0, sd - 1), (0, 0), (0, 0), (0, 0)))
        z = S.getitem(S.reshape(z, shape=(nb, d * sd, cout, hf, wf)), key=(slice(None), slice(0, span)))
        z = S.pad(z, pad_width=((0, 0), (t, kd - 1 - t + out_pad[0]), (0, 0), (0, 0), (0, 0)))
        y = z if y is None else S.add(y, z)
    return S.transpose(y, axes=(0, 2, 1, 3, 4))
