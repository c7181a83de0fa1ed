"""The op registry and the op library, one file per family; importing this registers them all."""
from . import conv, core, elementwise, math, nn, reduce, sampling, sbp_rules, shape, sorting  # noqa: F401  (registration side effect)
from .registry import OpDef, all_ops, get, register  # noqa: F401
