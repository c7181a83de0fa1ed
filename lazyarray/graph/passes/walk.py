"""Walking a pattern back from the node a rewrite visits, in the old graph and the rewritten one side
by side: the old graph says who reads a value (``use_counts``), the rewritten one gives the entries
the replacement node must read (``rewrite`` hands ``visit`` the new inputs of the node only; each
step back follows the same input on both). Shared by ``attention.py`` and ``layer_norm.py``.
"""
from __future__ import annotations

from ..node import Entry


def op_name(e: Entry) -> str | None:
    """The op of the node ``e`` is an output of (None for a variable or constant)."""
    return None if e.node.op is None else e.node.op.name


class Walk:
    """The facts a pattern's walk checks at every step (``uses``: ``rewrite.use_counts`` of the old graph)."""

    def __init__(self, uses: dict[int, int]):
        self.uses = uses

    def private(self, old: Entry, readers: int = 1) -> bool:
        """``old`` is an op's only output and read ``readers`` times (by the pattern alone)."""
        return old.node.op is not None and len(old.node.avals) == 1 and self.uses.get(id(old.node), 0) == readers

    @staticmethod
    def same(old: Entry, new: Entry) -> bool:
        """``new`` is ``old``'s node as rewritten (not replaced by another op): inputs correspond."""
        return new.node.op is old.node.op and len(new.node.inputs) == len(old.node.inputs)

    def step(self, old: Entry, new: Entry, name: str, readers: int = 1) -> bool:
        """``old`` is a private output of op ``name`` whose rewritten node is the same op."""
        return op_name(old) == name and self.private(old, readers) and self.same(old, new)
