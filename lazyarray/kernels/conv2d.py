"""conv2d's implementations and the one function that chooses among them (``choose_conv2d``).

``ops/conv.py`` says what conv2d means and holds its reference kernel (im2col, depthwise,
grouped); the kernels below compute the same values faster where their ``when`` holds. Each
call (eager, or a compiled program's step) runs ``run_conv2d``, which asks ``choose_conv2d``
and runs its choice; ``explain()`` and ``la.profile()`` show it as ``conv2d[name, notes]``.
A compiled step binds the choice once instead (``bind_conv2d``), checking per call only the facts a
call alone shows where they could change it.
"""
from __future__ import annotations

import functools

import numpy as np

from ..mode import MODE, PROFILING, RECORDING
from ..ops import conv
from ..ops.derived import keeps
from ..threads import in_pool, num_threads, split_threads
from ..tuning_table import current
from . import (
    blocked_region,
    conv1d,
    conv_blocked,
    conv_direct,
    conv_im2col,
    conv_patchify,
    depthwise,
    direct_batch,
    pointwise_loop,
    pointwise_strided,
)
from .conv_batch_last import conv2d_batch_last, conv2d_region, region_fits, region_threads
from .conv_split import conv2d_split
from .impl import Choice, Impl
from .log import log_choice
from .profile import current as current_profile
from .runner import Bound, by_facts, direct
from .winograd4 import conv2d_winograd, winograd_tile

IM2COL = Impl("conv2d", "im2col", conv.conv2d_im2col,
              "groups == 1: one im2col copy and one product per image (the reference)")
DEPTHWISE = depthwise.DEPTHWISE  # (compiled; depthwise.TAPS, the per-tap NumPy path, where it cannot run)
GROUPED = conv_direct.GROUPED
DIRECT = conv_direct.DIRECT
POINTWISE = conv_direct.POINTWISE
LOOP = pointwise_loop.LOOP  # (pointwise's choice, with a small layer's bias known: ``with_bias``)
BATCH_LAST = Impl("conv2d", "batch_last", conv2d_batch_last,
                  "groups == 1, a batch of images under per_image_min_pixels output pixels, or stored batch "
                  "last: one product for the whole batch, im2col in runs of N values", layout="batch last")
REGION = Impl("conv2d", "region", conv2d_region,
              "batch_last's case with a batch-last output and numba: one compiled parallel region",
              threads=True, layout="batch last", fallback=BATCH_LAST)
SPLIT = Impl("conv2d", "split", conv2d_split,
             "groups == 1, several threads set and min_split_macs multiply-adds: chunks of images over the threads",
             threads=True)
WINOGRAD2 = Impl("conv2d", "winograd2", conv2d_winograd(2),
                 "3x3, stride 1, winograd_min_channels input channels, winograd_min_pixels output pixels: "
                 "Winograd F(2x2, 3x3)", threads=True)
WINOGRAD4 = Impl("conv2d", "winograd4", conv2d_winograd(4),
                 "winograd2's case with winograd4_min_channels..winograd4_max_channels channels and "
                 "winograd4_min_pixels output pixels: Winograd F(4x4, 3x3)", threads=True)
IM2COL_COMPILED = Impl("conv2d", "im2col_compiled", conv_im2col.conv2d_im2col_compiled,
                       "im2col's case, a kernel larger than 1x1, float32/float64, conv_im2col_compiled on, numba: "
                       "the columns written by one compiled pass from the image (no padded copy), the same products",
                       fallback=IM2COL)
BLOCKED = Impl("conv2d", "blocked", conv_blocked.conv2d_blocked,
               "groups == 1, a kernel larger than 1x1, at most conv_blocked_max_filters filters, output planes of "
               "16 pixels and 2 rows up (per_image_min_pixels for a batch), not batch last, float32/float64, "
               "conv_blocked on, numba: one compiled loop per image, 4 output channels by 3 taps a pass",
               fallback=IM2COL_COMPILED)
