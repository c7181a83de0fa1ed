"""``Impl``: one named way to run an op on this machine, and ``Choice``: the one a call takes.

An op's meaning (params, shape rules, reference kernel, gradient) lives in ``ops/``; an
``Impl`` is a faster way to compute the same values under conditions it states in words
(``when``), with the resources it states (``threads``, ``layout``, ``workspace``). The op's
chooser (``kernels/conv2d.py``'s ``choose_conv2d``, ...) picks one per call from the call's
facts and the tuning table; ``explain()`` and ``la.profile()`` show the name it picked.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ``Impl.layout`` values: made for values stored batch last, (C, H, W, N) in memory (the executor's
# ``batch_last.py`` plans them), or walking its arrays in whatever memory order they have
BATCH_LAST = "batch last"
ANY_ORDER = "any order"

@dataclass(frozen=True, eq=False)
class Impl:
    """A named implementation of ``op``.

    ``run(xp, *arrays, **params)`` computes the op's outputs (``out=`` honoured as the op's
    reference kernel honours it), or returns None where something only the run can see rules it
    out (numba missing): ``fallback`` then runs. ``when``: the conditions, in words.
    ``threads``: it spreads over ``la.set_num_threads`` threads. ``layout``: the memory order of
    its inputs and outputs it is made for (``BATCH_LAST``: (C, H, W, N); ``ANY_ORDER``: whatever
    order they are stored in, batch last included). ``workspace(*arrays,
    **params)``: scratch bytes it uses beyond its outputs (from the per-thread arena).
    """

    op: str
    name: str
    run: Callable
    when: str
    threads: bool = False
    layout: str = ""
    fallback: Any = None
    workspace: Callable | None = None

    def __repr__(self) -> str:
        return f"<Impl {self.op}[{self.name}]>"


@dataclass(frozen=True, eq=False)
class Choice:
    """What runs for one call: the ``impl`` and the notes that qualify it (``"kernel kept"``,
    ``"2 threads"``), shown as ``conv2d[winograd4, 2 threads, kernel kept]``."""

    impl: Impl
    notes: tuple = ()

    def label(self) -> str:
        return ", ".join((self.impl.name,) + tuple(self.notes))

    def __repr__(self) -> str:
        return f"{self.impl.op}[{self.label()}]"
