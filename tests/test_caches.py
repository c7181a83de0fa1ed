"""lazyarray/caches.py: ``NamedCache``, a named map with a bound and ``clear()`` (the one form of
module-level mutable state besides the op registry and the tuning table)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray.caches import NamedCache
from lazyarray.errors import ParamValueError


def test_the_least_recently_used_entry_goes_past_the_bound():
    c = NamedCache("t", size=2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the most recently used
    c.put("c", 3)
    assert "b" not in c and c.get("a") == 1 and c.get("c") == 3 and len(c) == 2
    assert c.get("b", "none") == "none"
    c.discard("a")
    assert "a" not in c and len(c) == 1
    c.clear()
    assert len(c) == 0 and "t" in repr(c)


def test_once_is_true_the_first_time_only_and_stays_bounded():
    c = NamedCache("warned", size=3)
    assert [c.once(k) for k in ("x", "x", "y")] == [True, False, True]
    for k in range(10):
        c.once(k)
    assert len(c) == 3
    c.clear()
    assert c.once("x")


def test_threads_storing_at_once_keep_the_bound():
    c = NamedCache("shared", size=50)

    def work(base):
        for k in range(200):
            c.put((base, k), k)
            c.get((base, k - 1))

    threads = [threading.Thread(target=work, args=(b,)) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c) == 50


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_a_bad_size_is_a_named_error(size):
    with pytest.raises(ParamValueError, match="size must be an int >= 1"):
        NamedCache("bad", size=size)


def test_the_fallback_warnings_are_given_once_per_op_until_cleared(fresh_fallback_warnings):
    from lazyarray.ops import registry
    x = la.sparse.csr_matrix((np.array([1.0, 2.0], np.float32), np.array([0, 2]), np.array([0, 1, 2])),
                             shape=(2, 3))
    with pytest.warns(la.StorageFallbackWarning):
        la.exp(x).asnumpy()
    assert len(registry.STORAGE_FALLBACK_WARNED) == 1
    registry.STORAGE_FALLBACK_WARNED.clear()
    with pytest.warns(la.StorageFallbackWarning):
        la.exp(x).asnumpy()


def test_the_distributed_worker_keeps_its_programs_in_named_caches():
    from lazyarray.distributed import worker
    worker.clear()
    text = (la.sym.var("x") * 2).to_json()
    xn = np.arange(3.0, dtype=np.float32)
    out = worker.run_region(text, ("x",), xn)
    np.testing.assert_array_equal(out[0], xn * 2)
    assert len(worker.PROGRAMS) == 1 and len(worker.PARSED) == 1
    worker.run_region(text, ("x",), xn)
    assert len(worker.PROGRAMS) == 1  # the same signature: the same program
    worker.clear()
    assert len(worker.PROGRAMS) == len(worker.PARSED) == 0


def test_get_or_make_makes_once_while_other_threads_wait():
    c = NamedCache("made", size=4)
    made, started = [], threading.Event()

    def make(k):
        started.set()
        made.append(k)
        threading.Event().wait(0.05)  # (the others arrive while this one makes)
        return k * 10

    got = []
    threads = [threading.Thread(target=lambda: got.append(c.get_or_make("k", make, 7))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [7] and got == [70] * 4 and c.peek("k") == 70


def test_get_or_make_stores_nothing_when_make_fails_and_may_fill_other_keys():
    c = NamedCache("made", size=4)
    with pytest.raises(ZeroDivisionError):
        c.get_or_make("bad", lambda: 1 / 0)
    assert "bad" not in c
    # (one make may fill another key of the same cache: the make lock is re-entrant)
    assert c.get_or_make("outer", lambda: c.get_or_make("inner", lambda: 1) + 1) == 2 and c.peek("inner") == 1


def test_peek_leaves_the_order_and_get_moves_to_the_end():
    c = NamedCache("order", size=2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.peek("a") == 1 and c.peek("zz", "none") == "none"
    c.put("c", 3)  # ("a" was only peeked: still the oldest)
    assert "a" not in c and c.get("b") == 2
    c.put("d", 4)
    assert "c" not in c and "b" in c


def test_values_are_a_copy_oldest_first():
    c = NamedCache("v", size=3)
    for k in "abc":
        c.put(k, k.upper())
    c.get("a")
    vals = c.values()
    c.clear()
    assert vals == ["B", "C", "A"] and c.values() == []


def test_drop_is_called_with_every_value_let_go():
    dropped = []
    c = NamedCache("owned", size=2, drop=dropped.append)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 3)  # replaced
    c.put("c", 4)  # evicts "b"
    c.discard("c")
    c.once("x")  # evicts nothing (2 entries: "a", "x")
    c.once("y")  # evicts "a"
    assert dropped == [1, 2, 4, 3]
    c.put("x", 5)  # replaces once's True
    c.clear()
    assert dropped == [1, 2, 4, 3, True, True, 5] and len(c) == 0
