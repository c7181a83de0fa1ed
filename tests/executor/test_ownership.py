"""Ownership: what a run hands out never shares memory with its inputs (``executor/program.py``)."""
import numpy as np

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
