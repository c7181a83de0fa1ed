"""Copies derived from weights (ops/derived.py): kept per (array, version, what), read-only, within
one budget, from the second call at an unchanged version only."""
import gc

import numpy as np
import pytest

import lazyarray as la
from lazyarray.buffer import bump, expose
from lazyarray.ops import derived


@pytest.fixture(autouse=True)
def fresh_table():
    derived.clear()
    yield
    derived.clear()


def _w(seed=0, shape=(64, 128)):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def test_kept_from_the_second_call_read_only_and_served_while_unchanged():
    w = _w()
    made = []

    def make():
        made.append(1)
        return w * 2

    assert derived.keeps(w)  # (from the first call: an algorithm chosen by it is chosen at every call)
    assert derived.derived(w, "double", make, w.nbytes) is None  # first call: the caller derives it
    assert made == [] and derived.keeps(w)
    c = derived.derived(w, "double", make, w.nbytes)
    assert made == [1] and not c.flags.writeable
    np.testing.assert_array_equal(c, w * 2)
    assert derived.derived(w, "double", make, w.nbytes) is c and made == [1]
    assert derived.held_count("double") == 1 and derived.held_bytes() == c.nbytes


def test_a_view_is_kept_read_only_through_its_base_too():
    w = _w()
    derived.derived(w, "view", lambda: (w * 2).T, w.nbytes)
    c = derived.derived(w, "view", lambda: (w * 2).T, w.nbytes)
    assert c.base is not None and not c.flags.writeable and not c.base.flags.writeable
    with pytest.raises(ValueError):
        c.base[0] = 0


def test_several_derivations_of_one_weight_share_its_entry_and_the_budget():
    w = _w()
    derived.derived(w, "a", lambda: w + 1, w.nbytes)
    a = derived.derived(w, "a", lambda: w + 1, w.nbytes)
    b = derived.derived(w, "b", lambda: w - 1, w.nbytes)  # seen at this version already: kept at once
    assert derived.derived(w, "a", lambda: w + 1, w.nbytes) is a
    assert derived.derived(w, "b", lambda: w - 1, w.nbytes) is b
    assert derived.held_count() == 2 and derived.held_bytes() == 2 * w.nbytes


def test_a_write_drops_every_copy_of_the_weight():
    w = _w()
    for _ in range(2):
        derived.derived(w, "a", lambda: w + 1, w.nbytes)
        derived.derived(w, "b", lambda: w - 1, w.nbytes)
    assert derived.held_count() == 2
    w[:] = 3
    bump(w)  # (what every write through lazyarray does)
    assert derived.keeps(w)  # (kept again from the new version's second call)
    assert derived.derived(w, "a", lambda: w + 1, w.nbytes) is None
    assert derived.held_count() == 0 and derived.held_bytes() == 0
    np.testing.assert_array_equal(derived.derived(w, "a", lambda: w + 1, w.nbytes), np.full_like(w, 4))


def test_views_exposed_and_foreign_arrays_are_never_kept():
    owner = _w()
    exposed_w = _w(1)
    expose(exposed_w)
    for _ in range(3):
        for w in (owner[:, :64], exposed_w, owner.tolist()):
            assert derived.derived(w, "a", lambda: 0, 0) is None
            assert not derived.keeps(w)
    assert derived.held_count() == 0


def _plus(w, k):
    return lambda: w + k


def test_the_budget_bounds_all_copies(monkeypatch):
    a, b = _w(0), _w(1)
    monkeypatch.setattr(la.config, "keep_weights_budget", a.nbytes + a.nbytes // 2)
    derived.derived(a, "x", _plus(a, 1), a.nbytes)
    derived.derived(b, "x", _plus(b, 1), b.nbytes)
    np.testing.assert_array_equal(derived.derived(a, "x", _plus(a, 1), a.nbytes), a + 1)
    for _ in range(3):
        assert derived.derived(a, "y", _plus(a, 2), a.nbytes) is None  # no room for a second copy
        assert derived.derived(b, "x", _plus(b, 1), b.nbytes) is None
    assert derived.held_count() == 1 and derived.held_bytes() == a.nbytes
    assert derived.keeps(a, a.nbytes) and not derived.keeps(b, b.nbytes)  # (a has a copy; b no room)
    assert derived.keeps(b, 0)
    del a
    gc.collect()  # the weight dies with its copies: the budget has room for b's
    assert derived.held_bytes() == 0 and len(derived._ENTRIES) == 1
    np.testing.assert_array_equal(derived.derived(b, "x", _plus(b, 1), b.nbytes), b + 1)
    assert derived.held_bytes() == b.nbytes


def test_caching_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(la.config, "keep_weights", False)
    w = _w()
    for _ in range(3):
        assert derived.derived(w, "a", lambda: w + 1, w.nbytes) is None
    assert not derived.keeps(w) and derived.held_count() == 0


def test_threads_deriving_at_once_share_one_table():
    """Callers on several threads: every result is right, each derivation is kept once, and the
    bytes held match the copies held."""
    from concurrent.futures import ThreadPoolExecutor

    ws = [_w(s) for s in range(4)]
    for w in ws:
        derived.derived(w, "a", _plus(w, 1), w.nbytes)  # (seen once: the next calls keep copies)

    def work(i):
        w = ws[i % 4]
        what = "ab"[i % 2]
        c = derived.derived(w, what, _plus(w, 1 if what == "a" else 2), w.nbytes)
        np.testing.assert_array_equal(c, w + (1 if what == "a" else 2))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(200)))
    assert derived.held_count() == 4 and derived.held_bytes() == sum(w.nbytes for w in ws)
