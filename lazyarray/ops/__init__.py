"""The op registry and the op library, one file per family; importing this registers them all."""
from . import (  # noqa: F401  (registration side effect)
    conv,
    core,
    elementwise,
    linalg,
    math,
    nn,
    pool,
    reduce,
    repeat_elements,
    sampling,
    sbp_rules,
    shape,
    sorting,
)
from .registry import OpDef, all_ops, get, register  # noqa: F401
