"""Structural blocks: ``Identity`` and ``Residual`` (``body(x) + shortcut(x)``), the skip
connection of residual networks."""
from __future__ import annotations

from .block import Block, HybridBlock


class Identity(HybridBlock):
    """Returns its input unchanged (a placeholder where a layer is optional, as Gluon's).

    >>> import lazyarray as la
    >>> la.blocks.Identity()(la.array([1.0, 2.0])).asnumpy()
    array([1., 2.], dtype=float32)
    """

    def forward(self, x):
        return x

    def __repr__(self) -> str:
        return "Identity()"


class Residual(HybridBlock):
    """A skip connection: ``body(x) + shortcut(x)``; ``shortcut=None`` adds ``x`` itself.

    ``body`` and ``shortcut`` are blocks (children ``body`` and ``shortcut``, so their
    parameters are named ``body.*`` and ``shortcut.*``). A shortcut that changes the shape (a
    strided 1x1 ``Conv2D`` + ``BatchNorm``) must give ``body``'s output shape. No activation is
    applied after the sum: wrap it, e.g. ``HybridSequential().add(Residual(...), Activation("relu"))``.

    >>> import lazyarray as la
    >>> block = la.blocks.Residual(la.blocks.Dense(3, in_units=3))
    >>> block.initialize()
    >>> x = la.ones((2, 3))
    >>> bool((abs((block(x) - block.body(x)).asnumpy() - 1) < 1e-6).all())  # body(x) + x, in float32
    True
    """

    def __init__(self, body: Block, shortcut: Block | None = None):
        super().__init__()
        self.body = body
        self.shortcut = Identity() if shortcut is None else shortcut

    def forward(self, x):
        return self.body(x) + self.shortcut(x)
