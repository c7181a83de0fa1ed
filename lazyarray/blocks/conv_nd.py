"""1-D and 3-D convolution layers: ``Conv1D``, ``Conv3D``, ``Conv1DTranspose``, ``Conv3DTranspose``
(Gluon's arguments; layouts NCW and NCDHW), written with the registry's 2-D convolutions so that
their gradients and their ONNX / MXNet export are those of ops that already have them.

* 1-D: the 2-D op on a unit height axis (``expand_dims`` of input and weight, a reshape after).
* 3-D: a sum over the ``kd`` depth taps of 2-D convolutions. The input is made depth-major once,
  ``(N, D, C, H, W)``; tap ``t`` reads the depth slice ``t * dilation :: stride`` it needs, folds those
  depths into the batch and convolves them with the weight's plane ``t``. The transposed form mirrors
  it: each tap's 2-D transposed convolution of every input depth lands on output depths
  ``i * stride + t * dilation`` (``onnx/import_conv3d.place_depth``, shared with the ONNX importer),
  and the sum is cropped by the depth padding. Cost: ``kd`` 2-D convolutions over ``N * D_out`` planes
  plus two transposes of the activations (ONNX: ``kd`` ``Conv`` nodes, not one 3-D ``Conv``).
"""
from __future__ import annotations

from ..errors import ParamValueError, ShapeError
from ..onnx.import_conv3d import place_depth
from .conv import ConvLayer, int_tuple
from .nn import F

_DEPTH_MAJOR = (0, 2, 1, 3, 4)  # (N, C, D, H, W) <-> (N, D, C, H, W)


def _check_rank(layer: str, x, ndim: int, layout: str) -> None:
    if getattr(x, "ndim", None) != ndim + 2:
        raise ShapeError(f"{layer}: expected a {ndim + 2}-D input in layout {layout}, got shape "
                         f"{tuple(getattr(x, 'shape', ()))}; add the missing axes (la.expand_dims)")


def _drop_height(y):
    """``(N, C, 1, W)`` -> ``(N, C, W)`` (a reshape: la.mxnet.export writes no squeeze)."""
    return F.reshape(y, shape=(-1, y.shape[1], y.shape[3]))


def _output_padding(layer: str, v, n: int, strides, dilation) -> tuple[int, ...]:
    op = int_tuple(v, n, "output_padding", layer)
    for o, s, d in zip(op, strides, dilation):
        if o < 0 or (o >= s and o >= d):
            raise ParamValueError(f"{layer}: output_padding={op} must be >= 0 and smaller than the stride "
                                  f"{strides} or the dilation {dilation} on each axis")
    return op


class Conv1D(ConvLayer):
    """1-D convolution over NCW input: ``channels`` filters of width ``kernel_size``; weight
    ``(channels, in_channels // groups, k)``. Computed by ``nn.conv2d`` on a unit height axis.

    >>> import lazyarray as la
    >>> conv = la.blocks.Conv1D(4, 3, padding=1, in_channels=2)
    >>> conv.initialize()
    >>> conv(la.ones((2, 2, 10))).shape, conv.weight.shape
    ((2, 4, 10), (4, 2, 3))
    """

    ndim = 1

    def __init__(self, channels: int, kernel_size, strides=1, padding=0, dilation=1, groups: int = 1,
                 activation=None, use_bias: bool = True, in_channels: int = 0, layout: str = "NCW",
                 dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, weight_initializer, bias_initializer)

    def forward(self, x):
        _check_rank("Conv1D", x, 1, self.layout)
        x, w, *b = self._args(x)
        y = F.conv2d(F.expand_dims(x, axis=2), F.expand_dims(w, axis=2), *b, stride=(1,) + self.strides,
                     padding=(0,) + self.padding, dilation=(1,) + self.dilation, groups=self.groups)
        return self._activate(_drop_height(y))


class Conv1DTranspose(ConvLayer):
    """Transposed 1-D convolution over NCW input (the adjoint of ``Conv1D``); weight
    ``(in_channels, channels // groups, k)``; output width ``(W - 1) * stride - 2 * padding +
    dilation * (k - 1) + output_padding + 1``.

    >>> import lazyarray as la
    >>> up = la.blocks.Conv1DTranspose(3, 4, strides=2, padding=1, in_channels=2)
    >>> up.initialize()
    >>> up(la.ones((1, 2, 5))).shape
    (1, 3, 10)
    """

    ndim, transposed = 1, True

    def __init__(self, channels: int, kernel_size, strides=1, padding=0, output_padding=0, dilation=1,
                 groups: int = 1, activation=None, use_bias: bool = True, in_channels: int = 0,
                 layout: str = "NCW", dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, weight_initializer, bias_initializer)
        self.output_padding = _output_padding("Conv1DTranspose", output_padding, 1, self.strides, self.dilation)

    def forward(self, x):
        _check_rank("Conv1DTranspose", x, 1, self.layout)
        x, w, *b = self._args(x)
        y = F.conv2d_transpose(F.expand_dims(x, axis=2), F.expand_dims(w, axis=2), *b,
                               stride=(1,) + self.strides, padding=(0,) + self.padding,
                               output_padding=(0,) + self.output_padding, dilation=(1,) + self.dilation,
                               groups=self.groups)
        return self._activate(_drop_height(y))


