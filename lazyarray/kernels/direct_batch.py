"""conv2d ``direct`` at a batch: a batch of small C-ordered images, no groups, takes ``direct``'s loop.

``conv_direct.applies`` leaves a batch without groups to the products (``batch_last`` under
``per_image_min_pixels`` output pixels, else ``im2col_compiled``): one product for the batch was
as fast as the loop on the development machine. For small layers it is not: the products pay
their fixed costs (a padded batch-last copy, the columns, a transposing copy back to NCHW, the
bias and activation passes) on a few thousand multiply-adds an image. Issue #35, SqueezeNet's fire
modules at batch 8 (one thread, CPU time per step in the compiled program): the (8, 4, 7, 7) by
(8, 4, 3, 3) expand layers 108 -> 47 us, the (8, 8, 3, 3) by (16, 8, 3, 3) one 87 -> 54 us (the
activation in the loop, no copies); DenseNet's (8, 8, 8, 8) by (4, 8, 3, 3) 83 -> 55 us.

``applies``: the batch runs ``direct`` (its loop walks the images in turn) where one image would:
NumPy float32/float64, ``groups == 1``, a kernel larger than 1x1 (a strided 1x1 layer ran 1.4x
slower in the loop: the products win), the input and the planned output C-ordered (a batch-last
or strided input ran 1.8x slower: the loop reads C-ordered planes; batch-last values have
``region``), at most ``conv_direct_max_macs`` multiply-adds an image (16-filter layers of 74-147K
an image ran 1.2-1.3x slower than the products), ``WIDE_MACS`` times that for output planes of
``WIDE_PIXELS`` pixels and up (long flat loops) of a stem (at most ``STEM_CHANNELS`` input channels)
or of at most ``FEW_FILTERS`` output channels: SqueezeNet's (8, 3, 32, 32) by (16, 3, 3, 3)
stride-2 stem 217 -> 171 us in the program; ResNet's and MobileNet's stems 0.8x, ConvNeXt's 4x4
patchify 0.97x im2col_compiled's CPU time in isolation; with the few filters' layers (ResNet's
(8, 8, 16, 16) by (8, 8, 3, 3), DenseNet's 4-filter 3x3 layers) resnet_mini's batch 8 1903 ->
1750 us and densenet_mini's 2101 -> 1794 us a call (same process, alternating, best of 4 rounds
of 400 calls), ``conv_direct_batch`` on. The
values are ``direct``'s (its sums, within float rounding of the reference's products); the chooser
notes the choice ``direct, batch``. A layer ``conv2d[blocked]`` also takes (few filters, a
plane of 16 pixels and more) runs there: ``choose_conv2d`` asks blocked first (faster on every
CNN of the real-model set at batch 8).
"""
from __future__ import annotations

import numpy as np

from .. import jit
from .conv_direct import WIDE_MACS, WIDE_PIXELS, images_c_ordered
from .depthwise import FLOATS
from .impl import Choice

STEM_CHANNELS = 4  # input channels up to which a layer is a stem (an image's colour planes): the wide limit
FEW_FILTERS = 8  # output channels up to which a layer's wide planes take the wide limit too
BATCH_NOTE = "batch"  # the note explain() shows: conv2d[direct, batch]


def choice(direct) -> Choice:
    """The chooser's answer where ``applies``: ``direct`` noted as run over a batch."""
    return Choice(direct, (BATCH_NOTE,))


def applies(xp, x, weight, out, pixels: int, t) -> bool:
    """Whether a batch (``groups == 1``, checked by the caller) of ``x`` (N, C, H, W) by ``weight``
    into ``out`` (None, or the planned output) of ``pixels`` output pixels an image takes ``direct``'s
    loop under the tuning table ``t``."""
    if not t.conv_direct_batch or xp is not np or x.dtype not in FLOATS or weight.dtype != x.dtype:
        return False
    o, c, kh, kw = weight.shape
    wide = pixels >= WIDE_PIXELS and (c <= STEM_CHANNELS or o <= FEW_FILTERS)
    limit = t.conv_direct_max_macs * (WIDE_MACS if wide else 1)
    if kh * kw == 1 or o * c * kh * kw * pixels > limit or not x.flags.c_contiguous:
        return False
    if out is not None and (out.dtype != x.dtype or not images_c_ordered(out)):  # (the loops index it)
        return False
    return jit.enabled()
