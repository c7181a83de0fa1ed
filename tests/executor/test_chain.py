"""Chains keyed while they are recorded: the key's identity is the structure, never more or less."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.executor import chain, recorded
from lazyarray.executor.program import SMALL_GRAPH
from lazyarray.ops import registry

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fresh_cache():
    recorded.clear()
    yield
    recorded.clear()


def _data(shape=(3,), dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


_UNARY = {"tanh": np.tanh, "negative": np.negative, "abs": np.abs, "sin": np.sin}
_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum}
_SCALARS = [1.5, 0.5, 2, -3, True]
_LEAVES = [((3,), "float32"), ((2, 3), "float32"), ((1, 3), "float64"), ((), "float32"), ((3,), "int32")]


@st.composite
def _chains(draw):
    """A chain: a first input, then steps that each read the previous value (and perhaps a leaf:
    a Python number or an array, on either side)."""
    n = draw(st.integers(SMALL_GRAPH + 1, 9))
    steps = []
    for _ in range(n):
        kind = draw(st.sampled_from(["unary", "scalar", "array"]))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(_UNARY))), None, False))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from(sorted(_BINARY))), draw(st.sampled_from(_SCALARS)),
                          draw(st.booleans())))
        else:
            steps.append(("array", draw(st.sampled_from(sorted(_BINARY))),
                          draw(st.integers(0, len(_LEAVES) - 1)), draw(st.booleans())))
    first = draw(st.sampled_from([((3,), "float32"), ((2, 3), "float32"), ((3,), "float64")]))
    return first, steps


def _inputs(spec):
    (shape, dtype), steps = spec
    leaves = {i: _data(*_LEAVES[i]) for kind, _, i, _ in steps if kind == "array"}
    return _data(shape, dtype), leaves


def _run(spec, x, leaves, lib):
    _, steps = spec
    y = x
    for kind, name, what, reverse in steps:
        if kind == "unary":
            y = getattr(la, name)(y) if lib is la else _UNARY[name](y)
            continue
        other = leaves[what] if kind == "array" else what
        f = getattr(la, name) if lib is la else _BINARY[name]
        y = f(other, y) if reverse else f(y, other)
    return y


def _record(spec, xn, leaves):
    x = la.array(xn)
    arrays = {i: la.array(v) for i, v in leaves.items()}
    with la.deferred():
        return _run(spec, x, arrays, la)


def _structure(array):
    """What a chain's key stands for, read off the graph itself: per op from the end, the op,
    its output avals and, per input, the chain's position or the leaf's aval."""
    node, out = array._entry.node, []
    while node.op is not None:
        ins = tuple(("op", i) if e.node.op is not None else ("leaf", e.node.avals[e.index])
                    for i, e in enumerate(node.inputs))
        out.append((node.op.name, node.avals, ins))
        ops = [e.node for e in node.inputs if e.node.op is not None]
        if not ops:
            break
        node = ops[0]
    return tuple(out)


def test_a_chain_recorded_again_has_the_same_key_and_hits_the_cache():
    spec = (((3,), "float32"), [("unary", "tanh", None, False), ("scalar", "multiply", 1.5, False)] * 4)
    keys = []
    stats = recorded.stats()
    for _ in range(4):
        xn, leaves = _inputs(spec)
        y = _record(spec, xn, leaves)
        keys.append(y._entry.node.chain)
        np.testing.assert_allclose(y.asnumpy(), _run(spec, xn, leaves, np), rtol=1e-6)
    assert keys[0] is not None and all(k is keys[0] for k in keys)
    assert recorded.stats()["compiles"] - stats["compiles"] == 1 and recorded.stats()["hits"] - stats["hits"] == 2


@pytest.mark.parametrize("change", ["shape", "dtype", "op", "leaf dtype", "leaf shape", "leaf broadcast", "side", "length"])
def test_every_structural_change_makes_another_key(change):
    base = (((3,), "float32"), [("unary", "tanh", None, False), ("scalar", "subtract", 1.5, False),
                                ("array", "add", 0, False), ("unary", "abs", None, False),
                                ("scalar", "multiply", 0.5, False), ("unary", "sin", None, False)])
    (first, steps) = base
    steps = list(steps)
    if change == "shape":
        first = ((2, 3), "float32")
    elif change == "dtype":
        first = ((3,), "float64")
    elif change == "op":
        steps[3] = ("unary", "negative", None, False)
    elif change == "leaf dtype":
        steps[2] = ("array", "add", 4, False)
    elif change == "leaf shape":
        steps[2] = ("array", "add", 2, False)
    elif change == "leaf broadcast":  # (a 0-d leaf: the same output avals, another input)
        steps[2] = ("array", "add", 3, False)
    elif change == "side":
        steps[1] = ("scalar", "subtract", 1.5, True)
    else:
        steps.append(("unary", "sin", None, False))
    other = (first, steps)
    for _ in range(2):  # (the second recording of each: every op's rule memo is warm)
        a = _record(base, *_inputs(base))
        b = _record(other, *_inputs(other))
    assert a._entry.node.chain is not None and b._entry.node.chain is not None
    assert a._entry.node.chain is not b._entry.node.chain
    assert _structure(a) != _structure(b)


@settings(max_examples=60, deadline=None)
@given(_chains(), _chains())
def test_random_chains_share_a_key_exactly_when_their_structure_is_equal(first, second):
    """Interleaved recordings of two random chains: the same key object exactly when the graphs
    have the same structure, and every result (cold, compiled, cached) is NumPy's."""
    keys = {}
    for _ in range(3):
        for name, spec in (("first", first), ("second", second)):
            xn, leaves = _inputs(spec)
            y = _record(spec, xn, leaves)
            keys[name] = (y._entry.node.chain, _structure(y))
            ref = _run(spec, xn, leaves, np)
            got = y.asnumpy()
            assert got.dtype == ref.dtype and got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    (ka, sa), (kb, sb) = keys["first"], keys["second"]
    assert ka is not None and kb is not None
    assert (ka is kb) == (sa == sb)


