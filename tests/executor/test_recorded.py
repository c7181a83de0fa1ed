"""Materializing recorded graphs: one-shot runs, the structural program cache, its bounds."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.executor import recorded
from lazyarray.executor.program import SMALL_GRAPH

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _fresh_cache():
    recorded.clear()
    yield
    recorded.clear()


def _data(shape=(5,), dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def _chain(x, y, c=1.5):
    """A graph larger than SMALL_GRAPH (so the cache applies)."""
    h = x
    for _ in range(SMALL_GRAPH):
        h = la.tanh(h * c) + y
    return h


def _chain_np(x, y, c=1.5):
    h = x
    for _ in range(SMALL_GRAPH):
        h = np.tanh(h * np.float32(c)) + y
    return h


def _hits():
    return recorded.stats()["hits"]


def _compiles():
    return recorded.stats()["compiles"]


def test_a_repeated_structure_compiles_once_and_runs_new_values():
    before = _compiles()
    for k in range(4):
        xn, yn = _data(), _data()
        x, y = la.array(xn), la.array(yn)
        with la.deferred():
            h = _chain(x, y)
        np.testing.assert_allclose(h.asnumpy(), _chain_np(xn, yn), rtol=1e-5)
    assert _compiles() - before == 1  # first run one-shot, second compiles, the rest reuse
    assert recorded.stats()["size"] == 1


def _variants():
    """Graphs that differ from ``_chain`` on float32 (5,) in one structural respect each."""
    return {
        "shape": (lambda: (_data((6,)), _data((6,))), _chain, _chain_np),
        "broadcast": (lambda: (_data((2, 5)), _data((5,))), _chain, _chain_np),
        "dtype": (lambda: (_data(dtype="float64"), _data(dtype="float64")), _chain, _np64),
        "scalar value": (lambda: (_data(), _data()), lambda x, y: _chain(x, y, 0.25),
                         lambda x, y: _chain_np(x, y, 0.25)),
        "op": (lambda: (_data(), _data()), lambda x, y: _chain(x, y) - y, lambda x, y: _chain_np(x, y) - y),
        "wiring": (lambda: (_data(), _data()), lambda x, y: _chain(y, x), lambda x, y: _chain_np(y, x)),
        "params": (lambda: (_data((2, 5)), _data((2, 5))), lambda x, y: la.sum(_chain(x, y), axis=1),
                   lambda x, y: _chain_np(x, y).sum(axis=1)),
        "params other axis": (lambda: (_data((2, 5)), _data((2, 5))), lambda x, y: la.sum(_chain(x, y), axis=0),
                              lambda x, y: _chain_np(x, y).sum(axis=0)),
    }


def _np64(x, y):
    h = x
    for _ in range(SMALL_GRAPH):
        h = np.tanh(h * 1.5) + y
    return h


@pytest.mark.parametrize("name", list(_variants()))
def test_a_cached_program_never_serves_another_structure(name):
    """Each variant runs after the base structure (and the other variants) are compiled and
    cached: it must get its own program and NumPy's values."""
    for _ in range(2):  # the base structure, compiled
        x, y = la.array(_data()), la.array(_data())
        with la.deferred():
            _chain(x, y).asnumpy()
    variants = _variants()
    order = [n for n in variants if n != name] + [name]
    for n in order:
        make, f, ref = variants[n]
        for _ in range(3):  # one-shot, compiled, cached
            xn, yn = make()
            x, y = la.array(xn), la.array(yn)
            with la.deferred():
                h = f(x, y)
            out = h.asnumpy()
            expect = ref(xn, yn)
            assert out.shape == expect.shape and out.dtype == expect.dtype, n
            np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6, err_msg=n)


