"""nn.conv2d_act's implementations (``kernels/conv_act.py``): the runner equals the op's reference kernel
over the op's case table (float32, float64; within conv2d's implementations' rounding), the compiled
activation pass equals the reference's NumPy calls bit for bit on the same convolution values (NaN,
+-inf, -0.0, values clipped both ways), over C-ordered, channels-last and batch-last outputs, views,
empty dims; ``ufuncs`` where numba is off or the output's order has no flat view; the label names the
convolution's implementation too (``explain()``, ``la.profile()``)."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import CASES

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv_act, conv_direct
from lazyarray.ops import registry
from lazyarray.ops.conv_act import ACTIVATIONS, activate

OP = registry.get("conv2d_act")
DTYPES = ("float32", "float64")
TOL = {"float32": {"rtol": 1e-4, "atol": 1e-5}, "float64": {"rtol": 1e-12, "atol": 1e-12}}
HARD = {"relu": {}, "hardsigmoid": {"alpha": 0.2, "beta": 0.5}, "hardswish": {"alpha": 1 / 6, "beta": 0.5}}
needs_numba = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")


@pytest.fixture
def no_loop():
    """``fused`` where ``loop`` would take these small layers (``conv_pointwise_loop`` off)."""
    with la.tuning(conv_pointwise_loop=False):
        yield


def _special(rng, shape, dtype):
    v = (rng.standard_normal(shape) * 6).astype(dtype)
    flat = v.reshape(-1)
    if flat.size >= 6:
        flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -3.0]
    return v


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_runner_equals_the_reference_over_the_case_table(dtype):
    rng = np.random.default_rng(0)
    samples = CASES["conv2d_act"].samples(rng, dtype, False)
    assert {s.params["act"] for s in samples} == set(ACTIVATIONS)
    for s in samples:
        want = OP.kernel(np, *s.args, **s.params)
        got = conv_act.run_conv2d_act(np, *s.args, **s.params)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **TOL[dtype], err_msg=s.name)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_the_compiled_pass_is_the_references_calls_bit_for_bit(act, dtype):
    rng = np.random.default_rng(1)
    base = _special(rng, (2, 5, 4, 3), dtype)
    p = HARD[act]
    alpha, beta = p.get("alpha", 0.2), p.get("beta", 0.5)
    want = activate(np, base.copy(), act, alpha, beta)
    layouts = [base.copy(),  # C-ordered
               np.ascontiguousarray(base.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),  # channels last
               np.ascontiguousarray(base.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)]  # batch last
    for y in layouts:
        assert conv_act.flat_view(y) is not None
        assert conv_act._compiled(np, y, act, alpha, beta) is y
        np.testing.assert_array_equal(y, want)
    odd = np.full((2, 5, 4, 6), np.nan, dtype)[..., ::2]  # a strided view: no flat view of it
    odd[...] = base
    assert conv_act.flat_view(odd) is None and conv_act._compiled(np, odd, act, alpha, beta) is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_planned_outputs_and_empty_dims(dtype):
    rng = np.random.default_rng(2)
    big = rng.standard_normal((2, 8, 9, 11)).astype(dtype)
    x = big[:, ::2, 1:, ::2]  # a strided view
    w, b = rng.standard_normal((6, 4, 3, 3)).astype(dtype), rng.standard_normal(6).astype(dtype)
    params = {"padding": (1, 1), "act": "hardswish", "alpha": 1 / 6, "beta": 0.5}
    want = OP.kernel(np, x, w, b, **params)
    for out in (np.full(want.shape, np.nan, dtype),
                np.full(want.shape[:1] + want.shape[2:] + want.shape[1:2], np.nan, dtype).transpose(0, 3, 1, 2),
                np.full(want.shape[::-1], np.nan, dtype).T):
        got = conv_act.run_conv2d_act(np, x, w, b, out=out, **params)
        assert got is out
        np.testing.assert_allclose(got, want, **TOL[dtype])
    for xs in ((0, 4, 5, 5), (2, 4, 0, 5), (2, 0, 5, 5)):  # empty batch, rows, channels
        xe = np.ones(xs, dtype)
        we = np.ones((6, xs[1], 1, 1), dtype)
        got = conv_act.run_conv2d_act(np, xe, we, b, act="relu")
        np.testing.assert_array_equal(got, OP.kernel(np, xe, we, b, act="relu"))


def test_the_chooser_and_the_labels_name_both():
    x, w = np.ones((1, 8, 6, 6), np.float32), np.ones((16, 8, 1, 1), np.float32)
    choice = kernels.choose(OP, np, x, w, act="relu")
    assert choice.impl is (conv_act.COMPILED if jit.enabled() else conv_act.UFUNCS)
    assert repr(choice) == f"conv2d_act[{choice.impl.name}, pointwise]"
    assert kernels.choose(OP, np, x.astype(np.float16), w.astype(np.float16)).impl is conv_act.UFUNCS
    assert conv_act.COMPILED in kernels.IMPLS["conv2d_act"] and conv_act.UFUNCS in kernels.IMPLS["conv2d_act"]
    with la.profile() as prof:
        y = la.nn.conv2d_act(la.array(x), la.array(w), act="hardsigmoid")
    np.testing.assert_allclose(y.asnumpy(), np.clip(8 * 0.2 + 0.5, 0, 1))
    assert [e.impl for e in prof.events if e.name.endswith("conv2d_act")] == [choice.label()]


def test_without_compiled_kernels_the_ufuncs_run():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    before = jit.enabled()
    jit.set_enabled(False)
    try:
        assert kernels.choose(OP, np, x, w, act="hardswish").impl is conv_act.UFUNCS
        y = conv_act.run_conv2d_act(np, x, w, act="hardswish", alpha=1 / 6, beta=0.5)
    finally:
        jit.set_enabled(before)
    np.testing.assert_array_equal(y, OP.kernel(np, x, w, act="hardswish", alpha=1 / 6, beta=0.5))
    h = conv_act.run_conv2d_act(np, x.astype(np.float16), w.astype(np.float16), act="relu")  # conv2d's half path
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, np.maximum(OP.kernel(np, x, w), 0), rtol=2e-2, atol=2e-2)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_the_fused_bias_pass_is_the_references_calls_bit_for_bit(act, dtype):
    """``fused``'s one pass (``_bias_act``) rounds the bias add and the activation as the reference's
    ``y += bias`` then the activation's calls do, on the same product values (NaN, +-inf, -0.0)."""
    rng = np.random.default_rng(4)
    p = HARD[act]
    alpha, beta = p.get("alpha", 0.2), p.get("beta", 0.5)
    y, b = _special(rng, (2, 5, 12), dtype), _special(rng, (5,), dtype)
    b[1] = -0.0
    want = activate(np, y + b.reshape(1, 5, 1), act, alpha, beta)
    jit.compiled(conv_act._bias_act)(y, b, *conv_act._scalars(y.dtype, act, alpha, beta))
    np.testing.assert_array_equal(y, want)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("no_loop")
