"""``Parameter``: a named, lazily shaped array that a block learns, with its gradient.

A shape may contain ``0`` for dims unknown until the first forward call (``Dense(10)``
learns ``in_units`` from its input). ``initialize()`` on such a parameter only remembers
the initializer and device; the block's ``infer_shape(x)`` fills the unknown dims at the
first call and the value is created then.

Values written by ``forward`` itself (batch-norm running statistics) go through
``Parameter.update(value)``: imperatively it writes at once; inside a hybridize trace it
is recorded as an extra graph output and written back after each compiled call, so the
graph never mutates anything.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import threading

import numpy as np

from .. import guards
from .. import init as _init
from ..autograd import Leaf
from ..aval import as_dtype, check_alloc
from ..buffer import bump
from ..device import Device, current_device
from ..errors import AutogradError, LazyArrayError, ParamError, ParamValueError, ShapeError
from ..ndarray import NDArray, make_array
from ..storage import RowSparse
from ..user_frames import warn

_GRAD_REQS = ("write", "add", "null")


class ReinitializeWarning(UserWarning):
    """``initialize()`` on a parameter that already has a value: it is kept (``force_reinit=True``
    initializes it again)."""


class DeferredInitializationError(LazyArrayError, RuntimeError):
    """A parameter's value was asked for before its shape was known (or before initialize())."""