def test_a_live_intermediate_is_computed_with_the_end():
    x = la.array(_data())
    for _ in range(3):
        with la.deferred():
            y = x
            for k in range(2 * SMALL_GRAPH):
                y = la.tanh(y) * 0.5
                if k == SMALL_GRAPH:
                    mid = y
        out = y.asnumpy()
        assert not mid.is_lazy  # filled by the same run (describe's path)
        ref = x.asnumpy()
        for k in range(2 * SMALL_GRAPH):
            ref = np.tanh(ref) * np.float32(0.5)
            if k == SMALL_GRAPH:
                np.testing.assert_allclose(mid.asnumpy(), ref, rtol=1e-6)
        np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_a_computed_intermediate_is_read_not_recomputed():
    for _ in range(3):
        xn = _data()
        x = la.array(xn)
        with la.deferred():
            mid = la.tanh(x)
            y = mid
            for _ in range(SMALL_GRAPH + 1):
                y = y * 2.0
        mid.asnumpy()
        x[:] = 0  # (the graph of y reads mid's value now: x is not read again)
        np.testing.assert_allclose(y.asnumpy(), np.tanh(xn) * 2.0 ** (SMALL_GRAPH + 1), rtol=1e-6)


def test_a_captured_array_written_after_recording_is_refused_on_the_chain_path():
    for k in range(3):
        x = la.array(_data())
        with la.deferred():
            y = x
            for _ in range(SMALL_GRAPH + 1):
                y = la.tanh(y) + 1.0
        assert y._entry.node.chain is not None
        if k == 2:
            x += 1
            with pytest.raises(la.DeferredComputeError, match="written in place"):
                y.asnumpy()
        else:
            y.asnumpy()


def test_ops_that_draw_or_are_not_registered_get_no_key():
    x = la.array(_data())
    entries = (x._as_entry(),)
    avals = (x._as_entry().aval,)
    draws = [op for op in registry.all_ops() if op.random]
    assert draws and chain.root(draws[0], entries, avals) is None
    stray = registry.OpDef(name="stray_tanh", inputs=["x"], kernel=lambda xp, x: xp.tanh(x))
    assert chain.root(stray, entries, avals) is None
    with la.deferred():
        y = la.tanh(x)
    assert chain.grow(y._entry.node.chain, draws[0], avals, 0, None) is None


def test_the_key_tables_are_bounded(monkeypatch):
    monkeypatch.setattr(chain, "MAX_KEYS", 8)
    chain.KEYS.clear()
    spec = (((3,), "float32"), [("unary", "tanh", None, False), ("scalar", "add", 1.5, False)] * 5)
    keys = []
    for _ in range(4):
        xn, leaves = _inputs(spec)
        y = _record(spec, xn, leaves)
        keys.append(y._entry.node.chain)
        np.testing.assert_allclose(y.asnumpy(), _run(spec, xn, leaves, np), rtol=1e-6)
        gen = chain.KEYS.get(None)
        assert len(gen.roots) <= gen.made <= 8 and len(chain.KEYS) == 1
    assert keys[0] is not keys[1]  # (past the bound: new keys, a miss, never a wrong hit)


def test_clearing_the_keys_starts_new_ones():
    spec = (((3,), "float32"), [("unary", "tanh", None, False), ("scalar", "add", 1.5, False)] * 3)
    first, again = (_record(spec, *_inputs(spec))._entry.node.chain for _ in range(2))
    assert first is again is not None  # (the same structure: the same key)
    chain.KEYS.clear()
    xn, leaves = _inputs(spec)
    fresh = _record(spec, xn, leaves)
    assert fresh._entry.node.chain is not first
    np.testing.assert_allclose(fresh.asnumpy(), _run(spec, xn, leaves, np), rtol=1e-6)


def test_with_the_cache_off_chains_run_node_by_node(monkeypatch):
    monkeypatch.setattr(la.config, "graph_cache", False)
    spec = (((3,), "float32"), [("unary", "tanh", None, False), ("scalar", "multiply", 1.5, False)] * 4)
    before = recorded.stats()["compiles"]
    for _ in range(3):
        xn, leaves = _inputs(spec)
        np.testing.assert_allclose(_record(spec, xn, leaves).asnumpy(), _run(spec, xn, leaves, np), rtol=1e-6)
    assert recorded.stats()["size"] == 0 and recorded.stats()["compiles"] == before


def _record_here_a(x):
    with la.deferred():
        y = x
        for _ in range(SMALL_GRAPH + 1):
            y = la.tanh(y) * 2.0  # line a
    return y


def _record_here_b(x):
    with la.deferred():
        y = x
        for _ in range(SMALL_GRAPH + 1):
            y = la.tanh(y) * 2.0  # line b
    return y


def _lines(y):
    node, out = y._entry.node, set()
    while node.op is not None:
        out.add(node.source_line().split(": ", 1)[1])
        node = node.inputs[0].node
    return out


def test_the_same_chain_recorded_from_other_lines_names_its_own_lines():
    x = la.array(_data())
    ya, yb, ya2 = _record_here_a(x), _record_here_b(x), _record_here_a(x)
    assert ya._entry.node.chain is yb._entry.node.chain is ya2._entry.node.chain
    assert _lines(ya) == _lines(ya2) == {"y = la.tanh(y) * 2.0  # line a"}
    assert _lines(yb) == {"y = la.tanh(y) * 2.0  # line b"}
