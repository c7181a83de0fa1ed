"""``nn.conv2d_act``'s implementations (``ops/conv_act.py``: a convolution and its activation, one
op made by the inference pass ``graph/passes/conv_activation.py``) and its chooser.

Both run the convolution by ``choose_conv2d``'s choice (so every conv2d implementation applies,
and the label names it: ``conv2d_act[compiled, pointwise]``), then the activation in place on the
output: ``compiled``, one numba pass over the output's memory (float32/float64 NumPy arrays, numba
on, an output stored C-ordered, channels last or batch last), rounding op by op as the recorded ops
(``relu``; ``hardsigmoid``: multiply, add, ``minimum(t, 1)``, ``maximum(t, 0)`` with NumPy's NaN and
signed-zero rules; ``hardswish``: times the input), so the values are the recorded graph's bit for
bit; ``ufuncs``, the reference's NumPy calls (``ops/conv_act.activate``), elsewhere. ``fused``
(issue #35), where conv2d's choice is ``pointwise`` with a bias: its product without the bias, then
one compiled pass adding the bias and activating (``_bias_act``, rounding as ``y += bias`` then
the activation's ops do): one pass and one call fewer a layer; ``loop`` (``pointwise_loop.py``), where
that layer is small (``conv_pointwise_loop_max_macs``): product, bias and activation in one compiled
loop, one call a layer (within float rounding of ``fused``, not bit for bit). Where conv2d's choice is
``direct`` or ``depthwise`` (its NCHW loop), ``compiled``'s activation runs in that loop
(``conv_direct``, ``depthwise``: bit for bit the pass's values), eager and bound. A compiled step binds the choice
once (``bind_conv2d_act``: conv2d's binding, then the pass; ``fused`` itself at any batch), asking no
chooser per call.
``compiled`` and ``ufuncs`` take values stored in any order (``ANY_ORDER``): the executor stores
them batch last where it would conv2d's (``kernels.takes_batch_last``, with conv2d's condition
``conv_batch_last.columns_fit``); ``fused`` runs only on C-ordered ones, as ``pointwise`` does (an input whose images are
C-ordered blocks at any batch stride counts, as for ``pointwise``).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..ops import conv
from ..ops.conv_act import ACTIVATIONS, activate
from ..tuning_table import current
from . import conv1d, pointwise_loop
from .blocked_region import bound_region, conv2d_blocked_region
from .conv2d import BLOCKED, BLOCKED_REGION, CONV1D, DIRECT, POINTWISE, bind_conv2d, choose_conv2d, run_conv2d
from .conv_blocked import bound_blocked, conv2d_blocked
from .conv_direct import bound_direct, conv2d_direct, images_c_ordered
from .covering_view import covering
from .depthwise import DEPTHWISE, FLOATS, bound_nchw, conv2d_depthwise_compiled
from .impl import ANY_ORDER, Choice, Impl
from .log import log_choice
from .profile import current as current_profile
from .runner import Bound


@jit.tiered
def _act_in_place(a, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
    """``a`` (flat) activated in place: code 0 relu, 1 hardsigmoid, 2 hardswish (one loop each, so
    each vectorizes)."""
    if code == 0:
        for i in range(a.shape[0]):
            u = a[i]
            a[i] = u if (u > zero) | (u != u) else zero
    elif code == 1:
        for i in range(a.shape[0]):
            t = a[i] * alpha
            t = t + beta
            t = one if t > one else t  # (NumPy's minimum / maximum: a NaN stays, -0.0 stays)
            a[i] = zero if t < zero else t
    else:
        for i in range(a.shape[0]):
            u = a[i]
            t = u * alpha
            t = t + beta
            t = one if t > one else t
            t = zero if t < zero else t
            a[i] = u * t


def _bias_act(y, b, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
    """``y`` (N, O, P) plus ``b`` (O,) per channel, then activated, in place: the bias add and
    ``_act_in_place``'s activation rounded as they round, in one pass (code 0 relu, 1 hardsigmoid,
    2 hardswish)."""
    for img in range(y.shape[0]):
        for oc in range(y.shape[1]):
            row, bo = y[img, oc], b[oc]
            if code == 0:
                for q in range(row.shape[0]):
                    u = row[q] + bo
                    row[q] = u if (u > zero) | (u != u) else zero
            elif code == 1:
                for q in range(row.shape[0]):
                    t = (row[q] + bo) * alpha
                    t = t + beta
                    t = one if t > one else t
                    row[q] = zero if t < zero else t
            else:
                for q in range(row.shape[0]):
                    u = row[q] + bo
                    t = u * alpha
                    t = t + beta
                    t = one if t > one else t
                    t = zero if t < zero else t
                    row[q] = u * t


def flat_view(y):
    """A 1-D view of all of ``y``'s (4-D) values when it is stored C-ordered, channels last or batch
    last; else None."""
    if y.flags.c_contiguous:
        return y.reshape(-1)
    for order in ((0, 2, 3, 1), (1, 2, 3, 0)):
        t = y.transpose(order)
        if t.flags.c_contiguous:
            return t.reshape(-1)
    return None


@functools.lru_cache(maxsize=64)
def _scalars(dtype, act: str, alpha: float, beta: float) -> tuple:
    """The compiled pass's arguments after the array, in ``dtype`` (made once per activation and dtype)."""
    d = dtype.type
    return ACTIVATIONS.index(act), d(alpha), d(beta), d(0), d(1)


