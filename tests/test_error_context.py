"""Issue #38 item 6: an error inside a model says which block failed, once, and points at the user's
line; TraceError names the user's line once; writing a weight before backward names the parameter."""
from __future__ import annotations

import linecache
import traceback

import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.user_frames import in_package


class _Branches(B.HybridBlock):
    def forward(self, x):
        if x.sum() > 0:  # a value read while traced
            return x
        return -x


def test_trace_error_names_the_users_line_once():
    net = _Branches()
    net.hybridize()
    with pytest.raises(la.TraceError) as info:
        net(la.ones((2, 2)))
    line = "if x.sum() > 0:"
    assert str(info.value).count(line) == 1
    assert "test_error_context.py:" in str(info.value)
