"""kernels/runner.py's ``counted_until``: a bound step of a tiered op counts its calls as the op's
runner counts, and binds again (the later tier's choice) once the count passes."""
from __future__ import annotations

from types import SimpleNamespace

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