def _compiled(xp, y, act, alpha, beta):
    flat = flat_view(y) if xp is np and y.dtype.char in "fd" else None
    kern = None if flat is None else jit.compiled(_act_in_place)
    if kern is None:
        return None
    kern(flat, *_scalars(y.dtype, act, alpha, beta))
    return y


def _ufuncs(xp, y, act, alpha, beta):
    return activate(xp, y, act, alpha, beta)


def pointwise_fused(xp, x, weight, bias, act, alpha, beta, out):
    """conv2d ``pointwise``'s product without its bias, into the output (C-ordered ``out``, or a new
    array), then the bias and the activation in one compiled pass (``_bias_act``); None where that
    kernel is off or the memory orders are not C's (the input's images C-ordered blocks at any batch
    stride, ``conv_direct.images_c_ordered``, as ``pointwise`` takes; the caller runs the convolution,
    then ``compiled``)."""
    kern = jit.compiled(_bias_act)
    if kern is None:
        return None
    return _fused_call(kern, _scalars(x.dtype, act, alpha, beta), x, weight, bias, out)


def _fused_call(kern, scalars, x, weight, bias, out):
    """``pointwise_fused``'s work with its compiled pass and scalars given (a bound step fetches them
    once); None where the memory orders are not ``pointwise``'s (the only facts of a call that change
    ``pointwise``'s choice at a step's shapes, dtypes, tuning table and threads)."""
    if not images_c_ordered(x) or (out is not None and not images_c_ordered(out)) or x.dtype != scalars[1].dtype:
        return None
    n, c, h, w = x.shape
    o = weight.shape[0]
    y = out if out is not None else np.empty((n, o, h, w), x.dtype)
    rows = y.reshape(n, o, h * w)
    np.matmul(weight.reshape(o, c), x.reshape(n, c, h * w), out=rows)
    kern(rows, np.ascontiguousarray(bias.reshape(-1)), *scalars)
    return y


UFUNCS = Impl("conv2d_act", "ufuncs", _ufuncs,
              "any: the convolution by conv2d's choice, then the activation's NumPy calls in place (the reference's)",
              layout=ANY_ORDER)
COMPILED = Impl("conv2d_act", "compiled", _compiled,
                "float32/float64 NumPy output stored C-ordered, channels last or batch last, numba on: the "
                "convolution by conv2d's choice, then one compiled pass of the activation in place",
                layout=ANY_ORDER, fallback=UFUNCS)
FUSED = Impl("conv2d_act", "fused", pointwise_fused,
             "conv2d's choice pointwise with a bias, numba on: its product without the bias, then one compiled "
             "pass of the bias and the activation (issue #35: one pass and one call fewer a layer)",
             fallback=COMPILED)
LOOP = Impl("conv2d_act", "loop", pointwise_loop.run_loop,
            "fused's case with at most conv_pointwise_loop_max_macs multiply-adds, conv_pointwise_loop on: the "
            "product, the bias and the activation in one compiled loop (issue #35: one call a layer where BLAS's "
            "fixed cost was most of it)", fallback=FUSED)



