"""Ownership: what a run hands out never shares memory with its inputs, and memory it handed out
is reused only when nobody holds it any more (``executor/program.py``)."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.program import _aliases, _unaliasing


def test_a_kernel_that_returns_a_view_of_an_input_is_caught():
    a = np.arange(6.0)  # owns its memory: its .base is None
    assert _aliases(a[:], [a])  # a view of it
    assert _aliases(a, [a])  # itself
    assert _aliases(a[1:].reshape(1, 5), [a[:3]])  # two views of one buffer
    assert not _aliases(a.copy(), [a])
    assert not _aliases(a, [None, np.ones(2)])


def test_unaliasing_hands_out_a_copy_of_a_returned_view():
    a = np.arange(6.0)
    fn = _unaliasing(lambda x: x[:])
    r = fn(a)
    r += 1
    np.testing.assert_array_equal(a, np.arange(6.0))
    kept = _unaliasing(lambda x: x * 2)(a)
    assert kept.base is None  # a fresh result is passed through, not copied again


# -- a run's outputs are taken back only when nothing holds them --------------------------------
def _op():
    x = la.sym.var("x", shape=(4,))
    return la.CachedOp(la.sym.exp(x) * 2)


def test_memory_of_dropped_outputs_is_reused_by_the_next_run():
    op = _op()
    a = op(la.ones(4))
    first = id(a._value)
    del a
    b = op(la.ones(4))
    assert id(b._value) == first
    np.testing.assert_allclose(b.asnumpy(), np.full(4, 2 * np.e, np.float32), rtol=1e-6)


@pytest.mark.parametrize("hold", ["array", "view"])
def test_memory_anyone_still_holds_is_never_written_by_a_later_run(hold):
    op = _op()
    a = op(la.ones(4))
    raw_id = id(a._value)
    keep = a._value if hold == "array" else a._value[1:3]
    before = np.array(keep, copy=True)
    del a
    b = op(la.full(4, 3.0))
    assert id(b._value) != raw_id
    np.testing.assert_array_equal(keep, before)  # what the user holds did not change


def test_frozen_memory_nobody_holds_is_not_taken_back():
    op = _op()
    a = op(la.ones(4))
    a._value.flags.writeable = False  # e.g. captured read-only by a graph that has since died
    del a
    b = op(la.full(4, 3.0))
    assert b._value.flags.writeable  # fresh memory: a reused frozen buffer could not be written
    np.testing.assert_allclose(b.asnumpy(), np.full(4, 2 * np.exp(3.0), np.float32), rtol=1e-6)


def test_outputs_autograd_saved_are_not_reused_until_backward_frees_them():
    x = la.sym.var("x", shape=(4,))
    op = la.CachedOp(la.sym.sum(la.sym.exp(x) * x))
    w = la.ones(4)
    w.attach_grad()
    with la.autograd.record():
        y1 = op(w)
    with la.autograd.record():
        y2 = op(w)  # the first call's saved values are still held by its record
    y1.backward()
    g1 = w.grad.asnumpy().copy()
    y2.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), g1, rtol=1e-6)
    np.testing.assert_allclose(g1, np.full(4, 2 * np.e, np.float32), rtol=1e-6)


@pytest.mark.parametrize("general", [False, True])
def test_a_run_takes_back_each_output_nobody_holds_and_only_those(general):
    # an output of one view: ``Program.run``'s inline check; else (forced here) ``buffer_set.unheld``
    x = la.sym.var("x", shape=(4,))
    op = la.CachedOp(la.Symbol([(la.sym.exp(x) * 2).outputs[0], (la.sym.tanh(x) + 1).outputs[0]]))
    a, b = op(la.ones(4))
    prog = next(iter(op._cache.values())).program
    assert [h[-1] is not None for h in prog._handed] == [True, True]
    if general:
        prog._handed = [h[:-1] + (None,) for h in prog._handed]
    keep_a = a._value[1:3]  # a view the user holds: that memory stays theirs
    before = np.array(keep_a, copy=True)
    raw_a, raw_b = id(a._value), id(b._value)
    del a, b
    c, d = op(la.full(4, 3.0))
    np.testing.assert_array_equal(keep_a, before)
    assert id(c._value) != raw_a and id(d._value) == raw_b  # nobody held the second output: taken back
    np.testing.assert_allclose(c.asnumpy(), np.full(4, 2 * np.exp(3.0), np.float32), rtol=1e-6)
    np.testing.assert_allclose(d.asnumpy(), np.full(4, np.tanh(3.0) + 1, np.float32), rtol=1e-6)
