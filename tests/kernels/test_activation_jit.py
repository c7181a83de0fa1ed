"""``activation_jit.activate_row`` (``depthwise``'s write-out of a row): each activation's loop gives
``activate_value``'s values bit for bit, the bias added first (-0.0 for none: every value, -0.0 and
NaN included, kept), in float32 and float64, on a strided view and an empty row."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray import jit
from lazyarray.kernels.activation_jit import NO_ACT, act_code, act_params, activate_row, activate_value
from lazyarray.ops.conv_act import ACTIVATIONS

numba = pytest.importorskip("numba")
needs_numba = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0, -3.0, 2.5, -2.5, 1e-30, -1e-30]


def _loops():
    """Two compiled loops over a row: ``activate_row``'s, and ``activate_value`` value by value (the
    inlined helpers need a compiled caller)."""
    row = jit.compiled(activate_row, always=True)
    value = jit.compiled(activate_value, always=True)

    def rows(y, a, bo, code, p):  # pragma: no cover  (compiled by numba)
        row(y, a, bo, code, p[0], p[1], p[2], p[3])

    def values(y, a, bo, code, p):  # pragma: no cover  (compiled by numba)
        for i in range(y.shape[0]):
            y[i] = value(a[i] + bo, code, p[0], p[1], p[2], p[3])

    return numba.njit(rows), numba.njit(values)


@needs_numba
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", [None, *ACTIVATIONS])
def test_activate_row_is_activate_value_bit_for_bit(act, dtype):
    rows, values = _loops()
    rng = np.random.default_rng(0)
    base = np.concatenate([np.array(SPECIAL), rng.standard_normal(45) * 4]).astype(dtype)
    p = act_params(np.dtype(dtype), 1 / 6, 0.5)
    code = act_code(act)
    assert (code == NO_ACT) == (act is None)
    for a in (base, np.repeat(base, 2)[::2], base[:0]):  # contiguous, a strided view, empty
        for bo in (np.dtype(dtype).type(0.75), -np.dtype(dtype).type(0.0)):
            got, want = np.full(a.shape, 7, dtype), np.full(a.shape, 7, dtype)
            rows(got, a, bo, code, p)
            values(want, a, bo, code, p)
            assert got.tobytes() == want.tobytes()
        untouched = np.empty_like(a)
        rows(untouched, a, -np.dtype(dtype).type(0.0), NO_ACT, p)
        assert untouched.tobytes() == a.tobytes()  # adding -0.0 keeps every value
