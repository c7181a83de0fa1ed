"""Convolution and pooling layers on NCHW data: ``Conv2D``, ``Conv2DTranspose``, ``MaxPool2D``,
``AvgPool2D``, ``GlobalMaxPool2D``, ``GlobalAvgPool2D``. Semantics and argument names follow
MXNet Gluon (``strides``, ``pool_size``, ``ceil_mode``, ``count_include_pad``)."""
from __future__ import annotations

from ..errors import ParamValueError
from .block import HybridBlock
from .nn import F, activation_fn
from .parameter import Parameter


def _pair(v, name: str, layer: str) -> tuple[int, int]:
    t = (v, v) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else None
    if t is None or len(t) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) for d in t):
        raise ParamValueError(f"{layer}: {name} must be an int or a pair of ints, got {v!r}")
    return t


def _nchw_only(layout: str, layer: str) -> None:
    if layout != "NCHW":
        raise ParamValueError(f"{layer}: only layout='NCHW' is supported, got {layout!r}; "
                              "transpose the input with la.transpose(x, (0, 3, 1, 2))")


def _check_groups(groups, channels: int, in_channels: int, layer: str) -> int:
    if not isinstance(groups, int) or groups < 1:
        raise ParamValueError(f"{layer}: groups must be an int >= 1, got {groups!r}")
    for what, n in (("channels", channels), ("in_channels", in_channels)):
        if n and n % groups:
            raise ParamValueError(f"{layer}: {what}={n} is not divisible by groups={groups}; "
                                  "use a multiple of groups")
    return groups


class _Conv(HybridBlock):
    """What ``Conv2D`` and ``Conv2DTranspose`` share: geometry, activation, bias, repr."""

    def __init__(self, layer, channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                 in_channels, layout, dtype, weight_shape, weight_initializer, bias_initializer):
        super().__init__()
        _nchw_only(layout, layer)
        self.channels, self.in_channels = channels, in_channels
        self.kernel = _pair(kernel_size, "kernel_size", layer)
        self.strides = _pair(strides, "strides", layer)
        self.padding = _pair(padding, "padding", layer)
        self.dilation = _pair(dilation, "dilation", layer)
        self.groups = _check_groups(groups, channels, in_channels, layer)
        self.act_name = activation
        self._act = activation_fn(activation)
        self.weight = Parameter("weight", shape=weight_shape, dtype=dtype, init=weight_initializer)
        self.bias = Parameter("bias", shape=(channels,), dtype=dtype, init=bias_initializer) if use_bias else None

    def _args(self, x):
        w = self.weight.data()
        return (x, w) if self.bias is None else (x, w, self.bias.data())

    def _activate(self, y):
        return y if self._act is None else self._act(y)

    def _describe(self, c_in) -> str:
        extra = "".join(f", {k}={v}" for k, v, default in (("dilation", self.dilation, (1, 1)),
                                                           ("groups", self.groups, 1)) if v != default)
        return (f"{type(self).__name__}({c_in or None} -> {self.channels}, kernel_size={self.kernel}, "
                f"stride={self.strides}, padding={self.padding}{extra}, {self.act_name or 'linear'})")