def _write_out(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d by blocked's loop with the relu taken in its write-out (None where blocked declines)."""
    return conv2d_blocked(xp, x, weight, bias, stride, padding, dilation, groups, out, relu=True)


WRITE_OUT = Impl("conv2d_act", "write_out", _write_out,
                 "conv2d's choice blocked, act relu, conv_act_write_out on: the relu taken in blocked's write-out "
                 "(no pass after it; compiled's values bit for bit)", fallback=COMPILED)
WRITE_OUT_REGION = Impl("conv2d_act", "write_out_region", functools.partial(conv2d_blocked_region, relu=True),
                        "conv2d's choice blocked_region, act relu, conv_act_write_out on: write_out's loop over the "
                        "threads in one compiled parallel region (write_out's values bit for bit; write_out while "
                        "contended)", threads=True, fallback=WRITE_OUT)


@functools.lru_cache(maxsize=256)
def _choice(impl: Impl, conv_choice: Choice) -> Choice:
    return Choice(impl, (conv_choice.label(),))


def _pick(xp, x, weight, bias, conv_choice: Choice, t, act: str) -> Impl:
    """The activation's implementation given the convolution's choice (``t``: the tuning table)."""
    if not (xp is np and np.result_type(x.dtype, weight.dtype) in FLOATS and jit.enabled()):
        return UFUNCS
    if conv_choice.impl in (BLOCKED, BLOCKED_REGION) and act == "relu" and t.conv_act_write_out:
        return WRITE_OUT if conv_choice.impl is BLOCKED else WRITE_OUT_REGION
    if conv_choice.impl is not POINTWISE or bias is None or bias.dtype != x.dtype:
        return COMPILED
    return LOOP if pointwise_loop.applies(x, weight, bias, t) else FUSED


def choose_conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                      act="relu", alpha=0.2, beta=0.5, out=None) -> Choice:
    """What runs conv2d_act of these arrays (``kernels.choose``): the activation's implementation, noted
    with the convolution's choice."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return Choice(UFUNCS, ("float16 via float32",))
    return _choices(xp, x, weight, bias, conv.geometry(stride, padding, dilation), groups, out, act)[0]


def _choices(xp, x, weight, bias, geo, groups, out, act: str) -> tuple[Choice, Choice]:
    """``choose_conv2d_act``'s choice and the convolution's (float32/float64)."""
    t = current()
    conv_choice = choose_conv2d(xp, x, weight, out, *geo, groups, t)
    if conv_choice.impl is CONV1D:  # (the activation in the convolution's loop)
        return conv1d.act_choice(conv_choice), conv_choice
    return _choice(_pick(xp, x, weight, bias, conv_choice, t, act), conv_choice), conv_choice


def _activated(xp, y, act, alpha, beta) -> Impl:
    """``y`` activated in place by ``compiled`` (``ufuncs`` where it declines); which one ran."""
    if _compiled(xp, y, act, alpha, beta) is None:
        activate(xp, y, act, alpha, beta)
        return UFUNCS
    return COMPILED


def run_conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                   act="relu", alpha=0.2, beta=0.5, out=None):
    """conv2d_act: ``fused`` where it is chosen and runs; else the convolution by ``choose_conv2d``'s
    choice (its fallback where it declines), then the activation by ``compiled`` (``ufuncs`` where it
    declines); the op's kernel in every call."""
    if x.dtype == np.float16 and weight.dtype == np.float16:  # (conv2d's half path, then the reference's)
        y = run_conv2d(xp, x, weight, bias, stride, padding, dilation, groups, out)
        return activate(xp, y, act, alpha, beta)
    t = current()
    y, label = _run(xp, x, weight, bias, conv.geometry(stride, padding, dilation), groups, act, alpha, beta, out, t)
    if MODE.get() & PROFILING:
        current_profile().chose(label)
    if t.log_kernels:
        log_choice(label, x, weight)
    return y


def _run(xp, x, weight, bias, geo, groups, act, alpha, beta, out, t):
    """``run_conv2d_act``'s work (float32/float64), choosing as it runs: the output and the choice
    that ran."""
    conv_choice = choose_conv2d(xp, x, weight, out, *geo, groups, t)
    impl = _pick(xp, x, weight, bias, conv_choice, t, act)
    y, ran = _in_one_pass(impl, conv_choice, xp, x, weight, bias, geo, groups, act, alpha, beta, out)
    if y is not None:
        return y, ran
    y = conv_choice.impl.run(xp, x, weight, bias, *geo, groups, out)
    if y is None:  # (declined at run time: its fallback runs)
        conv_choice = Choice(conv_choice.impl.fallback)
        y = conv_choice.impl.run(xp, x, weight, bias, *geo, groups, out)
    return y, _choice(_activated(xp, y, act, alpha, beta), conv_choice)


