"""The kernels layer's dense: the chooser names each path, each equals the reference kernel, and
the name is the one ``explain()`` shows."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels, threads
from lazyarray.kernels import dense as kdense
from lazyarray.kernels import dense_regions
from lazyarray.ops import registry

REFERENCE = registry.get("dense").kernel  # ops/nn.py: x @ weight.T + bias as one matmul
RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", ["gemv", "gemm", "gemm one row", "rows", "units_major"])
def test_each_path_is_named_and_equals_the_reference(case):
    x, w, b = _f32(1 if case in ("gemv", "gemm one row") else 8, 16), _f32(4, 16), _f32(4)
    out = None
    if case == "gemv":
        out = np.empty((1, 4), np.float32)
    elif case == "rows":
        x = _f32(3, 5, 16)
    elif case == "units_major":
        out = np.empty((4, 8), np.float32).T  # (memory (units, rows))
    choice = kernels.choose("dense", np, x, w, b, out=out)
    assert choice.impl.name == case.split()[0]
    y = kdense.run_dense(np, x, w, b, out=out)
    if out is not None:
        assert y is out
    np.testing.assert_allclose(y, REFERENCE(np, x, w, b), rtol=1e-5, atol=1e-5)


def test_a_large_one_row_layer_takes_the_region_or_names_its_fallback():
    before = threads.num_threads()
    la.set_num_threads(2)
    try:
        # (a shape no other test uses: dense_regions keeps a plan per weight shape and thread count)
        x, w, b = _f32(1, 776), _f32(520, 776), _f32(520)
        out = np.empty((1, 520), np.float32)
        assert kernels.choose("dense", np, x, w, b, out=out).impl.name == "region"
        with la.profile() as prof:
            y = registry.get("dense").bind(np)(x, w, b, out=out)
            ran = prof.take_choice()
        # the region where it runs (numba, a thread-safe layer, BLAS's small calls serial), else
        # its fallback, and the label says which: the region itself declines exactly when gemv ran
        assert ran in ("region", "gemv")
        assert dense_regions.dense_row(x, w, np.empty_like(out)) is (ran == "region")
        if not jit.parallel_ready():
            assert ran == "gemv"
        np.testing.assert_allclose(y, REFERENCE(np, x, w, b), rtol=1e-5, atol=1e-4)
        with la.tuning(dense_region_min_weight_bytes=1 << 40):
            assert kernels.choose("dense", np, x, w, b, out=out).impl.name == "gemv"
    finally:
        la.set_num_threads(before)


def test_explain_names_the_dense_path_of_a_hybridized_mlp():
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Dense(8, in_units=4), la.blocks.Dense(2, in_units=8))
    net.initialize()
    net.hybridize()
    one = [r["op[implementation]"] for r in net.explain(la.ones((1, 4))).steps]
    many = [r["op[implementation]"] for r in net.explain(la.ones((16, 4))).steps]
    assert one[-1] == "nn.dense[gemv]" and many[-1].startswith("nn.dense[")
    assert all(r.startswith("nn.dense[") for r in one + many)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["plain", "no bias", "strided input", "empty rows", "empty features",
                                  "weight transposed view"])
def test_stack_writes_a_stacked_input_into_its_planned_buffer(dtype, case):
    """``stack``: an input of more than 2 dims into a C-ordered planned buffer (the layers
    graph/passes/matmul_bias.py makes): one product into the buffer's rows, the bias added in
    place; the reference's values (views, empty dims, a weight that is a transposed view)."""
    shape = {"empty rows": (2, 0, 16), "empty features": (2, 5, 0)}.get(case, (3, 5, 16))
    x = RNG.standard_normal(shape).astype(dtype)
    if case == "strided input":
        x = RNG.standard_normal((5, 3, 16)).astype(dtype).transpose(1, 0, 2)
    w = RNG.standard_normal((4, shape[-1])).astype(dtype)
    if case == "weight transposed view":
        w = np.ascontiguousarray(w.T).T
    b = None if case == "no bias" else RNG.standard_normal(4).astype(dtype)
    out = np.full(x.shape[:-1] + (4,), np.nan, dtype)
    assert kernels.choose("dense", np, x, w, b, out=out).impl.name == "stack"
    y = kdense.run_dense(np, x, w, b, out=out)
    assert y is out
    np.testing.assert_allclose(y, REFERENCE(np, x, w, b), rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    with la.tuning(dense_stack=False):
        assert kernels.choose("dense", np, x, w, b, out=out).impl.name == "rows"
    assert kernels.choose("dense", np, x, w, b).impl.name == "rows"  # (no planned buffer)
    assert kernels.choose("dense", np, x, w.astype(np.float16), b, out=out).impl.name == "rows"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["plain", "strided input", "empty rows", "empty features", "packed weight",
                                  "large product"])
def test_a_bound_stack_gives_the_runners_values_bit_for_bit(dtype, case):
    """``stack`` bound for a step's shapes (its sizes found once): ``run_dense``'s values bit for bit,
    call after call (a weight whose transpose is packed from its second call; a product large enough to
    find its BLAS threads per call runs ``_stack`` itself), views and empty dims among them."""
    shape, units = {"empty rows": ((2, 0, 16), 4), "empty features": ((2, 5, 0), 4), "packed weight": ((1, 7, 32), 128),
                    "large product": ((4, 64, 128), 256)}.get(case, ((3, 5, 16), 4))
    x = RNG.standard_normal(shape).astype(dtype)
    if case == "strided input":
        x = RNG.standard_normal((5, 3, 16)).astype(dtype).transpose(1, 0, 2)
    w, b = RNG.standard_normal((units, shape[-1])).astype(dtype), RNG.standard_normal(units).astype(dtype)
    out = np.full(x.shape[:-1] + (units,), np.nan, dtype)
    with la.tuning(blas_row_blocks=False):  # (the large product: dense[row_blocks] otherwise, blas_rows.py)
        bound = kernels.bind("dense", np, x, w, b, out=out)
        assert bound.choice.impl is kdense.STACK
        for _ in range(3):
            want = kdense.run_dense(np, x, w, b, out=np.empty_like(out))
            assert bound.fn(x, w, b, out=out) is out
            np.testing.assert_array_equal(out, want)