class Conv3D(ConvLayer):
    """3-D convolution over NCDHW input; weight ``(channels, in_channels // groups, kd, kh, kw)``.
    Computed as a sum over the depth taps of ``nn.conv2d`` (the module's docstring says the cost).

    >>> import lazyarray as la
    >>> conv = la.blocks.Conv3D(4, 3, padding=1, in_channels=2)
    >>> conv.initialize()
    >>> conv(la.ones((1, 2, 4, 5, 5))).shape
    (1, 4, 4, 5, 5)
    """

    ndim = 3

    def __init__(self, channels: int, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1),
                 groups: int = 1, activation=None, use_bias: bool = True, in_channels: int = 0,
                 layout: str = "NCDHW", dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, weight_initializer, bias_initializer)

    def forward(self, x):
        _check_rank("Conv3D", x, 3, self.layout)
        c, d, h, w_ = x.shape[1:]
        (kd, *_), (sd, *s_hw), (pd, *p_hw), (dd, *d_hw) = self.kernel, self.strides, self.padding, self.dilation
        d_out = (d + 2 * pd - (kd - 1) * dd - 1) // sd + 1
        if d_out < 1:
            raise ShapeError(f"Conv3D: the kernel's depth {kd} (dilation {dd}) does not fit the input's depth {d} "
                             f"padded by {pd}; pad more or use a smaller kernel")
        x, w, *b = self._args(x)
        xt = F.transpose(x, axes=_DEPTH_MAJOR)
        if pd:
            xt = F.pad(xt, pad_width=((0, 0), (pd, pd), (0, 0), (0, 0), (0, 0)))
        y = None
        for t in range(kd):
            taps = F.getitem(xt, key=(slice(None), slice(t * dd, t * dd + (d_out - 1) * sd + 1, sd)))
            z = F.conv2d(F.reshape(taps, shape=(-1, c, h, w_)), F.getitem(w, key=(slice(None), slice(None), t)),
                         *(b if t == 0 else ()), stride=tuple(s_hw), padding=tuple(p_hw), dilation=tuple(d_hw),
                         groups=self.groups)
            y = z if y is None else y + z
        y = F.reshape(y, shape=(-1, d_out) + tuple(y.shape[1:]))
        return self._activate(F.transpose(y, axes=_DEPTH_MAJOR))


class Conv3DTranspose(ConvLayer):
    """Transposed 3-D convolution over NCDHW input (the adjoint of ``Conv3D``); weight
    ``(in_channels, channels // groups, kd, kh, kw)``. Computed per depth tap with
    ``nn.conv2d_transpose`` (the module's docstring says how).

    >>> import lazyarray as la
    >>> up = la.blocks.Conv3DTranspose(2, 2, strides=2, in_channels=3)
    >>> up.initialize()
    >>> up(la.ones((1, 3, 2, 3, 3))).shape
    (1, 2, 4, 6, 6)
    """

    ndim, transposed = 3, True

    def __init__(self, channels: int, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0), output_padding=(0, 0, 0),
                 dilation=(1, 1, 1), groups: int = 1, activation=None, use_bias: bool = True, in_channels: int = 0,
                 layout: str = "NCDHW", dtype="float32", weight_initializer=None, bias_initializer="zeros"):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation, use_bias,
                         in_channels, layout, dtype, weight_initializer, bias_initializer)
        self.output_padding = _output_padding("Conv3DTranspose", output_padding, 3, self.strides, self.dilation)

    def forward(self, x):
        _check_rank("Conv3DTranspose", x, 3, self.layout)
        c, d, h, w_ = x.shape[1:]
        (kd, *_), (sd, *s_hw), (pd, *p_hw), (dd, *d_hw) = self.kernel, self.strides, self.padding, self.dilation
        opd, *op_hw = self.output_padding
        full = (d - 1) * sd + (kd - 1) * dd + 1 + opd
        if full - 2 * pd < 1:
            raise ShapeError(f"Conv3DTranspose: padding {pd} crops the whole output depth {full}; pad less")
        x, w, *b = self._args(x)
        planes = F.reshape(F.transpose(x, axes=_DEPTH_MAJOR), shape=(-1, c, h, w_))
        y = None
        for t in range(kd):
            z = F.conv2d_transpose(planes, F.getitem(w, key=(slice(None), slice(None), t)), stride=tuple(s_hw),
                                   padding=tuple(p_hw), output_padding=tuple(op_hw), dilation=tuple(d_hw),
                                   groups=self.groups)
            z = place_depth(F, z, d, tuple(z.shape[1:]), sd, t * dd, (kd - 1 - t) * dd + opd)
            y = z if y is None else y + z
        if pd:
            y = F.getitem(y, key=(slice(None), slice(pd, full - pd)))
        y = F.transpose(y, axes=_DEPTH_MAJOR)
        if b:
            y = y + F.reshape(b[0], shape=(1, -1, 1, 1, 1))
        return self._activate(y)