def _in_one_pass(impl, conv_choice, xp, x, weight, bias, geo, groups, act, alpha, beta, out):
    """``(y, the choice that ran)`` where the chosen implementations compute the convolution and the
    activation in one loop (``loop``; ``fused``; ``conv1d``; ``direct`` with the activation in its
    loop, as ``compiled`` rounds it); ``(None, None)`` where none runs (declined, or not chosen)."""
    if impl is LOOP:
        y = pointwise_loop.run_loop(xp, x, weight, bias, act, alpha, beta, out)
        if y is not None:
            return y, _choice(LOOP, conv_choice)
        impl = FUSED
    if impl is WRITE_OUT_REGION:
        y = conv2d_blocked_region(xp, x, weight, bias, *geo, groups, out, relu=True)
        if y is not None:
            return y, _choice(WRITE_OUT_REGION, conv_choice)
        impl, conv_choice = WRITE_OUT, Choice(BLOCKED)  # (declined: contended, or a pool thread)
    if impl is WRITE_OUT:
        y = _write_out(xp, x, weight, bias, *geo, groups, out)
        return y, (None if y is None else _choice(WRITE_OUT, conv_choice))
    if impl is FUSED:
        y = pointwise_fused(xp, x, weight, bias, act, alpha, beta, out)
        return y, (None if y is None else _choice(FUSED, conv_choice))
    if conv_choice.impl is CONV1D:
        y = conv1d.run_conv1d_act(xp, x, weight, bias, *geo, groups, act, alpha, beta, out)
        return y, (None if y is None else conv1d.act_choice(conv_choice))
    if conv_choice.impl in (DIRECT, DEPTHWISE) and impl is COMPILED:
        run = conv2d_direct if conv_choice.impl is DIRECT else conv2d_depthwise_compiled
        y = run(xp, x, weight, bias, *geo, groups, out, act, alpha, beta)
        return y, (None if y is None else _choice(COMPILED, conv_choice))
    return None, None


def bind_conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                    act="relu", alpha=0.2, beta=0.5, out=None) -> Bound | None:
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_conv2d_act``'s choice with the convolution
    bound as ``bind_conv2d`` binds it (reading per call the facts that could change its choice) and the
    activation's pass after it; ``loop`` and ``fused`` bound as chosen, at any batch (``_bound_pointwise``).
    None for half precision (the runner converts)."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return None
    geo = conv.geometry(stride, padding, dilation)
    choice, conv_choice = _choices(xp, x, weight, bias, geo, groups, out, act)
    if choice.impl is conv1d.CONV1D_ACT:
        return conv1d.bound_step(choice, x, weight, bias, *geo, act, alpha, beta)
    if choice.impl in (LOOP, FUSED):
        bound = _bound_pointwise(choice, xp, x, weight, bias, geo, groups, act, alpha, beta, out)
        if bound is not None:
            return bound
        choice = _choice(COMPILED, Choice(POINTWISE))  # (its kernels off: conv2d's binding, then the pass)
    conv_bound = bind_conv2d(xp, x, weight, bias, stride, padding, dilation, groups, out=out)
    conv_fn = conv_bound.fn
    kern = jit.compiled(_act_in_place) if choice.impl is not UFUNCS else None
    code, a, b, zero, one = _scalars(np.result_type(x.dtype, weight.dtype), act, alpha, beta)
    dtype, planned = a.dtype, out
    rows = None if kern is None or out is None else _by_image(out)  # (a part at a batch stride)

    def fn(*arrays, out=None):
        y = conv_fn(*arrays, out=out)
        if kern is None or y.dtype != dtype:
            return activate(xp, y, act, alpha, beta)
        flat = y.reshape(-1) if y.flags.c_contiguous else flat_view(y)
        if flat is None:
            if rows is None or y is not planned:
                return activate(xp, y, act, alpha, beta)
            rows[0](rows[1], rows[2], code, a, b, zero, one)
            return y
        kern(flat, code, a, b, zero, one)
        return y

    lean = None
    if choice.impl in (WRITE_OUT, WRITE_OUT_REGION):  # (the relu in blocked's write-out; else as the runner runs it)
        lean = bound_blocked(x, weight, bias, *geo[:3], out, fn, relu=True)
        if lean is not None and choice.impl is WRITE_OUT_REGION:  # (over the threads; blocked's when it declines)
            lean = bound_region(x, weight, bias, *geo[:3], out, lean, relu=True) or lean
        if lean is None:
            return Bound(choice, _runs_as_runner(xp, geo, groups, act, alpha, beta), scratch=conv_bound.scratch)
    elif choice.impl is COMPILED and conv_choice.impl is DIRECT:  # (the activation in direct's loop)
        lean = bound_direct(x, weight, bias, *geo, groups, out, fn, act, alpha, beta)
    elif choice.impl is COMPILED and conv_choice.impl is DEPTHWISE:  # (in depthwise's NCHW loop)
        lean = bound_nchw(x, weight, bias, *geo, out, act, alpha, beta, fn)
    return Bound(choice, lean or fn, scratch=lean is None and conv_bound.scratch)  # (the loops read none)


