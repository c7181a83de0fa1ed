"""Whether two symbols are the same graph, node for node: a structural key per graph, compared
without writing either down.

A ``SubGraph`` parameter (a loop body, a called graph) is compared whenever the node holding it is
looked up by its parameters (the rule memo of ``registry.infer``, ``cse``'s keys): comparing their
JSON text wrote every body out (constants as JSON numbers, then read back and written again sorted)
and was a tenth of an imported bidirectional LSTM's first call. ``graph_key`` holds the same facts
as plain tuples, built once per graph (``SubGraph`` keeps it), and two keys compare at C speed.

Two keys are equal only where the JSON text would be (ops, wiring, parameters, avals, constants'
values bit for bit, names, source lines, block paths, SBP): never more graphs match than before, so
nothing is merged or reused that was not. A value it does not know compares by its own ``==``.
"""
from __future__ import annotations

import os

import numpy as np

from ..aval import Aval


def graph_key(sym) -> tuple:
    """A tuple that equals another symbol's key exactly when the two graphs hold the same nodes in
    the same order, reading the same inputs, with the same parameters, avals, constant values (bit
    for bit), names, source lines, block paths and SBP.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2,))
    >>> graph_key(la.sym.exp(x) * 2) == graph_key(la.sym.exp(x) * 2)
    True
    >>> graph_key(la.sym.exp(x) * 2) == graph_key(la.sym.exp(x) * -2)
    False
    """
    order = sym.topo()
    pos = {id(n): i for i, n in enumerate(order)}
    names = sym.names()
    # (the fields most nodes leave None keyed without a call: a loop body's key is made per SubGraph)
    nodes = tuple([(n.op, n.kind, names[id(n)], tuple([(pos[id(e.node)], e.index) for e in n.inputs]),
                    _key(n.avals), _source(n.source), _NONE if n.block is None else _key(n.block),
                    _NONE if n.sbp is None else _key(n.sbp), _NONE if n.params is None else _key(n.params),
                    _NONE if n.value is None else _key(n.value))
                   for n in order])
    return nodes, tuple([(pos[id(e.node)], e.index) for e in sym.outputs])


def same_graph(a, b) -> bool:
    """``graph_key(a) == graph_key(b)`` (False where a value's ``==`` cannot say)."""
    if a is b:
        return True
    try:
        return graph_key(a) == graph_key(b)
    except (TypeError, ValueError):  # (a value whose == is no bool: not known to be the same)
        return False


def params_key(params: dict) -> tuple:
    """A node's parameters as a tuple that equals another's exactly where ``graph_key`` would call
    them the same (names sorted; arrays by their bytes, sub-graphs by their structure): a key that
    ``cse`` may merge nodes by. Hashable where the values are."""
    return tuple([(k, _key(v)) for k, v in sorted(params.items(), key=_first)])


def _first(item):
    return item[0]


def _source(source):
    """A node's source as its JSON text holds it: the file's base name and the line (a graph read
    back from JSON keeps only the base name)."""
    return None if not source else (os.path.basename(source[0]), int(source[1]))


def _key(v):
    """``v`` as a tuple of its class and contents: floats by ``repr`` (-0.0 and 0.0 differ, NaNs are
    alike: their JSON text), arrays by dtype, shape and bytes, anything else as itself."""
    cls = v.__class__
    if v is None or cls is int or cls is str or cls is bool:
        return cls, v
    if cls is tuple:  # (the common container first: avals, shapes, block paths)
        return cls, tuple([_key(x) for x in v])
    if cls is Aval:  # (its own == says what the fields' keys would, with the sizes' classes beside)
        shape = v.shape
        if _plain_shape(shape):
            return cls, v
        classes = tuple([d.__class__ for d in shape])
        return (cls, v, classes) if float not in classes else (cls, tuple([_key(x) for x in v]))
    if isinstance(v, float):
        return cls, repr(v)
    if isinstance(v, (tuple, list)):
        return cls, tuple([_key(x) for x in v])
    if isinstance(v, dict):
        return cls, tuple([(k, _key(x)) for k, x in v.items()])
    if isinstance(v, (np.ndarray, np.generic)):
        return cls, v.dtype.str, v.shape, v.tobytes()
    if isinstance(v, slice):
        return cls, _key(v.start), _key(v.stop), _key(v.step)
    return cls, v


_NONE = (type(None), None)  # (``_key(None)``)


def _plain_shape(shape) -> bool:
    """A shape of Python ints (or unknown dims) only: compared as it is, it is equal exactly where
    its ``_key`` is (no float, bool or NumPy integer among its dims)."""
    if shape is None:
        return True
    for d in shape:
        if d is not None and d.__class__ is not int:
            return False
    return True