BLOCKED_REGION = Impl("conv2d", "blocked_region", blocked_region.conv2d_blocked_region,
                      "blocked's case with several threads set, conv_blocked_region_min_macs multiply-adds, C-ordered "
                      "arrays, conv_blocked_region on: its loop over the threads in one compiled parallel region, "
                      "images (or an image's channel blocks) per thread, blocked's values", threads=True,
                      fallback=BLOCKED)
POINTWISE_STRIDED = Impl("conv2d", "pointwise_strided", pointwise_strided.conv2d_pointwise_strided,
                         "im2col's case with a 1x1 kernel, a stride, no padding, float32/float64, a C-ordered output "
                         "when given, conv_pointwise_strided on: the strided pixels copied once, then one product per "
                         "image (im2col's values bit for bit)", fallback=IM2COL)
CONV1D = conv1d.CONV1D
PATCHIFY = Impl("conv2d", "patchify", conv_patchify.conv2d_patchify,
                "groups == 1, stride equal to a kernel of 2 taps or more, no padding or dilation, "
                "conv_patchify_min_channels input channels, conv_patchify_min_macs multiply-adds, float32/float64, a C-ordered output when given, "
                "conv_patchify on: the patches copied once, one product (im2col's values bit for bit)",
                fallback=IM2COL)
# the implementations whose runs take no scratch from the arena (their loops read the arrays as they are)
NO_SCRATCH = (DIRECT, POINTWISE, LOOP, DEPTHWISE, BLOCKED, BLOCKED_REGION)
IMPLS = (WINOGRAD4, WINOGRAD2, SPLIT, REGION, BATCH_LAST, BLOCKED_REGION, BLOCKED, IM2COL_COMPILED, IM2COL, DIRECT, DEPTHWISE, depthwise.TAPS, GROUPED,
         POINTWISE, LOOP, POINTWISE_STRIDED, CONV1D, PATCHIFY)

_KEPT = ("kernel kept",)
_CHOICES = {impl: Choice(impl) for impl in IMPLS}
_DIRECT_BATCH = direct_batch.choice(DIRECT)
_WINOGRAD = {(4, False): Choice(WINOGRAD4), (4, True): Choice(WINOGRAD4, _KEPT),
             (2, False): Choice(WINOGRAD2), (2, True): Choice(WINOGRAD2, _KEPT)}


@functools.lru_cache(maxsize=64)
def _on_threads(impl: Impl, n: int) -> Choice:
    return Choice(impl, (f"{n} threads",))


