"""Sizes are checked, never trusted: every shape rule (``registry.infer``) and every creation
function refuses negative dims, dims >= 2**63 and shapes whose byte count overflows intp
(``la.ShapeError``), and allocations above the limit (``la.OutOfMemoryError``), before NumPy
sees the size.

The three reproductions that used to kill the process (signal 11 inside ``np.tile``) run in a
subprocess, so a regression fails a test instead of taking pytest down with it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazyarray as la
from lazyarray.aval import MAX_ALLOC_ENV, check_alloc, check_shape, max_alloc_bytes, physical_memory
from lazyarray.errors import ParamValueError
from lazyarray.ops import registry
from lazyarray.tuning_table import from_environment

BIG = 2**62  # repeat(ones((2, 3)), 2, BIG): 3 * 2**62 elements along dim 1 -> >= 2**63

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=_ROOT)


@pytest.fixture
def limit(monkeypatch):
    """Set the allocation limit (bytes) for the test (the tuning table's ``max_alloc_bytes``)."""
    def set_limit(n):
        monkeypatch.setattr(la.config, "max_alloc_bytes", n)
    return set_limit


# -- the crashes ------------------------------------------------------------------------------
_CRASHES = {
    "eager": "la.tile(la.ones((2, 3)), 2, 2**62)",
    "method": "la.ones((2, 3)).repeat(2, 2**62)",
    "deferred": """
        with la.deferred():
            y = la.tile(la.ones((2, 3)), 2, 2**62)
        y.asnumpy()""",
    "cached_op_loaded_graph": """
        text = la.sym.repeat(la.sym.var("x"), sizes=(2, 4)).to_json()
        bad = text.replace('"sizes": [2, 4]', '"sizes": [2, 4611686018427387904]')
        assert bad != text
        la.CachedOp(la.Symbol.from_json(bad))(la.ones((2, 3)))""",
    # whatever path reaches the kernel (a graph whose avals were not re-inferred), np.tile never
    # sees an overflowing size: the kernel checks too
    "kernel": """
        import numpy as np
        from lazyarray.ops import registry
        registry.get("repeat").bind(np)(np.ones((2, 3), np.float32), sizes=(2, 2**62))""",
}


@pytest.mark.parametrize("how", sorted(_CRASHES))
def test_overflowing_repeat_sizes_raise_shape_error_instead_of_crashing(how):
    body = textwrap.indent(textwrap.dedent(_CRASHES[how]).strip(), "    ")
    proc = _run(f"""
import lazyarray as la
try:
{body}
except la.ShapeError as exc:
    print("ShapeError:", exc)
else:
    print("no error")
""")
    assert proc.returncode == 0, f"the process died (rc={proc.returncode}): {proc.stderr[-2000:]}"
    out = proc.stdout
    assert out.startswith("ShapeError: repeat"), out
    assert "13835058055282163712" in out and ">= 2**63" in out  # the size asked for, named


def test_loaded_graph_with_known_input_shape_is_refused_at_load():
    text = la.sym.repeat(la.sym.var("x", shape=(2, 3)), sizes=(2, 4)).to_json()
    bad = text.replace('"sizes": [2, 4]', f'"sizes": [2, {BIG}]')
    assert bad != text
    with pytest.raises(la.LazyArrayError, match="repeat: result shape"):
        la.Symbol.from_json(bad)


# -- flatten: exact sizes, never int64 wrap-around ---------------------------------------------
def test_flatten_rule_uses_exact_sizes():
    rule = registry.get("flatten").shape
    assert rule([(2, 2**32, 2**32)]) == (2, 2**64)  # np.prod(dtype=int64) made this (2, 0)


def test_flatten_of_an_impossible_shape_is_a_shape_error():
    # the graph input itself is refused where it is declared (la.sym.var checks its shape)
    with pytest.raises(la.ShapeError, match=r"la.sym.var\('x'\): input shape \[2,4294967296,4294967296\]"):
        la.sym.nn.flatten(la.sym.var("x", shape=(2, 2**32, 2**32)))
    # bool: the input fits (2**63 - 1 bytes), the flattened dim is exact
    x = la.sym.var("x", shape=(1, 2**31 - 1, 2**32), dtype="bool")
    _, (shape,) = la.sym.nn.flatten(x).infer_shape()
    assert shape == (1, (2**31 - 1) * 2**32)


# -- every shape rule: negative, >= 2**63, byte overflow -----------------------------------------
@pytest.mark.parametrize("call,match", [
    (lambda: la.nn.one_hot(la.array([0, 1]), -1), r"one_hot: result shape \[2,-1\] has a negative dim -1"),
    (lambda: la.nn.one_hot(la.array([0, 1]), BIG), r"one_hot: result shape \[2,4611686018427387904\] of float32 "
                                                    r"asks for 9223372036854775808 elements x 4 bytes"),
    (lambda: la.broadcast_to(la.ones(1), (BIG, 4)), r"broadcast_to: result shape \[4611686018427387904,4\]"),
    (lambda: la.broadcast_to(la.ones(1), (-2,)), r"broadcast_to: result shape \[-2\] has a negative dim"),
    (lambda: la.ones(1).expand(BIG, 4), r"expand: result shape"),
    (lambda: la.ones(0).reshape((0, 2**70)), r"reshape: result shape \[0,1180591620717411303424\] has a dim .* >= 2\*\*63"),
    (lambda: la.ones((2, 3)).repeat(2**61, 2**2), r"repeat: result shape \[4611686018427387904,12\] of float32"),
    (lambda: la.sym.sum_to(la.sym.var("x", shape=(2, None)), shape=(2, -1)),
     r"sum_to: result shape \[2,-1\] has a negative dim"),
])
def test_shape_rules_refuse_impossible_sizes(call, match):
    with pytest.raises(la.ShapeError, match=match):
        call()


def test_graph_inputs_of_impossible_shapes_are_refused_where_declared_or_by_the_first_rule():
    with pytest.raises(la.ShapeError, match=r"la.sym.var\('x'\): input shape \[2,-3\] has a negative dim"):
        la.sym.relu(la.sym.var("x", shape=(2, -3)))
    with pytest.raises(la.ShapeError, match=r"la.sym.var\('x'\): input shape \[9223372036854775808\] has a dim"):
        la.sym.relu(la.sym.var("x", shape=(2**63,)))
    with pytest.raises(la.ShapeError, match=r"relu: input shape \[\?,2305843009213693952\] of float64 asks"):
        la.sym.relu(la.sym.var("x", shape=(None, 2**61), dtype="float64"))  # the known dims alone overflow
    # a data-dependent dim is not probed with made-up sizes: indexing it keeps what is known
    assert la.sym.getitem(la.sym.var("x", shape=(None, 2**61), dtype="bool"), key=(0,)).outputs[0].aval.shape == \
        (2**61,)


def test_sizes_are_checked_in_deferred_compute_and_for_sym():
    with la.deferred():
        with pytest.raises(la.ShapeError, match="one_hot"):
            la.nn.one_hot(la.array([0, 1]), -5)
    with pytest.raises(la.ShapeError, match="expand"):
        la.sym.expand(la.sym.var("x", shape=(1,)), sizes=(BIG, 4))


def test_check_shape_follows_numpys_rule():
    assert check_shape("t", (0, 2**61), np.int8) == (0, 2**61)
    with pytest.raises(la.ShapeError, match=r"t: result shape \[0,2305843009213693952\] of float64 asks for"):
        check_shape("t", (0, 2**61), np.float64)  # no elements, but NumPy refuses it: non-zero dims overflow
    with pytest.raises(la.ShapeError, match="sizes must be ints"):
        check_shape("t", (2, 2.5))
    assert check_shape("t", (np.int64(3), None)) == (3, None)


# -- the allocation limit ------------------------------------------------------------------------
def test_out_of_memory_error_is_a_lazyarray_error_and_a_memory_error():
    assert issubclass(la.OutOfMemoryError, la.LazyArrayError)
    assert issubclass(la.OutOfMemoryError, MemoryError)


def test_default_limit_is_physical_memory_and_the_env_var_overrides_it(limit):
    limit(None)
    assert max_alloc_bytes() == physical_memory() > 0
    limit(12345)
    assert max_alloc_bytes() == 12345
    for text, n in (("12345", 12345), ("8e9", 8 * 10**9), ("0x400", 1024)):  # (read at import)
        assert from_environment({MAX_ALLOC_ENV: text}).max_alloc_bytes == n
    assert from_environment({}).max_alloc_bytes is None
    with pytest.raises(ParamValueError, match=f"{MAX_ALLOC_ENV} must be a number >= 0.*'nonsense'"):
        from_environment({MAX_ALLOC_ENV: "nonsense"})


@pytest.mark.parametrize("call,match", [
    (lambda: la.dot(la.ones((23, 3)), la.ones((3, 29))), r"dot: result float32\[23,29\] needs 2668 bytes"),
    (lambda: la.nn.one_hot(la.array([0, 1, 2]), 1001), r"one_hot: result float32\[3,1001\] needs 12012 bytes"),
    (lambda: la.ones((2, 3)).repeat(37, 41), r"repeat: result float32\[74,123\] needs 36408 bytes"),
    (lambda: la.nn.conv2d(la.ones((1, 1, 3, 3)), la.ones((1, 1, 3, 3)), padding=(47, 47)),
     r"conv2d: result float32\[1,1,95,95\] needs"),
    # workspace: the padded copy is large even though the result is one pixel
    (lambda: la.nn.max_pool2d(la.ones((1, 1, 3, 3)), kernel=(202, 202), padding=(101, 101)),
     r"max_pool2d: padded input float32\[1,1,205,205\] needs 168100 bytes"),
])
def test_allocations_above_the_limit_raise_out_of_memory_error(limit, call, match):
    limit(2000)
    with pytest.raises(la.OutOfMemoryError, match=match) as info:
        call()
    assert "allocation limit of 2000 bytes" in str(info.value) and MAX_ALLOC_ENV in str(info.value)


def test_views_are_not_counted_against_the_limit(limit):
    limit(2000)
    v = la.broadcast_to(la.ones(1), (1013, 1019))  # a zero-stride view: nothing is allocated
    assert v.shape == (1013, 1019)


def test_deferred_broadcasting_above_the_limit_is_refused_before_running(limit):
    limit(2**40)
    with la.deferred():
        with pytest.raises(la.OutOfMemoryError, match=r"add: result float32\[1048576,67108864\] needs "
                                                      r"281474976710656 bytes \(256 TiB\)"):
            la.ones((2**20, 1)) + la.ones((1, 2**26))


def test_check_alloc_counts_zero_sized_and_unknown_shapes_as_free(limit):
    limit(0)
    assert check_alloc("t", (0, 10**9), np.float64) == (0, 10**9)
    assert check_alloc("t", (None, 10**9), np.float64) == (None, 10**9)
    with pytest.raises(la.OutOfMemoryError, match=r"t: result float64\[1\] needs 8 bytes"):
        check_alloc("t", (1,), np.float64)


# -- creation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,cls,match", [
    (lambda: la.zeros((10**6, 10**6)), la.OutOfMemoryError, r"zeros: result float32\[1000000,1000000\] needs "
                                                             r"4000000000000 bytes \(3.64 TiB\)"),
    (lambda: la.ones((2 * 10**6, 10**6), dtype="int8"), la.OutOfMemoryError, r"ones: result int8\[2000000,1000000\]"),
    (lambda: la.full((10**6, 10**6), 2.0), la.OutOfMemoryError, r"full: result float32"),
    (lambda: la.arange(10**12), la.OutOfMemoryError, r"arange: result int64\[1000000000000\] needs 8000000000000"),
    (lambda: la.arange(0.0, 1e12, 1.0), la.OutOfMemoryError, r"arange: result float64\[1000000000000\]"),
    (lambda: la.random.uniform(shape=(10**6, 10**6)), la.OutOfMemoryError, r"uniform: samples float64"),
    (lambda: la.random.normal(shape=(10**6, 10**6)), la.OutOfMemoryError, r"normal: samples float64"),
    (lambda: la.zeros((2**63,)), la.ShapeError, r"zeros: result shape \[9223372036854775808\] has a dim"),
    (lambda: la.zeros((2**62, 4)), la.ShapeError, r"zeros: result shape \[4611686018427387904,4\] of float32 asks"),
    (lambda: la.random.normal(shape=(2**63,)), la.ShapeError, r"normal"),
    (lambda: la.zeros(None), la.ShapeError, r"zeros: shape must be an int or a tuple of ints"),
    (lambda: la.zeros(2.5), la.ShapeError, r"zeros: shape must be an int or a tuple of ints"),
    (lambda: la.arange(2**70), la.ParamValueError, r"arange: integer bounds"),
    (lambda: la.arange(0, 1, 0), la.ParamValueError, r"arange: step must not be zero"),
    (lambda: la.arange(0, float("inf")), la.ParamValueError, r"arange: cannot count"),
    (lambda: la.full((2,), "a"), la.DTypeError, r"full: fill_value must be a real number, got 'a'"),
    (lambda: la.full((2,), None), la.DTypeError, r"full: fill_value must be a real number"),
    (lambda: la.full((2,), 300, dtype="uint8"), OverflowError, r"full: fill_value 300 does not fit uint8"),
    (lambda: la.full((2,), float("nan"), dtype="int32"), la.ParamValueError, r"full: fill_value nan"),
    (lambda: la.arange("5"), la.DTypeError, r"arange: stop must be a real number"),
])
def test_creation_refuses_bad_sizes_and_values_with_named_errors(limit, call, cls, match):
    limit(2**40)  # 1 TiB: the same answer on any machine
    with pytest.raises(cls, match=match) as info:
        call()
    assert isinstance(info.value, la.LazyArrayError)


