"""Shared helper for the pass tests: run a symbol node by node with the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray.executor.interpret import interpret as evaluate
from lazyarray.graph.node import const_node
from lazyarray.graph.rewrite import rewrite


def _run(sym, **values):
    bound = rewrite(sym, lambda node, ins: const_node(np.asarray(values[node.name]), node.avals[0])
                    if node.op is None and node.kind == "var" else None)
    return [np.asarray(v) for v in evaluate(list(bound.outputs))]


@pytest.fixture
def run_symbol():
    """``run_symbol(sym, x=array, ...)`` -> list of NumPy outputs (reference interpreter)."""
    return _run
