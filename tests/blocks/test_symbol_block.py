"""SymbolBlock: a graph as a block."""
from __future__ import annotations

import pytest

import lazyarray as la


def test_a_parameter_with_a_symbolic_shape_is_a_format_error():
    """A graph variable that is not an input but has a symbolic dim cannot become a Parameter."""
    x = la.sym.var("data", shape=(la.Dim("batch"), 3))
    w = la.sym.var("w", shape=(la.Dim("batch"), 3))
    with pytest.raises(la.GraphFormatError, match="'w' is not one of the inputs .* symbolic"):
        la.blocks.SymbolBlock(x + w, ["data"])
