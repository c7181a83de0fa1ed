"""The structural key of a recorded sub-graph: equal for equal structure, else different."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.deferred import known_values
from lazyarray.executor.structure import Uncacheable, describe, finish, freeze, params_key


def _described(out):
    return finish(describe([out._entry], known_values), [out._entry], [])


def _key(build, *arrays):
    with la.deferred():
        out = build(*arrays)
    return _described(out).key


def _x(shape=(3,), dtype="float32", seed=0):
    return la.array(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def test_values_are_not_part_of_the_key():
    f = lambda x: la.tanh(x * 2.0) + x  # noqa: E731
    assert _key(f, _x(seed=1)) == _key(f, _x(seed=2))
    assert _key(lambda x: x * 2.0 + 1, _x()) == _key(lambda x: x * 3.5 + 7, _x())


@pytest.mark.parametrize("other", [
    lambda: _key(lambda x: la.tanh(x * 2.0) + x, _x((4,))),  # shape
    lambda: _key(lambda x: la.tanh(x * 2.0) + x, _x(dtype="float64")),  # dtype
    lambda: _key(lambda x: la.exp(x * 2.0) + x, _x()),  # op
    lambda: _key(lambda x: la.tanh(x * 2.0) - x, _x()),  # op
    lambda: _key(lambda x: x + la.tanh(x * 2.0), _x()),  # wiring (operand order)
    lambda: _key(lambda x: la.tanh(x * 2.0) + x * 2.0, _x()),  # one more node
])
def test_any_structural_change_changes_the_key(other):
    assert _key(lambda x: la.tanh(x * 2.0) + x, _x()) != other()


def test_a_scalars_dtype_is_part_of_the_key():
    ints = la.array(np.arange(3, dtype="int32"))
    assert _key(lambda x: x * 2 + x, ints) != _key(lambda x: x * 2.0 + x, ints)
    # (a Python int beside float32 is a float32 constant, exactly as 2.0 is: the same structure)
    assert _key(lambda x: x * 2 + x, _x()) == _key(lambda x: x * 2.0 + x, _x())


def test_params_are_typed():
    assert _key(lambda x: la.sum(x, axis=0), _x((2, 3))) != _key(lambda x: la.sum(x, axis=1), _x((2, 3)))
    assert freeze(1) != freeze(1.0) != freeze(True)
    assert freeze(0.0) != freeze(-0.0)
    assert freeze(float("nan")) == freeze(float("nan"))
    assert freeze((1, 2)) != freeze([1, 2]) and freeze((1, 2)) != freeze((1, 2.0))
    assert freeze(np.dtype("float32")) != freeze(np.dtype("float16"))
    assert freeze(slice(0, 2)) != freeze(slice(0, 3))
    assert params_key({}) == ()


def test_objects_in_params_are_uncacheable():
    with pytest.raises(Uncacheable):
        freeze(object())
    with pytest.raises(Uncacheable):
        params_key({"table": {"a": 1}})


def test_leaves_are_numbered_by_first_use():
    x, y = _x(seed=1), _x(seed=2)
    with la.deferred():
        out = (x * y) + x
    d = _described(out)
    assert [node.value is x._value for node, _ in d.inputs] == [True, False]
    assert len(d.ops) == 2 and d.out_slots == [d.firsts[0]]
    assert [node.op.name for node, _, _ in d.steps] == ["multiply", "add"]  # run in creation order


def test_known_values_are_leaves():
    x = _x()
    with la.deferred():
        a = la.tanh(x)
        out = a * 2.0 + a
    a.asnumpy()
    d = _described(out)
    assert [node.op.name for node in d.ops] == ["add", "multiply"]
    assert any(node is a._entry.node for node, _ in d.inputs)
    np.testing.assert_allclose(out.asnumpy(), np.tanh(x.asnumpy()) * 3, rtol=1e-6)


def test_which_op_carries_a_param_is_part_of_the_key():
    # (same ops, avals and wiring; only the param sits on the other `sum`)
    a = _key(lambda x: la.sum(x, axis=0) - la.sum(x), _x())
    b = _key(lambda x: la.sum(x) - la.sum(x, axis=0), _x())
    assert a != b and hash(a) != hash(b)


def test_the_key_keeps_its_hash_and_compares_by_parts():
    f = lambda x: la.tanh(x * 2.0) + x  # noqa: E731
    a, b = _key(f, _x(seed=1)), _key(f, _x(seed=2))
    assert a is not b and a == b and hash(a) == hash(b)
    assert a != a.parts and a.parts == b.parts  # (never equal to a bare tuple)
    assert {a: 1}[b] == 1
    assert a != _key(lambda x: la.tanh(x * 2.0) - x, _x())


def _walk(out, unshown_unknown):
    asked = []

    def ask(node):
        asked.append(node)
        return known_values(node)

    d = finish(describe([out._entry], ask, unshown_unknown=unshown_unknown), [out._entry], [])
    return d, asked


def test_unshown_nodes_are_not_asked_about_and_the_walk_is_the_same():
    x = _x()
    with la.deferred():
        h = la.tanh(x * 2.0)
        out = la.exp(h) + h * 3.0  # only `h` and `out` are shown by live arrays
    full, asked_all = _walk(out, False)
    quick, asked = _walk(out, True)
    assert full.key == quick.key and full.ops == quick.ops and full.ins == quick.ins
    assert len(asked_all) == 5 and [n.op.name for n in asked] == ["add", "tanh"]
    h.asnumpy()  # a shown node with a value is a leaf either way
    full, _ = _walk(out, False)
    quick, _ = _walk(out, True)
    assert [n.op.name for n in quick.ops] == [n.op.name for n in full.ops] == ["add", "multiply", "exp"]
    assert any(node is h._entry.node for node, _ in quick.inputs)


def test_random_nodes_are_always_asked_about():
    with la.deferred():
        out = la.tanh(la.random.uniform(size=(3,)) * 2.0)
    _, asked = _walk(out, True)
    assert [n.op.name for n in asked] == ["tanh", "random_uniform"]