def test_integer_scalars_keep_their_dtype_rules_across_cached_runs():
    for value, dtype in ((3, "int8"), (3, "int64"), (3.0, "int8"), (3, "float32")):
        for _ in range(3):
            xn = np.arange(5, dtype=dtype)
            x = la.array(xn)
            with la.deferred():
                h = x
                for _ in range(SMALL_GRAPH + 1):
                    h = h * value + x
            out = h.asnumpy()
            ref = xn
            for _ in range(SMALL_GRAPH + 1):
                ref = ref * value + xn
            assert out.dtype == ref.dtype, (value, dtype)
            np.testing.assert_array_equal(out, ref)


def test_held_intermediates_are_filled_and_are_part_of_the_structure():
    for hold in (False, False, True, True, False):
        xn, yn = _data(), _data()
        x, y = la.array(xn), la.array(yn)
        with la.deferred():
            a = la.tanh(x * 2.0)
            h = _chain(a, y)
        if not hold:
            del a
        np.testing.assert_allclose(h.asnumpy(), _chain_np(np.tanh(xn * np.float32(2.0)), yn), rtol=1e-5)
        if hold:
            assert not a.is_lazy
            np.testing.assert_allclose(a.asnumpy(), np.tanh(xn * np.float32(2.0)), rtol=1e-6)


def test_outputs_own_their_buffers_cold_and_warm():
    for _ in range(3):
        xn = _data((2, 3))
        x = la.array(xn)
        with la.deferred():
            h = x
            for _ in range(SMALL_GRAPH + 1):
                h = h + 0.0 * h
            v = h.reshape((3, 2))
            w = h.reshape((3, 2))
        la.compute(v, w)
        vv, ww = v.asnumpy(), w.asnumpy()
        assert not np.shares_memory(vv, ww)
        assert not np.shares_memory(vv, x.asnumpy())
        np.testing.assert_allclose(vv, xn.reshape(3, 2))


def test_the_cache_pins_no_user_array():
    for _ in range(3):
        xn = _data((64,))
        x = la.array(xn)
        y = la.array(_data((64,)))
        with la.deferred():
            h = _chain(x, y)
        h.asnumpy()
    assert recorded.stats()["size"] == 1
    refs = [weakref.ref(x._value), weakref.ref(y._value)]
    del x, y, h, xn
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_a_held_result_is_never_overwritten_by_the_next_run():
    results = []
    for _ in range(4):
        xn, yn = _data(), _data()
        x, y = la.array(xn), la.array(yn)
        with la.deferred():
            h = _chain(x, y)
        results.append((h, _chain_np(xn, yn)))
    for h, ref in results:
        np.testing.assert_allclose(h.asnumpy(), ref, rtol=1e-5)


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(la.config, "cache_size", 3)
    for n in range(6):
        for _ in range(2):
            x, y = la.array(_data((n + 1,))), la.array(_data((n + 1,)))
            with la.deferred():
                _chain(x, y).asnumpy()
        assert recorded.stats()["size"] <= 3
    assert recorded.stats()["size"] == 3


def test_large_programs_are_not_kept(monkeypatch):
    monkeypatch.setattr(la.config, "graph_cache_bytes", 1024)
    for _ in range(3):
        x, y = la.array(_data((4096,))), la.array(_data((4096,)))
        with la.deferred():
            _chain(x, y).asnumpy()
    assert recorded.stats()["size"] == 0


def test_the_cache_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(la.config, "graph_cache", False)
    before = _compiles()
    for _ in range(3):
        xn, yn = _data(), _data()
        x, y = la.array(xn), la.array(yn)
        with la.deferred():
            h = _chain(x, y)
        np.testing.assert_allclose(h.asnumpy(), _chain_np(xn, yn), rtol=1e-5)
    assert _compiles() == before and recorded.stats()["size"] == 0


def _bad_take_here(x, idx):
    with la.deferred():
        h = la.tanh(x) + 1.0
        for _ in range(SMALL_GRAPH):
            h = h * 1.0
        out = la.take(h, idx)  # the line a failure must name
    return out


