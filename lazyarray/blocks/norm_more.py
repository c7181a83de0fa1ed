"""Per-sample normalization layers: ``GroupNorm`` and ``InstanceNorm`` (Gluon's arguments).

Each normalizes every sample with its own statistics (no running averages, the same in training
and inference): ``GroupNorm`` over each group of channels with the spatial axes, ``InstanceNorm``
over the spatial axes of each channel. Both are written with ``mean`` / ``square`` / ``sqrt`` (biased
variance, as Gluon and PyTorch), then scaled and shifted per channel by ``gamma`` and ``beta``, shape
``(in_channels,)`` (MXNet 2 and PyTorch; MXNet 1.x's GroupNorm had one per group).
"""
from __future__ import annotations

import numpy as np

from ..args import int_arg, number_arg
from ..errors import ShapeError
from .block import HybridBlock
from .conv import flag
from .nn import F
from .parameter import Parameter


def _normalized(x, axes: tuple[int, ...], eps: float):
    mean = F.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    return centred / F.sqrt(F.mean(F.square(centred), axis=axes, keepdims=True) + eps)


class _PerChannelAffine(HybridBlock):
    """``gamma`` / ``beta`` of ``in_channels`` (0: learned at the first call) applied along ``axis``."""

    def __init__(self, layer, axis, epsilon, center, scale, beta_initializer, gamma_initializer, in_channels):
        super().__init__()
        self.axis = int_arg(axis, layer, "axis")
        self.epsilon = number_arg(epsilon, layer, "epsilon", lo=0, lo_open=True)
        self.center, self.scale = flag(center, "center", layer), flag(scale, "scale", layer)
        c = int_arg(in_channels, layer, "in_channels", lo=0)
        self.gamma = Parameter("gamma", shape=(c,), init=gamma_initializer, grad_req="write" if self.scale else "null")
        self.beta = Parameter("beta", shape=(c,), init=beta_initializer, grad_req="write" if self.center else "null")

    def infer_shape(self, x) -> None:
        for p in (self.gamma, self.beta):
            p.shape = (x.shape[self.axis],)

    def _affine(self, y):
        shape = [1] * y.ndim
        shape[self.axis % y.ndim] = -1
        return y * F.reshape(self.gamma.data(), shape=tuple(shape)) + F.reshape(self.beta.data(), shape=tuple(shape))


class GroupNorm(_PerChannelAffine):
    """Normalize each sample over groups of channels: the ``C`` channels of an ``(N, C, ...)`` input
    are split into ``num_groups`` groups, each normalized over its channels and the spatial axes
    (Wu & He 2018). ``num_groups=1`` is LayerNorm over ``(C, ...)``; ``num_groups=C`` InstanceNorm.

    >>> import lazyarray as la
    >>> norm = la.blocks.GroupNorm(2, in_channels=4)
    >>> norm.initialize()
    >>> norm(la.ones((2, 4, 3, 3))).shape
    (2, 4, 3, 3)
    """

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels: int = 0):
        super().__init__("GroupNorm", 1, epsilon, center, scale, beta_initializer, gamma_initializer, in_channels)
        self.num_groups = int_arg(num_groups, "GroupNorm", "num_groups", lo=1)
        if in_channels and in_channels % self.num_groups:
            raise ShapeError(f"GroupNorm: in_channels={in_channels} is not divisible by num_groups={self.num_groups}")

    def forward(self, x):
        if x.ndim < 2 or x.shape[1] % self.num_groups:
            raise ShapeError(f"GroupNorm: the input {tuple(x.shape)} needs a channel axis 1 divisible by "
                             f"num_groups={self.num_groups}")
        rest = int(np.prod(x.shape[1:])) // self.num_groups
        y = _normalized(F.reshape(x, shape=(-1, self.num_groups, rest)), (2,), self.epsilon)
        return self._affine(F.reshape(y, shape=(-1,) + tuple(x.shape[1:])))

    def __repr__(self) -> str:
        return f"GroupNorm(num_groups={self.num_groups}, eps={self.epsilon}, in_channels={self.gamma.shape[0] or None})"


class InstanceNorm(_PerChannelAffine):
    """Normalize each channel (``axis``) of each sample over the other axes but the batch
    (Ulyanov et al. 2016). Gluon's defaults: ``center=True``, ``scale=False``.

    >>> import lazyarray as la
    >>> norm = la.blocks.InstanceNorm(in_channels=3)
    >>> norm.initialize()
    >>> norm(la.ones((2, 3, 5))).shape
    (2, 3, 5)
    """

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = False,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels: int = 0):
        super().__init__("InstanceNorm", axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                         in_channels)

    def forward(self, x):
        axis = self.axis % x.ndim if -x.ndim <= self.axis < x.ndim else None
        if x.ndim < 3 or axis in (None, 0):
            raise ShapeError(f"InstanceNorm: the input {tuple(x.shape)} needs a batch axis, the channel axis "
                             f"{self.axis} (not 0) and at least one axis to normalize over")
        return self._affine(_normalized(x, tuple(i for i in range(1, x.ndim) if i != axis), self.epsilon))

    def __repr__(self) -> str:
        return f"InstanceNorm(axis={self.axis}, eps={self.epsilon}, in_channels={self.gamma.shape[0] or None})"