def test_creation_still_works():
    np.testing.assert_array_equal(la.arange(0, 1, 0.25).asnumpy(), np.arange(0, 1, 0.25, dtype=np.float32))
    assert la.arange(True).asnumpy().tolist() == [0]
    assert la.arange(5, dtype="int8").dtype == np.int8
    np.testing.assert_array_equal(la.full((2,), np.float64(2.5), dtype="int32").asnumpy(), [2, 2])
    assert la.zeros(np.int64(3)).shape == (3,) and la.ones([2, 2]).shape == (2, 2)
    assert la.random.uniform(shape=3).shape == (3,)


def _nested(depth):
    v = [1.0]
    for _ in range(depth - 1):
        v = [v]
    return v


@pytest.mark.parametrize("data,match", [
    ([[1, 2], [3]], r"array: ragged nested lists: the lists at depth 1 have different lengths \[1, 2\]"),
    ([[1, 2], 3], r"array: ragged nested lists: at depth 1 some entries are lists and some are numbers"),
    ([[[1], [2]], [[3], [4, 5]]], r"depth 2 have different lengths"),
    (_nested(100), r"array: the nested lists are 100 levels deep, but an array has at most 64 dims"),
    (_nested(65), r"65 levels deep"),
])
def test_array_refuses_ragged_and_too_deep_lists(data, match):
    with pytest.raises(la.ShapeError, match=match):
        la.array(data)


def test_array_of_64_deep_lists_still_works():
    assert la.array(_nested(64)).ndim == 64
