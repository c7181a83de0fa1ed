"""The one-shot interpreter: results equal NumPy's, and values are dropped after their last read."""
from __future__ import annotations

import tracemalloc

import numpy as np

import lazyarray as la
from lazyarray.executor import recorded
from lazyarray.executor.recorded import ONESHOT_MAX_BYTES


def test_a_long_chain_run_once_holds_a_few_values_at_a_time():
    n = ONESHOT_MAX_BYTES // 4 // 2  # float32 values of half the one-shot limit: run node by node
    xn = np.random.default_rng(0).standard_normal(n).astype("float32")
    x = la.array(xn)
    recorded.clear()
    with la.deferred():
        y = x
        for _ in range(60):
            y = la.tanh(y) * 0.5
    tracemalloc.start()
    try:
        out = y.asnumpy()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert recorded.stats()["size"] == 0  # (seen once: not compiled)
    assert peak < 8 * xn.nbytes, peak  # 120 values were made; a handful were alive at once
    ref = xn
    for _ in range(60):
        ref = np.tanh(ref) * np.float32(0.5)
    np.testing.assert_allclose(out, ref, rtol=1e-5)
