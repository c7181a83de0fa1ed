"""``kernels.bind``: the choice a compiled step binds once is the one ``kernels.choose`` makes per call
(the same chooser underneath), and the bound function computes the runner's values, over the
conv2d / dense / matmul cases of this folder's tests and the row-wise and attention ops' cases (each
implementation and the reference kernel, bound where nothing applies); facts only a call shows (a weight kept by its
version, autograd recording, a program input's memory order) still decide per call."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import dense as kdense
from lazyarray.kernels import layer_norm as kln
from lazyarray.kernels import matmul as kmatmul
from lazyarray.ops import derived, registry
from lazyarray.ops.attention import code
from tests.kernels.test_conv2d_choice import CASES as CONV_CASES
from tests.kernels.test_matmul import SHAPES as MATMUL_SHAPES

RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_arrays(xs, ws):
    return _f32(*xs), (_f32(*ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)


def _out_like(y, batch_last=False):
    if not batch_last:
        return np.empty_like(y)
    return np.empty(y.shape[1:] + y.shape[:1], y.dtype).transpose(3, 0, 1, 2)


@pytest.mark.parametrize("into", [False, True])
@pytest.mark.parametrize("name,xs,ws,params,settings", CONV_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CONV_CASES)])
def test_conv2d_binds_what_choose_picks_per_call(name, xs, ws, params, settings, into):
    x, w = _conv_arrays(xs, ws)
    derived.clear()
    with la.tuning(min_split_macs=1 << 62, **{"conv_direct_max_macs": 0, **settings}):
        want = kconv.run_conv2d(np, x, w, **params)
        out = _out_like(want) if into else None
        bound = kernels.bind("conv2d", np, x, w, out=out, **params)
        assert bound.choice == kernels.choose("conv2d", np, x, w, out=out, **params)
        for _ in range(3):  # (a kept kernel from the second call on: the choice per call follows it)
            per_call = kernels.choose("conv2d", np, x, w, out=out, **params)
            got = bound.fn(x, w, out=None if out is None else _out_like(want))
            np.testing.assert_array_equal(got, kconv.run_conv2d(np, x, w, **params))
            assert per_call.impl.name == name


def test_conv2d_with_bias_and_a_batch_last_output_binds_as_choose():
    x, w, b = _f32(16, 3, 6, 6), _f32(4, 3, 3, 3), _f32(4)
    out = _out_like(np.empty((16, 4, 4, 4), np.float32), batch_last=True)
    bound = kernels.bind("conv2d", np, x, w, b, out=out)
    assert bound.choice == kernels.choose("conv2d", np, x, w, b, out=out)
    y = bound.fn(x, w, b, out=out)
    assert y is out
    # (region's products against blocked's sums: float32 rounding of 28 terms of size ~1, whatever values the RNG gives)
    np.testing.assert_allclose(out, kconv.run_conv2d(np, x, w, b), rtol=1e-5, atol=28 * 1e-6)


def test_a_kept_kernel_and_recording_still_decide_per_call():
    """Winograd's choice hangs on whether the weight's transformed kernel is kept (by its version)
    and autograd records: the bound function asks per call and runs what ``choose`` names."""
    x, w = _conv_arrays((4, 64, 16, 16), (64, 64, 3, 3))
    derived.clear()
    bound = kernels.bind("conv2d", np, x, w, padding=(1, 1))
    assert bound.choice.notes == ("kernel kept",)
    ran = []
    for recording in (False, True, False):
        with la.autograd.record() if recording else contextlib.nullcontext():
            ran.append(kernels.choose("conv2d", np, x, w, padding=(1, 1)).notes)
            np.testing.assert_array_equal(bound.fn(x, w), kconv.run_conv2d(np, x, w, padding=(1, 1)))
    assert ran == [("kernel kept",), (), ("kernel kept",)]


def test_a_batch_input_stored_otherwise_is_rechosen():
    """A batch conv's choice reads its input's memory order (a program's input may arrive batch last):
    the bound function binds once per order it sees, as ``choose`` picks for each."""
    x, w = _conv_arrays((8, 3, 6, 6), (4, 3, 3, 3))
    out = np.empty((8, 4, 4, 4), np.float32)
    with la.tuning(per_image_min_pixels=1):
        bound = kernels.bind("conv2d", np, x, w, out=out)
        x_last = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
        assert kernels.choose("conv2d", np, x_last, w, out=out) != bound.choice
        for a in (x, x_last, x):
            np.testing.assert_allclose(bound.fn(a, w, out=np.empty_like(out)), kconv.run_conv2d(np, a, w),
                                       rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["gemv", "gemm", "gemm one row", "rows", "units_major", "no bias"])
def test_dense_binds_what_choose_picks(case):
    x, w, b = _f32(1 if case in ("gemv", "gemm one row") else 8, 16), _f32(4, 16), _f32(4)
    out = None
    if case in ("gemv", "no bias"):
        out = np.empty((x.shape[0], 4), np.float32)
    elif case == "rows":
        x = _f32(3, 5, 16)
    elif case == "units_major":
        out = np.empty((4, 8), np.float32).T
    arrays = (x, w) if case == "no bias" else (x, w, b)
    bound = kernels.bind("dense", np, *arrays, out=out)
    assert bound.choice == kernels.choose("dense", np, *arrays, out=out)
    into = None if out is None else np.empty_like(out)
    np.testing.assert_array_equal(bound.fn(*arrays, out=into), kdense.run_dense(np, *arrays, out=out))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_binds_what_choose_picks(sa, sb, dtype, two_threads):
    a, b = RNG.standard_normal(sa).astype(dtype), RNG.standard_normal(sb).astype(dtype)
    bound = kernels.bind("matmul", np, a, b)
    if kmatmul.order_decides(np, a, b):  # (its choice reads the stack's memory order: the runner decides)
        assert bound is None
        return
    assert bound.choice == kernels.choose("matmul", np, a, b)
    np.testing.assert_array_equal(bound.fn(a, b), kmatmul.run_matmul(np, a, b))


def test_a_binding_is_for_the_tuning_table_it_was_made_under():
    x, w, b = _f32(1, 64), _f32(8, 64), _f32(8)
    out = np.empty((1, 8), np.float32)
    assert kernels.bind("dense", np, x, w, b, out=out).choice.impl is kdense.GEMV
    with la.tuning(dense_region_min_weight_bytes=0):
        bound = kernels.bind("dense", np, x, w, b, out=out)
        assert bound.choice == kernels.choose("dense", np, x, w, b, out=out)
        want = kdense.run_dense(np, x, w, b, out=np.empty_like(out))
    assert bound.choice.impl is kdense.REGION  # (it declines without numba: gemv runs)
    np.testing.assert_array_equal(bound.fn(x, w, b, out=np.empty_like(out)), want)  # (outside the table, too)


def test_ops_without_binders_bind_nothing():
    assert kernels.bind("tanh", np, np.ones(3, np.float32)) is None
    assert not kernels.binds("tanh") and kernels.binds("conv2d") and kernels.binds("relu")
    half = np.ones((1, 2, 4, 4), np.float16), np.ones((2, 2, 3, 3), np.float16)
    assert kernels.bind("conv2d", np, *half) is None  # (half precision: the runner converts)


# -- the row-wise and attention ops (issue #35): the reference kernel is bound where nothing applies ---------

def _rows(dtype, *shape):
    return (RNG.standard_normal(shape) * 3 + 1).astype(dtype)


def _row_cases(dtype):
    """(op, arrays, params, writes into ``out``): each op's implementations and its reference, views
    and empty dims among them."""
    x, big = _rows(dtype, 1, 7, 32), _rows(dtype, 600, 512)  # (big: 1 MiB or more, by rows)
    g, b, wide = _rows(dtype, 32), _rows(dtype, 32), _rows(dtype, 2, 3, 200)
    t = _rows(dtype, 1, 32, 7).transpose(0, 2, 1)  # (rows across: layer_norm's in_place)
    labels = RNG.integers(0, 512, 600)
    q, k, v = _rows(dtype, 1, 2, 7, 16), _rows(dtype, 1, 2, 16, 7), _rows(dtype, 1, 2, 7, 16)
    mask = np.where(RNG.random((1, 1, 1, 7)) > 0.3, 0, -1e9).astype(dtype)
    scores = {"score_ops": (code("multiply", 0), code("add", 0))}
    return [("softmax", (x,), {}, False), ("softmax", (big,), {}, False), ("softmax", (big,), {"axis": 0}, False),
            ("softmax", (_rows(dtype, 0, 5),), {}, False), ("log_softmax", (big,), {}, False),
            ("log_softmax", (x[0].T,), {"axis": 1}, False), ("softmax_cross_entropy", (big, labels), {}, False),
            ("gelu", (x,), {}, True), ("gelu", (big,), {"approximation": "tanh"}, True),
            ("gelu_grad", (big, big), {}, True), ("gelu_grad", (x, x), {"approximation": "tanh"}, True),
            ("layer_norm", (x, g, b), {}, True), ("layer_norm", (x, g, b), {"eps": 1e-3}, False),
            ("layer_norm", (wide, wide[0, 0], wide[0, 1]), {}, True), ("layer_norm", (t, g, b), {}, True),
            ("layer_norm", (_rows(dtype, 0, 32), g, b), {}, True), ("rms_norm", (x, g), {}, True),
            ("rms_norm", (wide, wide[0, 0]), {"eps": 1e-5}, True), ("rms_norm", (t, g), {}, False),
            ("fused_attention", (q, k, v, np.array(0.25, dtype), mask), scores, True),
            ("fused_attention", (q.astype("float16"), k.astype("float16"), v.astype("float16")), {}, True)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_ops_bind_what_choose_picks_with_the_runners_values(dtype, kernel_path):
    for name, arrays, params, into in _row_cases(dtype):
        op = registry.get(name)
        want = op.runner(np, *arrays, **op.make_params(params))
        out = np.empty_like(want) if into else None
        bound = kernels.bind(name, np, *arrays, out=out, **params)
        chosen = kernels.choose(name, np, *arrays, out=out, **params)
        what = f"{name}{[a.shape for a in arrays]} {params}"
        assert bound.choice.label() == chosen.label(), what
        assert bound.choice == chosen or chosen.impl.name == "reference", what  # (choose makes a fresh reference)
        for _ in range(2):
            got = bound.fn(*arrays, out=None if out is None else np.empty_like(out))
            np.testing.assert_array_equal(got, want, err_msg=what)


def test_a_bound_compiled_layer_norm_hands_rows_across_to_the_runner(kernel_path, monkeypatch):
    """A program's input may arrive in another memory order: layer_norm's compiled choice reads per
    call whether the rows are adjacent values, and where not the runner decides (strided_rows for this
    channels-last view; in_place where compiled kernels are off)."""
    x, g, b = _rows("float32", 1, 7, 32), _rows("float32", 32), _rows("float32", 32)
    t = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    want, want_x = kln.run_layer_norm(np, t, g, b), kln.run_layer_norm(np, x, g, b)
    bound = kernels.bind("layer_norm", np, x, g, b, out=np.empty_like(x))
    assert bound.choice.impl.name == ("compiled" if kernel_path == "compiled" else "in_place")
    runner, asked = kln.run_layer_norm, []
    monkeypatch.setattr(kln, "run_layer_norm", lambda *a: asked.append(kernels.choose("layer_norm", *a[:4])) or runner(*a))
    np.testing.assert_array_equal(bound.fn(t, g, b, out=np.empty_like(x)), want)
    np.testing.assert_array_equal(bound.fn(x, g, b, out=np.empty_like(x)), want_x)
    assert [c.impl.name for c in asked] == (["strided_rows"] if kernel_path == "compiled" else [])


def test_bound_row_ops_note_nothing_and_the_runners_still_do():
    """A bound function runs its choice directly (a compiled program's steps under ``la.profile()``
    take the runners, which name what they chose: ``tests/executor/test_binding.py``)."""
    x = _rows("float32", 600, 512)
    bound = kernels.bind("softmax", np, x)
    with la.profile() as prof:
        bound.fn(x)
        la.nn.softmax(x)
    assert [e.key for e in prof.events] == ["nn.softmax[rows]"]
