"""kernels/runner.py's ``counted_until``: a bound step of a tiered op counts its calls as the op's
runner counts, and binds again (the later tier's choice) once the count passes; ``direct`` of a plain
kernel function is a ``functools.partial`` (called in C), the same results as the lambda of the others."""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from lazyarray.kernels import runner
from lazyarray.kernels.impl import Choice, Impl
from lazyarray.kernels.runner import Bound, by_facts, counted_until


def _make(state, made):
    def make(arrays, out):
        tier = "late" if state.calls >= 2 else "early"
        made.append(tier)
        return Bound(tier, lambda *a, out=None: (tier, a, out))
    return make


def test_not_tiered_is_the_made_binding_and_counts_nothing():
    state, made = SimpleNamespace(calls=0), []
    b = counted_until(state, 2, False, _make(state, made), (1,), None)
    assert b.choice == "early" and b.fn(1, out="o") == ("early", (1,), "o")
    assert state.calls == 0 and made == ["early"]


def test_tiered_counts_each_call_then_binds_the_later_tier_once():
    state, made = SimpleNamespace(calls=0), []
    b = counted_until(state, 2, True, _make(state, made), (1,), None)
    assert b.choice == "early"
    assert [b.fn(7, out=None)[0] for _ in range(5)] == ["early", "early", "late", "late", "late"]
    assert state.calls == 2  # (counted while early; the later binding counts nothing)
    assert made == ["early", "late"]  # (bound again once, when the count passed)


def test_a_bound_that_binds_by_facts_names_the_choice_each_call_runs():
    made = []

    def bind(arrays, out):
        made.append(arrays[0])
        return Bound(f"c{arrays[0]}", lambda *a, out=None: a[0])

    b = by_facts(lambda x, out: x, bind, {1: Bound("c1", lambda *a, out=None: -1)}, "c1")
    assert b.choice == "c1"
    assert b.fn(2) == 2 and b.choice == "c2"
    assert b.fn(1) == -1 and b.choice == "c1"  # (the answer bound first: its Bound again)
    assert b.fn(2) == 2 and b.choice == "c2" and made == [2]  # (bound once per answer)


def test_a_tiered_bound_names_the_later_tier_once_it_runs():
    state, made = SimpleNamespace(calls=0), []
    b = counted_until(state, 2, True, _make(state, made), (1,), None)
    names = []
    for _ in range(4):
        b.fn(7)
        names.append(b.choice)
    assert names == ["early", "early", "late", "late"]


def _plain(xp, a, b, out=None):
    return xp.add(a, b, out=out)


def _named_y(xp, a, b, y=None):
    return xp.add(a, b, out=y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_direct_run_of_a_plain_kernel_is_called_in_c_with_the_same_result(dtype):
    fast = runner.direct(Choice(Impl("t", "plain", _plain, "")), {}, np, arity=2)
    slow = runner.direct(Choice(Impl("t", "named_y", _named_y, "")), {}, np, arity=2)
    assert isinstance(fast, functools.partial) and not isinstance(slow, functools.partial)
    a = np.arange(12, dtype=dtype).reshape(3, 4)[:, ::2]  # a view
    b = np.ones((3, 2), dtype)
    for fn in (fast, slow):
        out = np.empty((3, 2), dtype)
        assert fn(a, b, out=out) is out
        np.testing.assert_array_equal(out, a + b)
        np.testing.assert_array_equal(fn(a, b), a + b)  # (no out: the kernel allocates)
        assert fn(a[:0], b[:0], out=np.empty((0, 2), dtype)).shape == (0, 2)
