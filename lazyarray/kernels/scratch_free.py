"""Which compiled steps read no scratch once bound, so that the memory plan gives them no workspace.

A step whose op declares a workspace (``OpDef.workspace``: im2col's columns, a padded input) gets a
planned buffer lent as its kernel's scratch (``ops/scratch.py``). A binder that binds a kernel which
never takes scratch says so (``Bound.scratch`` False) and the step does not lend it; this module
answers the same before any run, for the planner (``executor/program.py``): ``reads_no_scratch`` asks
the op's chooser on arrays like the step's (stand-ins of its avals) and whether its binder binds that
choice once with ``scratch`` False. Where a run's arrays choose otherwise (an input stored in another
order, another tuning table) a kernel that takes scratch takes the calling thread's own arena: the
same values, bytes outside the plan.
"""
from __future__ import annotations

import numpy as np

from ..ops import conv
from ..tuning_table import current
from . import conv1d, conv2d, conv_act


def _conv2d(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None) -> bool:
    """``bind_conv2d`` binds a scratch-free choice once (``direct``, ``pointwise``, ``depthwise``, no
    fact checked per call; ``conv1d``, whose loops allocate their own)."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return False
    geometry = conv.geometry(stride, padding, dilation) + (groups,)
    choice = conv2d.choose_conv2d(xp, x, weight, out, *geometry)
    return choice.impl is conv2d.CONV1D or \
        choice.impl in conv2d.NO_SCRATCH and not any(conv2d.per_call_facts(xp, x, weight, groups, current()))


def _conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, act="relu",
                alpha=0.2, beta=0.5, out=None) -> bool:
    """``bind_conv2d_act`` binds ``loop``, ``fused`` or ``conv1d`` (their loops read none), or its convolution as
    ``_conv2d`` says (the activation's pass or loop reads none)."""
    choice = conv_act.choose_conv2d_act(xp, x, weight, bias, stride, padding, dilation, groups, act, alpha, beta, out)
    return choice.impl in (conv_act.LOOP, conv_act.FUSED, conv1d.CONV1D_ACT) or \
        _conv2d(xp, x, weight, bias, stride, padding, dilation, groups, out)


def _always(xp, *arrays, out=None, **params) -> bool:
    """No max pool binding takes scratch (``pool.bind_max_pool2d``: its padded values read in place)."""
    return True


_RULES = {"conv2d": _conv2d, "conv2d_act": _conv2d_act, "max_pool2d": _always, "max_pool2d_relu": _always}


def reads_no_scratch(op, xp, *arrays, out=None, **params) -> bool:
    """Whether ``kernels.bind`` of ``op`` (an ``OpDef``) on arrays like these (into ``out``) binds a
    kernel that never takes scratch (``Bound.scratch`` False), by the tuning table in force; False
    where this module has no rule for the op."""
    rule = _RULES.get(op.name)
    return rule is not None and rule(xp, *arrays, out=out, **op.make_params(params))
