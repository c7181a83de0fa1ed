"""The op registry and the op library, one file per family; importing this registers them all."""
from . import (  # noqa: F401  (registration side effect)
    advanced_index,
    bitcast,
    conv,
    core,
    detection,
    elementwise,
    fft,
    linalg,
    loss,
    math,
    nn,
    norm,
    pool,
    reduce,
    repeat_elements,
    sampling,
    sbp_rules,
    scatter,
    shape,
    sorting,
)
from .registry import OpDef, all_ops, get, register  # noqa: F401
