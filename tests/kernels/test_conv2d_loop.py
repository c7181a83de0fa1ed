"""conv2d ``loop`` (``kernels/pointwise_loop.py``): a small 1x1 convolution with a bias and no activation
by ``nn.conv2d_act[loop]``'s compiled loop equals the op's reference kernel within float rounding
(float32, float64) over views (a split's half, a strided weight and bias), planned and new outputs and
empty dims, and ``nn.conv2d_act[loop]`` without an activation bit for bit; the chooser takes it up to
``conv_pointwise_loop_max_macs`` and never with ``conv2d_pointwise_loop`` off, numba off or no bias
(``pointwise`` then); a compiled step's binding runs what the runner runs, bit for bit, and hands other
memory orders to the runner's path; a program's ``explain()`` names it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import pointwise_loop
from lazyarray.ops import registry

OP = registry.get("conv2d")
DTYPES = ("float32", "float64")
TOL = {"float32": {"rtol": 1e-5, "atol": 1e-5}, "float64": {"rtol": 1e-12, "atol": 1e-12}}
pytestmark = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")


def _arrays(rng, x_shape, o, dtype):
    x = (rng.standard_normal(x_shape) * 3).astype(dtype)
    w = rng.standard_normal((o, x_shape[1], 1, 1)).astype(dtype)
    return x, w, rng.standard_normal(o).astype(dtype)


def _check(x, w, b, dtype):
    """The runner's loop vs the reference and the loop without an activation; the binding's (planned
    output, new output) bit for bit."""
    assert kernels.choose(OP, np, x, w, b).impl is kconv.LOOP
    want = OP.kernel(np, np.ascontiguousarray(x), w, b)
    got = kconv.run_conv2d(np, x, w, b)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    np.testing.assert_array_equal(got, pointwise_loop.run_loop(np, x, w, b, None, 0.0, 0.0, None))
    out = np.full(want.shape, np.nan, dtype)
    bound = kernels.bind(OP, np, x, w, b, out=out)
    assert bound.choice.impl is kconv.LOOP
    assert bound.fn(x, w, b, out=out) is out
    np.testing.assert_array_equal(out, got)
    np.testing.assert_array_equal(bound.fn(x, w, b), got)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_loop_equals_the_reference_and_its_binding_the_runner(dtype):
    rng = np.random.default_rng(0)
    for x_shape, o in (((1, 16, 16, 16), 8), ((1, 24, 8, 8), 16), ((1, 32, 8, 8), 16), ((8, 16, 16, 16), 8),
                       ((8, 24, 8, 8), 16), ((8, 32, 8, 8), 16), ((3, 5, 2, 3), 6),
                       ((1, 7, 1, 1), 3), ((2, 4, 7, 7), 8)):
        x, w, b = _arrays(rng, x_shape, o, dtype)
        assert repr(kernels.choose(OP, np, x, w, b)) == "conv2d[loop]"
        _check(x, w, b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_and_empty_dims(dtype):
    """A split's half (images C-ordered, a batch stride twice their size), a strided weight and bias
    (read where they lie), and empty batch, channels, planes and output channels."""
    rng = np.random.default_rng(1)
    x, w, b = _arrays(rng, (3, 12, 4, 5), 6, dtype)
    half = x[:, 6:]
    w2 = np.repeat(rng.standard_normal((6, 6, 1, 1)).astype(dtype), 2, axis=1)[:, ::2]
    b2 = np.repeat(b, 2)[::2]
    assert not (half.flags.c_contiguous or w2.flags.c_contiguous or b2.flags.c_contiguous)
    got = _check(half, w2, b2, dtype)
    np.testing.assert_array_equal(got, kconv.run_conv2d(np, np.ascontiguousarray(half), w2.copy(), b2.copy()))
    for x_shape, o in (((0, 4, 3, 3), 3), ((2, 0, 3, 3), 3), ((2, 4, 0, 3), 3), ((1, 4, 3, 0), 3), ((2, 4, 3, 3), 0)):
        x, w, b = _arrays(rng, x_shape, o, dtype)
        got = _check(x, w, b, dtype)
        assert got.shape == (x_shape[0], o) + x_shape[2:]
        if x_shape[1] == 0 and got.size:
            np.testing.assert_array_equal(got, np.broadcast_to(b.reshape(1, o, 1, 1), got.shape))


def test_the_chooser_takes_it_up_to_its_size_and_not_when_off():
    rng = np.random.default_rng(3)
    x, w, b = _arrays(rng, (1, 8, 8, 8), 16, "float32")  # (8,192 multiply-adds)
    assert kernels.choose(OP, np, x, w, b).impl is kconv.LOOP
    with la.tuning(conv_pointwise_loop_max_macs=8191, conv_pointwise_loop_narrow_weights=127):
        assert kernels.choose(OP, np, x, w, b).impl is kconv.POINTWISE
    with la.tuning(conv2d_pointwise_loop=False):
        assert kernels.choose(OP, np, x, w, b).impl is kconv.POINTWISE
        assert kernels.bind(OP, np, x, w, b).choice.impl is kconv.POINTWISE
        np.testing.assert_allclose(kconv.run_conv2d(np, x, w, b), OP.kernel(np, x, w, b), **TOL["float32"])
    assert kernels.choose(OP, np, x, w).impl is kconv.POINTWISE  # (no bias)
    assert kernels.bind(OP, np, x, w).choice.impl is kconv.POINTWISE
    assert kernels.choose(OP, np, x, w, b.astype(np.float64)).impl is not kconv.LOOP
    with la.tuning(jit=False):
        assert kernels.choose(OP, np, x, w, b).impl is not kconv.LOOP
        np.testing.assert_allclose(kconv.run_conv2d(np, x, w, b), OP.kernel(np, x, w, b), **TOL["float32"])


def test_a_bound_step_hands_other_orders_to_the_runners_path():
    """A binding made on C-ordered images, called on channels-last ones (the loop's values bit for bit; the
    runner's choice there, ``direct``, within float rounding: the loop's multiply-adds may contract) and into
    an output that is not C-ordered (the loop declines it: its fallback ``pointwise``'s values)."""
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, (1, 6, 4, 5), 7, "float64")
    bound = kernels.bind(OP, np, x, w, b, out=np.empty((1, 7, 4, 5), np.float64))
    assert bound.choice.impl is kconv.LOOP
    last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(bound.fn(last, w, b), pointwise_loop.conv2d_loop(
        np, last, w, b, (1, 1), (0, 0), (1, 1), 1, None))
    np.testing.assert_allclose(bound.fn(last, w, b), kconv.run_conv2d(np, last, w, b), **TOL["float64"])
    np.testing.assert_allclose(bound.fn(last, w, b), OP.kernel(np, x, w, b), **TOL["float64"])
    out = np.empty((1, 4, 5, 7), np.float64).transpose(0, 3, 1, 2)
    assert bound.fn(x, w, b, out=out) is out  # (the loop declines such an output: pointwise's product, copied)
    np.testing.assert_array_equal(out, kconv.conv_direct.conv2d_pointwise(np, x, w, b, (1, 1), (0, 0), (1, 1), 1,
                                                                           None))
    np.testing.assert_allclose(out, OP.kernel(np, x, w, b), **TOL["float64"])


def test_a_program_runs_the_loop_as_explain_names_it():
    S = la.sym
    y = S.nn.conv2d(S.var("x", shape=(1, 8, 5, 5)), S.var("k", shape=(6, 8, 1, 1)), S.var("b", shape=(6,)))
    op = la.CachedOp(y)
    rng = np.random.default_rng(5)
    shapes = {"x": (1, 8, 5, 5), "k": (6, 8, 1, 1), "b": (6,)}
    values = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    args = [la.array(values[name]) for name in y.list_inputs()]
    want = kconv.run_conv2d(np, values["x"], values["k"], values["b"])
    np.testing.assert_array_equal(op(*args).asnumpy(), want)
    np.testing.assert_allclose(want, OP.kernel(np, values["x"], values["k"], values["b"]), **TOL["float32"])
    assert "conv2d[loop]" in str(op.explain(*args))
