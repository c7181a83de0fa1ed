"""A C-ordered view that covers an output whose images lie at a larger batch stride.

A part of a batch's concatenation written in place (``executor/concat_in_place.py``) is an output
(N, O, H, W) whose images are C-ordered blocks ``S`` bytes apart, ``S`` the concatenation's image
(its C channels). A compiled loop given such an array compiles for NumPy's "any" layout, whose
stores numba neither vectorizes nor strength-reduces (SqueezeNet's 1x1 loop at batch 8 ran 2x
slower into it). ``covering`` gives the loops a C-ordered array instead: (N, S / (H*W) , H, W) from
the output's first value, whose ``[:, :O]`` are the output's values. Its last image claims memory
past the output's (the next parts' channels, and past the concatenation's end by the part's
channel offset): a loop given it must write channels ``[0, O)`` only, reading its channel count from
the weight, never from the array (``pointwise_loop``, ``conv_blocked``, ``conv_direct``); nothing else
may read it.
"""
from __future__ import annotations

import numpy as np


def covering(out):
    """``out`` where it is C-ordered; else the C-ordered view described above where ``out`` (4-D) has
    images that are C-ordered blocks at a stride of whole planes; else None."""
    if out.flags.c_contiguous:
        return out
    n, o, h, w = out.shape
    plane, stride = h * w * out.itemsize, out.strides[0]
    if plane == 0 or stride % plane or not out[0].flags.c_contiguous or out.strides[1] != plane:
        return None
    return np.lib.stride_tricks.as_strided(out, (n, stride // plane, h, w), (stride, plane, w * out.itemsize,
                                                                            out.itemsize))