def _runs_as_runner(xp, geo, groups, act, alpha, beta):
    """A step's function that chooses and runs as ``run_conv2d_act`` does (``write_out`` bound without a
    planned output: each call its own choice)."""
    def fn(x, w, b=None, out=None):
        return _run(xp, x, w, b, geo, groups, act, alpha, beta, out, current())[0]

    return fn


def _make_rows(act):
    def act_rows(a, length, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
        """The first ``length`` values of each row of ``a`` (C-ordered) activated in place by ``act``
        (``_act_in_place``: the same values)."""
        for i in range(a.shape[0]):
            act(a[i][:length], code, alpha, beta, zero, one)

    return act_rows


@functools.lru_cache(maxsize=1)
def _rows_fn():
    return _make_rows(jit.compiled(_act_in_place, always=True))


def _by_image(y) -> tuple | None:
    """``(kernel, rows, length)`` that activate ``y`` in place image by image where its images are
    C-ordered blocks at another batch stride (a batch's part of a concatenation written in place; not
    C-ordered, channels or batch last: ``flat_view``'s None): ``kernel(rows, length, *scalars)``, one call
    over the ``covering`` view's rows, each image's values a prefix of its row (the compiled pass's
    values); else None."""
    cov = covering(y) if y.ndim == 4 and y.size and flat_view(y) is None and jit.enabled() else None
    if cov is None or cov is y:
        return None
    return jit.compiled(_rows_fn(), always=True), cov.reshape(y.shape[0], -1), y[0].size


def _bound_pointwise(choice, xp, x, weight, bias, geo, groups, act, alpha, beta, out) -> Bound | None:
    """``loop`` or ``fused`` bound for a step (issue #35: at a step's shapes, dtypes, tuning table and
    threads, only the memory orders a call checks change ``pointwise``'s choice, so these run at any
    batch with everything else fixed once: the kernel, the scalars, the planned output's view); a call
    with other memory orders (or no planned output) chooses and runs as the runner does. None where
    its kernel is off."""
    def chosen(x, w, b, out=None):
        return _run(xp, x, w, b, geo, groups, act, alpha, beta, out, current())[0]

    if choice.impl is LOOP:
        fn = pointwise_loop.bound_loop(x, weight, bias, act, alpha, beta, out, chosen)
        return None if fn is None else Bound(choice, fn, scratch=False)  # (its loop reads no scratch)
    kern = jit.compiled(_bias_act)
    if kern is None:
        return None
    code, al, be, zero, one = scalars = _scalars(x.dtype, act, alpha, beta)
    n, c, h, wd = x.shape
    o, hw = weight.shape[0], h * wd
    planned = out if out is not None and images_c_ordered(out) else None  # ((N, O, H*W): a view)
    rows = None if planned is None else planned.reshape(n, o, hw)

    def other(x, w, b, out=None):  # (another output: as ``pointwise_fused``, else as the runner)
        y = _fused_call(kern, scalars, x, w, b, out)
        return chosen(x, w, b, out) if y is None else y

    def fused(x, w, b, out=None):
        if out is planned and out is not None:
            r = rows
        elif out is not None and out.flags.c_contiguous:  # (a program's output: new memory each run)
            r = out.reshape(n, o, hw)
        else:
            return other(x, w, b, out)
        if not (x.flags.c_contiguous or x[0].flags.c_contiguous):
            return other(x, w, b, out)
        np.matmul(w.reshape(o, c), x.reshape(n, c, hw), out=r)
        kern(r, b, code, al, be, zero, one)
        return out

    return Bound(choice, fused, scratch=False)  # (a matmul into the output, then its loop)


IMPLS = {"conv2d_act": (conv1d.CONV1D_ACT, LOOP, FUSED, WRITE_OUT_REGION, WRITE_OUT, COMPILED, UFUNCS)}
RUNNERS = {"conv2d_act": run_conv2d_act}
CHOOSERS = {"conv2d_act": choose_conv2d_act}
BINDERS = {"conv2d_act": bind_conv2d_act}
