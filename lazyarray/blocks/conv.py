"""Convolution layers on NCHW data: ``Conv2D`` and ``MaxPool2D``."""
from __future__ import annotations

from ..errors import ParamValueError
from .block import HybridBlock
from .nn import F, activation_fn
from .parameter import Parameter


def _pair(v, name: str, layer: str) -> tuple[int, int]:
    t = (v, v) if isinstance(v, int) else tuple(v)
    if len(t) != 2 or not all(isinstance(d, int) for d in t):
        raise ParamValueError(f"{layer}: {name} must be an int or a pair of ints, got {v!r}")
    return t


class Conv2D(HybridBlock):
    """2-D convolution: ``channels`` filters of ``kernel_size`` over NCHW input.

    The weight is ``(channels, in_channels, kh, kw)``; ``in_channels=0`` learns it at the
    first call.

    >>> import lazyarray as la
    >>> conv = la.blocks.Conv2D(8, 3, padding=1, activation="relu")
    >>> conv.initialize()
    >>> conv(la.ones((2, 3, 16, 16))).shape
    (2, 8, 16, 16)
    """

    def __init__(self, channels: int, kernel_size, strides=(1, 1), padding=(0, 0), activation=None,
                 use_bias: bool = True, in_channels: int = 0, layout: str = "NCHW", dtype="float32",
                 weight_initializer=None, bias_initializer="zeros"):
        super().__init__()
        if layout != "NCHW":
            raise ParamValueError(f"Conv2D: only layout='NCHW' is supported, got {layout!r}; "
                                  "transpose the input with la.transpose(x, (0, 3, 1, 2))")
        self.channels = channels
        self.kernel = _pair(kernel_size, "kernel_size", "Conv2D")
        self.strides = _pair(strides, "strides", "Conv2D")
        self.padding = _pair(padding, "padding", "Conv2D")
        self.act_name = activation
        self._act = activation_fn(activation)
        self.weight = Parameter("weight", shape=(channels, in_channels) + self.kernel, dtype=dtype,
                                init=weight_initializer)
        self.bias = Parameter("bias", shape=(channels,), dtype=dtype, init=bias_initializer) if use_bias else None

    def infer_shape(self, x) -> None:
        self.weight.shape = (self.channels, x.shape[1]) + self.kernel

    def forward(self, x):
        y = F.conv2d(x, self.weight.data(), None if self.bias is None else self.bias.data(),
                     stride=self.strides, padding=self.padding)
        return y if self._act is None else self._act(y)

    def __repr__(self) -> str:
        c_in = self.weight.shape[1] or None
        return (f"Conv2D({c_in} -> {self.channels}, kernel_size={self.kernel}, stride={self.strides}, "
                f"padding={self.padding}, {self.act_name or 'linear'})")


class MaxPool2D(HybridBlock):
    """Maximum over ``pool_size`` windows of NCHW input; ``strides=None`` = ``pool_size``."""

    def __init__(self, pool_size=(2, 2), strides=None, padding=0, layout: str = "NCHW"):
        super().__init__()
        if layout != "NCHW":
            raise ParamValueError(f"MaxPool2D: only layout='NCHW' is supported, got {layout!r}")
        self.pool_size = _pair(pool_size, "pool_size", "MaxPool2D")
        self.strides = self.pool_size if strides is None else _pair(strides, "strides", "MaxPool2D")
        self.padding = _pair(padding, "padding", "MaxPool2D")

    def forward(self, x):
        return F.max_pool2d(x, kernel=self.pool_size, stride=self.strides, padding=self.padding)

    def __repr__(self) -> str:
        return f"MaxPool2D(size={self.pool_size}, stride={self.strides}, padding={self.padding})"
