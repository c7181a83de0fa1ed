"""Containers: ``Sequential`` / ``HybridSequential`` (children one after the other) and
``Concatenate`` / ``HybridConcatenate`` (every child on the input, outputs joined)."""
from __future__ import annotations

from typing import TypeVar

from ..errors import BlockError
from .block import Block, HybridBlock
from .nn import F

_B = TypeVar("_B", bound=Block)  # add returns the container it was called on (HybridSequential too)


class Sequential(Block):
    """Children run one after the other: ``Sequential().add(a, b)(x) == b(a(x))``."""

    def add(self: _B, *blocks: Block) -> _B:
        for b in blocks:
            self.register_child(b)
        return self

    def forward(self, x):
        for child in self._children.values():
            x = child(x)
        return x

    def __getitem__(self, i):
        items = list(self._children.values())
        if isinstance(i, slice):
            out = type(self)()
            out.add(*items[i])
            return out
        return items[i]

    def __len__(self) -> int:
        return len(self._children)


class HybridSequential(HybridBlock):
    """``Sequential`` that can be hybridized as a whole (one graph for all children)."""

    add = Sequential.add
    forward = Sequential.forward
    __getitem__ = Sequential.__getitem__
    __len__ = Sequential.__len__


class Concatenate(Sequential):
    """Every child gets the same input; their outputs are concatenated along ``axis``.

    >>> import lazyarray as la
    >>> net = la.blocks.Concatenate(axis=-1)
    >>> _ = net.add(la.blocks.Dense(2, in_units=3), la.blocks.Dense(4, in_units=3)); net.initialize()
    >>> net(la.ones((5, 3))).shape
    (5, 6)
    """

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        outs = [child(x) for child in self._children.values()]
        if not outs:
            raise BlockError(f"{type(self).__name__} has no children to concatenate; add some with .add(...)")
        return F.concatenate(outs, axis=self.axis)


class HybridConcatenate(HybridSequential):
    """``Concatenate`` that can be hybridized as a whole."""

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    forward = Concatenate.forward


# -- parameter files -----------------------------------------------------------------------------
