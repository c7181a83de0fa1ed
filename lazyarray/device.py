"""Devices: ``cpu(i)`` and ``gpu(i)``, the array module of each, and transfers.

``cpu(0)`` and ``cpu(1)`` are distinct devices. Both keep NumPy arrays in host memory,
but lazyarray treats them as separate places: mixing them in one op is an error and a
transfer between them is a real copy. That makes every multi-device code path
(placement, copy nodes, per-device memory plans) testable on a machine with no GPU.
"""
from __future__ import annotations

import contextvars
from types import ModuleType

import numpy as np

from .args import int_arg
from .errors import DeviceError

try:  # CuPy is an optional extra: ``pip install lazyarray[gpu]``.
    import cupy as _cupy
except Exception:  # pragma: no cover - depends on the machine
    _cupy = None


class Device:
    """A place where arrays live: ``kind`` is ``"cpu"`` or ``"gpu"``, ``id`` its index.

    Devices are interned, so ``la.cpu(1) is la.cpu(1)`` and comparison is cheap.
    A device is also a context manager that makes it the default device::

        >>> import lazyarray as la
        >>> with la.cpu(1):
        ...     la.zeros(2).device
        cpu(1)
    """

    # No per-instance mutable state: devices are shared singletons, and the ``with`` stack
    # of the default device lives in context variables (one per thread / asyncio task).
    __slots__ = ("kind", "id", "xp")
    _interned: dict[tuple[str, int], Device] = {}

    def __new__(cls, kind: str, id: int = 0) -> Device:
        key = (kind, int(id))
        dev = cls._interned.get(key)
        if dev is not None:
            return dev
        if kind not in ("cpu", "gpu"):
            raise DeviceError(f"unknown device kind {kind!r}; use la.cpu(i) or la.gpu(i)")
        if not isinstance(id, (int, np.integer)) or id < 0:
            raise DeviceError(f"device id must be a non-negative int, got {id!r}")
        dev = object.__new__(cls)
        dev.kind, dev.id = key
        dev.xp = np if kind == "cpu" else _cupy
        cls._interned[key] = dev
        return dev

    def __repr__(self) -> str:
        return f"{self.kind}({self.id})"

    __str__ = __repr__

    def __reduce__(self):
        return (Device, (self.kind, self.id))

    def __enter__(self) -> Device:
        # The token goes on this context's own stack (an immutable tuple in a ContextVar), so
        # threads and asyncio tasks entering the same device never see each other's tokens.
        _TOKENS.set(_TOKENS.get() + (_DEFAULT.set(self),))
        return self

    def __exit__(self, *exc) -> None:
        tokens = _TOKENS.get()
        if not tokens:
            raise DeviceError(f"{self}.__exit__ without a matching __enter__ in this thread / task")
        _DEFAULT.reset(tokens[-1])
        _TOKENS.set(tokens[:-1])

    @staticmethod
    def parse(text: str | Device) -> Device:
        """``"cpu(1)"`` -> ``cpu(1)``; used by serialization and by params given as strings."""
        if isinstance(text, Device):
            return text
        s = str(text).strip()
        for kind in ("cpu", "gpu"):
            if s.startswith(kind + "(") and s.endswith(")"):
                try:
                    return Device(kind, int(s[len(kind) + 1 : -1]))
                except ValueError:
                    break
        raise DeviceError(f"cannot parse device {text!r}; expected a form like 'cpu(0)' or 'gpu(1)'")


def cpu(i: int = 0) -> Device:
    """The CPU device number ``i`` (NumPy arrays). ``str(la.cpu(1)) == "cpu(1)"``."""
    return Device("cpu", int_arg(i, "la.cpu", "the device number"))


def gpu(i: int = 0) -> Device:
    """The GPU device number ``i`` (CuPy arrays). Raises ``DeviceError`` without CuPy or that GPU."""
    i = int_arg(i, "la.gpu", "the device number")
    if _cupy is None:
        raise DeviceError(
            f"la.gpu({i}) needs CuPy, which is not installed; install it with "
            "`pip install lazyarray[gpu]` (and a CUDA driver), or use la.cpu()"
        )
    try:
        count = _cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        raise DeviceError(f"la.gpu({i}): CuPy found no usable GPU ({exc}); use la.cpu()") from None
    if i >= count:
        raise DeviceError(f"la.gpu({i}): only {count} GPU(s) present (ids 0..{count - 1})")
    return Device("gpu", i)


def as_device(value, where: str = "device") -> Device:
    """A ``device=`` argument as a ``Device``: a device itself, or a string such as ``"cpu"``,
    ``"cpu(1)"``, ``"gpu"`` or ``"gpu(0)"`` (a bare kind is device 0). A GPU must be usable here
    (CuPy and that GPU present), else ``DeviceError`` with the fix."""
    if isinstance(value, Device):
        return value
    if not isinstance(value, str):
        raise DeviceError(f"{where}: device must be a device such as la.cpu(0) or a string such as 'cpu(1)', "
                          f"got {type(value).__name__} {value!r}"[:300])
    text = value.strip()
    try:
        dev = Device(text, 0) if text in ("cpu", "gpu") else Device.parse(text)
        if dev.kind == "gpu":
            gpu(dev.id)
    except DeviceError as exc:
        raise DeviceError(f"{where}: device {value!r}: {exc}") from None
    return dev


def gpu_available() -> bool:
    """True when CuPy is importable and at least one GPU is visible."""
    try:
        gpu(0)
    except DeviceError:
        return False
    return True


# The default device, and the tokens of the open ``with device:`` blocks (innermost last).
# Both are per context: each thread and each asyncio task has its own (a task starts with a
# copy of its creator's), like the deferred-compute flag in ``deferred.py``.
_DEFAULT: contextvars.ContextVar[Device] = contextvars.ContextVar("lazyarray_device", default=cpu(0))
_TOKENS: contextvars.ContextVar[tuple[contextvars.Token, ...]] = contextvars.ContextVar(
    "lazyarray_device_tokens", default=())


def current_device() -> Device:
    """The default device of this thread / asyncio task: ``cpu(0)`` unless a ``with la.cpu(i):``
    / ``with la.gpu(i):`` is open in it."""
    return _DEFAULT.get()


def array_module(device: Device) -> ModuleType:
    """The array module (``numpy`` or ``cupy``) that holds arrays of ``device``."""
    return device.xp


def to_device(value, src: Device, dst: Device):
    """Copy a backend array from ``src`` to ``dst``. Always a real copy, even cpu(0) -> cpu(1)."""
    if dst.kind == "cpu":
        if src.kind == "gpu":
            return _cupy.asnumpy(value)
        return np.array(value, copy=True)
    with _cupy.cuda.Device(dst.id):
        return _cupy.array(value, copy=True)


def on_device(device: Device):
    """A context in which the backend allocates on ``device`` (a no-op for CPUs)."""
    if device.kind == "gpu":
        return _cupy.cuda.Device(device.id)
    return _NullContext()


class _NullContext:
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None
