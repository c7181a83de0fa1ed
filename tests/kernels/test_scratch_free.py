"""kernels/scratch_free.py: ``reads_no_scratch`` answers before any run what ``kernels.bind`` binds
(``Bound.scratch`` False), so the memory plan may leave such a step without a workspace."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray import kernels
from lazyarray.kernels.scratch_free import reads_no_scratch
from lazyarray.ops import registry

RNG = np.random.default_rng(11)

CASES = [  # (input shape, weight shape, params)
    ((1, 8, 16, 16), (8, 8, 3, 3), {"padding": (1, 1)}),  # (direct)
    ((1, 16, 8, 8), (32, 16, 1, 1), {}),  # (pointwise)
    ((1, 16, 8, 8), (16, 1, 3, 3), {"padding": (1, 1), "groups": 16}),  # (depthwise)
    ((3, 8, 16, 16), (8, 8, 3, 3), {"padding": (1, 1)}),  # (a batch: the choice checked per call)
    ((1, 64, 16, 16), (64, 64, 3, 3), {"padding": (1, 1)}),  # (Winograd's channels: a kept weight counts)
    ((1, 3, 64, 64), (96, 3, 7, 7), {"stride": (2, 2), "padding": (3, 3)}),  # (a large stem)
    ((1, 8, 1, 40), (8, 8, 1, 5), {"padding": (0, 2)}),  # (conv1d)
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["conv2d", "conv2d_act"])
@pytest.mark.parametrize("case", CASES, ids=["direct", "pointwise", "depthwise", "batch", "winograd", "stem", "conv1d"])
def test_a_step_said_to_read_no_scratch_binds_a_kernel_that_reads_none(case, op, dtype, kernel_path):
    xs, ws, params = case
    x, w, b = (RNG.standard_normal(s).astype(dtype) for s in (xs, ws, (ws[0],)))
    o = registry.get(op)
    want = o.bind(np)(x, w, b, **o.make_params(params))  # (the runner's values)
    out = np.empty_like(want)
    said = reads_no_scratch(o, np, x, w, b, out=out, **params)
    bound = kernels.bind(o, np, x, w, b, out=out, **params)
    if said:
        assert bound is not None and not bound.scratch, bound
    if bound is not None:
        np.testing.assert_array_equal(bound.fn(x, w, b, out=out), want)
    if kernel_path == "compiled" and case is CASES[0]:
        assert said  # (direct's loop, bound once)


def test_max_pools_read_no_scratch_and_other_ops_are_not_asked():
    x = RNG.standard_normal((1, 8, 9, 9)).astype(np.float32)
    pool = registry.get("max_pool2d")
    assert reads_no_scratch(pool, np, x, kernel=(3, 3), stride=(2, 2), padding=(1, 1))
    bound = kernels.bind(pool, np, x, out=np.empty((1, 8, 5, 5), np.float32), kernel=(3, 3), stride=(2, 2),
                         padding=(1, 1))
    assert not bound.scratch
    assert not reads_no_scratch(registry.get("avg_pool2d"), np, x, kernel=(2, 2))
