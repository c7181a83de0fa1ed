"""``nn.conv2d_act[loop]`` (``kernels/pointwise_loop.py``): a small 1x1 convolution with its bias and
activation as one compiled loop equals the op's reference kernel within float rounding (float32,
float64), over views (a strided batch, a strided weight and bias), planned and new outputs and empty
dims; its activation rounds as the reference's calls bit for bit; the chooser takes it up to
``conv_pointwise_loop_max_macs`` and never with ``conv_pointwise_loop`` off, numba off or no bias; a
compiled step's binding runs what the runner runs, bit for bit, and hands other memory orders to the
runner's path; ``explain()`` names it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv_act, pointwise_loop
from lazyarray.kernels.activation_jit import NO_ACT, act_code, act_params
from lazyarray.ops import registry
from lazyarray.ops.conv_act import activate

OP = registry.get("conv2d_act")
DTYPES = ("float32", "float64")
TOL = {"float32": {"rtol": 1e-5, "atol": 1e-5}, "float64": {"rtol": 1e-12, "atol": 1e-12}}
HARD = {"relu": {}, "hardsigmoid": {"alpha": 0.2, "beta": 0.5}, "hardswish": {"alpha": 1 / 6, "beta": 0.5}}
pytestmark = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")


def _arrays(rng, x_shape, o, dtype):
    x = (rng.standard_normal(x_shape) * 3).astype(dtype)
    w = rng.standard_normal((o, x_shape[1], 1, 1)).astype(dtype)
    return x, w, rng.standard_normal(o).astype(dtype)


def _check(x, w, b, dtype, act, p):
    """The runner's loop vs the reference; the binding's (planned output, new output) bit for bit."""
    want = OP.kernel(np, np.ascontiguousarray(x), w, b, act=act, **p)
    got = conv_act.run_conv2d_act(np, x, w, b, act=act, **p)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    out = np.full(want.shape, np.nan, dtype)
    bound = kernels.bind(OP, np, x, w, b, act=act, out=out, **p)
    assert bound.choice == kernels.choose(OP, np, x, w, b, act=act, **p)
    assert bound.fn(x, w, b, out=out) is out
    np.testing.assert_array_equal(out, got)
    np.testing.assert_array_equal(bound.fn(x, w, b), got)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", list(HARD))
def test_the_loop_equals_the_reference_and_its_binding_the_runner(act, dtype):
    rng = np.random.default_rng(0)
    p = HARD[act]
    for x_shape, o in (((1, 4, 7, 7), 8), ((1, 16, 7, 7), 4), ((1, 32, 3, 3), 10), ((3, 5, 2, 3), 6),
                       ((1, 7, 1, 1), 3)):
        x, w, b = _arrays(rng, x_shape, o, dtype)
        assert repr(kernels.choose(OP, np, x, w, b, act=act, **p)) == "conv2d_act[loop, pointwise]"
        _check(x, w, b, dtype, act, p)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_and_empty_dims(dtype):
    """A split's half (images C-ordered, a batch stride twice their size), a strided weight and bias
    (read where they lie), and empty batch, channels and planes."""
    rng = np.random.default_rng(1)
    x, w, b = _arrays(rng, (3, 12, 4, 5), 6, dtype)
    half = x[:, 6:]
    w2 = np.repeat(rng.standard_normal((6, 6, 1, 1)).astype(dtype), 2, axis=1)[:, ::2]
    b2 = np.repeat(b, 2)[::2]
    assert not (half.flags.c_contiguous or w2.flags.c_contiguous or b2.flags.c_contiguous)
    for act, p in HARD.items():
        assert kernels.choose(OP, np, half, w2, b2, act=act, **p).impl is conv_act.LOOP
        got = _check(half, w2, b2, dtype, act, p)
        np.testing.assert_array_equal(got, conv_act.run_conv2d_act(np, np.ascontiguousarray(half), w2.copy(),
                                                                    b2.copy(), act=act, **p))
    for x_shape in ((0, 4, 3, 3), (2, 0, 3, 3), (2, 4, 0, 3), (1, 4, 3, 0)):
        x, w, b = _arrays(rng, x_shape, 3, dtype)
        assert kernels.choose(OP, np, x, w, b).impl is conv_act.LOOP
        got = _check(x, w, b, dtype, "hardswish", HARD["hardswish"])
        assert got.shape == (x_shape[0], 3) + x_shape[2:]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", list(HARD))
def test_the_loops_activation_rounds_as_the_references_calls_bit_for_bit(act, dtype):
    """The loop with an activation is the loop without one, then the reference's NumPy calls (NaN,
    +-inf, values clipped both ways)."""
    rng = np.random.default_rng(2)
    x, w, b = _arrays(rng, (2, 3, 4, 4), 5, dtype)
    x[0, :, 0, :3] = [np.nan, np.inf, -np.inf]
    p = HARD[act]
    alpha, beta = p.get("alpha", 0.2), p.get("beta", 0.5)
    kern, params = pointwise_loop.kernel(), act_params(x.dtype, alpha, beta)
    plain, activated = np.empty((2, 5, 4, 4), dtype), np.empty((2, 5, 4, 4), dtype)
    kern(x, w, b, plain, NO_ACT, params)
    kern(x, w, b, activated, act_code(act), params)
    np.testing.assert_array_equal(activated, activate(np, plain, act, alpha, beta))


def test_the_chooser_takes_it_up_to_its_size_and_not_when_off():
    rng = np.random.default_rng(3)
    x, w, b = _arrays(rng, (1, 8, 8, 8), 16, "float32")  # (8,192 multiply-adds)
    assert kernels.choose(OP, np, x, w, b).impl is conv_act.LOOP
    with la.tuning(conv_pointwise_loop_max_macs=8191, conv_pointwise_loop_narrow_weights=127):
        assert kernels.choose(OP, np, x, w, b).impl is conv_act.FUSED
    with la.tuning(conv_pointwise_loop=False):
        assert kernels.choose(OP, np, x, w, b).impl is conv_act.FUSED
        np.testing.assert_allclose(conv_act.run_conv2d_act(np, x, w, b), OP.kernel(np, x, w, b), **TOL["float32"])
    assert kernels.choose(OP, np, x, w).impl is conv_act.COMPILED  # (no bias)
    assert kernels.choose(OP, np, x, w, b.astype(np.float64)).impl is not conv_act.LOOP
    with la.tuning(jit=False):
        assert kernels.choose(OP, np, x, w, b).impl is conv_act.UFUNCS
        np.testing.assert_allclose(conv_act.run_conv2d_act(np, x, w, b), OP.kernel(np, x, w, b), **TOL["float32"])


def test_narrow_weights_take_it_up_to_sixteen_times_its_size():
    """A weight of at most ``conv_pointwise_loop_narrow_weights`` values (O * C) takes the loop past
    ``conv_pointwise_loop_max_macs``, up to ``NARROW_MACS`` times it (MobileNet's batch-8 layers), and its
    values equal the reference's within float rounding, the binding's the runner's bit for bit."""
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        x, w, b = _arrays(rng, (8, 8, 16, 16), 24, dtype)  # (393K multiply-adds, 192 weights)
        assert kernels.choose(OP, np, x, w, b, act="relu").impl is conv_act.LOOP
        _check(x, w, b, dtype, "relu", {})
        with la.tuning(conv_pointwise_loop_narrow_weights=191):
            assert kernels.choose(OP, np, x, w, b, act="relu").impl is conv_act.FUSED
        with la.tuning(conv_pointwise_loop_max_macs=393216 // pointwise_loop.NARROW_MACS - 1):
            assert kernels.choose(OP, np, x, w, b, act="relu").impl is conv_act.FUSED
    x, w, b = _arrays(rng, (8, 32, 8, 8), 32, "float32")  # (1,024 weights: BLAS's product)
    assert kernels.choose(OP, np, x, w, b, act="relu").impl is conv_act.FUSED


def test_a_bound_step_hands_other_orders_to_the_runners_path():
    """A binding made on C-ordered images, called on channels-last ones (not ``pointwise``'s: the runner
    chooses another convolution) and into an output that is not C-ordered: the runner's values bit for
    bit (into such an output the loop declines: its fallback's values, within float rounding of the loop's,
    whose multiply-adds may contract)."""
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, (1, 6, 4, 5), 7, "float32")
    bound = kernels.bind(OP, np, x, w, b, act="relu", out=np.empty((1, 7, 4, 5), np.float32))
    assert bound.choice.impl is conv_act.LOOP
    last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(bound.fn(last, w, b), conv_act.run_conv2d_act(np, last, w, b))
    out = np.empty((1, 4, 5, 7), np.float32).transpose(0, 3, 1, 2)
    assert bound.fn(x, w, b, out=out) is out
    other = np.empty((1, 4, 5, 7), np.float32).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(out, conv_act.run_conv2d_act(np, x, w, b, out=other))
    np.testing.assert_allclose(out, conv_act.run_conv2d_act(np, x, w, b), **TOL["float32"])


def test_a_program_runs_the_loop_as_explain_names_it():
    S = la.sym
    x, k, bias = S.var("x", shape=(1, 8, 5, 5)), S.var("k", shape=(6, 8, 1, 1)), S.var("b", shape=(6,))
    y = S.nn.conv2d(S.relu(S.nn.conv2d(x, k, bias)), S.var("k2", shape=(4, 6, 1, 1)), S.var("b2", shape=(4,)))
    y = S.relu(y)
    op = la.CachedOp(y)
    rng = np.random.default_rng(5)
    shapes = {"x": (1, 8, 5, 5), "k": (6, 8, 1, 1), "b": (6,), "k2": (4, 6, 1, 1), "b2": (4,)}
    values = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    args = [la.array(values[name]) for name in y.list_inputs()]
    hidden = conv_act.run_conv2d_act(np, values["x"], values["k"], values["b"])
    want = conv_act.run_conv2d_act(np, hidden, values["k2"], values["b2"])
    for _ in range(3):
        np.testing.assert_array_equal(op(*args).asnumpy(), want)
    explained = op.explain(*args)
    prog, rows = explained.programs[0]
    assert [r["op[implementation]"] for r in rows] == ["nn.conv2d_act[loop, pointwise]"] * 2
    assert [b.choice.label() for b in prog.bindings.chosen().values()] == ["loop, pointwise"] * 2
