"""``worker.run_step_region``: a replica's training program run without copies (``replica.local``)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.distributed import worker


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_run_step_region_equals_run_region_seeded_and_leaves_its_inputs(dtype):
    x, w = la.sym.var("x"), la.sym.var("w")
    text = la.Symbol([la.sym.dot(x, w).outputs[0], w.outputs[0], (x * 2).outputs[0]]).to_json()
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((6, 4)).astype(dtype)[:, ::2]  # (a view: not contiguous)
    wn = rng.standard_normal((2, 3)).astype(dtype)
    wa = la.array(wn)
    want = worker.run_region_seeded(text, ("x", "w"), 7, xn, wn)
    got = worker.run_step_region(text, ("x", "w"), 7, xn, wa)  # (the parameter as an NDArray, not copied)
    assert len(got) == len(want) == 3
    for g, e in zip(got, want):
        assert isinstance(g, np.ndarray) and g.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(wa.asnumpy(), wn)  # (the inputs are read, not written)
    empty = worker.run_step_region(text, ("x", "w"), 7, xn[:0], wa)  # (an empty dim)
    assert empty[0].shape == (0, 3) and empty[2].shape == (0, 2)
