"""``NDArray``: a value on a device, or a lazy entry in a graph, with NumPy's face.

A normal array holds a backend array (NumPy / CuPy) or a sparse storage. A lazy array
(made while deferred compute is on) holds a graph entry and its aval; it computes when
a value is needed (``asnumpy``, ``item``, ``bool``, ``.shape`` with unknown dims, or use
by an op outside deferred compute).
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from . import autograd, display, guards
from .aval import Aval, check_operand
from .buffer import bump, expose, is_frozen
from .deferred import MODE, is_deferred, known_values
from .device import Device, to_device
from .dispatch import ArrayBase, apply, operator_method
from .errors import AutogradError, DeferredComputeError, DeviceError, DTypeError, ShapeError, fmt_shape
from .ops import registry
from .ops.sparse_kernels import to_scipy
from .storage import SPARSE_TYPES, densify, from_dense, stype_of

_op = registry.get
_ADD, _SUB, _MUL, _DIV, _POW = _op("add"), _op("subtract"), _op("multiply"), _op("divide"), _op("power")
_MATMUL, _NEG = _op("matmul"), _op("negative")
_EQ, _NE, _LT, _LE, _GT, _GE = (
    _op("equal"), _op("not_equal"), _op("less"), _op("less_equal"), _op("greater"), _op("greater_equal")
)
_AND, _OR, _XOR, _INV = _op("bitwise_and"), _op("bitwise_or"), _op("bitwise_xor"), _op("bitwise_invert")
_LSHIFT, _RSHIFT, _FLOORDIV, _MOD = (
    _op("bitwise_left_shift"), _op("bitwise_right_shift"), _op("floor_divide"), _op("remainder")
)
_EMPTY: dict = {}
_INPLACE = {"+=": _ADD, "-=": _SUB, "*=": _MUL, "/=": _DIV, "**=": _POW, "//=": _FLOORDIV, "%=": _MOD,
            "&=": _AND, "|=": _OR, "^=": _XOR, "<<=": _LSHIFT, ">>=": _RSHIFT}


def _make_late(value, entry, device):
    # The operators are built while the class body runs, before ``make_array`` can name the class.
    return make_array(value, entry, device)


if TYPE_CHECKING:
    # What an operator takes on its other side: an array, a Python or NumPy number, a NumPy array.
    Operand: TypeAlias = "NDArray | complex | np.generic | np.ndarray[Any, Any]"


def _operator(op, reverse: bool = False) -> Callable[[NDArray, Operand], NDArray]:
    """``operator_method`` with its type spelled out (an array in, an array out) for type checkers."""
    return operator_method(op, _make_late, reverse)


def _unary(op) -> Callable[[NDArray], NDArray]:
    return operator_method(op, _make_late)


class NDArray(ArrayBase):
    """An n-dimensional array on a device; lazy while deferred compute records it.

    >>> import lazyarray as la
    >>> x = la.array([[1.0, 2.0], [3.0, 4.0]])
    >>> (x * 2 + 1).sum().item()
    24.0
    """

    __slots__ = ()
    # __array_ufunc__, __array_function__, __dlpack__, __dlpack_device__: set by interop.py, which maps
    # NumPy functions onto the op functions (a floor above this one)
    __hash__ = None  # like NumPy: == is elementwise, so arrays are not hashable

    @staticmethod
    def _make(value, entry, device) -> NDArray:
        # the constructor layers below the array type are handed (la.autograd.backward finds it on its heads)
        return make_array(value, entry, device)

    # -- attributes ------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape; computes a lazy array whose static shape has unknown dims."""
        v = self._value
        if v is not None:
            return v.shape
        s = self._entry.aval.shape
        if None in s:
            return self._materialize().shape
        trace = guards.active()
        return s if trace is None else guards.GuardedShape(s, self._entry, trace)

    @property
    def static_shape(self) -> tuple:
        """The shape known without computing (``None`` for data-dependent dims). Never computes."""
        v = self._value
        if v is not None:
            return tuple(v.shape)
        s = self._entry.aval.shape
        trace = guards.active()
        return s if trace is None or None in s else guards.GuardedShape(s, self._entry, trace)

    @property
    def ndim(self) -> int:
        """Number of dimensions (``len(x.shape)``); known without computing a lazy array."""
        return len(self.static_shape)

    @property
    def size(self) -> int:
        """Number of elements (the product of ``x.shape``; 1 for a 0-d array)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements; a lazy array knows it from its recorded node."""
        v = self._value
        return v.dtype if v is not None else self._entry.aval.dtype

    @property
    def device(self) -> Device:
        """The device the array lives on, e.g. ``cpu(0)``; move it with ``x.to(device)``."""
        return self._device

    @property
    def stype(self) -> str:
        """Storage type: ``"default"`` (dense), ``"csr"`` or ``"row_sparse"``; change it with ``tostype``."""
        v = self._value
        return stype_of(v) if v is not None else self._entry.aval.stype

    @property
    def is_lazy(self) -> bool:
        """True while the value has not been computed."""
        return self._value is None

    @property
    def aval(self) -> Aval:
        """Shape, dtype, device and storage type as one abstract value."""
        v = self._value
        if v is not None:
            return Aval(tuple(v.shape), v.dtype, self._device, stype_of(v))
        return self._entry.aval

    # -- sparse parts (csr: data, indices, indptr; row_sparse: data, indices) ----------
    @property
    def data(self) -> NDArray:
        """The stored values of a sparse array (csr: one per stored element; row_sparse: the rows)."""
        return self._sparse_part("data")

    @property
    def indices(self) -> NDArray:
        """csr: the column of each stored value; row_sparse: the stored row numbers (sorted)."""
        return self._sparse_part("indices")

    @property
    def indptr(self) -> NDArray:
        """csr only: row ``i`` stores ``data[indptr[i]:indptr[i + 1]]``."""
        return self._sparse_part("indptr")

    def _sparse_part(self, name: str) -> NDArray:
        v = self._materialize()
        part = getattr(v, name, None) if isinstance(v, SPARSE_TYPES) else None
        if part is None:
            raise AttributeError(f"{name}: only {'csr' if name == 'indptr' else 'csr and row_sparse'} arrays "
                                 f"have .{name}; this array's storage is {stype_of(v)!r} "
                                 "(convert with .tostype('csr'))")
        return make_array(part, None, self._device)

    def asscipy(self):
        """A ``scipy.sparse.csr_matrix`` sharing this csr array's stored values (host arrays only)."""
        v = self._materialize()
        if stype_of(v) != "csr":
            raise TypeError(f"asscipy: needs a csr array, this one is {stype_of(v)!r}; use .tostype('csr') first")
        if self._device.kind != "cpu":
            raise DeviceError(f"asscipy: the array lives on {self._device}; move it with .to(la.cpu()) first")
        return to_scipy(np, v)

    # -- values ----------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        """A NumPy copy of the (dense) value; computes a lazy array."""
        v = self._value
        if v.__class__ is np.ndarray:  # the common case: a computed dense array on the CPU
            return np.array(v, copy=True)
        v = densify(self._materialize(), self._device.xp)
        if self._device.kind == "gpu":
            return to_device(v, self._device, _CPU0)
        return np.array(v, copy=True)

    def item(self):
        """The single element as a Python scalar."""
        v = self.asnumpy()
        if v.size != 1:
            raise ShapeError(f"item: only arrays of one element convert to a scalar, this one is "
                             f"{fmt_shape(v.shape)}; index it first, e.g. x[0, 0].item()")
        return v.reshape(()).item()

    def __array__(self, dtype=None, copy=None):
        v = densify(self._materialize(), self._device.xp)
        if self._device.kind == "gpu":
            return to_device(v, self._device, _CPU0) if dtype is None else to_device(v, self._device, _CPU0).astype(dtype)
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return np.array(v, copy=True)
        if v is self._value and v.flags.writeable:  # NumPy's view of the live buffer: writes bump no version
            expose(v)
        return v

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ShapeError(f"bool: the truth value of an array of shape {fmt_shape(self.shape)} is "
                             "ambiguous; use (x != 0).sum() > 0 or compare element by element")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __format__(self, spec: str) -> str:
        """``f"{loss:.3f}"``: arrays of one element format as their scalar; others as their repr."""
        if self.size == 1:
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"format: spec {spec!r} needs an array of one element, this one is "
                            f"{fmt_shape(self.shape)}; format its elements, e.g. x[0].item()")
        return repr(self)

    def tolist(self):
        """The value as nested Python lists of Python scalars (a scalar for a 0-d array)."""
        return self.asnumpy().tolist()

    def __array_namespace__(self, api_version: str | None = None):
        """The Array API namespace of lazyarray arrays: the ``lazyarray`` module (``la``)."""
        if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"__array_namespace__: api_version {api_version!r} is not supported; "
                             "lazyarray implements the 2024.12 standard (older versions are accepted too)")
        return sys.modules[__name__.rpartition(".")[0]]

    def to_device(self, device: Device, /, *, stream=None) -> NDArray:
        """The standard's spelling of ``x.to(device)``."""
        if stream is not None:
            raise ValueError("to_device: streams are not supported; pass stream=None")
        return self.to(device)

    @property
    def mT(self) -> NDArray:
        """The matrix transpose: the last two axes swapped (a stack of matrices stays a stack)."""
        n = self.ndim
        if n < 2:
            raise ShapeError(f"mT: needs an array of at least 2 dims, got {n}")
        return apply(_op("transpose"), (self,), {"axes": tuple(range(n - 2)) + (n - 1, n - 2)}, make_array)

    def __index__(self) -> int:
        if self.dtype.kind not in "iu" or self.ndim != 0:
            raise TypeError(f"only 0-d integer arrays can be used as an index, not {self.dtype} "
                            f"{fmt_shape(self.shape)}")
        return int(self.item())

    def __len__(self) -> int:
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d array")
        return s[0]

    def __iter__(self) -> Iterator[NDArray]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        if self.is_lazy:
            shape = "(" + ", ".join("?" if d is None else str(d) for d in self.static_shape)
            shape += ",)" if len(self.static_shape) == 1 else ")"
            return f"lazy array(shape={shape}, dtype={self.dtype}, device={self._device})"
        v = self._materialize()
        stype = "" if stype_of(v) == "default" else f", stype={stype_of(v)}"
        text = np.array2string(np.asarray(self), separator=", ", prefix="array(")
        return f"array({text}, dtype={self.dtype}, device={self._device}{stype})"

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return display.array_html(self._value, self._entry, self._device, known_values)

    # -- conversions -----------------------------------------------------------
    def to(self, device: Device) -> NDArray:
        """This array on ``device`` (itself if already there). Recorded as a copy node when lazy."""
        if device is self._device:
            return self
        return apply(_op("copy_to"), (self,), {"device": device}, make_array)

    def astype(self, dtype) -> NDArray:
        """A copy converted to ``dtype``."""
        return apply(_op("cast"), (self,), {"dtype": dtype}, make_array)

    def tostype(self, stype: str) -> NDArray:
        """A copy with storage type ``"default"``, ``"csr"`` or ``"row_sparse"``."""
        return apply(_op("cast_storage"), (self,), {"stype": stype}, make_array)

    def copy(self) -> NDArray:
        """A new array with the same value in its own buffer (recorded as a ``copy`` node when lazy)."""
        return apply(_op("copy"), (self,), _EMPTY, make_array)

    def detach(self) -> NDArray:
        """The same value, cut from the autograd graph (gradients do not flow back through it)."""
        if self._value is not None and not is_deferred():
            return make_array(self._value, None, self._device)
        return apply(_op("stop_gradient"), (self,), _EMPTY, make_array)

    # -- autograd --------------------------------------------------------------
    def attach_grad(self, grad_req: str = "write", stype: str = "default") -> None:
        """Ask for this array's gradient: ``backward`` fills ``.grad`` (``"add"`` accumulates).

        ``stype="row_sparse"``: the gradient is kept row_sparse (only the rows it touches), as
        ``take(..., sparse_grad=True)`` and ``dot(csr, w)`` give for ``w``.
        The gradient buffer is allocated by the first ``backward`` that writes it (an array that is
        never differentiated costs no gradient memory); ``grad_req="null"`` stops tracking.
        """
        autograd.mark_leaf(self, grad_req, stype)

    @property
    def grad(self) -> NDArray | None:
        """The gradient written by the last ``backward`` (lazy inside deferred compute); None
        before the first backward. Reading it twice gives the same array."""
        ag = self._ag
        return ag.grad if ag.__class__ is autograd.Leaf else None

    def backward(self, out_grad: NDArray | None = None, retain_graph: bool = False) -> None:
        """Gradients of this array w.r.t. every array that called ``attach_grad()``.

        The values autograd saved are freed afterwards; pass ``retain_graph=True`` to run
        backward through the same graph again.
        """
        if self._ag is None:
            raise AutogradError(
                "backward: this array was not computed from an array with attach_grad() inside "
                "autograd.record(); call x.attach_grad() and compute inside `with la.autograd.record():`"
            )
        heads = None
        if out_grad is not None:
            heads = [out_grad if isinstance(out_grad, NDArray) else array_from(out_grad, self._device)]
        autograd.backward_arrays([self], heads, make_array, retain_graph)

    # -- arithmetic (the dispatcher builds these: its hot path is inlined in them) ----
    __add__ = _operator(_ADD)
    __radd__ = _operator(_ADD, reverse=True)
    __sub__ = _operator(_SUB)
    __rsub__ = _operator(_SUB, reverse=True)
    __mul__ = _operator(_MUL)
    __rmul__ = _operator(_MUL, reverse=True)
    __truediv__ = _operator(_DIV)
    __rtruediv__ = _operator(_DIV, reverse=True)
    __pow__ = _operator(_POW)
    __rpow__ = _operator(_POW, reverse=True)
    __matmul__ = _operator(_MATMUL)
    __rmatmul__ = _operator(_MATMUL, reverse=True)
    __neg__ = _unary(_NEG)
    __floordiv__ = _operator(_FLOORDIV)
    __rfloordiv__ = _operator(_FLOORDIV, reverse=True)
    __mod__ = _operator(_MOD)
    __rmod__ = _operator(_MOD, reverse=True)
    __and__ = _operator(_AND)
    __rand__ = _operator(_AND, reverse=True)
    __or__ = _operator(_OR)
    __ror__ = _operator(_OR, reverse=True)
    __xor__ = _operator(_XOR)
    __rxor__ = _operator(_XOR, reverse=True)
    __lshift__ = _operator(_LSHIFT)
    __rlshift__ = _operator(_LSHIFT, reverse=True)
    __rshift__ = _operator(_RSHIFT)
    __rrshift__ = _operator(_RSHIFT, reverse=True)
    __invert__ = _unary(_INV)

    def __pos__(self) -> NDArray:
        return self  # (la.positive(x) makes a copy)

    def __abs__(self) -> NDArray:
        return apply(_op("abs"), (self,), _EMPTY, make_array)

    __eq__ = _operator(_EQ)
    __ne__ = _operator(_NE)
    __lt__ = _operator(_LT)
    __le__ = _operator(_LE)
    __gt__ = _operator(_GT)
    __ge__ = _operator(_GE)

    # -- in place (normal arrays only) ------------------------------------------
    def _inplace(self, sym: str, other) -> NDArray:
        v = self._value
        if v is None or MODE.get() or is_frozen(v):  # the rare cases: _check_writable says which
            self._check_writable(f"x {sym} y", f"x = x {sym[:-1]} y")
        op = _INPLACE[sym]
        ov = other._materialize() if isinstance(other, ArrayBase) else other
        if isinstance(other, ArrayBase) and other._device is not self._device:
            raise _device_mismatch(op.name, self, other)
        try:
            res = op.bind(self._device.xp)(v, ov, out=v)
            if res is not v:  # a kernel that made a new array (not a ufunc): write it back
                self._device.xp.copyto(v, res, casting="same_kind")
            bump(v)
        except Exception as exc:
            if isinstance(exc, TypeError):  # NumPy's same_kind casting rule for out=
                raise DTypeError(
                    f"{op.name} (in place, {sym}): the result of {v.dtype} {sym[:-1]} "
                    f"{getattr(ov, 'dtype', type(ov).__name__)} cannot be stored in the {v.dtype} left operand "
                    f"without changing its kind (NumPy's same_kind rule); write x = x {sym[:-1]} y to get a "
                    "new array, or cast first") from None
            oshape = fmt_shape(getattr(ov, "shape", ()))
            raise ShapeError(
                f"{op.name} (in place, {sym}): cannot write the result into the left operand "
                f"{v.dtype}{fmt_shape(v.shape)} with the right operand "
                f"{getattr(ov, 'dtype', type(ov).__name__)}{oshape}: {exc}; "
                f"write x = x {sym[:-1]} y to get a new array"
            ) from None
        return self

    def __iadd__(self, other: Operand) -> NDArray:
        return self._inplace("+=", other)

    def __isub__(self, other: Operand) -> NDArray:
        return self._inplace("-=", other)

    def __imul__(self, other: Operand) -> NDArray:
        return self._inplace("*=", other)

    def __itruediv__(self, other: Operand) -> NDArray:
        return self._inplace("/=", other)

    def __ipow__(self, other: Operand) -> NDArray:
        return self._inplace("**=", other)

    def __ifloordiv__(self, other: Operand) -> NDArray:
        return self._inplace("//=", other)

    def __imod__(self, other: Operand) -> NDArray:
        return self._inplace("%=", other)

    def __iand__(self, other: Operand) -> NDArray:
        return self._inplace("&=", other)

    def __ior__(self, other: Operand) -> NDArray:
        return self._inplace("|=", other)

    def __ixor__(self, other: Operand) -> NDArray:
        return self._inplace("^=", other)

    def __ilshift__(self, other: Operand) -> NDArray:
        return self._inplace("<<=", other)

    def __irshift__(self, other: Operand) -> NDArray:
        return self._inplace(">>=", other)

    def _check_writable(self, what: str, instead: str) -> None:
        if self._value is None or is_deferred():
            raise DeferredComputeError(
                f"{what}: in-place writes are not allowed on lazy arrays or inside deferred compute "
                f"(the graph decides where memory is reused); write `{instead}` instead"
            )
        if autograd.is_recording() and self._ag is not None:
            raise AutogradError(
                f"{what}: in-place write on an array recorded for autograd would corrupt its "
                f"gradient; write `{instead}` instead, or do it under la.autograd.pause()"
            )
        if is_frozen(self._value):
            raise DeferredComputeError(
                f"{what}: this array is read-only (a constant of a graph, or a value shared with one); "
                f"write `{instead}` instead, or take a copy first: y = x.copy()")

    # -- indexing --------------------------------------------------------------
    def __getitem__(self, key: Any) -> NDArray:
        if isinstance(key, NDArray) and key.dtype == np.bool_:
            return apply(_op("boolean_mask"), (self, key), _EMPTY, make_array)
        if isinstance(key, NDArray) or isinstance(key, (list, np.ndarray)):
            return apply(_op("take"), (self, key), {"axis": 0}, make_array)
        if key.__class__ is tuple and any(_is_index_array(k) for k in key):
            return _advanced_index(self, key)
        return apply(_op("getitem"), (self,), {"key": key}, make_array)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_writable("x[key] = v", "x = la.where(mask, v, x) or build a new array")
        if isinstance(key, NDArray):
            key = key._materialize()
        v = value._materialize() if isinstance(value, ArrayBase) else check_operand(value, "setitem", self.dtype)
        try:
            self._value[key] = v
            bump(self._value)
        except Exception as exc:
            raise ShapeError(f"setitem: cannot assign {getattr(v, 'shape', type(v).__name__)} to "
                             f"x[{key!r}] of an array {fmt_shape(self.shape)}: {exc}") from None

    # -- common methods (thin calls into the op library) ------------------------
    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> NDArray:
        """Sum over ``axis`` (``None``: all elements); ``keepdims=True`` keeps reduced dims as size 1. See ``la.sum``."""
        return apply(_op("sum"), (self,), {"axis": axis, "keepdims": keepdims}, make_array)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> NDArray:
        """Mean over ``axis`` (``None``: all elements); ``keepdims=True`` keeps reduced dims as size 1. See ``la.mean``."""
        return apply(_op("mean"), (self,), {"axis": axis, "keepdims": keepdims}, make_array)

    def max(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> NDArray:
        """Largest element over ``axis`` (``None``: all elements). See ``la.max``."""
        return apply(_op("max"), (self,), {"axis": axis, "keepdims": keepdims}, make_array)

    def min(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> NDArray:
        """Smallest element over ``axis`` (``None``: all elements). See ``la.min``."""
        return apply(_op("min"), (self,), {"axis": axis, "keepdims": keepdims}, make_array)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> NDArray:
        """Index of the largest element along ``axis`` (``None``: into the flattened array). See ``la.argmax``."""
        return apply(_op("argmax"), (self,), {"axis": axis, "keepdims": keepdims}, make_array)

    def reshape(self, *shape: int | tuple[int, ...]) -> NDArray:
        """The same elements in a new shape, given as ints or one tuple (``x.reshape(2, -1)``,
        ``x.reshape((2, -1))``); one dim may be -1 (inferred). A view where NumPy's would be one."""
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return apply(_op("reshape"), (self,), {"shape": shape}, make_array)

    def transpose(self, *axes: int | tuple[int, ...] | None) -> NDArray:
        """Dims permuted by ``axes`` (ints or one tuple); no axes reverses them, like ``x.T``."""
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) or axes == (None,) else axes
        return apply(_op("transpose"), (self,), {"axes": axes or None}, make_array)

    @property
    def T(self) -> NDArray:
        """The array with its dims reversed (``x.transpose()``)."""
        return apply(_op("transpose"), (self,), {"axes": None}, make_array)

    def expand(self, *sizes: int | tuple[int, ...]) -> NDArray:
        """PyTorch ``Tensor.expand``: -1 keeps a dim, size-1 dims stretch without copying."""
        return apply(_op("expand"), (self,), {"sizes": _sizes(sizes)}, make_array)

    def repeat(self, *sizes: int | tuple[int, ...]) -> NDArray:
        """PyTorch ``Tensor.repeat``: tile the array ``sizes`` times per dim (new dims in front)."""
        return apply(_op("repeat"), (self,), {"sizes": _sizes(sizes)}, make_array)

    def broadcast_to(self, shape: tuple[int, ...]) -> NDArray:
        """The array broadcast to ``shape`` by NumPy's rules (a view, no copy). See ``la.broadcast_to``."""
        return apply(_op("broadcast_to"), (self,), {"shape": shape}, make_array)

    def squeeze(self, axis: int | tuple[int, ...] | None = None) -> NDArray:
        """The array without the size-1 dims in ``axis`` (``None``: every size-1 dim)."""
        return apply(_op("squeeze"), (self,), {"axis": axis}, make_array)

    def expand_dims(self, axis: int | tuple[int, ...]) -> NDArray:
        """The array with a new size-1 dim inserted at ``axis``."""
        return apply(_op("expand_dims"), (self,), {"axis": axis}, make_array)

    def flatten(self) -> NDArray:
        """Every dim after the first merged into one, as MXNet's ``flatten``: ``(n, a, b)`` -> ``(n, a * b)``,
        a 1-D ``(n,)`` -> ``(n, 1)``, a 0-d array -> ``(1,)``."""
        return self.reshape(self.static_shape[0] if self.static_shape else 1, -1) if self.ndim else self.reshape(1)

    def exp(self) -> NDArray:
        """Elementwise ``e ** x`` (``la.exp(x)``)."""
        return apply(_op("exp"), (self,), _EMPTY, make_array)

    def log(self) -> NDArray:
        """Elementwise natural logarithm (``la.log(x)``)."""
        return apply(_op("log"), (self,), _EMPTY, make_array)

    def sqrt(self) -> NDArray:
        """Elementwise square root (``la.sqrt(x)``)."""
        return apply(_op("sqrt"), (self,), _EMPTY, make_array)

    def square(self) -> NDArray:
        """Elementwise ``x * x`` (``la.square(x)``)."""
        return apply(_op("square"), (self,), _EMPTY, make_array)

    def abs(self) -> NDArray:
        """Elementwise absolute value (``la.abs(x)``)."""
        return apply(_op("abs"), (self,), _EMPTY, make_array)

    def relu(self) -> NDArray:
        """Elementwise ``max(x, 0)`` (``la.relu(x)``)."""
        return apply(_op("relu"), (self,), _EMPTY, make_array)

    def sigmoid(self) -> NDArray:
        """Elementwise ``1 / (1 + exp(-x))`` (``la.sigmoid(x)``)."""
        return apply(_op("sigmoid"), (self,), _EMPTY, make_array)

    def tanh(self) -> NDArray:
        """Elementwise hyperbolic tangent (``la.tanh(x)``)."""
        return apply(_op("tanh"), (self,), _EMPTY, make_array)

    def dot(self, other: NDArray) -> NDArray:
        """``la.dot(x, other)``: NumPy's ``dot`` (matrix product for 2-D, sum over the last axis of
        ``x`` and the second-to-last of ``other`` for N-D)."""
        return apply(_op("dot"), (self, other), _EMPTY, make_array)


def _sizes(sizes):
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes


def _device_mismatch(opname, a, b):
    return DeviceError(f"{opname}: inputs live on different devices ({a.aval}, {b.aval}); "
                       f"move one first, e.g. y = y.to({a.device})")


_new = object.__new__


def make_array(value, entry, device) -> NDArray:
    """Build an ``NDArray`` (the constructor the dispatcher is handed)."""
    a = _new(NDArray)
    a._value = value
    a._entry = entry
    a._device = device
    return a


def array_from(obj, device: Device, dtype=None) -> NDArray:
    """Backend array from Python / NumPy data on ``device``: the core of ``la.array``."""
    if isinstance(obj, NDArray):
        v = obj._materialize()
        if dtype is not None and v.dtype != dtype:
            v = v.astype(dtype)
        return make_array(v if obj._device is device else to_device(v, obj._device, device), None, device)
    if isinstance(obj, SPARSE_TYPES):
        return make_array(obj, None, device)
    arr = np.asarray(obj) if not hasattr(obj, "__cuda_array_interface__") else obj
    if dtype is None and not isinstance(obj, (np.ndarray, np.generic)) and getattr(arr, "dtype", None) == np.float64:
        dtype = np.float32  # Python floats default to float32, NumPy arrays keep their dtype
    if dtype is not None:
        arr = arr.astype(dtype, copy=False)
    if device.kind == "cpu":
        value = np.array(arr, copy=True)
    else:
        value = to_device(arr, _CPU0, device)
    return make_array(value, None, device)


def storage_from_dense(x: NDArray, stype: str):
    return from_dense(x._materialize(), stype, x._device.xp)


_CPU0 = Device("cpu", 0)


def _is_index_array(k) -> bool:
    """True for an index-array part of a tuple key (not an int, a slice, None or ...)."""
    if isinstance(k, NDArray):
        return k.ndim > 0 or k._value is None or k.dtype.kind not in "iu"
    return isinstance(k, (list, np.ndarray))


def _advanced_index(x: NDArray, key: tuple) -> NDArray:
    """``x[key]`` for a tuple key holding integer index arrays: the ``advanced_index`` op."""
    positions, arrays, template = [], [], []
    for i, k in enumerate(key):
        if _is_index_array(k):
            a = k if isinstance(k, NDArray) else np.asarray(k)
            if a.dtype == np.bool_:
                raise DTypeError(
                    f"x[...]: a boolean mask inside a tuple key {fmt_shape(x.shape)} is not supported; "
                    "index with the mask alone (x[mask]) or with integer arrays (la.nonzero(mask))")
            positions.append(i)
            arrays.append(a)
            template.append(0)
        else:
            template.append(k)
    return apply(_op("advanced_index"), (x, arrays), {"key": tuple(template), "positions": tuple(positions)},
                 make_array)
