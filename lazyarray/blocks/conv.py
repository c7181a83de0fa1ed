"""Convolution and pooling layers on NCHW (or NHWC) data: ``Conv2D``, ``Conv2DTranspose``,
``MaxPool2D``, ``AvgPool2D``, ``GlobalMaxPool2D``, ``GlobalAvgPool2D``. Semantics and argument names
follow MXNet Gluon (``strides``, ``pool_size``, ``ceil_mode``, ``count_include_pad``).

``layout="NHWC"`` (``Conv2D`` and the pools) is served by the NCHW ops: the input is transposed to
NCHW and the output back, two copies of the activations a call (and, for ``Conv2D``, of the weight,
which is ``(channels, kh, kw, in_channels // groups)`` in NHWC as MXNet's). Prefer NCHW where the
data allows; NHWC is there to load and run models written for it.
``ConvLayer`` / ``PoolLayer`` hold what the 1-D, 2-D and 3-D layers (``conv_nd.py``, ``pool_nd.py``)
share."""
from __future__ import annotations

import numpy as np

from ..args import int_arg
from ..errors import ParamError, ParamValueError
from ..ndarray import NDArray
from .block import HybridBlock
from .nn import F, activation_fn
from .parameter import Parameter

_COUNT = {1: "an int or a 1-tuple of ints", 2: "an int or a pair of ints", 3: "an int or a triple of ints"}
# the layouts each number of spatial axes accepts; the first is the native one of the ops
LAYOUTS = {1: ("NCW",), 2: ("NCHW", "NHWC"), 3: ("NCDHW",)}
TO_NCHW, FROM_NCHW = (0, 3, 1, 2), (0, 2, 3, 1)


