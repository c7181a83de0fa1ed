"""relu's compiled step on flat views: ``relu[compiled, flat]``, the compiled loop called with as little
Python around it as a C-ordered step allows.

``relu[compiled]``'s runner (``elementwise.compiled_elementwise``) serves every call: it finds each array's
memory order, checks every layout against the first, builds its flat views in a list and looks for
memory shared with the inputs. On a small activation that is most of the step: T5's (8, 7, 128) float32
relu ran about 10 us of Python around a loop of 2.5-3 us (one thread, the shared development machine).
A compiled step's avals, memory orders, tuning table and thread count fix the choice (``kernels.bind``);
where they make it ``compiled`` of a C-ordered float32/float64 array, ``bind_relu``'s function asks only
what a call can still change: whether ``x`` is C-ordered, whether ``out`` is ``x`` itself (the planner's
in place pair: ``relu_in_place``) or a C-ordered array of its shape sharing no memory with it
(``relu_flat``), and whether the compiled loop is there (None in a program's first run: the loops are
``jit.tiered``). Anything else runs the bound ``compiled`` choice and its fallbacks, as before. T5's relu
in place: 10.4 -> 5.0 us a call (CPU time, one thread, same process); into another buffer ``may_share_memory``
adds about 1.5 us.

Values: the same loops on the same flat views as ``compiled``'s runner, so ``maximum``'s bit for bit.
Switch: the tuning table's ``relu_flat_step`` (off: ``relu[compiled]`` as before).
"""
from __future__ import annotations

import numpy as np

from .. import jit
from .impl import Choice
from .runner import Bound

FLAT = "flat"  # the note explain() shows: relu[compiled, flat]


def applies(choice: Choice, compiled, x, out, t) -> bool:
    """Whether a step bound to ``choice`` (``compiled`` the relu ``Impl`` it must be) of these arrays
    (``t`` the tuning table) takes the flat call: the table's ``relu_flat_step`` on, NumPy arrays of
    one float dtype, stored in C order (the flat views are then reshapes)."""
    return t.relu_flat_step and choice.impl is compiled and x.__class__ is np.ndarray and x.flags.c_contiguous \
        and (out is None or (out.__class__ is np.ndarray and out.dtype == x.dtype and out.flags.c_contiguous))


def flat_fn(kernels: tuple, dtype, general):
    """``fn(x, out=None)``: ``kernels[1](flat x, 0, 1)`` where ``out`` is ``x``, ``kernels[0](flat x, flat
    out, 0, 1)`` where ``out`` is another C-ordered array of ``x``'s shape sharing no memory with it, both
    where ``x`` is C-ordered and the compiled loop is there; else ``general(x, out=out)`` (the bound
    choice with its fallbacks)."""
    into, in_place = kernels[0], kernels[1]
    zero, one = np.dtype(dtype).type(0), np.dtype(dtype).type(1)

    def fn(x, out=None):
        if out is not None and x.flags.c_contiguous:
            if out is x:
                k = jit.compiled(in_place)
                if k is not None:
                    k(x.reshape(-1), zero, one)
                    return out
            elif out.shape == x.shape and out.flags.c_contiguous and not np.may_share_memory(out, x):
                k = jit.compiled(into)
                if k is not None:
                    k(x.reshape(-1), out.reshape(-1), zero, one)
                    return out
        return general(x, out=out)

    return fn


def bound(choice: Choice, kernels: tuple, x, general) -> Bound:
    """The step's ``Bound``: ``choice`` (``relu[compiled, flat]``) running ``flat_fn`` for ``x``'s dtype."""
    return Bound(choice, flat_fn(kernels, x.dtype, general))
