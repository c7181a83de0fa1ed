"""``la.get_symbol``: turn what deferred compute recorded into a ``Symbol``.

The recorded graph is copied between the named inputs and the outputs: the nodes of the
named input arrays become graph inputs (variables), and every other normal array the
code captured becomes a named constant that keeps its value with the symbol.
"""
from __future__ import annotations

from .args import dict_arg, seq_arg
from .errors import DeferredComputeError, ParamError
from .graph.node import Node, check_capture, const_node, var_node
from .graph.rewrite import rewrite
from .graph.symbol import Symbol
from .graph.traverse import topo_order
from .ndarray import NDArray
from .storage import copy_value
from .user_frames import warn


class UnusedInputWarning(UserWarning):
    """An array named in ``get_symbol(inputs=...)`` that the outputs do not depend on (it stays an
    input of the symbol: a ``CachedOp`` of it takes that input and ignores it)."""


def get_symbol(outputs, inputs: dict | None = None) -> Symbol:
    """The ``Symbol`` recorded between ``inputs`` (name -> array) and ``outputs`` (one array or a list).

    >>> import lazyarray as la
    >>> x = la.ones((2, 3))
    >>> with la.deferred():
    ...     y = la.relu(x * 2)
    >>> sym = la.get_symbol(y, inputs={"x": x})
    >>> sym.list_inputs()
    ['x']
    """
    outs = _output_arrays(outputs)
    inputs = dict(dict_arg(inputs, "la.get_symbol", "inputs", "a dict of name -> input array, e.g. {'x': x}"))
    out_entries = [o._entry if o._entry is not None else o._as_entry() for o in outs]
    by_node, by_value = _named_inputs(inputs)
    order = topo_order(out_entries, stop=lambda n: id(n) in by_node)
    for node in order:
        if node.kind == "const" and node.version is not None and id(node.value) in by_value:
            by_node[id(node)] = by_value[id(node.value)]
    reached = {by_node[id(n)] for n in order if id(n) in by_node}
    unused = [name for name in inputs if name not in reached]
    for name in unused:
        warn(f"get_symbol: input {name!r} was never used by the recorded outputs; it stays an input of the "
             "symbol", UnusedInputWarning)
    variables: dict[str, Node] = {}

    def visit(node: Node, ins):
        if id(node) in by_node:  # a named input: a graph variable
            name = by_node[id(node)]
            if name not in variables:
                variables[name] = var_node(name, node.avals[0])
            return variables[name]
        if node.op is None and node.kind == "const":
            check_capture(node)  # a captured array written in place since would be a wrong constant
            # The symbol's own read-only snapshot: later writes to the user's array never reach it.
            value = node.value if node.version is None else copy_value(node.value)
            return const_node(value, node.avals[0], name=node.name, source=node.source)
        return None  # a plain copy

    sym = rewrite(Symbol(out_entries), visit, stop=lambda n: id(n) in by_node)
    if not unused:
        return sym
    # declared, so a CachedOp of the symbol takes them (positionally too) as the user named them
    return Symbol(list(sym.outputs), tuple(var_node(name, inputs[name].aval) for name in unused))


def _output_arrays(outputs) -> list:
    """``get_symbol``'s outputs (one array or a list of arrays) as a list, checked."""
    outs = [outputs] if isinstance(outputs, NDArray) else seq_arg(
        outputs, "la.get_symbol", "outputs", "an array or a list of arrays (the results recorded under la.deferred())")
    for i, o in enumerate(outs):
        if not isinstance(o, NDArray):
            raise ParamError(f"la.get_symbol: output {i} is a {type(o).__name__}, not an array; pass the arrays "
                             "computed under la.deferred()")
    return outs


def _named_inputs(inputs: dict) -> tuple:
    """``(by_node, by_value)``: the name of each input by the id of its recorded node and by the id of
    its value (an array with a value is read as a capture of its buffer while recording)."""
    by_node: dict[int, str] = {}
    by_value: dict[int, str] = {}
    for name, arr in inputs.items():
        if not isinstance(arr, NDArray):
            raise ParamError(f"la.get_symbol: input {name!r} is a {type(arr).__name__}, not an array; "
                             "inputs maps each name to the array the graph reads")
        node = arr._entry.node if arr._entry is not None else None
        if node is not None and id(node) in by_node or arr._value is not None and id(arr._value) in by_value:
            first = by_node.get(id(node)) or by_value.get(id(arr._value))
            raise DeferredComputeError(f"get_symbol: inputs {first!r} and {name!r} are the same array")
        if node is not None:
            by_node[id(node)] = name
        if arr._value is not None:
            by_value[id(arr._value)] = name
    return by_node, by_value
