"""``conv1d``: a 1-D convolution (conv2d of a unit-height image by a unit-height kernel, as the ONNX
importer writes a 1-D ``Conv``) as one compiled loop, with its bias and activation in the same pass.

A 1-D audio encoder exported from torch (``conv1d_net``: (N, 4, 1, 23) by (16, 4, 1, 3), then
(N, 16, 1, 11) by (16, 16, 1, 3) dilated) has a few thousand multiply-adds a layer. At batch 1
``conv2d[direct]``'s row loop ran them, but its step also copied the weight into its transposed
layout, the input and the bias with ``ascontiguousarray``, and then made a second compiled pass for
the activation; at batch 8 the layers took ``batch_last``'s im2col copy and product (issue #35: 85-90
us a layer on the shared development machine, against a few microseconds of arithmetic).

``_conv1d`` reads the arrays where they lie (any strides: the 4-D views the executor hands it,
no copy), and per image and output channel sums each input channel's taps into a row accumulator
(one short loop per tap, the taps in the padding skipped by bounds), then writes ``act(acc + bias)``
into the output row. The sums run in ``conv2d[direct]``'s row loop's order (channel, then tap, from
0, the bias added last), so at batch 1 the values are ``direct``'s and its activation pass's bit for
bit; against the reference (im2col and BLAS) they agree within float rounding (rtol 1e-5 float32,
1e-12 float64). The activation rounds as ``kernels/conv_act.py``'s compiled pass does (the recorded
ops' NumPy rules). A compiled step binds it once (``bound``): the geometry and the scalars fixed,
a call is the output's allocation (none into a planned buffer) and one compiled call.

Applies (``applies``): NumPy float32/float64 arrays of one dtype, numba on, a unit-height image,
kernel and output (no height padding), not stored batch last, the tuning table's ``conv1d`` on and at
most ``conv1d_max_macs`` multiply-adds (past that the products' BLAS wins); any batch, any groups.
``choose`` notes a stride-1 call ``rows`` (``conv2d[conv1d, rows]``): ``kernels/conv1d_rows.py``'s loop runs it, over
the whole batch at once, with these values bit for bit; other strides run the loop here.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..ops import conv
from ..tuning_table import current
from . import conv1d_rows
from .activation_jit import act_code, act_params, activate_value
from .conv_direct import GROUPED
from .depthwise import FLOATS
from .impl import Choice, Impl
from .runner import Bound


def _make(activate):
    def _conv1d(x, w, b, y, sw, pw, dw, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
        """y (N, O, 1, Lo) = act(conv of x (N, C, 1, L) by w (O, C/groups, 1, K) + b (O,)); ``b`` with no
        values: no bias. The weight is first copied with its output channels innermost (groups, C/groups,
        K, O/groups), so each tap's input value is added times a contiguous row of weights (a loop over
        the group's output channels that vectorizes)."""
        n, c, length = x.shape[0], x.shape[1], x.shape[3]
        o, cg, k = w.shape[0], w.shape[1], w.shape[3]
        lo_n = y.shape[3]
        groups = c // cg if cg > 0 else 1
        og = o // groups
        wt = np.empty((groups, cg, k, og), y.dtype)
        for oc in range(o):
            for ci in range(cg):
                for j in range(k):
                    wt[oc // og, ci, j, oc % og] = w[oc, ci, 0, j]
        acc = np.empty((lo_n, og), y.dtype)
        for img in range(n):
            for g in range(groups):
                acc[:, :] = 0
                for ci in range(cg):
                    xs = x[img, g * cg + ci, 0]
                    for j in range(k):
                        wv, off = wt[g, ci, j], j * dw - pw
                        lo = 0 if off >= 0 else (sw - 1 - off) // sw
                        for q in range(lo, min(lo_n, (length - 1 - off) // sw + 1)):
                            xv, row = xs[q * sw + off], acc[q]
                            for oc in range(og):
                                row[oc] += xv * wv[oc]
                for oc in range(og):
                    yr = y[img, g * og + oc, 0]
                    bo = b[g * og + oc] if b.shape[0] == o else zero
                    for q in range(lo_n):
                        yr[q] = activate(acc[q, oc] + bo if b.shape[0] == o else acc[q, oc], code, alpha, beta,
                                         zero, one)

    return _conv1d


@functools.lru_cache(maxsize=1)
def _kernel_fn():
    """The kernel function with the compiled ``activation_jit.activate_value`` inlined in it (made once)."""
    return _make(jit.compiled(activate_value, always=True))


def kernel():
    """The compiled ``_conv1d``, or None where compiled kernels are off."""
    return jit.compiled(_kernel_fn()) if jit.enabled() else None


def applies(xp, x, weight, bias, out, stride, padding, dilation, groups, t) -> bool:
    """``conv1d`` runs this call (pairs of geometry checked; ``t`` the tuning table): see the module."""
    if xp is not np or not t.conv1d or x.ndim != 4 or x.shape[2] != 1 or weight.shape[2] != 1 or padding[0] != 0:
        return False
    if x.dtype not in FLOATS or weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype) \
            or (out is not None and out.dtype != x.dtype) or conv.is_batch_last(x) or conv.is_batch_last(out):
        return False
    lo = conv.out_size(x, weight, stride, padding, dilation)[1]
    return x.shape[0] * weight.shape[0] * weight.shape[1] * weight.shape[3] * lo <= t.conv1d_max_macs \
        and jit.enabled()


@functools.lru_cache(maxsize=64)
def scalars(dtype, code: int, alpha: float, beta: float) -> tuple:
    """The kernel's activation arguments in ``dtype``."""
    d = np.dtype(dtype).type
    return code, d(alpha), d(beta), d(0), d(1)


def bound(x, weight, bias, stride, padding, dilation, act=None, alpha=0.2, beta=0.5, rows=False):
    """``fn(x, w, b=None, out=None)`` computing the (activated) convolution of arrays shaped and typed as
    these (a compiled step's: ``applies`` held when it bound) by the ``rows`` loop (``rows``: its
    ``applies`` held too) or the first one, the geometry and scalars bound in; None where the kernel
    is off."""
    kern = conv1d_rows.kernel() if rows else kernel()
    if kern is None:
        return None
    lo = conv.out_size(x, weight, stride, padding, dilation)[1]
    shape, dtype = (x.shape[0], weight.shape[0], 1, lo), x.dtype
    args = ((padding[1], dilation[1], act_code(act), act_params(dtype, alpha, beta)) if rows else
            (stride[1], padding[1], dilation[1]) + scalars(dtype, act_code(act), alpha, beta))
    none = np.zeros(0, dtype)

    def fn(x, w, b=None, out=None):
        y = np.empty(shape, dtype) if out is None else out
        kern(x, w, none if b is None else b, y, *args)
        return y

    return fn


def run_conv1d(xp, x, weight, bias, stride, padding, dilation, groups, out, act=None, alpha=0.2, beta=0.5):
    """conv2d (and its activation: ``act``) by the compiled loop, into ``out`` or a new array; None where
    the kernel is off (the caller's next choice runs)."""
    fn = bound(x, weight, bias, stride, padding, dilation, act, alpha, beta, conv1d_rows.applies(stride, current()))
    if fn is None:
        return None
    shape = (x.shape[0], weight.shape[0], 1, conv.out_size(x, weight, stride, padding, dilation)[1])
    if out is None or out.shape == shape:
        return fn(x, weight, bias, out=out)
    out[...] = fn(x, weight, bias)
    return out


def run_conv1d_act(xp, x, weight, bias, stride, padding, dilation, groups, act, alpha, beta, out):
    """conv2d_act by the compiled loop (``run_conv1d`` with the activation)."""
    return run_conv1d(xp, x, weight, bias, stride, padding, dilation, groups, out, act, alpha, beta)


CONV1D = Impl("conv2d", "conv1d",
              run_conv1d, "float32/float64, numba, a unit-height image and kernel (a 1-D convolution), not batch "
              "last, conv1d on, at most conv1d_max_macs multiply-adds: one compiled loop over the input where it "
              "lies, the bias added in it", fallback=GROUPED)
CONV1D_ACT = Impl("conv2d_act", "conv1d", run_conv1d_act,
                  "conv2d's conv1d case: the activation applied in the same loop (one pass, one call a layer)")
ROWS = "rows"  # the note explain() shows where the rows loop runs: conv2d[conv1d, rows] (kernels/conv1d_rows.py)
CHOICES = {False: Choice(CONV1D), True: Choice(CONV1D, (ROWS,))}
ACT_CHOICES = {False: Choice(CONV1D_ACT), True: Choice(CONV1D_ACT, (ROWS,))}
ACT_CHOICE = ACT_CHOICES[False]


def choose(stride, t) -> Choice:
    """conv2d's choice where ``applies`` held (``t`` the tuning table): ``conv1d``, noted ``rows`` where
    that loop applies (``conv1d_rows.applies``)."""
    return CHOICES[conv1d_rows.applies(stride, t)]


def act_choice(conv_choice: Choice) -> Choice:
    """conv2d_act's choice where conv2d's is ``conv_choice`` (``conv1d``, either loop)."""
    return ACT_CHOICES[ROWS in conv_choice.notes]


def bound_step(choice: Choice, x, weight, bias, stride, padding, dilation, act=None, alpha=0.2,
               beta=0.5) -> Bound | None:
    """A compiled step's ``Bound`` of ``conv1d``, named ``choice`` (``act`` None: conv2d's, else
    conv2d_act's), reading no scratch (``kernels/scratch_free.py``); None where the kernel is off (the
    step calls its runner)."""
    fn = bound(x, weight, bias, stride, padding, dilation, act, alpha, beta, ROWS in choice.notes)
    return None if fn is None else Bound(choice, fn, scratch=False)  # (both loops allocate their own)