def choose_conv2d(xp, x, weight, out, stride, padding, dilation, groups, t=None) -> Choice:
    """What runs conv2d of these arrays (the pairs of geometry checked), by the tuning table ``t``
    (the one in force when None)."""
    t = current() if t is None else t
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    numpy = xp is np
    if numpy and t.winograd and c >= t.winograd_min_channels:
        # A transformed kernel kept from the last call (a weight that held still, outside autograd,
        # whose weights change every step) makes Winograd cheaper; a recorded step keeps the choice
        # of a kernel transformed every call, so it computes as it did before kernels were kept.
        kept = kh == kw == 3 and keeps(weight, 36 * weight.size // 9 * weight.itemsize) \
            and not MODE.get() & RECORDING
        tile = winograd_tile(x.shape, weight.shape, stride, padding, dilation, groups, ho, wo, kept, t)
        if tile:
            return _WINOGRAD[tile, kept]
    if t.conv_pointwise and conv_direct.pointwise_applies(xp, x, weight, None, out, stride, padding, groups):
        return _CHOICES[POINTWISE]
    if conv_patchify.applies(xp, x, weight, out, stride, padding, dilation, groups, t):
        return _CHOICES[PATCHIFY]
    if conv1d.applies(xp, x, weight, None, out, stride, padding, dilation, groups, t):
        return conv1d.choose(stride, t)
    if conv_direct.applies(xp, x, weight, None, out, groups, n * o * (c // groups) * kh * kw * ho * wo,
                           t.conv_direct_max_macs, ho * wo):  # (blocked's case with a few filters: faster)
        blocked = _blocked_choice(xp, x, weight, out, groups, ho, wo, t) if o >= t.conv_blocked_min_filters else None
        return blocked or _CHOICES[DIRECT]
    if groups == 1 and n > 1:
        x_last = conv.is_batch_last(x)
        out_last = out is not None and conv.is_batch_last(out)
        if numpy and not (x_last or out_last):
            threads = split_threads(n * o * c * kh * kw * ho * wo, n)
            if threads > 1:
                return _on_threads(SPLIT, threads)
        if not (x_last or out_last) and direct_batch.applies(xp, x, weight, out, ho * wo, t):
            # a layer blocked takes runs faster there
            return _blocked_choice(xp, x, weight, out, groups, ho, wo, t) or _DIRECT_BATCH
        if ho * wo < t.per_image_min_pixels or x_last or out_last:
            if numpy and region_fits(x, out, x_last, out_last, t):
                return _on_threads(REGION, region_threads(x, weight, out, t))
            return _CHOICES[BATCH_LAST]
    blocked = _blocked_choice(xp, x, weight, out, groups, ho, wo, t)
    if blocked is not None:
        return blocked
    if groups == 1 and pointwise_strided.applies(xp, x, weight, None, out, stride, padding, groups, t):
        return _CHOICES[POINTWISE_STRIDED]
    if groups == 1:
        return _CHOICES[IM2COL_COMPILED if t.conv_im2col_compiled and kh * kw > 1
                        and conv_im2col.applies(xp, x, weight, None, out, groups) else IM2COL]
    if conv.is_depthwise(x, weight, groups):
        return _CHOICES[depthwise.choose_impl(xp, x, weight, out)]
    return _CHOICES[GROUPED]


def with_bias(xp, x, weight, bias, out, stride, padding, dilation, groups, t=None) -> Choice:
    """conv2d's choice for a call with this ``bias`` (``choose_conv2d``'s, which does not see it, and
    which ``conv2d_act`` and the others that bring their own bias take as it is): ``pointwise`` becomes
    ``loop`` where the layer is small and has a bias (``pointwise_loop.conv2d_applies``)."""
    t = current() if t is None else t
    choice = choose_conv2d(xp, x, weight, out, stride, padding, dilation, groups, t)
    if choice.impl is POINTWISE and bias is not None and pointwise_loop.conv2d_applies(x, weight, bias, t):
        return _CHOICES[LOOP]
    return choice


def _blocked(xp, x, weight, out, groups, ho, wo, t) -> bool:
    """Whether ``conv2d[blocked]`` takes this layer (switched on, its plane and filters fit)."""
    return t.conv_blocked and conv_blocked.plane_fits(ho, wo) \
        and conv_blocked.applies(xp, x, weight, None, out, groups, t.conv_blocked_max_filters)


def _blocked_choice(xp, x, weight, out, groups, ho, wo, t) -> Choice | None:
    """``blocked``, or ``blocked_region`` on its threads, where blocked takes this layer; else None."""
    if not _blocked(xp, x, weight, out, groups, ho, wo, t):
        return None
    macs = x.shape[0] * weight.size * ho * wo
    if blocked_region.fits(xp, x, weight, out, groups, macs, t):
        return _on_threads(BLOCKED_REGION, num_threads())
    return _CHOICES[BLOCKED]


def run_conv2d(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """conv2d by the implementation ``choose_conv2d`` picks (the op's kernel in every call)."""
    if x.dtype == np.float16 and weight.dtype == np.float16:  # half precision accumulates in float32
        return conv.half_via_float32(run_conv2d, xp, x, weight, bias, stride, padding, dilation, groups, out)
    stride, padding, dilation = conv.geometry(stride, padding, dilation)
    t = current()
    choice = with_bias(xp, x, weight, bias, out, stride, padding, dilation, groups, t)
    y = choice.impl.run(xp, x, weight, bias, stride, padding, dilation, groups, out)
    if y is None:  # (declined at run time: its fallback runs)
        choice = _CHOICES[choice.impl.fallback]
        y = choice.impl.run(xp, x, weight, bias, stride, padding, dilation, groups, out)
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    if t.log_kernels:
        log_choice(choice, x, weight)
    return y


def bind_conv2d(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_conv2d``'s choice for these arrays with its
    implementation's run bound to the geometry. Where a call could change the choice (a weight kept
    by its version, under autograd or not, for Winograd; the input's memory order and the pool's
    threads for a batch), the bound function reads just those facts per call and binds once per
    answer; None for half precision (the runner converts)."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return None
    geometry = conv.geometry(stride, padding, dilation) + (groups,)
    params = ((None,) if bias is None else ()) + geometry  # (no bias: the step passes two arrays)
    choice = with_bias(xp, x, weight, bias, out, *geometry)
    if choice.impl is CONV1D:  # (its facts are the step's avals and memory orders: bound once)
        return conv1d.bound_step(choice, x, weight, bias, *geometry[:3])
    generic = direct(choice, _CHOICES, xp, params)
    fixed = (depthwise.bound_nchw(x, weight, bias, *geometry[:3], out) if choice.impl is DEPTHWISE else
             conv_direct.bound_direct(x, weight, bias, *geometry, out, generic) if choice.impl is DIRECT else
             conv_direct.bound_pointwise(x, weight, out, generic) if choice.impl is POINTWISE else
             pointwise_loop.bound_loop(x, weight, bias, None, 0.0, 0.0, out, generic) if choice.impl is LOOP else
             pointwise_strided.bound_strided(x, weight, geometry[0], out, generic)
             if choice.impl is POINTWISE_STRIDED else
             conv_patchify.bound_patchify(x, weight, out, generic) if choice.impl is PATCHIFY else
             conv_blocked.bound_blocked(x, weight, bias, *geometry[:3], out, generic) if choice.impl is BLOCKED
             else blocked_region.bound_region(x, weight, bias, *geometry[:3], out,  # (contended: blocked's bound loop)
                                              conv_blocked.bound_blocked(x, weight, bias, *geometry[:3], out, generic)
                                              or generic)
             if choice.impl is BLOCKED_REGION else None) or generic
    kept_counts, layout_counts = per_call_facts(xp, x, weight, groups, current())
    if not (kept_counts or layout_counts):  # (direct loops read no scratch: the step lends no workspace)
        return Bound(choice, fixed, scratch=choice.impl not in NO_SCRATCH)
    nbytes = 36 * weight.size // 9 * weight.itemsize

    def facts(x, weight, *_):
        kept = kept_counts and keeps(weight, nbytes) and not MODE.get() & RECORDING
        return (kept, conv.is_batch_last(x), x.flags.c_contiguous, conv_direct.images_c_ordered(x), in_pool()) \
            if layout_counts else kept  # (images C-ordered: pointwise's own condition, a strided batch included)

    def rebind(arrays, out):
        c = with_bias(xp, arrays[0], arrays[1], arrays[2] if len(arrays) > 2 else None, out, *geometry)
        return Bound(c, direct(c, _CHOICES, xp, params))

    return by_facts(facts, rebind, {facts(x, weight): Bound(choice, fixed)}, choice)


def per_call_facts(xp, x, weight, groups: int, t) -> tuple[bool, bool]:
    """What ``bind_conv2d`` checks per call for arrays like these under the tuning table ``t``: whether
    the weight being kept can choose Winograd, and whether the input's memory order and the pool's
    threads can change the choice (a batch); neither: the choice is bound once."""
    kept_counts = xp is np and t.winograd and x.shape[1] >= t.winograd_min_channels and weight.shape[2:] == (3, 3)
    return kept_counts, groups == 1 and x.shape[0] > 1


def choose_for_call(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """``choose_conv2d`` for a call's arguments as the op takes them (``kernels.choose``)."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        x, weight = x.astype(np.float32), weight.astype(np.float32)
    stride, padding, dilation = conv.geometry(stride, padding, dilation)
    return with_bias(xp, x, weight, bias, out, stride, padding, dilation, groups)


BINDERS = {"conv2d": bind_conv2d}