class Conv2D(_Conv):
    """2-D convolution: ``channels`` filters of ``kernel_size`` over NCHW input.

    The weight is ``(channels, in_channels // groups, kh, kw)``; ``in_channels=0`` learns it at
    the first call. ``groups`` splits the channels into independent convolutions
    (``groups == in_channels``: depthwise); ``dilation`` spaces the kernel taps.

    >>> import lazyarray as la
    >>> conv = la.blocks.Conv2D(8, 3, padding=1, activation="relu")
    >>> conv.initialize()
    >>> conv(la.ones((2, 3, 16, 16))).shape
    (2, 8, 16, 16)
    >>> depthwise = la.blocks.Conv2D(4, 3, padding=2, dilation=2, groups=4, in_channels=4)
    >>> depthwise.initialize()
    >>> depthwise(la.ones((1, 4, 8, 8))).shape, depthwise.weight.shape
    ((1, 4, 8, 8), (4, 1, 3, 3))
    """

    def __init__(self, channels: int, kernel_size, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                 groups: int = 1, activation=None, use_bias: bool = True, in_channels: int = 0,
                 layout: str = "NCHW", dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        kernel = _pair(kernel_size, "kernel_size", "Conv2D")
        groups_ok = groups if isinstance(groups, int) and groups >= 1 else 1
        super().__init__("Conv2D", channels, kernel, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, (channels, in_channels // groups_ok) + kernel,
                         weight_initializer, bias_initializer)

    def infer_shape(self, x) -> None:
        c = x.shape[1]
        if c % self.groups:
            raise ParamValueError(f"Conv2D: input {tuple(x.shape)} has {c} channels, not divisible by "
                                  f"groups={self.groups}")
        self.weight.shape = (self.channels, c // self.groups) + self.kernel

    def forward(self, x):
        return self._activate(F.conv2d(*self._args(x), stride=self.strides, padding=self.padding,
                                       dilation=self.dilation, groups=self.groups))

    def __repr__(self) -> str:
        c_in = self.weight.shape[1] * self.groups
        return self._describe(c_in)


class Conv2DTranspose(_Conv):
    """Transposed 2-D convolution ("deconvolution"): the adjoint of ``Conv2D`` in its input, used
    to upsample. The output size is ``(H - 1) * stride - 2 * padding + dilation * (k - 1) +
    output_padding + 1``. The weight is ``(in_channels, channels // groups, kh, kw)`` as in MXNet
    and PyTorch; ``in_channels=0`` learns it at the first call.

    >>> import lazyarray as la
    >>> up = la.blocks.Conv2DTranspose(4, 3, strides=2, padding=1, output_padding=1)
    >>> up.initialize()
    >>> up(la.ones((2, 8, 5, 5))).shape, up.weight.shape
    ((2, 4, 10, 10), (8, 4, 3, 3))
    """

    def __init__(self, channels: int, kernel_size, strides=(1, 1), padding=(0, 0), output_padding=(0, 0),
                 dilation=(1, 1), groups: int = 1, activation=None, use_bias: bool = True, in_channels: int = 0,
                 layout: str = "NCHW", dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        kernel = _pair(kernel_size, "kernel_size", "Conv2DTranspose")
        groups_ok = groups if isinstance(groups, int) and groups >= 1 else 1
        super().__init__("Conv2DTranspose", channels, kernel, strides, padding, dilation, groups, activation,
                         use_bias, in_channels, layout, dtype, (in_channels, channels // groups_ok) + kernel,
                         weight_initializer, bias_initializer)
        self.output_padding = _pair(output_padding, "output_padding", "Conv2DTranspose")

    def infer_shape(self, x) -> None:
        self.weight.shape = (x.shape[1], self.channels // self.groups) + self.kernel

    def forward(self, x):
        return self._activate(F.conv2d_transpose(*self._args(x), stride=self.strides, padding=self.padding,
                                                 output_padding=self.output_padding, dilation=self.dilation,
                                                 groups=self.groups))

    def __repr__(self) -> str:
        return self._describe(self.weight.shape[0])


class _Pool(HybridBlock):
    def __init__(self, layer, pool_size, strides, padding, ceil_mode, layout):
        super().__init__()
        _nchw_only(layout, layer)
        self.pool_size = _pair(pool_size, "pool_size", layer)
        self.strides = self.pool_size if strides is None else _pair(strides, "strides", layer)
        self.padding = _pair(padding, "padding", layer)
        self.ceil_mode = bool(ceil_mode)

    def _geometry(self) -> dict:
        return {"kernel": self.pool_size, "stride": self.strides, "padding": self.padding,
                "ceil_mode": self.ceil_mode}

    def __repr__(self) -> str:
        ceil = ", ceil_mode=True" if self.ceil_mode else ""
        return f"{type(self).__name__}(size={self.pool_size}, stride={self.strides}, padding={self.padding}{ceil})"


class MaxPool2D(_Pool):
    """Maximum over ``pool_size`` windows of NCHW input; ``strides=None`` = ``pool_size``.

    ``ceil_mode=True`` rounds the output size up (MXNet's ``pooling_convention="full"``): the
    last windows are clipped to the padded input.

    >>> import lazyarray as la
    >>> la.blocks.MaxPool2D(3, 2, ceil_mode=True)(la.ones((1, 2, 6, 6))).shape
    (1, 2, 3, 3)
    """

    def __init__(self, pool_size=(2, 2), strides=None, padding=0, ceil_mode: bool = False, layout: str = "NCHW"):
        super().__init__("MaxPool2D", pool_size, strides, padding, ceil_mode, layout)

    def forward(self, x):
        return F.max_pool2d(x, **self._geometry())


class AvgPool2D(_Pool):
    """Mean over ``pool_size`` windows of NCHW input; ``strides=None`` = ``pool_size``.

    ``count_include_pad=True`` (MXNet's default) divides by the window size including zero
    padding; ``False`` by the input pixels the window covers. ``ceil_mode`` as ``MaxPool2D``.

    >>> import lazyarray as la
    >>> pool = la.blocks.AvgPool2D(2, padding=1, count_include_pad=False)
    >>> pool(la.ones((1, 1, 2, 2))).asnumpy()[0, 0]
    array([[1., 1.],
           [1., 1.]], dtype=float32)
    """

    def __init__(self, pool_size=(2, 2), strides=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, layout: str = "NCHW"):
        super().__init__("AvgPool2D", pool_size, strides, padding, ceil_mode, layout)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x):
        return F.avg_pool2d(x, count_include_pad=self.count_include_pad, **self._geometry())


class GlobalAvgPool2D(HybridBlock):
    """Mean over the whole height and width: (N, C, H, W) -> (N, C, 1, 1), as Gluon.

    >>> import lazyarray as la
    >>> la.blocks.GlobalAvgPool2D()(la.ones((2, 3, 4, 5))).shape
    (2, 3, 1, 1)
    """

    def __init__(self, layout: str = "NCHW"):
        super().__init__()
        _nchw_only(layout, "GlobalAvgPool2D")

    def forward(self, x):
        return F.mean(x, axis=(2, 3), keepdims=True)

    def __repr__(self) -> str:
        return "GlobalAvgPool2D()"


class GlobalMaxPool2D(HybridBlock):
    """Maximum over the whole height and width: (N, C, H, W) -> (N, C, 1, 1), as Gluon.

    >>> import lazyarray as la
    >>> la.blocks.GlobalMaxPool2D()(la.ones((2, 3, 4, 5))).shape
    (2, 3, 1, 1)
    """

    def __init__(self, layout: str = "NCHW"):
        super().__init__()
        _nchw_only(layout, "GlobalMaxPool2D")

    def forward(self, x):
        return F.max(x, axis=(2, 3), keepdims=True)

    def __repr__(self) -> str:
        return "GlobalMaxPool2D()"
