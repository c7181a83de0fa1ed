"""Random sampling ops: ``random_uniform`` and ``random_normal`` (behind ``la.random.uniform`` /
``la.random.normal``).

They take no array inputs: the params say the shape, dtype, device and the distribution. The
kernels draw from the device's generator (``rng.generator``) when they run, so a recorded or
compiled graph draws anew at every run, and ``la.random.seed(n)`` makes eager calls and compiled
graphs give the same sequence of draws. ``random=True`` keeps CSE from merging two draws and
constant folding from freezing one. Samples are drawn in float64 and then cast (``workspace``
counts them), as ``la.random`` always did.
"""
from __future__ import annotations

import numpy as np

from ..device import Device, on_device
from ..errors import ParamValueError
from ..rng import generator
from .params import DEVICE, DTYPE, FLOAT, INTS, Param
from .registry import OpDef, register

_F32 = np.dtype("float32")
_CPU0 = Device("cpu", 0)


def _draw(device, method, a, b, shape, dtype):
    with on_device(device):
        g = generator(device)
        if method == "normal" and not isinstance(g, np.random.Generator):  # CuPy's has no normal()
            v = g.standard_normal(shape) * b + a
        else:
            v = getattr(g, method)(a, b, shape)
        return v.astype(dtype, copy=False)


def _check_scale(scale, op):
    if not scale >= 0.0:
        raise ParamValueError(f"{op}: scale must be >= 0, got {scale}")


def _sampling_op(name, method, a, b, doc, a_check=None, b_check=None):
    def kernel(xp, shape, dtype=_F32, device=_CPU0, out=None, **ab):
        return _draw(device, method, ab[a[0]], ab[b[0]], shape, dtype)

    register(OpDef(
        name, (), kernel,
        params=(Param("shape", INTS), Param(a[0], FLOAT, a[1], check=a_check), Param(b[0], FLOAT, b[1], check=b_check),
                Param("dtype", DTYPE, _F32), Param("device", DEVICE, _CPU0)),
        shape=lambda shapes, shape, **p: tuple(shape),
        dtype=lambda dtypes, dtype=_F32, **p: dtype,
        device=lambda avals, device=_CPU0, **p: device,
        workspace=lambda avals, shape, **p: [("samples", tuple(shape), np.dtype(np.float64))],
        random=True, doc=doc,
    ))


_sampling_op("random_uniform", "uniform", ("low", 0.0), ("high", 1.0),
             "samples from U[low, high) of the given shape, dtype and device, drawn when it runs "
             "(la.random.uniform)")
_sampling_op("random_normal", "normal", ("loc", 0.0), ("scale", 1.0),
             "samples from N(loc, scale**2) of the given shape, dtype and device, drawn when it runs "
             "(la.random.normal)", b_check=_check_scale)
