"""The op registry and the op library, one file per family; importing this registers them all."""
from . import conv, core, elementwise, linalg, math, nn, reduce, repeat_elements, sampling, shape, sorting  # noqa: F401,E501  (registration side effect)
from .registry import OpDef, all_ops, get, register  # noqa: F401