class Parameter:
    """A learnable array of a block.

    ``shape`` may hold ``0`` for unknown dims; ``grad_req`` is ``"write"``, ``"add"`` or
    ``"null"`` (no gradient: running statistics, frozen weights). ``lr_mult`` and ``wd_mult`` (as
    Gluon) multiply the optimizer's learning rate and weight decay for this parameter.

    >>> import lazyarray as la
    >>> w = la.blocks.Parameter("weight", shape=(2, 3), init=la.init.One())
    >>> w.initialize()
    >>> w.data().asnumpy().tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    def __init__(self, name: str = "", shape=None, dtype="float32", init=None, grad_req: str = "write",
                 device: Device | None = None, grad_stype: str = "default", lr_mult: float = 1.0,
                 wd_mult: float = 1.0):
        self.name = name
        self.qualified_name = ""  # its name in the collect_params() of the block last initialized
        self.lr_mult, self.wd_mult = lr_mult, wd_mult
        self.grad_stype = grad_stype  # "row_sparse": backward keeps only the rows it touches
        self._shape = None if shape is None else _as_shape(shape, name)
        self.dtype = as_dtype(dtype, f"Parameter {name!r}")
        self.init = None if init is None else _init.create(init)
        if grad_req not in _GRAD_REQS:
            raise ParamValueError(f"Parameter {name!r}: grad_req must be one of {_GRAD_REQS}, got {grad_req!r}"[:200])
        self._grad_req = grad_req
        self.device = device
        self._data: NDArray | None = None
        self._deferred = None  # (initializer, device) while waiting for the shape
        # initialize(device=[...]) with several devices: one copy per device (the first is _data);
        # a Trainer sums their gradients and writes the updated value into every copy
        self._devices: list[Device] | None = None
        self._copies: dict[Device, NDArray] = {}

    # -- shape -----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple | None:
        """The shape; ``0`` marks a dim not known yet."""
        return self._shape

    @shape.setter
    def shape(self, new) -> None:
        new = _as_shape(new, self.name)
        old = self._shape
        if old is not None:
            if len(old) != len(new) or any(o and n and o != n for o, n in zip(old, new)):
                raise ShapeError(f"Parameter {self.name!r}: cannot change shape {old} to {new}; "
                                 "only unknown (0) dims can be filled in")
            new = tuple(o or n for o, n in zip(old, new))
        self._shape = new
        if self._deferred is not None and self.shape_known:
            self._finish_init()

    @property
    def lr_mult(self) -> float:
        """The factor of the optimizer's learning rate for this parameter (1.0: the rate itself)."""
        return self._lr_mult

    @lr_mult.setter
    def lr_mult(self, value: float) -> None:
        self._lr_mult = _multiplier(value, self.name, "lr_mult")

    @property
    def wd_mult(self) -> float:
        """The factor of the optimizer's weight decay for this parameter (0.0: no decay, e.g. biases)."""
        return self._wd_mult

    @wd_mult.setter
    def wd_mult(self, value: float) -> None:
        self._wd_mult = _multiplier(value, self.name, "wd_mult")

    @property
    def shape_known(self) -> bool:
        return self._shape is not None and all(d > 0 for d in self._shape)

    @property
    def grad_req(self) -> str:
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req not in _GRAD_REQS:
            raise ParamValueError(f"Parameter {self.name!r}: grad_req must be one of {_GRAD_REQS}, got {req!r}"[:200])
        self._grad_req = req
        if self._data is not None:
            self._attach()

    # -- lifecycle --------------------------------------------------------------------------
    def initialize(self, init=None, device: Device | None = None, default_init=None,
                   force_reinit: bool = False) -> None:
        """Create the value with ``self.init`` (else ``init``, else ``default_init``, else Xavier
        for weights of 2 or more dims and zeros for vectors).

        With unknown dims the value is created at the first forward call instead.
        """
        if self._data is not None and not force_reinit:
            warn(f"Parameter {self.qualified_name or self.name!r} is already initialized, ignoring; pass "
                 "force_reinit=True to re-initialize", ReinitializeWarning)
            return
        initializer = self.init or (None if init is None else _init.create(init)) \
            or (None if default_init is None else _init.create(default_init))
        if isinstance(device, (list, tuple)):
            device = self._set_devices(device)
        else:
            self._devices = None
        self._copies = {}
        device = device or self.device or current_device()
        self._deferred = (initializer, device)
        if self.shape_known:
            self._finish_init()

    def _set_devices(self, devices) -> Device:
        """Keep a list of devices (one copy on each, ``initialize(device=[...])``); returns the first."""
        devices = list(dict.fromkeys(devices))
        if not devices or not all(isinstance(d, Device) for d in devices):
            raise ValueError(f"Parameter {self.name!r}: device must be a device or a non-empty list of "
                             f"devices such as [la.cpu(0), la.cpu(1)], got {devices!r}")
        self._devices = devices if len(devices) > 1 else None
        if self._devices:
            MULTI_DEVICE[0] = True
        return devices[0]

    def reset_device(self, device: Device | list[Device]) -> None:
        """Move the value and its gradient to ``device`` (Gluon's ``reset_ctx``); a list of devices keeps a
        copy on each, as ``initialize(device=[...])`` does (their gradients start again from zeros). A
        parameter not created yet is created on ``device`` when it is.

        >>> import lazyarray as la
        >>> w = la.blocks.Parameter("w", shape=(2,)); w.initialize(device=la.cpu(0))
        >>> w.reset_device(la.cpu(1)); w.data().device
        cpu(1)
        """
        if isinstance(device, (list, tuple)):
            first = self._set_devices(device)
        elif isinstance(device, Device):
            first, self._devices = device, None
        else:
            raise ParamError(f"Parameter {self.name!r}: reset_device takes a device such as la.cpu(0) (or a list "
                             f"of them), got {type(device).__name__}")
        self.device = first
        if self._deferred is not None:  # created on the new device when its shape is known
            self._deferred = (self._deferred[0], first)
        old = self._data
        if old is None:
            return
        if old.device == first:  # the value stays (its gradient too); only the other copies change
            self._make_copies(old)
            return
        leaf = self._leaf()
        grad = None if leaf is None or leaf.grad is None or self._devices else leaf.grad
        data = make_array(old.to(first)._materialize(), None, first)
        self._track(data)
        self._make_copies(data)
        self._data = data
        if grad is not None:
            new = self._leaf()
            new.grad = make_array(grad.to(first)._materialize(), None, first)
            new.fresh = leaf.fresh

    def _finish_init(self) -> None:
        with INIT_LOCK:  # another thread's first call may be creating it right now
            if self._deferred is None:
                return
            initializer, device = self._deferred
            if initializer is None:  # nobody chose: Xavier for weights, zeros for vectors
                initializer = _init.Xavier() if len(self._shape) >= 2 else _init.Zero()
            # (a named error before NumPy tries: a 16 TiB weight is a typo in a layer size)
            check_alloc(f"Parameter {self.name!r}", self._shape, self.dtype, "value")
            data = make_array(initializer(self._shape, self.dtype, device), None, device)
            self._track(data)
            self.device = device
            self._make_copies(data)
            self._data = data  # ready before ``_deferred`` clears: no thread sees neither
            self._deferred = None

    def _make_copies(self, data: NDArray) -> None:
        """One copy of ``data`` per extra device of ``initialize(device=[...])``, each with its gradient."""
        if not self._devices:
            self._copies = {}
            return
        copies = {data.device: data}
        for d in self._devices[1:]:
            c = data.to(d).detach()
            self._track(c)
            copies[d] = c
        self._copies = copies

    def _attach(self) -> None:
        # (grad_req="null" stops tracking: no gradient is computed for this parameter)
        self._track(self._data)
        for c in self._copies.values():
            self._track(c)

    def _track(self, data: NDArray) -> None:
        """``data.attach_grad`` with this parameter's gradient settings; the leaf carries the parameter's
        name, so an error about the recorded value (written before ``backward()``) can name it."""
        data.attach_grad(self._grad_req, stype=self.grad_stype)
        leaf = data._ag
        if leaf is not None:
            leaf.name = self.qualified_name or self.name

    def name_as(self, qualified_name: str) -> None:
        """Take the name a block's ``collect_params()`` gives it (``"0.weight"``), for messages."""
        self.qualified_name = qualified_name
        for data in ([self._data] if self._data is not None else []) + list(self._copies.values()):
            if data._ag is not None:
                data._ag.name = qualified_name

    @property
    def initialized(self) -> bool:
        return self._data is not None

    def data(self, device: Device | None = None) -> NDArray:
        """The value (an array that tracks its gradient when ``grad_req`` is not ``"null"``)."""
        trace = guards.active()
        if trace is not None:
            trace.read_parameter(self)  # a trace binds every parameter it reads as a graph input
        d = self._data
        if d is None:
            if self._deferred is not None and self.shape_known:
                self._finish_init()  # (a concurrent first call filled the shape in)
            d = self._data
            if d is None:
                raise self._not_ready()
        if self._copies:
            return self._copy_on(device or current_device(), strict=device is not None)
        if device is not None and device is not d.device:
            return d.to(device)
        return d

    def _copy_on(self, device: Device | None, strict: bool = False) -> NDArray:
        """The copy on ``device`` (parameters on several devices); the first copy when there is none
        there, or ``DeferredInitializationError`` with ``strict``."""
        c = self._copies.get(device)
        if c is None:
            if strict:
                raise DeferredInitializationError(
                    f"Parameter {self.name!r} has copies on {', '.join(map(str, self._copies))}, not on "
                    f"{device}; initialize it with device=[..., {device}] or move the input there")
            return self._data
        return c

    def list_data(self) -> list[NDArray]:
        """The value on each device it was initialized on (one array without several devices)."""
        return list(self._copies.values()) if self._copies else [self.data()]

    def list_grad(self) -> list[NDArray]:
        """The gradient on each device, in ``list_data()`` order."""
        return [self.grad(d) for d in self.list_device()]

    def list_device(self) -> list[Device]:
        """The devices holding a copy."""
        return list(self._copies) if self._copies else [self.data().device]

    def _not_ready(self) -> DeferredInitializationError:
        if self._deferred is not None:
            return DeferredInitializationError(
                f"Parameter {self.name!r} has shape {self._shape} with unknown (0) dims; it is created "
                "at the block's first forward call, which fills them in. Call the block once, or give "
                "the full shape (e.g. in_units=...)")
        return DeferredInitializationError(
            f"Parameter {self.name!r} is not initialized; call net.initialize() (or param.initialize()) "
            "before using it")

    def grad(self, device: Device | None = None) -> NDArray:
        """The gradient written by the last ``backward`` (zeros before any)."""
        if self._grad_req == "null":
            raise AutogradError(f"Parameter {self.name!r} has grad_req='null' and no gradient")
        d = self.data(device) if self._copies else self.data()
        g = d.grad
        if g is None:  # before the first backward: zeros (no gradient buffer is kept until then)
            g = make_array(d.device.xp.zeros(d.shape, d.dtype), None, d.device)
        return g if device is None or self._copies else g.to(device)

    def set_data(self, value) -> None:
        """Replace the value (a copy; the same shape keeps the array identity and its gradient buffer)."""
        v = value._materialize() if isinstance(value, NDArray) else np.asarray(value)
        if self._data is None:
            if self._shape is not None:
                self.shape = tuple(v.shape)
            else:
                self._shape = tuple(v.shape)
            device = self._deferred[1] if self._deferred else (self.device or current_device())
            self._deferred = None
            self.device = device
            xp = device.xp
            data = make_array(xp.array(v, dtype=self.dtype, copy=True), None, device)
            self._track(data)
            self._make_copies(data)
            self._data = data
            return
        buf = self._data._value
        if tuple(v.shape) != tuple(buf.shape):
            raise ShapeError(f"Parameter {self.name!r}: set_data got shape {tuple(v.shape)}, the parameter "
                             f"is {tuple(buf.shape)}")
        buf[...] = v
        bump(buf)
        self._sync_copies()

    def _sync_copies(self) -> None:
        """Write the first copy's value into the others (after an update)."""
        first = self._data
        for c in self._copies.values():
            if c is not first:
                buf = c._value
                buf[...] = first.to(c.device)._materialize()
                bump(buf)

    def cast(self, dtype) -> None:
        """Change the dtype: the value and the gradient (if any) are converted."""
        dtype = as_dtype(dtype, f"Parameter {self.name!r}")
        self.dtype = dtype
        d = self._data
        if d is None or d.dtype == dtype:
            return
        leaf = self._leaf()
        grad = None if leaf is None or leaf.grad is None else leaf.grad._materialize()
        self._data = make_array(d._materialize().astype(dtype), None, d.device)
        self._make_copies(self._data)
        self._attach()
        if grad is not None and not isinstance(grad, RowSparse):
            new = self._leaf()
            new.grad = make_array(grad.astype(dtype), None, d.device)
            new.fresh = leaf.fresh

    def zero_grad(self) -> None:
        """Set the gradient buffer to zeros (for ``grad_req='add'``)."""
        for leaf, device in self._leaves():
            if leaf.grad is None:
                continue
            g = leaf.grad._materialize()
            if isinstance(g, RowSparse):  # zero rows stored
                leaf.grad = make_array(RowSparse(g.data[:0], g.indices[:0], g.shape), None, device)
            else:
                g[...] = 0
                bump(g)

    def _leaves(self) -> list:
        """(autograd leaf, device) of every copy that tracks a gradient."""
        arrays = list(self._copies.values()) if self._copies else [self._data]
        if self._grad_req == "null":
            return []
        return [(a._ag, a.device) for a in arrays if a is not None and isinstance(a._ag, Leaf)]

    def update(self, value: NDArray) -> None:
        """Write a value computed by ``forward`` (running statistics).

        Imperatively the value is copied in now; inside a hybridize trace it becomes an
        extra output of the graph, written back after every call of the compiled graph.
        """
        pending = _PENDING_UPDATES.get()
        if pending is not None:
            pending.append((self, value))
        else:
            self.set_data(value.detach())

    # -- raw access for the trainer --------------------------------------------------------------
    def _leaf(self):
        d = self._data
        if d is None or self._grad_req == "null":
            return None
        ag = d._ag
        return ag if isinstance(ag, Leaf) else None

    def _grad_is_fresh(self) -> bool:
        """True when a backward wrote the gradient (of every copy) since the optimizer last took it."""
        if self._copies:
            leaves = self._leaves()
            return bool(leaves) and all(leaf.grad is not None and leaf.fresh for leaf, _ in leaves)
        leaf = self._leaf()
        return leaf is not None and leaf.grad is not None and leaf.fresh

    def _take_grad(self):
        """(value buffer, gradient buffer) as backend arrays for an in-place optimizer step; the
        gradient (computed now if lazy) counts as used until the next backward writes it. With copies
        on several devices the gradient is their sum, on the first device."""
        leaf = self._leaf()
        leaf.fresh = False
        g = leaf.grad._materialize()
        if self._copies:
            first = self._data.device
            for other, device in self._leaves()[1:]:
                other.fresh = False
                part = other.grad.to(first)._materialize()
                if isinstance(g, RowSparse) or isinstance(part, RowSparse):
                    raise AutogradError(f"Parameter {self.name!r}: row_sparse gradients on several devices "
                                        "are not summed; initialize it on one device")
                g = g + part
        return self._data._value, g

    def __repr__(self) -> str:
        shape = "?" if self._shape is None else self._shape
        return f"Parameter({self.name!r}, shape={shape}, dtype={self.dtype}, grad_req={self._grad_req!r})"


