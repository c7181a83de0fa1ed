"""The kernels layer: how this machine runs an op, as named implementations and one chooser per op.

``ops/`` defines what each op means and a reference kernel. Here an op with faster ways to run
declares them as ``Impl`` objects (``IMPLS``) and a runner that asks its chooser and runs the
choice; ``install()`` routes the op's kernel through that runner, so eager calls and compiled
steps take the same path. ``choose(op, xp, *arrays, **params)`` answers "what runs for this
call" for any op; ``la.profile()`` (``profile.py``) records what ran and how long.
``takes_batch_last(op, avals, out)`` answers the executor's layout pass from the implementations'
declared ``layout``. ``bind(op, xp, *arrays, out=None, **params)``: the choice for a compiled step,
made once by the same chooser, with a function that runs it directly (``runner.Bound``).
"""
from __future__ import annotations

from ..ops import registry
from . import (
    attention,
    batch_norm_relu,
    channel_shuffle,
    conv2d,
    conv2d_grad,
    conv_act,
    conv_add_relu,
    conv_batch_last,
    dense,
    elementwise,
    extrema,
    foreach,
    fused,
    gelu,
    layer_norm,
    layer_scale,
    matmul,
    mean,
    pad,
    pool,
    shape_views,
    softmax,
    squeeze_excite,
    take,
)
from .impl import ANY_ORDER, BATCH_LAST, Choice, Impl
from .profile import Event, Profile, profile, reference_label
from .runner import Bound

__all__ = ["IMPLS", "Bound", "Choice", "Event", "Impl", "Profile", "bind", "binds", "choose", "install", "profile",
           "reference", "takes_batch_last"]

# op name -> its implementations, best first; its runner; the function that picks one for a call's
# arrays (None where the op's reference kernel runs)
_FAMILIES = (attention, batch_norm_relu, channel_shuffle, conv2d_grad, conv_act, conv_add_relu, elementwise, extrema,
             gelu, layer_norm, layer_scale, mean, pad, pool, shape_views, softmax, squeeze_excite,
             take)  # (modules declaring IMPLS, RUNNERS, CHOOSERS)
IMPLS = {"conv2d": conv2d.IMPLS, "dense": dense.IMPLS, "foreach": foreach.IMPLS, "fused": fused.IMPLS,
         "matmul": matmul.IMPLS, **{k: v for f in _FAMILIES for k, v in f.IMPLS.items()}}
# (fused: the op is registered above this layer, by executor/fusion.py, whose kernel calls fused.run_fused)
_RUNNERS = {"conv2d": conv2d.run_conv2d, "dense": dense.run_dense, "foreach": foreach.run_foreach,
            "matmul": matmul.run_matmul, **{k: v for f in _FAMILIES for k, v in f.RUNNERS.items()}}
_CHOOSERS = {"conv2d": conv2d.choose_for_call, "dense": dense.choose_for_call, "foreach": foreach.choose_foreach,
             "fused": fused.choose_for_call, "matmul": matmul.choose_matmul,
             **{k: v for f in _FAMILIES for k, v in f.CHOOSERS.items()}}
# op name -> its binder (``bind``): ``binder(xp, *arrays, out=None, **params) -> Bound | None``; a module
# without ``BINDERS`` leaves its ops' compiled steps calling their runners
_BINDERS = {k: v for f in (conv2d, dense, foreach, fused, matmul) + _FAMILIES for k, v in getattr(f, "BINDERS", {}).items()}


# Ops with no faster implementation whose reference kernel walks its arrays in any memory order
# (elementwise or per-channel NumPy code; flatten's reshape makes one small copy): they take values
# stored batch last as they are.
REFERENCE_LAYOUTS = {"batch_norm": ANY_ORDER, "avg_pool2d": ANY_ORDER, "flatten": ANY_ORDER}
# What an implementation that takes batch-last values needs beyond its layout, by op
_LAYOUT_CONDITIONS = {"conv2d": conv_batch_last.columns_fit, "conv2d_act": conv_batch_last.columns_fit}


def takes_batch_last(op: str, avals, out) -> bool:
    """Whether a call of ``op`` on values of these avals (``out``: its first output's) may be handed
    values stored batch last, (C, H, W, N), and gain: one of its implementations (or its reference
    kernel) declares that layout and that implementation's conditions hold. The executor's
    layout pass (``executor/batch_last.py``) asks this instead of naming ops."""
    if REFERENCE_LAYOUTS.get(op) in (BATCH_LAST, ANY_ORDER):
        return True
    if not any(impl.layout in (BATCH_LAST, ANY_ORDER) for impl in IMPLS.get(op, ())):
        return False
    fits = _LAYOUT_CONDITIONS.get(op)
    return fits is None or fits(avals, out)


def reference(op) -> Choice:
    """The choice of an op the kernels layer has nothing for: its reference kernel."""
    return Choice(Impl(op.name, reference_label(op), op.bind, "the op's one kernel"))


def choose(op, xp, *arrays, out=None, **params) -> Choice:
    """What runs for ``op`` (an ``OpDef`` or its name) called on these backend arrays (written into
    ``out`` when given), by the tuning table in force.

    >>> import numpy as np
    >>> x, w = np.ones((8, 64, 16, 16), np.float32), np.ones((64, 64, 3, 3), np.float32)
    >>> choose("conv2d", np, x, w, padding=(1, 1))
    conv2d[winograd4, kernel kept]
    """
    op = registry.get(op) if isinstance(op, str) else op
    chooser = _CHOOSERS.get(op.name)
    choice = None if chooser is None else chooser(xp, *arrays, out=out, **op.make_params(params))
    return reference(op) if choice is None else choice


def binds(op) -> bool:
    """Whether ``bind`` has a binder for ``op`` (an ``OpDef`` or its name) whose runner is installed."""
    name = op if isinstance(op, str) else op.name
    return name in _BINDERS and registry.get(name).runner is _RUNNERS.get(name)


def bind(op, xp, *arrays, out=None, **params) -> Bound | None:
    """The choice ``choose`` makes for ``op`` called on these backend arrays (into ``out``), made once
    for a compiled step: a ``Bound(choice, fn)`` whose ``fn(*arrays, out=None)`` runs that choice
    directly. It stays right while the step's avals, its values' memory orders, the tuning table and
    the thread count do (a compiled program binds again when the table or thread count changes);
    facts only a call shows (a weight kept by its version) are checked by ``fn`` where they count.
    None where the op has no binder or its binder declines: the step calls the op's runner.

    >>> import numpy as np
    >>> x, w = np.ones((1, 144), np.float32), np.ones((32, 144), np.float32)
    >>> b = bind("dense", np, x, w, out=np.empty((1, 32), np.float32))
    >>> b.choice, float(b.fn(x, w, out=np.empty((1, 32), np.float32))[0, 0])
    (dense[gemv], 144.0)
    """
    op = registry.get(op) if isinstance(op, str) else op
    binder = _BINDERS.get(op.name)
    return None if binder is None else binder(xp, *arrays, out=out, **op.make_params(params))


def install() -> None:
    """Route every op that has implementations here through its runner (idempotent). An op
    registered above this layer (``foreach``, in ``executor/control_flow.py``) is skipped until it
    exists: its module calls ``install()`` again once it has registered it."""
    for name, runner in _RUNNERS.items():
        try:
            op = registry.get(name)
        except KeyError:
            continue
        op.set_runner(runner)


install()
