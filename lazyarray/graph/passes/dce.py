"""Dead-node elimination: keep only what the chosen outputs need."""
from __future__ import annotations

from ..node import Entry
from ..symbol import Symbol


def dce(sym: Symbol, keep=None) -> Symbol:
    """The symbol restricted to the outputs in ``keep`` (indices or names; default all).

    Nodes that no kept output reads disappear, and so do graph inputs nothing reads any more.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(3,))
    >>> both = la.Symbol([la.sym.exp(x).outputs[0], la.sym.sin(x).outputs[0]])
    >>> [n.op.name for n in dce(both, keep=[1]).topo() if n.op]
    ['sin']
    """
    if keep is None and not sym.unused_inputs:
        # every output kept and no input declared beside them: the symbol already holds only what its
        # outputs read (its order and ``Symbol(outputs)``'s are one walk), so it is the result, unwalked
        return sym
    outs = list(sym.outputs)
    if keep is not None:
        names = sym.list_outputs()
        idx = [names.index(k) if isinstance(k, str) else k for k in keep]
        outs = [outs[i] for i in idx]
    # A Symbol only reaches what its outputs read, so restricting the outputs is the pass. Nodes
    # are never mutated (graph/rewrite.py), so the result shares them with ``sym``: no copy, and
    # ``sym`` itself (its order and names known) when every node is kept.
    kept = Symbol([Entry(e.node, e.index) for e in outs])
    if keep is None and len(kept.topo()) == len(sym.topo()):
        return sym
    return kept
