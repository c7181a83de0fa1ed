"""The kernels layer's conv2d: one chooser names the implementation, every implementation equals the
reference kernel, and the name the chooser gives is the one ``la.profile()`` and ``explain()`` show."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.ops import derived, registry

RNG = np.random.default_rng(0)
REFERENCE = registry.get("conv2d").kernel  # ops/conv.py's reference kernel (im2col, depthwise, grouped)


def _arrays(x_shape, w_shape, dtype=np.float32):
    x = RNG.standard_normal(x_shape).astype(dtype)
    w = (RNG.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype)
    return x, w


# (x shape, w shape, params, tuning, the implementation chosen)
CASES = [
    ("winograd4", (4, 64, 16, 16), (64, 64, 3, 3), {"padding": (1, 1)}, {}),
    ("winograd2", (4, 64, 16, 16), (64, 64, 3, 3), {"padding": (1, 1)}, {"winograd_max_tile": 2}),
    ("im2col", (4, 64, 16, 16), (64, 64, 3, 3), {"padding": (1, 1)},
     {"winograd": False, "conv_im2col_compiled": False}),
    ("im2col", (1, 8, 9, 9), (4, 8, 3, 3), {"stride": (2, 2)}, {"conv_im2col_compiled": False, "conv_blocked": False}),
    ("im2col", (4, 8, 16, 16), (16, 8, 1, 1), {"stride": (2, 2)}, {"conv_pointwise_strided": False}),
    ("pointwise_strided", (4, 8, 16, 16), (16, 8, 1, 1), {"stride": (2, 2)}, {}),
    ("im2col_compiled", (4, 64, 16, 16), (64, 64, 3, 3), {"padding": (1, 1)}, {"winograd": False}),
    ("im2col_compiled", (1, 8, 9, 9), (4, 8, 3, 3), {"stride": (2, 2)}, {"conv_blocked": False}),
    ("blocked", (1, 8, 9, 9), (4, 8, 3, 3), {"stride": (2, 2)}, {}),
    ("blocked", (8, 8, 16, 16), (8, 8, 3, 3), {"padding": (1, 1)}, {"conv_blocked_region": False}),
    ("batch_last", (8, 3, 6, 6), (4, 3, 3, 3), {}, {}),
    ("batch_last", (8, 3, 12, 12), (4, 3, 3, 3), {"padding": (1, 1)}, {"per_image_min_pixels": 1 << 30}),
    ("depthwise", (2, 6, 8, 8), (6, 1, 3, 3), {"groups": 6, "padding": (1, 1)}, {}),
    ("grouped", (2, 6, 8, 8), (4, 3, 3, 3), {"groups": 2}, {}),
    ("direct", (1, 8, 9, 9), (4, 8, 3, 3), {"stride": (2, 2)}, {"conv_direct_max_macs": 1 << 15, "conv_blocked": False}),
    ("blocked", (1, 8, 9, 9), (4, 8, 3, 3), {"stride": (1, 1)}, {"conv_direct_max_macs": 1 << 15}),
    ("direct", (1, 8, 9, 9), (2, 8, 3, 3), {"stride": (1, 1)}, {"conv_direct_max_macs": 1 << 15}),
    ("direct", (2, 6, 8, 8), (4, 3, 3, 3), {"groups": 2}, {"conv_direct_max_macs": 1 << 15}),
    ("direct", (1, 4, 1, 23), (16, 4, 1, 3), {"padding": (0, 1)}, {"conv_direct_max_macs": 1 << 15, "conv1d": False}),
    ("conv1d", (1, 4, 1, 23), (16, 4, 1, 3), {"padding": (0, 1)}, {}),
    ("conv1d", (8, 16, 1, 11), (16, 8, 1, 3), {"padding": (0, 2), "dilation": (1, 2), "groups": 2}, {}),
]


@pytest.mark.parametrize("name,xs,ws,params,settings", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_chooser_names_the_path_and_it_equals_the_reference(name, xs, ws, params, settings):
    x, w = _arrays(xs, ws)
    with la.tuning(min_split_macs=1 << 62, **{"conv_direct_max_macs": 0, **settings}):  # (direct: its own cases)
        choice = kernels.choose("conv2d", np, x, w, **params)
        assert choice.impl.name == name
        assert choice.impl in kconv.IMPLS and choice.impl.op == "conv2d"
        y = kconv.run_conv2d(np, x, w, **params)
        with la.profile() as prof:
            la.nn.conv2d(la.array(x), la.array(w), **params)
    np.testing.assert_allclose(y, REFERENCE(np, x, w, **params), rtol=2e-4, atol=2e-5)
    assert [e.impl.split(",")[0] for e in prof.events] == [name]


def test_split_over_threads_is_named_with_its_thread_count(two_threads):
    x, w = _arrays((4, 8, 16, 16), (8, 8, 3, 3))
    with la.tuning(min_split_macs=0, winograd=False):
        choice = kernels.choose("conv2d", np, x, w, padding=(1, 1))
        y = kconv.run_conv2d(np, x, w, padding=(1, 1))
    assert repr(choice) == "conv2d[split, 2 threads]"
    np.testing.assert_allclose(y, REFERENCE(np, x, w, padding=(1, 1)), rtol=1e-4, atol=1e-5)


def test_a_batch_last_output_takes_the_region_or_says_it_fell_back():
    x, w = _arrays((16, 3, 6, 6), (4, 3, 3, 3))
    out = np.empty((4, 4, 4, 16), np.float32).transpose(3, 0, 1, 2)  # (N, O, Ho, Wo) stored batch last
    assert out.strides[0] == out.itemsize
    with la.profile() as prof, la.tuning(conv_region=True):
        y = registry.get("conv2d").bind(np)(x, w, out=out)  # (the kernel alone: its choice is noted)
        ran = prof.take_choice()
    assert y is out
    np.testing.assert_allclose(out, REFERENCE(np, x, w), rtol=1e-4, atol=1e-5)
    # the region where numba runs it, else its fallback, and the profile says which
    assert ran.startswith("region, ") if jit.parallel_ready() else ran == "batch_last"
    with la.tuning(conv_region=False):
        assert kernels.choose("conv2d", np, x, w, out=out).impl.name == "batch_last"


def test_weights_held_still_are_kept_and_say_so_outside_autograd():
    x, w = _arrays((4, 64, 16, 16), (64, 64, 3, 3))
    derived.clear()
    assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).notes == ("kernel kept",)
    with la.autograd.record():
        assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).notes == ()


def test_half_precision_chooses_as_float32_and_rounds_once():
    x, w = _arrays((2, 64, 8, 8), (64, 64, 3, 3), np.float16)
    choice = kernels.choose("conv2d", np, x, w, padding=(1, 1))
    assert choice.impl.name.startswith("winograd") or choice.impl.name.startswith("im2col")
    y = kconv.run_conv2d(np, x, w, padding=(1, 1))
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), REFERENCE(np, x, w, padding=(1, 1)).astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def test_ops_without_implementations_run_their_reference():
    choice = kernels.choose("tanh", np, np.ones(3, np.float32))
    assert choice.impl.name == "tanh" and repr(choice) == "tanh[tanh]"  # a ufunc kernel
    choice = kernels.choose("sigmoid", np, np.ones(3, np.float32))
    assert choice.impl.name == "reference" and repr(choice) == "sigmoid[reference]"
    assert kernels.choose("add", np, np.ones(3), np.ones(3)).impl.name == "add"  # a ufunc kernel


def test_every_call_path_runs_through_the_runner():
    """Eager calls, compiled steps and the interpreter bind the same runner (``OpDef.runner``)."""
    op = registry.get("conv2d")
    assert op.runner is kconv.run_conv2d
    assert op.bind(np).func is kconv.run_conv2d
