"""``buffer.versioned``: the one rule for "a value derived from this array may be kept by its version"
(kept weights, parameter hashes in distributed runs, parameter-only steps)."""
from __future__ import annotations

import numpy as np

import lazyarray as la
from lazyarray.buffer import expose, versioned


def test_an_array_owning_its_memory_is_versioned():
    assert versioned(np.zeros((3, 4), np.float32))


def test_a_view_a_non_numpy_value_and_an_exposed_array_are_not():
    a = np.zeros((3, 4), np.float32)
    assert not versioned(a[1:])  # (its owner may be written through another view)
    assert not versioned(la.array(a))  # (not a NumPy array)
    assert not versioned([1.0, 2.0])
    b = np.zeros(5)
    expose(b)  # (handed out writable: writes through it bump no version)
    assert not versioned(b)
