"""1-D and 3-D pooling layers: ``MaxPool1D``, ``MaxPool3D``, ``AvgPool1D``, ``AvgPool3D``,
``GlobalMaxPool1D``, ``GlobalMaxPool3D``, ``GlobalAvgPool1D``, ``GlobalAvgPool3D`` (Gluon's arguments;
layouts NCW and NCDHW), written with the registry's 2-D pooling ops (their gradients and exports).

* 1-D: the 2-D op on a unit height axis.
* 3-D: a box pool is separable. The 2-D op pools height and width with the depth folded into the
  channels, ``(N, C * D, H, W)``, then pools the depth with a ``(kd, 1)`` window over
  ``(N, C, D, H_out * W_out)``: reshapes only, no transposes. For the maximum that is exact; for the
  mean too, since every divisor is a product of per-axis counts (the window's size, clipped to the
  padded input in ceil mode, or with ``count_include_pad=False`` the input positions it covers).
"""
from __future__ import annotations

from ..errors import ShapeError
from .conv import GlobalPoolLayer, PoolLayer, flag
from .nn import F


def _check_rank(layer: str, x, ndim: int, layout: str) -> None:
    if getattr(x, "ndim", None) != ndim + 2:
        raise ShapeError(f"{layer}: expected a {ndim + 2}-D input in layout {layout}, got shape "
                         f"{tuple(getattr(x, 'shape', ()))}; add the missing axes (la.expand_dims)")


class _Pool1D(PoolLayer):
    ndim = 1

    def _pool1d(self, x, op, **extra):
        _check_rank(type(self).__name__, x, 1, self.layout)
        y = op(F.expand_dims(x, axis=2), kernel=(1,) + self.pool_size, stride=(1,) + self.strides,
               padding=(0,) + self.padding, ceil_mode=self.ceil_mode, **extra)
        return F.reshape(y, shape=(-1, y.shape[1], y.shape[3]))  # (la.mxnet.export writes no squeeze)


class _Pool3D(PoolLayer):
    ndim = 3

    def _pool3d(self, x, op, **extra):
        _check_rank(type(self).__name__, x, 3, self.layout)
        c, d, h, w = x.shape[1:]
        (kd, *k_hw), (sd, *s_hw), (pd, *p_hw) = self.pool_size, self.strides, self.padding
        y = op(F.reshape(x, shape=(-1, c * d, h, w)), kernel=tuple(k_hw), stride=tuple(s_hw), padding=tuple(p_hw),
               ceil_mode=self.ceil_mode, **extra)
        ho, wo = y.shape[2:]
        y = op(F.reshape(y, shape=(-1, c, d, ho * wo)), kernel=(kd, 1), stride=(sd, 1), padding=(pd, 0),
               ceil_mode=self.ceil_mode, **extra)
        return F.reshape(y, shape=(-1, c, y.shape[2], ho, wo))


class MaxPool1D(_Pool1D):
    """Maximum over ``pool_size`` windows of NCW input; ``strides=None`` = ``pool_size``.

    >>> import lazyarray as la
    >>> la.blocks.MaxPool1D(3, 2, ceil_mode=True)(la.ones((1, 2, 6))).shape
    (1, 2, 3)
    """

    def __init__(self, pool_size=2, strides=None, padding=0, layout: str = "NCW", ceil_mode: bool = False):
        super().__init__(pool_size, strides, padding, ceil_mode, layout)

    def forward(self, x):
        return self._pool1d(x, F.max_pool2d)