def test_a_failure_in_a_cached_program_names_this_graphs_line():
    good = la.array(np.array([0, 1], dtype=np.int64))
    for _ in range(3):
        _bad_take_here(la.array(_data()), good).asnumpy()
    assert recorded.stats()["size"] == 1
    bad = la.array(np.array([0, 99], dtype=np.int64))
    with pytest.raises(la.LazyArrayError, match="take") as info:
        _bad_take_here(la.array(_data()), bad).asnumpy()
    assert "the line a failure must name" in str(info.value)


def test_a_captured_array_written_after_recording_is_refused_warm():
    for k in range(3):
        x, y = la.array(_data()), la.array(_data())
        with la.deferred():
            h = _chain(x, y)
        if k == 2:
            x += 1
            with pytest.raises(la.DeferredComputeError, match="written in place"):
                h.asnumpy()
        else:
            h.asnumpy()


def test_random_draws_are_kept_and_fresh_per_recording():
    draws = []
    for _ in range(3):
        with la.deferred():
            r = la.random.uniform(size=(6,))
            a = r * 2.0
            for _ in range(SMALL_GRAPH):
                a = a + 1.0
            b = r + 1.0
        la.compute(a, b)
        np.testing.assert_allclose(a.asnumpy(), r.asnumpy() * 2 + SMALL_GRAPH, rtol=1e-6)
        np.testing.assert_allclose(b.asnumpy(), r.asnumpy() + 1, rtol=1e-6)
        draws.append(r.asnumpy())
    assert not np.array_equal(draws[1], draws[2])


_OPS = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("maximum", np.maximum)]
_UNARY = [("tanh", np.tanh), ("negative", np.negative), ("abs", np.abs)]


@st.composite
def _dags(draw):
    """A random elementwise DAG: each node reads one or two earlier values (inputs or nodes)."""
    n = draw(st.integers(SMALL_GRAPH + 1, 12))
    nodes = []
    for k in range(n):
        if draw(st.booleans()):
            i = draw(st.integers(0, k + 1))
            nodes.append(("u", draw(st.integers(0, len(_UNARY) - 1)), i, None))
        else:
            i, j = draw(st.integers(0, k + 1)), draw(st.integers(0, k + 1))
            nodes.append(("b", draw(st.integers(0, len(_OPS) - 1)), i, j))
    shape = draw(st.sampled_from([(3,), (2, 3)]))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    return nodes, shape, dtype


def _run_dag(nodes, vals, lib):
    vals = list(vals)
    for kind, which, i, j in nodes:
        if kind == "u":
            name, f = _UNARY[which]
            vals.append(getattr(la, name)(vals[i]) if lib == "la" else f(vals[i]))
        else:
            name, f = _OPS[which]
            vals.append(getattr(la, name)(vals[i], vals[j]) if lib == "la" else f(vals[i], vals[j]))
    return vals[-1]


@settings(max_examples=60, deadline=None)
@given(_dags(), _dags())
def test_random_dags_through_the_cache_equal_numpy(first, second):
    """Two random structures, each recorded three times, interleaved: every result is NumPy's."""
    for _ in range(3):
        for nodes, shape, dtype in (first, second):
            xn, yn = _data(shape, dtype), _data(shape, dtype)
            with la.deferred():
                out = _run_dag(nodes, [la.array(xn), la.array(yn)], "la")
            got = out.asnumpy()
            ref = _run_dag(nodes, [xn, yn], "np")
            assert got.dtype == ref.dtype
            np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_a_large_graph_computed_once_is_planned_and_leaves_no_program():
    before = _compiles()
    xn, yn = _data((100_000,)), _data((100_000,))  # 400 KB values: past ONESHOT_MAX_BYTES
    x, y = la.array(xn), la.array(yn)
    with la.deferred():
        h = _chain(x, y)
    np.testing.assert_allclose(h.asnumpy(), _chain_np(xn, yn), rtol=1e-5)
    assert _compiles() == before + 1
    assert recorded.stats()["size"] == 0
