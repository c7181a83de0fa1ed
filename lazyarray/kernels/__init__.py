"""The kernels layer: how this machine runs an op, as named implementations and one chooser per op.

``ops/`` defines what each op means and a reference kernel. Here an op with faster ways to run
declares them as ``Impl`` objects (``IMPLS``) and a runner that asks its chooser and runs the
choice; ``install()`` routes the op's kernel through that runner, so eager calls and compiled
steps take the same path. ``choose(op, xp, *arrays, **params)`` answers "what runs for this
call" for any op; ``la.profile()`` (``profile.py``) records what ran and how long.
``takes_batch_last(op, avals, out)`` answers the executor's layout pass from the implementations'
declared ``layout``.
"""
from __future__ import annotations

from ..ops import registry
from . import (
    attention,
    conv2d,
    conv2d_grad,
    conv_act,
    conv_batch_last,
    dense,
    elementwise,
    foreach,
    fused,
    gelu,
    layer_norm,
    matmul,
    pad,
    pool,
    softmax,
)
from .impl import ANY_ORDER, BATCH_LAST, Choice, Impl
from .profile import Event, Profile, profile, reference_label

__all__ = ["IMPLS", "Choice", "Event", "Impl", "Profile", "choose", "install", "profile", "reference",
           "takes_batch_last"]

# op name -> its implementations, best first; its runner; the function that picks one for a call's
# arrays (None where the op's reference kernel runs)
_FAMILIES = (attention, conv2d_grad, conv_act, elementwise, gelu, layer_norm, pad, pool,
             softmax)  # (modules declaring IMPLS, RUNNERS, CHOOSERS)
IMPLS = {"conv2d": conv2d.IMPLS, "dense": dense.IMPLS, "foreach": foreach.IMPLS, "fused": fused.IMPLS,
         "matmul": matmul.IMPLS, **{k: v for f in _FAMILIES for k, v in f.IMPLS.items()}}
# (fused: the op is registered above this layer, by executor/fusion.py, whose kernel calls fused.run_fused)
_RUNNERS = {"conv2d": conv2d.run_conv2d, "dense": dense.run_dense, "foreach": foreach.run_foreach,
            "matmul": matmul.run_matmul, **{k: v for f in _FAMILIES for k, v in f.RUNNERS.items()}}
_CHOOSERS = {"conv2d": conv2d.choose_for_call, "dense": dense.choose_for_call, "foreach": foreach.choose_foreach,
             "fused": fused.choose_for_call, "matmul": matmul.choose_matmul,
             **{k: v for f in _FAMILIES for k, v in f.CHOOSERS.items()}}


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
