"""Issue #33 item 6: the cache of which code objects are lazyarray's own (``graph.node.IN_PACKAGE``,
read for every node recorded to find the user's source line) is bounded: code made at run time
(``exec``, ``compile``) that records nodes no longer piles up in it."""
from __future__ import annotations

import sys

import numpy as np

import lazyarray as la
from lazyarray.graph import node as graph_node


def _recorder(i: int):
    ns = {}
    exec(compile(f"def f(x):\n    return x * {i}\n", f"<generated {i}>", "exec"), ns)  # one code object each
    return ns["f"]


def test_code_made_at_run_time_is_not_kept():
    x = la.array(np.ones(3, np.float32))
    n = 3 * graph_node.IN_PACKAGE_CACHE_SIZE
    for i in range(n):
        with la.deferred():
            y = _recorder(i)(x)
        assert y.is_lazy
    assert len(graph_node.IN_PACKAGE) <= graph_node.IN_PACKAGE_CACHE_SIZE
    kept = {c.co_filename for c in graph_node.IN_PACKAGE}
    assert "<generated 0>" not in kept and f"<generated {n - 1}>" in kept  # the oldest went
    f = _recorder(n)
    with la.deferred():
        y = f(x)
    assert y._entry.node.source == (f"<generated {n}>", 2)  # still the user's line after the turnover


def test_sources_are_right_after_eviction(monkeypatch):
    monkeypatch.setattr(graph_node, "IN_PACKAGE_CACHE_SIZE", 4)
    graph_node.IN_PACKAGE.clear()  # (a cache: emptied, it fills again)
    x = la.array(np.ones(2, np.float32))
    for i in range(20):
        with la.deferred():
            y = _recorder(i)(x)
        assert y._entry.node.source == (f"<generated {i}>", 2)
        assert len(graph_node.IN_PACKAGE) <= 4
    with la.deferred():
        y = la.nn.softmax(x) * 2  # through package frames: the source is this line, not the package's
    line = sys._getframe().f_lineno - 1
    assert y._entry.node.source == (__file__, line)
