"""Specialize a shape-polymorphic graph to one call's sizes: bind each symbolic dim (``la.Dim``) to
the size the call gives it, check every declared size (a pinned input's concrete dims too), and
substitute the values into the op parameters that hold symbolic sizes (``reshape(shape=(b, -1))``,
``arange(stop=s)``, a slice to ``b - 1``). The executor runs this before placement infers every
aval again from the concrete input avals, so a compiled program only ever sees ints.
"""
from __future__ import annotations

from ...aval import Aval
from ...dim import has_symbols, is_symbolic, substitute
from ..node import Node
from ..rewrite import copy_node, rewrite
from ..symbol import Symbol
from .infer import bind_env


def unbound_symbols(sym: Symbol) -> set[str]:
    """Symbols the graph computes with that none of its inputs' shapes declares: no call can bind
    them (a graph that reads only the shape of an input it does not take)."""
    declared: set = set()
    for n in sym.input_nodes():
        for d in n.avals[0].shape or ():
            if is_symbolic(d):
                declared |= set(d.symbols())
    dims: set = set()  # (each distinct symbolic size once: a graph's avals repeat a few sizes many times)
    for n in sym.topo():
        for a in n.avals:
            for d in a.shape or ():
                if d.__class__ is not int and is_symbolic(d):
                    dims.add(d)
        if n.op is not None and n.params:
            for v in n.params.values():
                dims.update(dims_in(v))
    used: set = set()
    for d in dims:
        used.update(d.symbols())
    return used - declared


def dims_in(v):
    """The symbolic sizes inside a parameter value (nested tuples, lists, slices)."""
    if is_symbolic(v):
        yield v
    elif isinstance(v, (tuple, list)):
        for x in v:
            yield from dims_in(x)
    elif isinstance(v, slice):
        yield from dims_in((v.start, v.stop, v.step))


def bind_dims(sym: Symbol, given: dict[str, Aval], what: str = "CachedOp", avals: bool = True) -> Symbol:
    """``sym`` with its symbolic sizes (inputs' shapes, every aval, size parameters) evaluated at the
    sizes ``given`` (name -> aval); a ``ShapeError`` naming the input, the axis and both sizes when a
    call does not fit the graph (a pinned input's concrete dims included).

    ``avals=False``: for a caller that infers every op node's avals again right after (``placement``,
    as the executor's compile does): op nodes are copied only where a size parameter is symbolic, their
    avals left to that inference (a transformer with a symbolic batch and length: every node's avals
    substituted, then inferred again, was a tenth of its compile).

    >>> import lazyarray as la, numpy as np
    >>> b = la.Dim("b")
    >>> y = la.sym.reshape(la.sym.var("x", shape=(b, 6)), shape=(b, 2, 3))
    >>> bound = bind_dims(y, {"x": la.Aval((4, 6), np.dtype("float32"), la.cpu())})
    >>> bound.topo()[-1].params["shape"]
    (4, 2, 3)
    """
    env = bind_env(sym.input_nodes(), given, what)
    return substitute_dims(sym, env, avals) if env else sym


def substitute_dims(sym: Symbol, env: dict, avals: bool = True) -> Symbol:
    """``sym`` with every symbol of ``env`` replaced by its value (an int, or an expression: a symbol
    renamed) in the inputs' shapes, every aval and every size parameter; other symbols stay.
    ``avals=False``: op nodes' avals only where a size parameter is symbolic (``bind_dims``)."""

    def visit(node: Node, ins):
        if node.op is not None and not avals:
            if not has_symbols(tuple(node.params.values())):
                return None
        elif not any(has_symbols(a.shape) for a in node.avals) and \
                (node.op is None or not has_symbols(tuple(node.params.values()))):
            return None
        new = copy_node(node, ins, tuple(a._replace(shape=substitute(a.shape, env, True)) if has_symbols(a.shape) else a
                                         for a in node.avals))
        if node.op is not None:
            new.params = {k: substitute(v, env, True) for k, v in node.params.items()}
        return new

    return rewrite(sym, visit)
