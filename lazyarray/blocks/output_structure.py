"""The structure of a hybridized block's output: arrays in nested tuples, lists and dicts.

A compiled graph has a flat list of outputs. ``flatten(out, owner)`` (at trace time) gives the
arrays in order and an ``OutputStructure`` that ``regroup`` turns a flat list of results back into
(the same nesting and containers, dict keys kept), and that names each leaf by its path for
exported graphs: ``out_0_1`` (tuple / list positions), the dict key (``logits``), or both
(``out_1_aux``, ``enc_0``). A block returning one array has no structure to keep: its hybridized
call never goes through here.

>>> import lazyarray as la
>>> a, b, c = la.ones(1), la.zeros(1), la.ones(2)
>>> leaves, st = flatten((a, {"aux": [b, c]}), "Net")
>>> st.names
['out_0', 'out_1_aux_0', 'out_1_aux_1']
>>> out = st.regroup(leaves)
>>> type(out).__name__, list(out[1]), out[1]["aux"][1] is c
('tuple', ['aux'], True)
"""
from __future__ import annotations

from collections import Counter

from ..errors import OutputStructureError
from ..graph.node import Entry, Node
from ..graph.rewrite import copy_node, rewrite
from ..graph.symbol import Symbol
from ..ndarray import NDArray
from ..ops import registry


class OutputStructure:
    """How to rebuild a block's output from the flat list of graph outputs, and each leaf's name."""

    __slots__ = ("names", "tree", "_flat")

    def __init__(self, tree, names: list[str]):
        self.tree = tree  # a leaf's index (int), or (container type, dict keys or None, children)
        self.names = names  # per leaf, in order: its path as a graph output name
        # a plain tuple or list of the leaves in order (the usual several outputs): its type, built in one call
        self._flat = (tree[0], len(tree[2])) if tree.__class__ is tuple and tree[0] in (tuple, list) \
            and tree[1] is None and tree[2] == list(range(len(tree[2]))) else None

    def regroup(self, flat):
        """``flat`` (one value per leaf, in order) in the block's output structure."""
        f = self._flat
        if f is not None and len(flat) == f[1]:
            return f[0](flat)
        return _build(self.tree, flat)

    def __repr__(self) -> str:
        return f"OutputStructure({', '.join(self.names)})"


def flatten(out, owner: str) -> tuple[list[NDArray], OutputStructure]:
    """The arrays of ``out`` (nested tuples / lists / dicts of arrays) in order, and its structure.
    Anything else in it (a number, None, a string) raises ``OutputStructureError`` naming its path."""
    leaves: list[NDArray] = []
    names: list[str] = []

    def walk(value, path: tuple):
        if isinstance(value, NDArray):
            leaves.append(value)
            names.append(_name(path))
            return len(leaves) - 1
        if isinstance(value, (tuple, list)):
            return type(value), None, [walk(v, path + (i,)) for i, v in enumerate(value)]
        if isinstance(value, dict):
            keys = list(value)
            return type(value), keys, [walk(value[k], path + (k,)) for k in keys]
        raise OutputStructureError(
            f"{owner}.forward must return arrays, or tuples / lists / dicts of them, to be hybridized; "
            f"{_where(path)} is {'None' if value is None else 'a ' + type(value).__name__}; return it as an "
            "array (la.array(...)) or leave it out")

    tree = walk(out, ())
    if not leaves:
        raise OutputStructureError(f"{owner}.forward returned no array ({_where(())} is an empty "
                                   f"{type(out).__name__}); a hybridized block must return at least one")
    return leaves, OutputStructure(tree, names)


def name_outputs(sym: Symbol, names: list[str]) -> Symbol:
    """``sym`` whose i-th output is produced by a node named ``names[i]`` (so ``list_outputs()`` gives
    ``f"{names[i]}_output"``, and an exported file keeps the names): the producing node is renamed
    where it makes just that output, else a ``copy`` node of that name is added (an output that is
    an input, a constant, one output of several of a node, or the same array twice)."""
    outs = list(sym.outputs)
    uses = Counter(id(e.node) for e in outs)
    rename = {id(e.node): n for e, n in zip(outs, names)
              if e.node.op is not None and len(e.node.avals) == 1 and uses[id(e.node)] == 1}

    def visit(node: Node, ins):
        if id(node) not in rename:
            return None
        new = copy_node(node, ins)  # (a fresh node of this pass: naming it changes nothing shared)
        new.name = rename[id(node)]
        return new

    new_outs = list(rewrite(sym, visit).outputs)
    copy = registry.get("copy")
    for i, (old, n) in enumerate(zip(outs, names)):
        if id(old.node) not in rename:
            e = new_outs[i]
            new_outs[i] = Entry(Node(copy, (e,), {}, (e.aval,), name=n, block=e.node.block))
    return Symbol(new_outs)


def _build(node, flat):
    if node.__class__ is int:
        return flat[node]
    kind, keys, children = node
    values = [_build(c, flat) for c in children]
    if keys is not None:
        return kind(zip(keys, values))
    if hasattr(kind, "_fields"):  # a namedtuple
        return kind(*values)
    return kind(values)


def _name(path: tuple) -> str:
    """A leaf's graph output name: ``out_0_1``, ``logits``, ``out_1_aux``."""
    parts = [str(p) for p in path]
    return "_".join(parts if path and not isinstance(path[0], int) else ["out"] + parts)


def _where(path: tuple) -> str:
    """A leaf's path as Python reads it: ``output[1]['aux']``."""
    return "output" + "".join(f"[{p!r}]" for p in path)
