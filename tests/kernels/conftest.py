"""Fixtures shared by the kernels' tests."""
from __future__ import annotations

import pytest

import lazyarray as la
from lazyarray import threads


@pytest.fixture
def two_threads():
    """``la.set_num_threads(2)`` for the test, the count before it restored after."""
    before = threads.num_threads()
    la.set_num_threads(2)
    yield
    la.set_num_threads(before)

