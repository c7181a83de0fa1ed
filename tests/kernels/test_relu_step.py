"""relu[compiled, flat] (lazyarray/kernels/relu_step.py): a compiled step's relu on flat views gives
``maximum``'s values bit for bit, in place and into another buffer, and hands every case it does not take
(views, overlapping buffers, a program's first run, no ``out``) to the bound ``compiled`` choice."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import elementwise, elementwise_jit, relu_step

pytest.importorskip("numba")

SPECIALS = [np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf]


def _x(shape, dtype, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:min(len(SPECIALS), flat.size)] = SPECIALS[:flat.size]
    return x


def _same_bits(got, want):
    kind = {4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(kind), np.ascontiguousarray(want).view(kind))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(8, 7, 128), (4096,), (3, 5000), (0, 7, 128)])
def test_the_flat_step_is_maximum_bit_for_bit_in_place_and_into_another_buffer(dtype, shape):
    x = _x(shape, dtype)
    want = np.maximum(x, 0)
    bound = kernels.bind("relu", np, x, out=x)
    if x.size < 4096:  # (under half a zero row: maximum is chosen, nothing to bind flat)
        assert relu_step.FLAT not in bound.choice.notes
    else:
        assert str(bound.choice) == "relu[compiled, flat]"
    y = x.copy()
    assert bound.fn(y, out=y) is y
    _same_bits(y, want)
    out = np.full_like(x, 7)
    assert bound.fn(x, out=out) is out
    _same_bits(out, want)
    new = bound.fn(x, out=None)  # (no out: the bound choice allocates)
    assert new is not x
    _same_bits(new, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_views_and_overlapping_buffers_take_the_general_path(dtype):
    """A view, a batch-last array, an ``out`` of another layout and an ``out`` overlapping ``x`` without
    being it: the bound ``compiled`` choice (and its fallbacks) run, with ``maximum``'s values."""
    x = _x((64, 80), dtype, 1)
    bound = kernels.bind("relu", np, x, out=np.empty_like(x))
    assert relu_step.FLAT in bound.choice.notes
    view = _x((64, 160), dtype, 2)[:, ::2]
    _same_bits(bound.fn(view, out=np.empty((64, 80), dtype)), np.maximum(view, 0))
    stored = np.ascontiguousarray(x.T).T  # (Fortran order: not C-ordered)
    out = np.empty_like(stored)
    assert bound.fn(stored, out=out) is out
    _same_bits(out, np.maximum(stored, 0))
    strided = np.empty((64, 160), dtype)[:, ::2]
    assert bound.fn(x, out=strided) is strided
    _same_bits(strided, np.maximum(x, 0))
    buf = _x(64 * 80 + 1, dtype, 3)
    src, dst = buf[:-1].reshape(64, 80), buf[1:].reshape(64, 80)
    want = np.maximum(src, 0)
    assert bound.fn(src, out=dst) is dst
    _same_bits(dst, want)


def test_the_flat_call_runs_the_compiled_loops_and_not_in_a_first_run():
    x = _x((8, 7, 128), np.float32, 4)
    bound = kernels.bind("relu", np, x, out=x)
    calls = []
    real = jit.compiled(elementwise_jit.relu_in_place)

    def spy(*args):
        calls.append(args[0].shape)
        return real(*args)

    jit.COMPILED.put(elementwise_jit.relu_in_place, spy)
    try:
        y = x.copy()
        bound.fn(y, out=y)
        assert calls == [(x.size,)]
        with jit.first_run():  # (tiered loops are off there: the NumPy path, the same values)
            z = x.copy()
            bound.fn(z, out=z)
        assert calls == [(x.size,)]
    finally:
        jit.COMPILED.discard(elementwise_jit.relu_in_place)
    _same_bits(y, np.maximum(x, 0))
    _same_bits(z, np.maximum(x, 0))


def test_the_switch_and_the_conditions():
    x = _x((8, 7, 128), np.float32)
    with la.tuning(relu_flat_step=False):
        assert str(kernels.bind("relu", np, x, out=x).choice) == "relu[compiled]"
    assert str(kernels.bind("relu", np, x.T, out=None).choice) == "relu[compiled]"  # (not C-ordered)
    xi = np.arange(-5000, 5000)
    b = kernels.bind("relu", np, xi, out=None)
    assert relu_step.FLAT not in b.choice.notes
    np.testing.assert_array_equal(b.fn(xi, out=None), np.maximum(xi, 0))
    assert not relu_step.applies(b.choice, elementwise.COMPILED, xi, None, la.tuning_table.current())


class _MatmulRelu(la.blocks.HybridBlock):
    """relu(x @ w): T5's feed-forward shape (a matmul without bias, so the relu stays its own step)."""

    def forward(self, x, w):
        return la.relu(la.matmul(x, w))


def test_a_compiled_program_names_it_in_explain_and_gives_the_reference_values():
    net = _MatmulRelu()
    net.hybridize()
    x = la.array(_x((8, 7, 32), np.float32, 5))
    w = la.array(_x((32, 128), np.float32, 6))
    net(x, w)
    y = net(x, w).asnumpy()  # (a second run: the tiered loops)
    with la.tuning(relu_flat_step=False):
        net(x, w)
        want = net(x, w).asnumpy()
    _same_bits(y, want)
    np.testing.assert_allclose(y, np.maximum(x.asnumpy() @ w.asnumpy(), 0), rtol=1e-5, atol=1e-5)  # (the product's
    # rounding is BLAS's: the relu's bits are checked against the reference runner's above)
    assert "relu[compiled, flat]" in str(net.explain(x, w))