class Constant(Parameter):
    """A parameter that holds a fixed value (``grad_req="null"``): saved, loaded and exported with the
    other parameters, never trained (Gluon's ``Constant``).

    >>> import lazyarray as la
    >>> class Shift(la.blocks.HybridBlock):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.offset = la.blocks.Constant([1.0, 2.0])
    ...     def forward(self, x):
    ...         return x + self.offset.data()
    >>> net = Shift(); net.initialize()
    >>> net(la.zeros(2)).asnumpy()
    array([1., 2.], dtype=float32)
    """

    def __init__(self, value, name: str = ""):
        v = value._materialize() if isinstance(value, NDArray) else np.asarray(value)
        if v.dtype == np.float64 and not isinstance(value, (NDArray, np.ndarray)):
            v = v.astype(np.float32)  # Python floats: float32, as la.array gives
        v = np.array(v.get() if hasattr(v, "get") else v)
        self.value = v
        super().__init__(name, shape=v.shape, dtype=v.dtype, init=_init.Constant(v), grad_req="null")

    @property
    def grad_req(self) -> str:
        return "null"

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req != "null":
            raise ParamValueError(f"Constant {self.name!r} has no gradient: its grad_req stays 'null', got {req!r}"[:200])
        self._grad_req = req

    def __repr__(self) -> str:
        return f"Constant({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def _multiplier(value, name: str, what: str) -> float:
    """``value`` as a finite float >= 0 (an ``lr_mult`` / ``wd_mult``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParamError(f"Parameter {name!r}: {what} must be a number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or value < 0:
        raise ParamValueError(f"Parameter {name!r}: {what} must be a finite number >= 0, got {value!r}")
    return value


def _as_shape(shape, name) -> tuple:
    if not isinstance(shape, (int, np.integer, tuple, list)):
        raise ShapeError(f"Parameter {name!r}: shape must be an int or a tuple of non-negative ints (0 = unknown), "
                         f"got {type(shape).__name__} {shape!r}"[:300])
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        raise ShapeError(f"Parameter {name!r}: shape must be non-negative ints (0 = unknown), got {shape}")
    return tuple(int(d) for d in shape)


# Deferred initialization happens once per parameter, at a block's first call; first calls from
# several threads at once take turns here (cold path only).
INIT_LOCK = threading.RLock()

# True once a parameter was initialized on several devices: blocks then run ``forward`` with the
# device of their first input as the current device, so ``param.data()`` picks that copy.
MULTI_DEVICE = [False]

_PENDING_UPDATES: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "lazyarray_pending_updates", default=None)


@contextlib.contextmanager
def collect_updates():
    """Collect ``Parameter.update`` calls instead of applying them (used while tracing)."""
    pending: list = []
    token = _PENDING_UPDATES.set(pending)
    try:
        yield pending
    finally:
        _PENDING_UPDATES.reset(token)
