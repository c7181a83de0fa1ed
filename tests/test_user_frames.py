"""``lazyarray/user_frames.py``: warnings about user code name the user's file and line (not
lazyarray/dispatch.py or the module that warns), and tracebacks can leave the package's frames out."""
from __future__ import annotations

import traceback
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.ops import sbp_rules
from lazyarray.ops.sbp_rules import SBPFallbackWarning
from lazyarray.tracing import UnusedInputWarning
from lazyarray.user_frames import in_package, user_stacklevel, without_internal_frames


def _caught(category, fn) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, category)]


@pytest.mark.usefixtures("fresh_fallback_warnings")
def test_storage_fallback_warning_names_the_users_line():
    x = la.array(np.eye(3, dtype=np.float32)).tostype("csr")
    ws = _caught(la.StorageFallbackWarning, lambda: la.exp(x))
    assert ws and ws[0].filename == __file__


def test_unused_input_warning_names_the_users_line():
    def record():
        x, unused = la.ones((2,)), la.ones((2,))
        with la.deferred():
            y = la.exp(x)
        la.get_symbol(y, inputs={"x": x, "unused": unused})

    ws = _caught(UnusedInputWarning, record)
    assert ws and ws[0].filename == __file__


def test_recompile_warning_names_the_users_line():
    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=2))
    net.initialize()
    net.hybridize(static_shape=True)

    def calls():
        for n in range(1, 12):
            net(la.ones((n, 2)))

    ws = _caught(la.RecompileWarning, calls)
    assert ws and ws[0].filename == __file__


def test_sbp_fallback_warning_names_the_users_line():
    x = la.sym.var("x", shape=(6, 4))
    y = la.sym.diagonal(x)
    sbp_rules.SBP_FALLBACK_WARNED.discard("diagonal")
    ws = _caught(SBPFallbackWarning, lambda: y.infer_sbp(x=la.sbp.split(0)))
    assert ws and ws[0].filename == __file__


def test_clip_global_norm_warning_names_the_users_line():
    ws = _caught(UserWarning, lambda: B.clip_global_norm([la.array([np.inf, 1.0])], 1.0))
    assert ws and ws[0].filename == __file__


def test_user_stacklevel_counts_to_the_first_frame_outside_the_package():
    assert user_stacklevel() == 1  # (this test's frame is the user's)
    assert in_package(la.__file__) and not in_package(__file__)


def test_without_internal_frames_keeps_the_users_frames_only():
    def inner():
        la.reshape(la.ones((2, 3)), (4, 4))

    try:
        inner()
    except la.LazyArrayError as exc:
        tb = exc.__traceback__
    frames = traceback.extract_tb(tb)
    assert any(in_package(f.filename) for f in frames)
    trimmed, dropped = without_internal_frames(tb)
    kept = traceback.extract_tb(trimmed)
    assert [f.name for f in kept] == ["test_without_internal_frames_keeps_the_users_frames_only", "inner"]
    assert dropped == len(frames) - 2
    assert len(traceback.extract_tb(tb)) == len(frames)  # the original is left as it was
