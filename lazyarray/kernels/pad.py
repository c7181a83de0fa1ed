"""pad's implementations: ``fill_copy`` for the constant mode, and the reference (``numpy.pad``).

``numpy.pad`` is Python code that pads axis by axis with views and checks (10-35 us on the
development machine for a (1, 16, 1, 11) array: the AveragePool of a torch-exported 1-D net pads
twice per call). A constant pad is an output filled with the constant and the input copied into its
interior: ``fill_copy`` writes exactly that (into the planned buffer where it is C-ordered and of the
output's shape and dtype), the same values bit for bit: the copy is exact, and the fill is the
constant cast to the float dtype as ``numpy.pad`` casts it (integer dtypes keep ``numpy.pad``: its
cast of an out-of-range constant is not ``fill``'s).
"""
from __future__ import annotations

import numpy as np

from ..ops import registry
from ..ops.shape import pad_pairs
from .impl import Choice, Impl
from .runner import fixed_binder, ran


def _reference(xp, x, pad_width, mode="constant", constant_values=0.0, out=None):
    return registry.get("pad").kernel(xp, x, pad_width, mode=mode, constant_values=constant_values)


def pad_fill_copy(xp, x, pad_width, mode="constant", constant_values=0.0, out=None):
    """The constant pad as a fill and one copy (None where it does not apply: the reference runs)."""
    if xp is not np or mode != "constant" or x.ndim == 0 or x.dtype.kind != "f":
        return None
    pairs = pad_pairs(pad_width, x.ndim)
    shape = tuple(d + b + a for d, (b, a) in zip(x.shape, pairs))
    into = out is not None and out.shape == shape and out.dtype == x.dtype and out.flags.c_contiguous \
        and not np.may_share_memory(out, x)
    y = out if into else np.empty(shape, x.dtype)
    if y.size != x.size:
        y.fill(constant_values)  # (cast to the dtype as numpy.pad casts it)
    y[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pairs))] = x
    return y


REFERENCE = Impl("pad", "reference", _reference, "numpy.pad (every mode, every dtype)")
FILL_COPY = Impl("pad", "fill_copy", pad_fill_copy,
                 "mode='constant', a NumPy float array of at least one axis: the output filled with the "
                 "constant, the input copied into its interior", fallback=REFERENCE)
_CHOICES = {impl: Choice(impl) for impl in (FILL_COPY, REFERENCE)}


def choose_pad(xp, x, pad_width=((0, 0),), mode="constant", constant_values=0.0, out=None) -> Choice:
    """What runs pad of ``x``."""
    fits = xp is np and mode == "constant" and x.ndim > 0 and x.dtype.kind == "f"
    return _CHOICES[FILL_COPY if fits else REFERENCE]


def run_pad(xp, x, pad_width, mode="constant", constant_values=0.0, out=None):
    """pad by the implementation ``choose_pad`` picks (the op's kernel in every call)."""
    choice = choose_pad(xp, x, pad_width, mode, constant_values)
    args = (xp, x, pad_width, mode, constant_values, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (x,))


IMPLS = {"pad": (FILL_COPY, REFERENCE)}
RUNNERS = {"pad": run_pad}
CHOOSERS = {"pad": choose_pad}
BINDERS = {"pad": fixed_binder(choose_pad, _CHOICES, ("pad_width", "mode", "constant_values"))}