class AvgPool1D(_Pool1D):
    """Mean over ``pool_size`` windows of NCW input; ``count_include_pad`` and ``ceil_mode`` as
    ``AvgPool2D``.

    >>> import lazyarray as la
    >>> la.blocks.AvgPool1D(2)(la.ones((1, 2, 6))).shape
    (1, 2, 3)
    """

    def __init__(self, pool_size=2, strides=None, padding=0, layout: str = "NCW", ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__(pool_size, strides, padding, ceil_mode, layout)
        self.count_include_pad = flag(count_include_pad, "count_include_pad", "AvgPool1D")

    def forward(self, x):
        return self._pool1d(x, F.avg_pool2d, count_include_pad=self.count_include_pad)


class MaxPool3D(_Pool3D):
    """Maximum over ``pool_size`` boxes of NCDHW input; ``strides=None`` = ``pool_size``.

    >>> import lazyarray as la
    >>> la.blocks.MaxPool3D(2)(la.ones((1, 2, 4, 6, 6))).shape
    (1, 2, 2, 3, 3)
    """

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, ceil_mode: bool = False,
                 layout: str = "NCDHW"):
        super().__init__(pool_size, strides, padding, ceil_mode, layout)

    def forward(self, x):
        return self._pool3d(x, F.max_pool2d)


class AvgPool3D(_Pool3D):
    """Mean over ``pool_size`` boxes of NCDHW input; ``count_include_pad`` and ``ceil_mode`` as
    ``AvgPool2D``.

    >>> import lazyarray as la
    >>> la.blocks.AvgPool3D(2, padding=1, count_include_pad=False)(la.ones((1, 1, 2, 2, 2))).shape
    (1, 1, 2, 2, 2)
    """

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, ceil_mode: bool = False,
                 layout: str = "NCDHW", count_include_pad: bool = True):
        super().__init__(pool_size, strides, padding, ceil_mode, layout)
        self.count_include_pad = flag(count_include_pad, "count_include_pad", "AvgPool3D")

    def forward(self, x):
        return self._pool3d(x, F.avg_pool2d, count_include_pad=self.count_include_pad)


class GlobalMaxPool1D(GlobalPoolLayer):
    """Maximum over the width: (N, C, W) -> (N, C, 1), as Gluon.

    >>> import lazyarray as la
    >>> la.blocks.GlobalMaxPool1D()(la.ones((2, 3, 5))).shape
    (2, 3, 1)
    """

    ndim = 1

    def __init__(self, layout: str = "NCW"):
        super().__init__(layout)

    def forward(self, x):
        _check_rank("GlobalMaxPool1D", x, 1, self.layout)
        return F.max(x, axis=self._axes(), keepdims=True)


class GlobalAvgPool1D(GlobalPoolLayer):
    """Mean over the width: (N, C, W) -> (N, C, 1), as Gluon.

    >>> import lazyarray as la
    >>> la.blocks.GlobalAvgPool1D()(la.ones((2, 3, 5))).shape
    (2, 3, 1)
    """

    ndim = 1

    def __init__(self, layout: str = "NCW"):
        super().__init__(layout)

    def forward(self, x):
        _check_rank("GlobalAvgPool1D", x, 1, self.layout)
        return F.mean(x, axis=self._axes(), keepdims=True)


class GlobalMaxPool3D(GlobalPoolLayer):
    """Maximum over depth, height and width: (N, C, D, H, W) -> (N, C, 1, 1, 1), as Gluon.

    >>> import lazyarray as la
    >>> la.blocks.GlobalMaxPool3D()(la.ones((2, 3, 4, 5, 6))).shape
    (2, 3, 1, 1, 1)
    """

    ndim = 3

    def __init__(self, layout: str = "NCDHW"):
        super().__init__(layout)

    def forward(self, x):
        _check_rank("GlobalMaxPool3D", x, 3, self.layout)
        return F.max(x, axis=self._axes(), keepdims=True)


class GlobalAvgPool3D(GlobalPoolLayer):
    """Mean over depth, height and width: (N, C, D, H, W) -> (N, C, 1, 1, 1), as Gluon.

    >>> import lazyarray as la
    >>> la.blocks.GlobalAvgPool3D()(la.ones((2, 3, 4, 5, 6))).shape
    (2, 3, 1, 1, 1)
    """

    ndim = 3

    def __init__(self, layout: str = "NCDHW"):
        super().__init__(layout)

    def forward(self, x):
        _check_rank("GlobalAvgPool3D", x, 3, self.layout)
        return F.mean(x, axis=self._axes(), keepdims=True)
