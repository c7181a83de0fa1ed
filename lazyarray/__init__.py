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
import numpy as _np

from . import (
    amp,
    autograd,
    blocks,
    data,
    distributed,
    init,
    lr_scheduler,
    metric,
    mxnet,
    nn,
    onnx,
    random,
    sbp,
    sparse,
    sym,
)
from .aval import Aval
from .blocks import DeferredInitializationError
from .control_flow import __all__ as _control_flow_names
from .control_flow import cond, foreach, while_loop
from .creation import arange, array, full, ones, zeros
from .deferred import compute, deferred, is_deferred
from .device import Device, cpu, current_device, gpu, gpu_available
from .dim import Dim, DimExpr, SymbolicDimError
from .errors import (
    AutogradError,
    AxisError,
    BlockError,
    ControlFlowError,
    DeferredComputeError,
    DeviceError,
    DistributedError,
    DTypeError,
    GraphError,
    GraphFormatError,
    LazyArrayError,
    NumPyFunctionError,
    OpFailed,
    OpIndexError,
    OpOverflowError,
    OpTypeError,
    OpValueError,
    OutOfMemoryError,
    OutputStructureError,
    ParamError,
    ParamValueError,
    ShapeError,
    TraceError,
)
from .executor.cached_op import CachedOp
from .executor.signature_cache import RecompileWarning
from .functions import namespace as _namespace
from .graph.symbol import Symbol, load_symbol
from .kernels import profile
from .ndarray import NDArray
from .ops.registry import StorageFallbackWarning
from .threads import set_num_threads
from .tracing import UnusedInputWarning, get_symbol
from .tuning_table import config, tuning

_OPS = _namespace("")
# la.cond / la.while_loop / la.foreach are the tracing functions, not the raw ops of the same names
globals().update({k: f for k, f in _OPS.items() if k not in _control_flow_names})
# The registry op ``nonzero`` gives (N, ndim) indices: NumPy's argwhere. ``la.nonzero`` (below, from
# array_api) is the standard's tuple of 1-D index arrays, built from it.
argwhere = _OPS["nonzero"]

# -- the Array API standard (2024.12): dtype objects, constants, dtype functions, aliases -------------
from .array_api import (  # noqa: E402  (after the op functions, which some aliases name)
    ALIASES as _ALIASES,
)
from .array_api import (  # noqa: E402
    DTYPES as _DTYPES,
)
from .array_api import (  # noqa: E402
    __array_api_version__,
    __array_namespace_info__,
    asarray,
    astype,
    broadcast_arrays,
    broadcast_shapes,
    can_cast,
    clip,
    concat,
    cumulative_prod,
    cumulative_sum,
    diff,
    e,
    empty,
    empty_like,
    eye,
    finfo,
    from_dlpack,
    full_like,
    iinfo,
    inf,
    isdtype,
    linspace,
    matrix_transpose,
    meshgrid,
    moveaxis,
    nan,
    newaxis,
    nonzero,
    ones_like,
    pi,
    prod,
    reshape,
    result_type,
    searchsorted,
    sum,
    tensordot,
    unique_all,
    unique_counts,
    unique_inverse,
    unstack,
    vecdot,
    zeros_like,
)

# ``la.bool`` etc. are NumPy dtype objects; binding them here shadows the builtins in this module
# only, which uses none of them (the rest of the package never sees these names).
bool = _DTYPES["bool"]  # noqa: A001
int8, int16, int32, int64 = _DTYPES["int8"], _DTYPES["int16"], _DTYPES["int32"], _DTYPES["int64"]
uint8, uint16, uint32, uint64 = _DTYPES["uint8"], _DTYPES["uint16"], _DTYPES["uint32"], _DTYPES["uint64"]
float32, float64 = _DTYPES["float32"], _DTYPES["float64"]
complex64, complex128 = _DTYPES["complex64"], _DTYPES["complex128"]
# The standard's spelling of the NumPy names we had (both public): concat, permute_dims, pow.
for _numpy_name, _std_name in _ALIASES.items():
    if _std_name not in globals():  # (concat is written out in array_api: it takes axis=None)
        globals()[_std_name] = globals()[_numpy_name]
from . import fft, interop, linalg  # noqa: E402, F401  (la.fft, la.linalg; NumPy / DLPack protocols on NDArray)

# ``repeat`` follows NumPy and the Array API (each element repeated); the tiling op named ``repeat``
# in the registry (PyTorch's Tensor.repeat, x.repeat(*sizes)) is ``la.tile``.
tile = _OPS["repeat"]
from .array_api import repeat  # noqa: E402

__version__ = "0.1.0"