def test_fused_runs_a_pointwise_layer_with_a_bias(dtype):
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((1, 8, 5, 6), (12, 8, 1, 1), (12,)))
    for act, p in HARD.items():
        choice = kernels.choose(OP, np, x, w, b, act=act, **p)
        assert repr(choice) == "conv2d_act[fused, pointwise]"
        want = OP.kernel(np, x, w, b, act=act, **p)
        for out in (None, np.full(want.shape, np.nan, dtype)):
            got = conv_act.run_conv2d_act(np, x, w, b, act=act, out=out, **p)
            assert out is None or got is out
            np.testing.assert_allclose(got, want, **TOL[dtype])
    assert kernels.choose(OP, np, x, w, act="relu").impl is conv_act.COMPILED  # (no bias: conv2d's own)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_binder_equals_the_runner_over_the_case_table(dtype):
    """A compiled step's binding (``bind_conv2d_act``) runs what the runner runs, into a planned output
    and a new one, and on inputs in memory orders the binding did not see (a view, channels last)."""
    rng = np.random.default_rng(6)
    samples = CASES["conv2d_act"].samples(rng, dtype, False)
    for s in samples:
        want = OP.kernel(np, *s.args, **s.params)
        bound = kernels.bind(OP, np, *s.args, **s.params)
        assert bound.choice == kernels.choose(OP, np, *s.args, **s.params)  # (fused too, at any batch)
        for out in (None, np.full(want.shape, np.nan, want.dtype)):
            got = bound.fn(*s.args, out=out)
            assert out is None or got is out
            np.testing.assert_allclose(got, want, **TOL[dtype], err_msg=s.name)
    x, w, b = (rng.standard_normal(sh).astype(dtype) for sh in ((1, 6, 4, 5), (7, 6, 1, 1), (7,)))
    bound = kernels.bind(OP, np, x, w, b, act="hardswish", alpha=1 / 6, beta=0.5)
    want = OP.kernel(np, x, w, b, act="hardswish", alpha=1 / 6, beta=0.5)
    for other in (np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),
                  np.repeat(x, 2, axis=3)[..., ::2]):
        np.testing.assert_allclose(bound.fn(other, w, b, out=None), want, **TOL[dtype])
    empty = np.ones((1, 6, 0, 5), dtype)
    np.testing.assert_array_equal(kernels.bind(OP, np, empty, w, b).fn(empty, w, b), OP.kernel(np, empty, w, b))


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [8, 1, 0])
@pytest.mark.usefixtures("no_loop")
def test_fused_takes_images_apart_by_any_batch_stride_bit_for_bit(n, dtype):
    """A split's half after ``channel_shuffle`` (C-ordered images, a batch stride twice C*H*W): ``fused``
    runs it, eager and bound, with the values of the C-ordered copy bit for bit; a view whose channels
    are strided is not ``pointwise``'s."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, 16, 4, 4)).astype(dtype)[:, 8:]
    w, b = rng.standard_normal((8, 8, 1, 1)).astype(dtype), rng.standard_normal(8).astype(dtype)
    dense = np.ascontiguousarray(x)
    for act, p in HARD.items():
        assert repr(kernels.choose(OP, np, x, w, b, act=act, **p)) == "conv2d_act[fused, pointwise]"
        want = conv_act.run_conv2d_act(np, dense, w, b, act=act, **p)
        np.testing.assert_allclose(want, OP.kernel(np, dense, w, b, act=act, **p), **TOL[dtype])
        assert conv_act.pointwise_fused(np, x, w, b, act, p.get("alpha", 0.2), p.get("beta", 0.5), None) is not None
        np.testing.assert_array_equal(conv_act.run_conv2d_act(np, x, w, b, act=act, **p), want)
        out = np.full(want.shape, np.nan, dtype)
        assert conv_act.run_conv2d_act(np, x, w, b, act=act, out=out, **p) is out
        np.testing.assert_array_equal(out, want)
        bound = kernels.bind(OP, np, x, w, b, act=act, **p)
        assert repr(bound.choice) == "conv2d_act[fused, pointwise]"  # (any batch: issue #35)
        np.testing.assert_array_equal(bound.fn(x, w, b), want)
        out = np.full(want.shape, np.nan, dtype)
        assert bound.fn(x, w, b, out=out) is out
        np.testing.assert_array_equal(out, want)
    strided = rng.standard_normal((max(n, 1), 16, 4, 4)).astype(dtype)[:, ::2]
    assert kernels.choose(OP, np, strided, w, b).impl is not conv_act.FUSED
    assert conv_act.pointwise_fused(np, strided, w, b, "relu", 0.2, 0.5, None) is None


@needs_numba
def test_a_programs_conv_after_a_channel_slice_is_pointwise():
    """A compiled program's 1x1 convolution of a channel slice of its input (images apart by twice their
    size): ``pointwise`` (it took ``batch_last`` before), the reference's values."""
    class Net(la.blocks.HybridBlock):
        def forward(self, a, k, b):
            return la.relu(la.nn.conv2d(a[:, 4:], k, b))

    rng = np.random.default_rng(8)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 8, 5, 5), (6, 4, 1, 1), (6,)))
    net = Net()
    net.hybridize()
    args = [la.array(v) for v in (x, w, b)]
    want = OP.kernel(np, np.ascontiguousarray(x[:, 4:]), w, b)
    np.testing.assert_allclose(net(*args).asnumpy(), want, **TOL["float32"])
    assert "pointwise]" in str(net.explain(*args))
    with la.profile() as prof:
        y = net(*args)
    np.testing.assert_allclose(y.asnumpy(), want, **TOL["float32"])
    assert [e.impl for e in prof.events if e.name.endswith("conv2d_act")] in (["loop, pointwise"],
                                                                              ["fused, pointwise"],
                                                                              ["compiled, pointwise"])


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [8, 1, 0])
@pytest.mark.usefixtures("no_loop")
def test_a_bound_fused_step_runs_fused_at_any_batch_as_the_runner_does(n, dtype):
    """Issue #35: the binding runs ``fused`` at every batch the chooser picks it (it was bound for one
    image only, conv2d's binding and a separate pass running under ``fused``'s name): the pass runs
    (a spy on it), with the eager runner's values bit for bit, on the binding's arrays, a strided-batch
    view of C-ordered images, and memory orders that are not ``pointwise``'s (then chosen as the
    runner chooses)."""
    rng = np.random.default_rng(9)
    base = _special(rng, (n, 16, 4, 3), dtype)
    w, b = rng.standard_normal((6, 8, 1, 1)).astype(dtype), rng.standard_normal(6).astype(dtype)
    view, dense = base[:, 8:], np.ascontiguousarray(base[:, 8:])
    channels_last = np.ascontiguousarray(dense.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    for act, p in HARD.items():
        for x in (dense, view):
            bound = kernels.bind(OP, np, x, w, b, act=act, **p)
            assert bound.choice == kernels.choose(OP, np, x, w, b, act=act, **p)
            assert repr(bound.choice) == "conv2d_act[fused, pointwise]"
            for y in (dense, view, channels_last):
                want = conv_act.run_conv2d_act(np, y, w, b, act=act, **p)
                np.testing.assert_array_equal(bound.fn(y, w, b), want)
                out = np.full(want.shape, np.nan, dtype)
                assert bound.fn(y, w, b, out=out) is out
                np.testing.assert_array_equal(out, want)
                np.testing.assert_allclose(want, OP.kernel(np, dense, w, b, act=act, **p), **TOL[dtype])
    assert n == 0 or kernels.choose(OP, np, channels_last, w, b).impl is not conv_act.FUSED


@needs_numba
@pytest.mark.usefixtures("no_loop")
def test_a_programs_fused_step_at_batch_8_is_bound_as_explain_names_it(monkeypatch):
    """A compiled program's 1x1 convolution with a bias and its relu at batch 8 (an
    ``nn.conv2d_act`` step): ``explain()`` names ``fused, pointwise``, the step is bound to that choice
    and runs the fused pass (a spy on it), with the eager runner's values bit for bit."""
    S = la.sym
    x, k, bias = S.var("x", shape=(8, 8, 4, 4)), S.var("k", shape=(6, 8, 1, 1)), S.var("b", shape=(6,))
    y = S.relu(S.nn.conv2d(x, k, bias))
    op = la.CachedOp(y)
    rng = np.random.default_rng(10)
    arrays = {"x": (8, 8, 4, 4), "k": (6, 8, 1, 1), "b": (6,)}
    values = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in arrays.items()}
    args = [la.array(values[name]) for name in y.list_inputs()]
    want = conv_act.run_conv2d_act(np, values["x"], values["k"], values["b"])
    op(*args)
    explained = op.explain(*args)
    prog, rows = explained.programs[0]
    op(*args)
    bound = {i: b.choice.label() for i, b in prog.bindings.chosen().items() if b.choice.impl.op == "conv2d_act"}
    assert list(bound.values()) == ["fused, pointwise"]
    for i, name in bound.items():
        assert rows[i]["op[implementation]"].split("[", 1)[1].rstrip("]") == name
    assert [prog.bindings.chosen()[i].fn.__name__ for i in bound] == ["fused"]  # (the lean call, planned output)
    calls = []
    for name in ("_fused_call", "_run", "bind_conv2d"):  # (none of the slower paths runs)
        monkeypatch.setattr(conv_act, name, lambda *a, name=name, **k: calls.append(name))
    for _ in range(3):
        np.testing.assert_array_equal(op(*args).asnumpy(), want)
    assert calls == []


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_direct_runs_the_activation_in_its_loop_as_the_pass_rounds(act, dtype):
    """``conv2d_act[compiled, direct]`` (runner and binding): the activation applied in ``direct``'s loops
    (the flat one, the row one, with and without a bias, grouped) is ``conv2d[direct]`` then the
    reference's NumPy calls bit for bit (NaN, +-inf among the inputs); other memory orders and new
    outputs too."""
    with la.tuning(conv_blocked_min_filters=1 << 30):  # (direct's cases: blocked takes them from 3 filters)
        _direct_in_its_loop(act, dtype)


