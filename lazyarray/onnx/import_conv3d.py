"""3-D ``Conv`` and ``ConvTranspose`` written with the registry's 2-D-and-matmul ops.

Our registry's convolutions are 2-D. A 3-D convolution is written per kernel tap: the input is
padded and made channels-last once, and each tap ``(i, j, k)`` adds the strided slice it reads,
``(N, D_out, H_out, W_out, C)``, times the tap's ``(C, O)`` weight matrix (a batched matmul per group
when ``group > 1``). ``benchmarks/onnx_conv3d.py`` measured this against the other way, a sum over
the depth taps of 2-D convolutions of depth slices folded into the batch: the per-tap matmuls ran
about 2x faster with 8 channels and on par with 32 (KD*KH*KW matmuls without im2col copies, against
KD calls of the 2-D kernel; a faster 2-D kernel would move this).
The transposed convolution is the mirror image of the depth-tap form: each depth tap's 2-D
transposed convolution (``nn.conv2d_input_grad``) lands on output depths ``d * stride + kd``,
placed by interleaving zeros (reshape) and padding (``place_depth``, which ``la.blocks.Conv3DTranspose``
shares), then summed. Shapes must be static (given at load).
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import sym as S
from .import_ops import OnnxNode, constant, dtype_of


def _out_len(size: int, k: int, s: int, d: int) -> int:
    return (size - (k - 1) * d - 1) // s + 1


def conv3d(n: OnnxNode, x, w, bias, strides, dil, begin, end, groups: int):
    xs, ws = n.known_shape(0, "a 3-D Conv"), n.known_shape(1, "a 3-D Conv")
    if any(begin) or any(end):
        x = S.pad(x, pad_width=((0, 0), (0, 0)) + tuple(zip(begin, end)))
    padded = [size + b + e for size, b, e in zip(xs[2:], begin, end)]
    out = [_out_len(p, k, s, d) for p, k, s, d in zip(padded, ws[2:], strides, dil)]
    if min(out) < 1:
        n.fail(f"the kernel {ws[2:]} (dilations {dil}) is larger than the padded input {tuple(padded)}")
    o, cg = ws[0], ws[1]
    og = o // groups
    last = S.transpose(x, axes=(0, 2, 3, 4, 1))  # channels last: (N, D, H, W, C)
    y = None
    for tap in itertools.product(*(range(k) for k in ws[2:])):
        key = (slice(None),) + tuple(slice(t * d, t * d + (m - 1) * s + 1, s)
                                     for t, d, m, s in zip(tap, dil, out, strides))
        sl = S.getitem(last, key=key)  # (N, Do, Ho, Wo, C)
        wt = S.getitem(w, key=(slice(None), slice(None)) + tap)  # (O, C / groups)
        if groups == 1:
            part = S.matmul(sl, S.transpose(wt))
        else:  # (N, Do, Ho, Wo, G, 1, Cg) @ (G, Cg, Og) -> (N, Do, Ho, Wo, G, 1, Og)
            sl = S.reshape(sl, shape=(-1, *out, groups, 1, cg))
            part = S.matmul(sl, S.transpose(S.reshape(wt, shape=(groups, og, cg)), axes=(0, 2, 1)))
            part = S.reshape(part, shape=(-1, *out, o))
        y = part if y is None else S.add(y, part)
    y = S.transpose(y, axes=(0, 4, 1, 2, 3))
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
    y = None
    for t in range(kd):
        z = S.nn.conv2d_input_grad(planes, S.getitem(w, key=(slice(None), slice(None), t)), like, stride=(sh, sw))
        z = place_depth(S, z, d, (cout, hf, wf), sd, t, kd - 1 - t + out_pad[0])
        y = z if y is None else S.add(y, z)
    return S.transpose(y, axes=(0, 2, 1, 3, 4))


def place_depth(ops, z, depth: int, plane: tuple, stride: int, before: int, after: int):
    """Depth planes folded into the batch, ``z: (N * depth, *plane)``, placed along a new depth axis:
    ``(N, before + (depth - 1) * stride + 1 + after, *plane)`` with plane ``i`` at depth
    ``before + i * stride`` and zeros between. ``ops`` is the op namespace (``la.sym`` here; the 3-D
    transposed convolution layer, ``blocks/conv_nd.py``, passes its array functions)."""
    z = ops.reshape(z, shape=(-1, depth, 1) + tuple(plane))
    if stride > 1:  # input depth i lands on output depth i * stride: interleave stride - 1 zero planes
        z = ops.pad(z, pad_width=((0, 0), (0, 0), (0, stride - 1)) + ((0, 0),) * len(plane))
    z = ops.reshape(z, shape=(-1, depth * stride) + tuple(plane))
    if stride > 1:
        z = ops.getitem(z, key=(slice(None), slice(0, (depth - 1) * stride + 1)))
    if before or after:
        z = ops.pad(z, pad_width=((0, 0), (before, after)) + ((0, 0),) * len(plane))
    return z
