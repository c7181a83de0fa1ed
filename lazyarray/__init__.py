"""lazyarray: arrays that compute now, or record a graph under deferred compute.

>>> import lazyarray as la
>>> x = la.array([[1.0, 2.0], [3.0, 4.0]])
>>> with la.deferred():
...     y = la.nn.softmax(x * 2)
>>> y.is_lazy
True
>>> y.asnumpy().round(3)
array([[0.119, 0.881],
       [0.119, 0.881]], dtype=float32)
"""
from . import autograd, blocks, init, mxnet, nn, random, sparse, sym
from .aval import Aval
from .creation import arange, array, full, ones, zeros
from .deferred import compute, deferred, is_deferred
from .device import Device, cpu, current_device, gpu, gpu_available
from .errors import (
    AutogradError,
    AxisError,
    BlockError,
    DeferredComputeError,
    DeviceError,
    DTypeError,
    GraphError,
    GraphFormatError,
    LazyArrayError,
    OpFailed,
    OpIndexError,
    OpOverflowError,
    OpTypeError,
    OpValueError,
    OutOfMemoryError,
    ParamError,
    ParamValueError,
    ShapeError,
    TraceError,
)
from .executor.cached_op import CachedOp
from .executor.signature_cache import RecompileWarning
from .functions import namespace as _namespace
from .graph.symbol import Symbol, load_symbol
from .ndarray import NDArray
from .ops.registry import StorageFallbackWarning
from .tracing import UnusedInputWarning, get_symbol

globals().update(_namespace(""))

__version__ = "0.1.0"
