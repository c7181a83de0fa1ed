"""The exception hierarchy. Every error lazyarray raises on purpose is a ``LazyArrayError``.

Each subclass also derives from the built-in exception a NumPy user would expect
(``ValueError`` for bad shapes, ``TypeError`` for bad dtypes or unknown parameters),
so ``except ValueError`` keeps working.
"""
from __future__ import annotations


class LazyArrayError(Exception):
    """Base class of every lazyarray error."""


class ShapeError(LazyArrayError, ValueError):
    """Shapes that do not fit the operator (broadcasting, reshape sizes, ...)."""


class AxisError(LazyArrayError, ValueError, IndexError):
    """An axis outside ``[-ndim, ndim)`` or repeated."""


class DTypeError(LazyArrayError, TypeError):
    """A dtype the operator does not accept."""


class ParamError(LazyArrayError, TypeError):
    """An unknown operator parameter, or a parameter of the wrong type."""


class UnknownSettingError(ParamError, AttributeError):
    """A tuning setting that does not exist (``la.config.winogard``, ``la.tuning(winogard=...)``)."""


class ParamValueError(LazyArrayError, ValueError):
    """A parameter of the right type with an illegal value."""


class DeviceError(LazyArrayError, ValueError):
    """Arrays on different devices mixed in one op, or an unavailable device."""


class DeferredComputeError(LazyArrayError, RuntimeError):
    """Something deferred compute cannot do, e.g. an in-place write on a lazy array."""


class AutogradError(LazyArrayError, RuntimeError):
    """Misuse of autograd, e.g. ``backward()`` on an array that was not recorded."""


class GraphFormatError(LazyArrayError, ValueError):
    """A serialized graph that cannot be loaded (bad JSON, unknown op, cycle, ...)."""


class GraphError(LazyArrayError, ValueError):
    """A graph that breaks an invariant (dangling entry, wrong order, bad aval)."""


class OpFailed(LazyArrayError, RuntimeError):
    """A kernel failed for a reason the op's rules did not foresee."""


class OpValueError(LazyArrayError, ValueError):
    """A kernel rejected the values it was given."""


class OpTypeError(LazyArrayError, TypeError):
    """A kernel rejected the types it was given."""


class OpIndexError(LazyArrayError, IndexError, ValueError):
    """A kernel was given an index outside the array."""


class OpOverflowError(LazyArrayError, OverflowError):
    """A value that does not fit the dtype of the result (NumPy 2: ``uint8_array + 300``)."""


class OutOfMemoryError(LazyArrayError, MemoryError):
    """An allocation above the limit: the machine's physical memory by default, or
    ``LAZYARRAY_MAX_ALLOC_BYTES`` (see ``lazyarray.aval.max_alloc_bytes``)."""


class NoKernelError(LazyArrayError, NotImplementedError):
    """An op asked for a kernel it does not have (a composite op, or a sparse kernel the
    storage rule chose but the op lacks)."""


class BlockError(LazyArrayError, RuntimeError):
    """A block used out of order: an attribute set before ``super().__init__()``, ``export``
    before the first call, a parameter updated in forward that the block does not own."""


class OutputStructureError(BlockError, TypeError):
    """A hybridized block's ``forward`` returned something other than arrays in (nested) tuples,
    lists and dicts: the message names the path of the bad leaf (``out[1]['aux']``)."""


# The class a kernel's built-in exception becomes, eager or compiled alike.
ERROR_CLASSES = {IndexError: OpIndexError, ValueError: OpValueError, TypeError: OpTypeError,
                 OverflowError: OpOverflowError, ArithmeticError: OpValueError}


def fmt_shape(shape) -> str:
    """``(2, None, 3)`` -> ``[2,?,3]``: the compact form used in every message."""
    if shape is None:
        return "[?]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class TraceError(LazyArrayError, RuntimeError):
    """``forward`` read a value that depends on a block input while it was traced for hybridize()."""


class ControlFlowError(LazyArrayError, ValueError):
    """A ``la.cond`` / ``la.while_loop`` / ``la.foreach`` whose functions do not fit together: branches
    with different outputs, a predicate that is not one value, a loop body that changes a state's shape."""


class DataLoaderError(LazyArrayError, RuntimeError):
    """A ``la.data.DataLoader`` worker failed (``dataset[i]`` or the batchify function raised, a worker
    process died, or no batch came within ``timeout``). ``index`` is the sample index that failed (or
    None), ``batch`` the batch number, ``original`` the worker's exception where it could be sent back."""

    def __init__(self, message: str, *, index=None, batch=None, original: BaseException | None = None):
        super().__init__(message)
        self.index, self.batch, self.original = index, batch, original


class NumPyFunctionError(LazyArrayError, TypeError):
    """A NumPy function called on a lazyarray array that lazyarray cannot run as a lazyarray op (no ``la``
    equivalent, or a keyword such as ``out=`` the equivalent does not take). The message names the NumPy
    function and the ``la`` equivalent, or says to convert explicitly with ``x.asnumpy()``; lazyarray never
    hands the array to NumPy behind the caller's back (that would drop it out of a recorded graph)."""


class DistributedError(LazyArrayError, RuntimeError):
    """A run on a Dask cluster (``la.distributed.run``, ``DataParallel.step``) that cannot finish: a
    worker or the scheduler lost, scattered data lost with its worker, no workers, or no result within
    ``timeout``. The message names what was lost (the input, piece or parameter) and the fix."""


class MissingDependencyError(LazyArrayError, ImportError):
    """A feature needs a package of an optional extra that is not installed (SciPy for sparse arrays:
    ``pip install 'lazyarray[sparse]'``). The message names the feature, the package and the extra."""