def _direct_in_its_loop(act, dtype):
    rng = np.random.default_rng(11)
    p = HARD[act]
    alpha, beta = p.get("alpha", 0.2), p.get("beta", 0.5)
    for xs, ws, padding, groups, bias in [((1, 4, 7, 7), (8, 4, 3, 3), (1, 1), 1, True),
                                          ((1, 8, 3, 3), (16, 8, 3, 3), (1, 1), 1, True),
                                          ((1, 4, 5, 5), (6, 4, 3, 3), (0, 0), 1, False),
                                          ((2, 6, 9, 8), (4, 3, 3, 3), (1, 1), 2, True)]:
        x = _special(rng, xs, dtype)
        w, b = rng.standard_normal(ws).astype(dtype), rng.standard_normal(ws[0]).astype(dtype) if bias else None
        arrays = (x, w, b) if bias else (x, w)
        plain = conv_direct.conv2d_direct(np, x, w, b, (1, 1), padding, (1, 1), groups, None)
        want = activate(np, plain.copy(), act, alpha, beta)
        assert repr(kernels.choose(OP, np, x, w, b, padding=padding, groups=groups, act=act, **p)) == \
            "conv2d_act[compiled, direct]"
        got = conv_act.run_conv2d_act(np, x, w, b, padding=padding, groups=groups, act=act, **p)
        assert got.tobytes() == want.tobytes()
        out = np.full(want.shape, np.nan, dtype)
        bound = kernels.bind(OP, np, *arrays, padding=padding, groups=groups, act=act, out=out, **p)
        assert bound.fn(*arrays, out=out) is out and out.tobytes() == want.tobytes()
        assert bound.fn(*arrays).tobytes() == want.tobytes()
        view = np.repeat(x, 2, axis=3)[..., ::2]
        assert bound.fn(view, *arrays[1:], out=np.empty_like(out)).tobytes() == want.tobytes()


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_depthwise_runs_the_activation_in_its_loop_as_the_pass_rounds(act, dtype):
    """``conv2d_act[compiled, depthwise]`` (runner and binding): the activation applied in depthwise's NCHW
    loop (four taps a pass and the rest one at a time: 3x3, 5x5, 1x3 and 2x2 kernels; strides 1 and 2;
    with and without a bias) is conv2d's reference then the reference's NumPy calls bit for bit (NaN,
    +-inf among the inputs), with no separate pass; views, channels-last inputs, new outputs and empty
    batches too."""
    rng = np.random.default_rng(12)
    p = HARD[act]
    alpha, beta = p.get("alpha", 0.2), p.get("beta", 0.5)
    conv2d = registry.get("conv2d").kernel
    for xs, k, stride, padding, bias in [((1, 16, 16, 16), (3, 3), (1, 1), (1, 1), True),
                                         ((2, 6, 9, 8), (5, 5), (2, 2), (2, 2), True),
                                         ((1, 5, 7, 6), (1, 3), (1, 2), (0, 1), False),
                                         ((3, 4, 6, 6), (2, 2), (1, 1), (0, 0), True)]:
        x = _special(rng, xs, dtype)
        w = rng.standard_normal((xs[1], 1) + k).astype(dtype)
        b = rng.standard_normal(xs[1]).astype(dtype) if bias else None
        arrays = (x, w, b) if bias else (x, w)
        kw = dict(stride=stride, padding=padding, groups=xs[1], act=act, **p)
        want = activate(np, conv2d(np, x, w, b, stride=stride, padding=padding, groups=xs[1]), act, alpha, beta)
        assert repr(kernels.choose(OP, np, *arrays, **kw)) == "conv2d_act[compiled, depthwise]"
        assert conv_act.run_conv2d_act(np, *arrays, **kw).tobytes() == want.tobytes()
        out = np.full(want.shape, np.nan, dtype)
        bound = kernels.bind(OP, np, *arrays, out=out, **kw)
        assert "bound_nchw" in bound.fn.__qualname__
        assert bound.fn(*arrays, out=out) is out and out.tobytes() == want.tobytes()
        assert bound.fn(*arrays).tobytes() == want.tobytes()
        view = np.repeat(x, 2, axis=3)[..., ::2]
        assert bound.fn(view, *arrays[1:], out=np.empty_like(out)).tobytes() == want.tobytes()
        last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        assert np.array_equal(conv_act.run_conv2d_act(np, last, *arrays[1:], **kw), want, equal_nan=True)
        empty = np.ones((0,) + xs[1:], dtype)
        assert conv_act.run_conv2d_act(np, empty, *arrays[1:], **kw).shape == (0,) + want.shape[1:]


@needs_numba
def test_depthwise_with_its_activation_runs_no_separate_pass(monkeypatch):
    """The eager runner's and the bound step's depthwise call with an activation run the loop only: the
    separate pass (``_act_in_place``'s compiled kernel) is not looked up."""
    rng = np.random.default_rng(13)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((1, 8, 10, 10), (8, 1, 3, 3), (8,)))
    kw = dict(padding=(1, 1), groups=8, act="hardswish", alpha=1 / 6, beta=0.5)
    want = conv_act.run_conv2d_act(np, x, w, b, **kw)
    out = np.empty_like(want)
    bound = kernels.bind(OP, np, x, w, b, out=out, **kw)
    monkeypatch.setattr(conv_act, "_compiled", lambda *a: pytest.fail("the separate pass ran"))
    monkeypatch.setattr(conv_act, "activate", lambda *a: pytest.fail("the NumPy activation ran"))
    assert conv_act.run_conv2d_act(np, x, w, b, **kw).tobytes() == want.tobytes()
    assert bound.fn(x, w, b, out=out) is out and out.tobytes() == want.tobytes()
