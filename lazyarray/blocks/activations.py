"""Activation layers beyond ``Activation(name)``: ``PReLU`` (a learnable negative slope), ``ELU``,
``SELU``, ``SiLU`` and ``Swish`` (Gluon's names and defaults), each a composition of registered
elementwise ops (``relu``, ``minimum``, ``exp``, ``sigmoid``), so gradients and export come from those.
These are ops both exporters write (``la.mxnet.export`` has no writer for ``where`` or ``expm1``).

The ELU's exponential is taken of ``minimum(x, 0)``: never ``inf`` for a large positive ``x`` (whose
gradient would be ``inf * 0``). ``exp(m) - 1`` rather than ``expm1``: an absolute error of one
rounding near 0, no relative one that matters once added to ``relu(x)``.
"""
from __future__ import annotations

from .. import init as _init
from ..args import int_arg, number_arg
from .block import HybridBlock
from .nn import F
from .parameter import Parameter

# SELU's constants (Klambauer et al. 2017), as Gluon and PyTorch
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _negative_part(x, alpha: float):
    """``alpha * (exp(x) - 1)`` for ``x <= 0``, ``x`` above (the ELU)."""
    return F.relu(x) + (F.exp(F.minimum(x, 0.0)) - 1.0) * alpha


class PReLU(HybridBlock):
    """``x`` where positive, ``alpha * x`` elsewhere, with ``alpha`` learned: one slope
    (``in_channels=1``, Gluon's default) or one per channel of axis 1. ``alpha`` starts at 0.25.

    >>> import lazyarray as la
    >>> act = la.blocks.PReLU()
    >>> act.initialize()
    >>> act(la.array([-2.0, 3.0])).asnumpy()
    array([-0.5,  3. ], dtype=float32)
    """

    def __init__(self, alpha_initializer=None, in_channels: int = 1):
        super().__init__()
        self.in_channels = int_arg(in_channels, "PReLU", "in_channels", lo=1)
        init = _init.Constant(0.25) if alpha_initializer is None else alpha_initializer
        self.alpha = Parameter("alpha", shape=(self.in_channels,), init=init)

    def forward(self, x):
        alpha = self.alpha.data()
        if self.in_channels > 1:  # one slope per channel of axis 1
            alpha = F.reshape(alpha, shape=(1, -1) + (1,) * (x.ndim - 2))
        return F.relu(x) - F.relu(-x) * alpha

    def __repr__(self) -> str:
        return f"PReLU(in_channels={self.in_channels})"


class ELU(HybridBlock):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere (Clevert et al.; Gluon's ``ELU``).

    >>> import lazyarray as la
    >>> la.blocks.ELU()(la.array([0.0, 1.0])).asnumpy()
    array([0., 1.], dtype=float32)
    """

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = number_arg(alpha, "ELU", "alpha")

    def forward(self, x):
        return _negative_part(x, self.alpha)

    def __repr__(self) -> str:
        return f"ELU(alpha={self.alpha})"


class SELU(HybridBlock):
    """``scale * ELU(x, alpha)`` with the self-normalizing constants ``SELU_ALPHA``, ``SELU_SCALE``.

    >>> import lazyarray as la
    >>> la.blocks.SELU()(la.array([1.0])).asnumpy()
    array([1.050701], dtype=float32)
    """

    def forward(self, x):
        return _negative_part(x, SELU_ALPHA) * SELU_SCALE

    def __repr__(self) -> str:
        return "SELU()"


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)`` (Ramachandran et al.; Gluon's ``Swish``); ``beta=1`` is ``SiLU``.

    >>> import lazyarray as la
    >>> la.blocks.Swish(2.0)(la.array([0.0])).asnumpy()
    array([0.], dtype=float32)
    """

    def __init__(self, beta: float = 1.0):
        super().__init__()
        self.beta = number_arg(beta, "Swish", "beta")

    def forward(self, x):
        return x * F.sigmoid(x if self.beta == 1.0 else x * self.beta)

    def __repr__(self) -> str:
        return f"Swish(beta={self.beta})"


class SiLU(Swish):
    """``x * sigmoid(x)``, the sigmoid-weighted linear unit (``Swish(beta=1)``).

    >>> import lazyarray as la
    >>> la.blocks.SiLU()(la.array([0.0])).asnumpy()
    array([0.], dtype=float32)
    """

    def __init__(self):
        super().__init__(1.0)

    def __repr__(self) -> str:
        return "SiLU()"
