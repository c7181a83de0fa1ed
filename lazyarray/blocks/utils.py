"""Training helpers of ``la.blocks`` (Gluon's ``gluon.utils``)."""
from __future__ import annotations

import math

from ..args import int_arg, number_arg, seq_arg
from ..buffer import bump
from ..creation import array
from ..device import as_device
from ..errors import ParamValueError, ShapeError, fmt_shape
from ..ndarray import NDArray
from ..ops.registry import normalize_axis
from ..storage import RowSparse
from ..user_frames import warn

__all__ = ["clip_global_norm", "split_and_load"]


def clip_global_norm(arrays, max_norm: float, check_isfinite: bool = True) -> float:
    """Rescale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``; return the
    norm they had (a float).

    As in Gluon every array is multiplied by ``min(1, max_norm / (norm + 1e-8))``. A NaN or infinite
    norm warns (``check_isfinite=True``): the clipped values are then undefined. Typical use is on
    the gradients between ``backward()`` and ``trainer.step``:
    ``clip_global_norm([p.grad() for p in params.values()], 1.0)``.

    >>> import lazyarray as la
    >>> g = [la.array([3.0, 0.0]), la.array([4.0])]
    >>> la.blocks.clip_global_norm(g, 1.0)
    5.0
    >>> [round(float(x), 6) for x in g[0].asnumpy()] + [round(float(g[1].asnumpy()[0]), 6)]
    [0.6, 0.0, 0.8]
    """
    arrays = [arrays] if isinstance(arrays, NDArray) else seq_arg(
        arrays, "clip_global_norm", "arrays", "a list of arrays such as [p.grad() for p in params.values()]")
    if not arrays:
        raise ParamValueError("clip_global_norm: got no arrays; pass a list such as [p.grad() for p in params]")
    max_norm = number_arg(max_norm, "clip_global_norm", "max_norm", lo=0, lo_open=True)
    values, modules = [], []
    for i, a in enumerate(arrays):
        if not isinstance(a, NDArray):
            raise ParamValueError(f"clip_global_norm: arrays[{i}] is a {type(a).__name__}, not a lazyarray "
                                  "array; pass the arrays to rescale in place (e.g. p.grad())")
        a._check_writable("clip_global_norm", "clip a copy, or call it outside autograd.record()")
        v = a._materialize()
        values.append(v.data if isinstance(v, RowSparse) else v)  # (the stored rows hold the norm)
        modules.append(a.device.xp)
    total = 0.0
    for v, xp in zip(values, modules):  # in float64: a float16 sum of squares overflows
        total += float(xp.sum(xp.square(v.astype("float64"))))
    total = math.sqrt(total)
    if check_isfinite and not math.isfinite(total):
        warn("clip_global_norm: nan or inf found in the arrays' norm; the clipped values are undefined",
             UserWarning)
    scale = max_norm / (total + 1e-8)
    if scale < 1.0:
        for v in values:
            v *= v.dtype.type(scale)
            bump(v)
    return total


def split_and_load(data, device_list, batch_axis: int = 0, even_split: bool = True) -> list:
    """Split ``data`` along ``batch_axis`` into one slice per device and copy each there (Gluon's
    ``gluon.utils.split_and_load``), for a model initialized with ``device=device_list``.

    >>> import lazyarray as la
    >>> parts = la.blocks.split_and_load(la.ones((4, 2)), [la.cpu(0), la.cpu(1)])
    >>> [(p.shape, str(p.device)) for p in parts]
    [((2, 2), 'cpu(0)'), ((2, 2), 'cpu(1)')]
    """

    if not isinstance(data, NDArray):
        data = array(data)
    devices = [as_device(d, "split_and_load") for d in seq_arg(
        device_list, "split_and_load", "device_list", "a list of devices such as [la.cpu(0), la.cpu(1)]")]
    if data.ndim == 0:
        raise ShapeError(f"split_and_load: data is a 0-d array ({data!r}); it needs a batch axis to split"[:300])
    batch_axis = normalize_axis(int_arg(batch_axis, "split_and_load", "batch_axis"), data.ndim,
                                f"split_and_load (batch_axis of data of shape {fmt_shape(data.shape)})")
    n, size = len(devices), data.shape[batch_axis]
    if n == 0:
        raise ParamValueError("split_and_load: device_list is empty; pass devices such as [la.cpu(0), la.cpu(1)]")
    if even_split and size % n:
        raise ParamValueError(f"split_and_load: {size} samples along axis {batch_axis} do not split evenly over "
                              f"{n} devices; pass even_split=False or a batch size divisible by {n}")
    bounds = [size * i // n for i in range(n + 1)]
    parts = []
    for d, lo, hi in zip(devices, bounds, bounds[1:]):
        index = tuple([slice(None)] * batch_axis + [slice(lo, hi)])
        parts.append(data[index].to(d))
    return parts
