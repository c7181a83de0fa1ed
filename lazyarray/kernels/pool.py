"""max_pool2d, its gradient, the pooled batch norm and avg_pool2d: their implementations and choosers.

``ops/pool.py`` and ``ops/pool_norm.py`` hold the reference kernels (folds of shifted, strided
views; the gradient routed through a windows view). Where numba is installed, float arrays on
NumPy run one compiled pass each (``pool_jit.py``: any memory order, batch-last buffers included),
with the same values: a maximum is exact, and ties go to the first maximum as in ``argmax``.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..ops.pool import avg_pool2d_kernel, jit_geometry, max_pool2d_grad_kernel, max_pool2d_kernel, window_layout
from ..ops.pool_norm import pooled_batch_norm
from ..tuning_table import current
from . import pool_jit, pool_windows
from .elementwise import run_relu
from .impl import ANY_ORDER, Choice, Impl
from .runner import Bound, direct, fixed_binder, noted, ran


def _max_pool_compiled(xp, x, kernel, stride, padding, ceil_mode, out):
    return pool_jit.max_pool(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode))  # (None: declined)


def _max_pool_windows(xp, x, kernel, stride, padding, ceil_mode, out):
    return pool_windows.max_pool(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode))  # (None: declined)


def _max_pool_folds(xp, x, kernel, stride, padding, ceil_mode, out):
    return max_pool2d_kernel(xp, x, kernel, stride, padding, ceil_mode, out=out)


def _relu_windows(xp, x, kernel, stride, padding, ceil_mode, out):
    return pool_windows.max_pool(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode), relu=True)


def _relu_compiled(xp, x, kernel, stride, padding, ceil_mode, out):
    return pool_jit.max_pool(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode), relu=True)


def _relu_after(xp, x, kernel, stride, padding, ceil_mode, out):
    y = run_max_pool2d(xp, x, kernel, stride, padding, ceil_mode, out)
    return run_relu(xp, y, out=y)


def _grad_compiled(xp, g, x, kernel, stride, padding, ceil_mode, out):
    k, s, p, _, _ = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    return pool_jit.max_pool_grad(g, x, k, s, p, out)  # (None: declined)


def _grad_windows(xp, g, x, kernel, stride, padding, ceil_mode, out):
    return max_pool2d_grad_kernel(xp, g, x, kernel, stride, padding, ceil_mode, out=out)


def _pooled_norm(xp, x, gamma, beta, mean, var, eps, relu, kernel, stride, padding, ceil_mode, out):
    pool = {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil_mode}
    return pooled_batch_norm(xp, x, gamma, beta, mean, var, eps, relu, pool, out, run_max_pool2d, run_relu)


def _pooled_norm_compiled(xp, x, gamma, beta, mean, var, eps, relu, kernel, stride, padding, ceil_mode, out):
    return pool_jit.max_pool_norm(x, out, gamma, beta, mean, var, eps, relu,
                                  *jit_geometry(x, kernel, stride, padding, ceil_mode))  # (None: declined)


def _avg_compiled(xp, x, kernel, stride, padding, ceil_mode, count_include_pad, out):
    k, s, p, shape, extra = window_layout(x.shape, kernel, stride, padding, ceil_mode)
    return pool_jit.avg_pool(x, out, k, s, p, shape, extra, count_include_pad,
                             current().avg_pool_compiled_max_taps)  # (None: declined)


def _avg_reference(xp, x, kernel, stride, padding, ceil_mode, count_include_pad, out):
    return avg_pool2d_kernel(xp, x, kernel, stride, padding, ceil_mode, count_include_pad, out=out)


FOLDS = Impl("max_pool2d", "folds", _max_pool_folds, "an elementwise maximum over the kh * kw shifted views "
             "(two flat passes where windows tile x): the reference", layout=ANY_ORDER)
COMPILED = Impl("max_pool2d", "compiled", _max_pool_compiled, "a float array on NumPy, numba installed: one "
                "compiled pass in x's memory order", layout=ANY_ORDER, fallback=FOLDS)
WINDOWS = Impl("max_pool2d", "windows", _max_pool_windows, "a float32/float64 NumPy array not stored batch last, "
               "a stride over 1, not 2 x 2 tiles, numba installed: each output's window folded in registers in "
               "compiled's tap order, taps in padding skipped (its values; issue #35: small planes)", layout=ANY_ORDER,
               fallback=COMPILED)
RELU_AFTER = Impl("max_pool2d_relu", "pool, then relu", _relu_after, "max_pool2d's runner, then relu's in place "
                  "on its output: the two recorded ops", layout=ANY_ORDER)
RELU_COMPILED = Impl("max_pool2d_relu", "compiled", _relu_compiled, "max_pool2d[compiled]'s cases: its row or "
                     "batch-last loop, the relu before each store", layout=ANY_ORDER, fallback=RELU_AFTER)
RELU_WINDOWS = Impl("max_pool2d_relu", "windows", _relu_windows, "max_pool2d[windows]'s cases: its loop, the relu "
                    "before each store (issue #35: SqueezeNet's pool and relu one step)", layout=ANY_ORDER,
                    fallback=RELU_COMPILED)
GRAD_WINDOWS = Impl("max_pool2d_grad", "windows", _grad_windows, "g added where each window's argmax is: the reference")
GRAD_COMPILED = Impl("max_pool2d_grad", "compiled", _grad_compiled, "NumPy, numba installed: one compiled pass",
                     fallback=GRAD_WINDOWS)
NORM_POOL_FIRST = Impl("batch_norm_max_pool2d", "pool_first", _pooled_norm, "pooled, then relu and the batch norm "
                       "on a quarter of the values (the recorded order where a scale is negative)",
                       layout=ANY_ORDER)
NORM_COMPILED = Impl("batch_norm_max_pool2d", "compiled", _pooled_norm_compiled, "NumPy, numba installed: "
                     "pool, relu and batch norm in one compiled pass", layout=ANY_ORDER, fallback=NORM_POOL_FIRST)
AVG_REFERENCE = Impl("avg_pool2d", "sums", _avg_reference, "a sum over the kh * kw shifted views (two flat "
                     "passes where windows tile x), times one over each window's count: the reference",
                     layout=ANY_ORDER)
AVG_COMPILED = Impl("avg_pool2d", "compiled", _avg_compiled, "a C-ordered float array on NumPy, numba installed: "
                    "one compiled pass, the reference's sums in its order", fallback=AVG_REFERENCE)
_AVG_ROWS = Choice(AVG_COMPILED, ("rows",))  # (explain(): avg_pool2d[compiled, rows], pool_jit's unit-height loop)
_CHOICES = {impl: Choice(impl) for impl in (FOLDS, COMPILED, WINDOWS, RELU_AFTER, RELU_COMPILED, RELU_WINDOWS, GRAD_WINDOWS, GRAD_COMPILED, NORM_POOL_FIRST,
                                            NORM_COMPILED, AVG_REFERENCE, AVG_COMPILED)}


def _compiles(xp, x) -> bool:
    return xp is np and x.__class__ is np.ndarray and x.dtype.kind == "f" and jit.enabled()


def choose_max_pool2d(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None) -> Choice:
    """What runs max_pool2d of ``x``."""
    if not _compiles(xp, x):
        return _CHOICES[FOLDS]
    if current().max_pool_windows and x.ndim == 4 \
            and pool_windows.applies(x, *jit_geometry(x, kernel, stride, padding, ceil_mode)):
        return _CHOICES[WINDOWS]
    return _CHOICES[COMPILED]


def run_max_pool2d(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None):
    """max_pool2d by the implementation ``choose_max_pool2d`` picks (the op's kernel in every call)."""
    choice = choose_max_pool2d(xp, x, kernel, stride, padding, ceil_mode, out)
    y = choice.impl.run(xp, x, kernel, stride, padding, ceil_mode, out) if choice.impl is not FOLDS else None
    if y is None and choice.impl is WINDOWS:  # (declined at run time: its fallback)
        y, choice = _max_pool_compiled(xp, x, kernel, stride, padding, ceil_mode, out), _CHOICES[COMPILED]
    if y is None:  # (not compiled, or declined: the folds)
        y, choice = max_pool2d_kernel(xp, x, kernel, stride, padding, ceil_mode, out=out), _CHOICES[FOLDS]
    if MODE.get() & PROFILING or current().log_kernels:
        noted(choice, x)
    return y


def bind_max_pool2d(xp, x, out=None, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``compiled`` with its geometry, phase tables and
    kernel made once (``pool_jit.bound_max_pool``) where it runs the phase-plane pool, else the
    chosen implementation's run bound to the window (``fixed_binder``'s). No max pool kernel takes
    scratch (its padded values are read in place): the step lends no workspace (``Bound.scratch``)."""
    choice = choose_max_pool2d(xp, x, kernel, stride, padding, ceil_mode, out)
    fn = direct(choice, _CHOICES, xp, (kernel, stride, padding, ceil_mode), arity=1)
    if choice.impl is WINDOWS:
        fixed = pool_windows.bound(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode), fn)
        if fixed is not None:
            return Bound(choice, fixed, scratch=False)
    if choice.impl is COMPILED:
        fixed = pool_jit.bound_max_pool(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode), fn)
        if fixed is not None:
            return Bound(choice, fixed, scratch=False)
    return Bound(choice, fn, scratch=False)


_WITH_RELU = {FOLDS: RELU_AFTER, COMPILED: RELU_COMPILED, WINDOWS: RELU_WINDOWS}


def choose_max_pool2d_relu(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None) -> Choice:
    """What runs max_pool2d_relu of ``x``: max_pool2d's choice, with the relu in its loop."""
    return _CHOICES[_WITH_RELU[choose_max_pool2d(xp, x, kernel, stride, padding, ceil_mode, out).impl]]


def run_max_pool2d_relu(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None):
    """max_pool2d_relu by the implementation ``choose_max_pool2d_relu`` picks (its fallbacks where it declines)."""
    choice = choose_max_pool2d_relu(xp, x, kernel, stride, padding, ceil_mode, out)
    args = (xp, x, kernel, stride, padding, ceil_mode, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (x,))


def bind_max_pool2d_relu(xp, x, out=None, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False) -> Bound:
    """A compiled step's ``Bound``: ``windows`` with its kernel and scalars made once
    (``pool_windows.bound``), else the chosen implementation's run bound to the window."""
    choice = choose_max_pool2d_relu(xp, x, kernel, stride, padding, ceil_mode, out)
    fn = direct(choice, _CHOICES, xp, (kernel, stride, padding, ceil_mode), arity=1)
    if choice.impl is RELU_WINDOWS:
        fixed = pool_windows.bound(x, out, *jit_geometry(x, kernel, stride, padding, ceil_mode), fn, relu=True)
        if fixed is not None:
            return Bound(choice, fixed, scratch=False)
    return Bound(choice, fn, scratch=False)


def choose_max_pool2d_grad(xp, g, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False,
                           out=None) -> Choice:
    """What runs max_pool2d_grad."""
    return _CHOICES[GRAD_COMPILED if xp is np and jit.enabled() else GRAD_WINDOWS]


def run_max_pool2d_grad(xp, g, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None):
    """max_pool2d_grad by the implementation ``choose_max_pool2d_grad`` picks."""
    choice = choose_max_pool2d_grad(xp, g, x)
    args = (xp, g, x, kernel, stride, padding, ceil_mode, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (g, x))


def _norm_compiles(xp, x) -> bool:
    return xp is np and x.__class__ is np.ndarray and jit.enabled()


def choose_norm(xp, x, *stats, **params) -> Choice:
    """What runs batch_norm_max_pool2d of ``x``."""
    return _CHOICES[NORM_COMPILED if _norm_compiles(xp, x) else NORM_POOL_FIRST]


def run_norm(xp, x, gamma, beta, mean, var, eps=1e-5, relu=False, kernel=(2, 2), stride=(0, 0), padding=(0, 0),
             ceil_mode=False, out=None):
    """batch_norm_max_pool2d by the implementation ``choose_norm`` picks."""
    args = (xp, x, gamma, beta, mean, var, eps, relu, kernel, stride, padding, ceil_mode, out)
    y = _pooled_norm_compiled(*args) if _norm_compiles(xp, x) else None
    choice = _CHOICES[NORM_COMPILED]
    if y is None:  # (not compiled, or declined: pooled first by the runners of max_pool2d and relu)
        y, choice = _pooled_norm(*args), _CHOICES[NORM_POOL_FIRST]
    if MODE.get() & PROFILING or current().log_kernels:
        noted(choice, x)
    return y


def choose_avg_pool2d(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, count_include_pad=True,
                      out=None) -> Choice:
    """What runs avg_pool2d of ``x``."""
    return _CHOICES[AVG_COMPILED if _compiles(xp, x) and x.flags.c_contiguous else AVG_REFERENCE]


def bind_avg_pool2d(xp, x, out=None, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False,
                    count_include_pad=True) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``compiled`` with its window layout, kernel and
    scalars made once (``pool_jit.bound_avg_pool``) where a kernel runs for the step's arrays, else
    the chosen implementation's run bound to the window (``fixed_binder``'s)."""
    choice = choose_avg_pool2d(xp, x, out=out)
    fn = direct(choice, _CHOICES, xp, (kernel, stride, padding, ceil_mode, count_include_pad), arity=1)
    if choice.impl is AVG_COMPILED:
        k, s, p, shape, extra = window_layout(x.shape, kernel, stride, padding, ceil_mode)
        fixed = pool_jit.bound_avg_pool(x, out, k, s, p, shape, extra, count_include_pad,
                                        current().avg_pool_compiled_max_taps, fn)
        if fixed is not None:  # (``rows``: pool_jit's unit-height loop runs it)
            rows = pool_jit.row_applies(x, k, p, shape, extra)
            return Bound(_AVG_ROWS if rows else choice, fixed)
    return Bound(choice, fn)


def run_avg_pool2d(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, count_include_pad=True,
                   out=None):
    """avg_pool2d by the implementation ``choose_avg_pool2d`` picks."""
    choice = choose_avg_pool2d(xp, x)
    args = (xp, x, kernel, stride, padding, ceil_mode, count_include_pad, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (x,))


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"max_pool2d": (WINDOWS, COMPILED, FOLDS), "max_pool2d_relu": (RELU_WINDOWS, RELU_COMPILED, RELU_AFTER),
         "max_pool2d_grad": (GRAD_COMPILED, GRAD_WINDOWS),
         "batch_norm_max_pool2d": (NORM_COMPILED, NORM_POOL_FIRST), "avg_pool2d": (AVG_COMPILED, AVG_REFERENCE)}
RUNNERS = {"max_pool2d": run_max_pool2d, "max_pool2d_relu": run_max_pool2d_relu, "max_pool2d_grad": run_max_pool2d_grad, "batch_norm_max_pool2d": run_norm,
           "avg_pool2d": run_avg_pool2d}
CHOOSERS = {"max_pool2d": choose_max_pool2d, "max_pool2d_relu": choose_max_pool2d_relu,
            "max_pool2d_grad": choose_max_pool2d_grad,
            "batch_norm_max_pool2d": choose_norm, "avg_pool2d": choose_avg_pool2d}
_WINDOW = ("kernel", "stride", "padding", "ceil_mode")  # (the implementations' parameters, in order)
BINDERS = {"max_pool2d": bind_max_pool2d, "max_pool2d_relu": bind_max_pool2d_relu,
           "max_pool2d_grad": fixed_binder(choose_max_pool2d_grad, _CHOICES, _WINDOW),
           "batch_norm_max_pool2d": fixed_binder(choose_norm, _CHOICES, ("eps", "relu") + _WINDOW),
           "avg_pool2d": bind_avg_pool2d}