def int_tuple(v, n: int, name: str, layer: str) -> tuple[int, ...]:
    """``v`` (an int or ``n`` ints) as an ``n``-tuple of ints, else ``ParamValueError``."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    t = tuple(v) if isinstance(v, (tuple, list)) else None
    if t is None or len(t) != n or not all(isinstance(d, int) and not isinstance(d, bool) for d in t):
        raise ParamValueError(f"{layer}: {name} must be {_COUNT[n]}, got {v!r}"[:300])
    return t


def _pair(v, name: str, layer: str) -> tuple[int, int]:
    return int_tuple(v, 2, name, layer)


def check_layout(layout, ndim: int, layer: str, allowed: tuple[str, ...] | None = None) -> str:
    allowed = LAYOUTS[ndim] if allowed is None else allowed
    if not isinstance(layout, str) or layout not in allowed:
        fix = "; transpose the input with la.transpose(x, (0, 3, 1, 2))" if ndim == 2 else ""
        raise ParamValueError(f"{layer}: layout must be one of {', '.join(map(repr, allowed))}, got "
                              f"{layout!r}"[:300] + fix)
    return layout


def _check_groups(groups, channels: int, in_channels: int, layer: str) -> int:
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ParamValueError(f"{layer}: groups must be an int >= 1, got {groups!r}"[:300])
    for what, n in (("channels", channels), ("in_channels", in_channels)):
        if n and n % groups:
            raise ParamValueError(f"{layer}: {what}={n} is not divisible by groups={groups}; "
                                  "use a multiple of groups")
    return groups


def flag(v, name: str, layer: str) -> bool:
    """A yes/no argument: a bool, or 0 / 1 (MXNet's files write flags as ints)."""
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
        return bool(v)
    raise ParamError(f"{layer}: {name} must be True or False, got {v!r}"[:300])


class ConvLayer(HybridBlock):
    """What the convolution layers (1-D, 2-D, 3-D, transposed or not) share: geometry checked to
    ``ndim``-tuples, activation, bias, repr. ``weight_shape(in_channels)`` is the layer's weight."""

    ndim = 2
    transposed = False

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                 in_channels, layout, dtype, weight_initializer, bias_initializer, layouts=None):
        super().__init__()
        layer, n = type(self).__name__, self.ndim
        self.layout = check_layout(layout, n, layer, layouts)
        self.channels = int_arg(channels, layer, "channels", lo=1)
        self.in_channels = int_arg(in_channels, layer, "in_channels", lo=0)
        self.kernel = int_tuple(kernel_size, n, "kernel_size", layer)
        self.strides = int_tuple(strides, n, "strides", layer)
        self.padding = int_tuple(padding, n, "padding", layer)
        self.dilation = int_tuple(dilation, n, "dilation", layer)
        for name, v, lo in (("kernel_size", self.kernel, 1), ("strides", self.strides, 1),
                            ("padding", self.padding, 0), ("dilation", self.dilation, 1)):
            if min(v) < lo:
                raise ParamValueError(f"{layer}: {name} must be >= {lo}, got {v}")
        self.groups = _check_groups(groups, self.channels, self.in_channels, layer)
        self.act_name = activation
        self._act = activation_fn(activation)
        self.weight = Parameter("weight", shape=self.weight_shape(self.in_channels), dtype=dtype,
                                init=weight_initializer)
        self.bias = Parameter("bias", shape=(self.channels,), dtype=dtype, init=bias_initializer) \
            if flag(use_bias, "use_bias", layer) else None

    def weight_shape(self, c_in: int) -> tuple[int, ...]:
        """``(channels, c_in // groups, *kernel)``; transposed: ``(c_in, channels // groups, *kernel)``;
        NHWC: ``(channels, *kernel, c_in // groups)``."""
        if self.transposed:
            return (c_in, self.channels // self.groups) + self.kernel
        if self.layout == "NHWC":
            return (self.channels,) + self.kernel + (c_in // self.groups,)
        return (self.channels, c_in // self.groups) + self.kernel

    def infer_shape(self, x) -> None:
        c = x.shape[-1] if self.layout == "NHWC" else x.shape[1]
        if not self.transposed and c % self.groups:
            raise ParamValueError(f"{type(self).__name__}: input {tuple(x.shape)} has {c} channels, not divisible "
                                  f"by groups={self.groups}")
        self.weight.shape = self.weight_shape(c)

    def _args(self, x):
        w = self.weight.data()
        return (x, w) if self.bias is None else (x, w, self.bias.data())

    def _activate(self, y):
        return y if self._act is None else self._act(y)

    def _c_in(self) -> int:
        w = self.weight.shape
        if self.transposed:
            return w[0]
        return (w[-1] if self.layout == "NHWC" else w[1]) * self.groups

    def __repr__(self) -> str:
        one = (1,) * self.ndim
        extra = "".join(f", {k}={v}" for k, v, default in (("dilation", self.dilation, one),
                                                           ("groups", self.groups, 1)) if v != default)
        return (f"{type(self).__name__}({self._c_in() or None} -> {self.channels}, kernel_size={self.kernel}, "
                f"stride={self.strides}, padding={self.padding}{extra}, {self.act_name or 'linear'})")


class Conv2D(ConvLayer):
    """2-D convolution: ``channels`` filters of ``kernel_size`` over NCHW input.

    The weight is ``(channels, in_channels // groups, kh, kw)``; ``in_channels=0`` learns it at
    the first call. ``groups`` splits the channels into independent convolutions
    (``groups == in_channels``: depthwise); ``dilation`` spaces the kernel taps.
    ``layout="NHWC"``: channels-last input and output, weight ``(channels, kh, kw, in_channels //
    groups)`` (MXNet's), computed by the NCHW op between transposes (see the module's docstring).

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
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, weight_initializer, bias_initializer)

    def forward(self, x: NDArray) -> NDArray:
        args = self._args(x)
        if self.layout == "NHWC":
            args = (F.transpose(x, axes=TO_NCHW), F.transpose(args[1], axes=TO_NCHW)) + args[2:]
        y = self._activate(F.conv2d(*args, stride=self.strides, padding=self.padding,
                                    dilation=self.dilation, groups=self.groups))
        return F.transpose(y, axes=FROM_NCHW) if self.layout == "NHWC" else y


class Conv2DTranspose(ConvLayer):
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

    transposed = True

    def __init__(self, channels: int, kernel_size, strides=(1, 1), padding=(0, 0), output_padding=(0, 0),
                 dilation=(1, 1), groups: int = 1, activation=None, use_bias: bool = True, in_channels: int = 0,
                 layout: str = "NCHW", dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, weight_initializer, bias_initializer, layouts=("NCHW",))
        self.output_padding = int_tuple(output_padding, 2, "output_padding", "Conv2DTranspose")

    def forward(self, x: NDArray) -> NDArray:
        return self._activate(F.conv2d_transpose(*self._args(x), stride=self.strides, padding=self.padding,
                                                 output_padding=self.output_padding, dilation=self.dilation,
                                                 groups=self.groups))


class PoolLayer(HybridBlock):
    """What the pooling layers share: ``ndim``-tuples of geometry, the layout, repr."""

    ndim = 2

    def __init__(self, pool_size, strides, padding, ceil_mode, layout):
        super().__init__()
        layer, n = type(self).__name__, self.ndim
        self.layout = check_layout(layout, n, layer)
        self.pool_size = int_tuple(pool_size, n, "pool_size", layer)
        self.strides = self.pool_size if strides is None else int_tuple(strides, n, "strides", layer)
        self.padding = int_tuple(padding, n, "padding", layer)
        for name, v, lo in (("pool_size", self.pool_size, 1), ("strides", self.strides, 1),
                            ("padding", self.padding, 0)):
            if min(v) < lo:
                raise ParamValueError(f"{layer}: {name} must be >= {lo}, got {v}")
        self.ceil_mode = flag(ceil_mode, "ceil_mode", layer)

    def _geometry(self) -> dict:
        return {"kernel": self.pool_size, "stride": self.strides, "padding": self.padding,
                "ceil_mode": self.ceil_mode}

    def _pool(self, x, op, **extra):
        """``op`` (a 2-D pooling op) over ``x`` in this layer's layout."""
        if self.layout == "NHWC":
            return F.transpose(op(F.transpose(x, axes=TO_NCHW), **self._geometry(), **extra), axes=FROM_NCHW)
        return op(x, **self._geometry(), **extra)

    def __repr__(self) -> str:
        ceil = ", ceil_mode=True" if self.ceil_mode else ""
        return f"{type(self).__name__}(size={self.pool_size}, stride={self.strides}, padding={self.padding}{ceil})"


class MaxPool2D(PoolLayer):
    """Maximum over ``pool_size`` windows of NCHW input; ``strides=None`` = ``pool_size``.

    ``ceil_mode=True`` rounds the output size up (MXNet's ``pooling_convention="full"``): the
    last windows are clipped to the padded input.

    >>> import lazyarray as la
    >>> la.blocks.MaxPool2D(3, 2, ceil_mode=True)(la.ones((1, 2, 6, 6))).shape
    (1, 2, 3, 3)
    """

    def __init__(self, pool_size=(2, 2), strides=None, padding=0, ceil_mode: bool = False, layout: str = "NCHW"):
        super().__init__(pool_size, strides, padding, ceil_mode, layout)

    def forward(self, x: NDArray) -> NDArray:
        return self._pool(x, F.max_pool2d)


class AvgPool2D(PoolLayer):
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
        super().__init__(pool_size, strides, padding, ceil_mode, layout)
        self.count_include_pad = flag(count_include_pad, "count_include_pad", "AvgPool2D")

    def forward(self, x: NDArray) -> NDArray:
        return self._pool(x, F.avg_pool2d, count_include_pad=self.count_include_pad)


class GlobalPoolLayer(HybridBlock):
    """A reduction over every spatial axis, kept as size 1 (Gluon's global pools)."""

    ndim = 2

    def __init__(self, layout):
        super().__init__()
        self.layout = check_layout(layout, self.ndim, type(self).__name__)

    def _axes(self) -> tuple[int, ...]:
        first = 1 if self.layout == "NHWC" else 2
        return tuple(range(first, first + self.ndim))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GlobalAvgPool2D(GlobalPoolLayer):
    """Mean over the whole height and width: (N, C, H, W) -> (N, C, 1, 1), as Gluon
    (NHWC: (N, H, W, C) -> (N, 1, 1, C)).

    >>> import lazyarray as la
    >>> la.blocks.GlobalAvgPool2D()(la.ones((2, 3, 4, 5))).shape
    (2, 3, 1, 1)
    """

    def __init__(self, layout: str = "NCHW"):
        super().__init__(layout)

    def forward(self, x: NDArray) -> NDArray:
        return F.mean(x, axis=self._axes(), keepdims=True)


class GlobalMaxPool2D(GlobalPoolLayer):
    """Maximum over the whole height and width: (N, C, H, W) -> (N, C, 1, 1), as Gluon
    (NHWC: (N, H, W, C) -> (N, 1, 1, C)).

    >>> import lazyarray as la
    >>> la.blocks.GlobalMaxPool2D()(la.ones((2, 3, 4, 5))).shape
    (2, 3, 1, 1)
    """

    def __init__(self, layout: str = "NCHW"):
        super().__init__(layout)

    def forward(self, x: NDArray) -> NDArray:
        return F.max(x, axis=self._axes(), keepdims=True)
