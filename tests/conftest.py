"""Shared fixtures. ``kernel_calls`` counts kernel calls, to prove what runs (and what does not) and when.

``LAZYARRAY_TEST_DEVICE`` runs the device suites (``DEVICE_SUITES``) with another default device:
``gpu`` puts their arrays on ``la.gpu(0)`` (``tools/gpu_check.sh`` runs it on a GPU machine), ``cpu1``
on ``la.cpu(1)``, which finds on any machine the code that assumes ``cpu(0)``. Only those suites are
collected then; tests that cannot run there carry ``@pytest.mark.cpu_only`` (with the reason).
"""
import os

import pytest

import lazyarray as la
from lazyarray.ops import registry
from lazyarray.ops.registry import OpDef

# Vendored third-party suites run in their own process (tests/test_array_api_conformance.py), not here.
collect_ignore = ["third_party"]


@pytest.fixture(autouse=True)
def _no_contention_guard(monkeypatch):
    """The contention guard off (``kernels/contention.py``): a stall on a loaded test machine would
    send the threaded kernels to their fallbacks in the middle of a test that checks what ran
    (tests/kernels/test_contention.py turns it on)."""
    monkeypatch.setattr(la.config, "contention_guard", False)


@pytest.fixture
def kernel_calls(monkeypatch):
    """A list that receives the op name of every kernel call made while the test runs."""
    calls: list[str] = []
    original = OpDef.bind

    def bind(self, xp):
        f = original(self, xp)

        def counted(*args, **kwargs):
            calls.append(self.name)
            return f(*args, **kwargs)

        return counted

    monkeypatch.setattr(OpDef, "bind", bind)
    return calls


@pytest.fixture
def fresh_fallback_warnings(monkeypatch):
    """Storage-fallback warnings enabled and not yet given (they are warned once per op and stypes)."""
    monkeypatch.setattr(la.config, "storage_fallback_warn", True)  # (LAZYARRAY_STORAGE_FALLBACK_WARN=0 at import)
    registry.STORAGE_FALLBACK_WARNED.clear()
    yield
    registry.STORAGE_FALLBACK_WARNED.clear()

# Scripts run by hand in a side environment with real MXNet (tests/data/mxnet/*.py): not test modules.
collect_ignore_glob = ["data/*/*.py"]


@pytest.fixture(params=["numpy", "compiled"])
def kernel_path(request, monkeypatch):
    """Runs the test twice: with the NumPy kernels and with the compiled ones (``lazyarray/jit.py``;
    skipped where numba is not installed: there is nothing to compare)."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setattr(la.config, "jit", request.param == "compiled")  # (process-wide: pool threads too)
    return request.param


@pytest.fixture
def both_paths(monkeypatch):
    """``both_paths(fn)``: ``(fn() with the compiled kernels, fn() with the NumPy ones)``, to compare."""

    def run(fn):
        monkeypatch.setattr(la.config, "jit", False)  # (process-wide: pool threads too)
        want = fn()
        monkeypatch.setattr(la.config, "jit", True)
        return fn(), want

    return run


# The suites that run with arrays on the test device: the op case table, deferred compute, CachedOp,
# hybridize, autograd, sparse, control flow, the model zoo, ONNX export and the mixed-device tests.
DEVICE_SUITES = (
    "tests/ops/", "tests/test_deferred.py", "tests/executor/test_cached_op.py",
    "tests/executor/test_control_flow.py", "tests/executor/test_plan.py", "tests/executor/test_fusion_gpu.py",
    "tests/blocks/test_hybridize.py", "tests/blocks/models/", "tests/test_autograd.py",
    "tests/test_sparse_api.py", "tests/test_device_gpu.py", "tests/onnx/test_onnx_export.py",
    "tests/onnx/test_export_dynamic.py", "tests/onnx/test_model_zoo_onnx.py",
)
TEST_DEVICES = {"gpu": lambda: la.gpu(0), "cpu1": lambda: la.cpu(1)}
TEST_DEVICE = os.environ.get("LAZYARRAY_TEST_DEVICE", "").strip().lower()


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_only: cannot run with LAZYARRAY_TEST_DEVICE (the reason is in the "
                                       "test); deselected from the device run")
    if TEST_DEVICE and TEST_DEVICE not in TEST_DEVICES:
        raise pytest.UsageError(f"LAZYARRAY_TEST_DEVICE={TEST_DEVICE!r}: use one of {sorted(TEST_DEVICES)}")


def _in_device_suites(item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    return any(path.startswith(s) if s.endswith("/") else path == s for s in DEVICE_SUITES)


def pytest_collection_modifyitems(config, items):
    """With ``LAZYARRAY_TEST_DEVICE`` set, keep only the device suites' tests (minus ``cpu_only``)."""
    if not TEST_DEVICE:
        return
    keep = [i for i in items if _in_device_suites(i) and i.get_closest_marker("cpu_only") is None]
    dropped = [i for i in items if i not in set(keep)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


@pytest.fixture(autouse=True)
def _test_device(request):
    """Inside the device suites, the default device is ``LAZYARRAY_TEST_DEVICE``'s for the test's span."""
    if not TEST_DEVICE or not _in_device_suites(request.node):
        yield None
        return
    if TEST_DEVICE == "gpu" and not la.gpu_available():
        pytest.skip("LAZYARRAY_TEST_DEVICE=gpu but no GPU is usable here (CuPy and a GPU are needed)")
    with TEST_DEVICES[TEST_DEVICE]() as device:
        yield device
