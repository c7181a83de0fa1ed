"""``Symbol``: an immutable view of the graph that reaches a list of output entries.

It knows its inputs (variables without values), constants (variables with values),
outputs and topological order; it infers avals, checks invariants, prints as a text IR,
and serializes (``serialize.py``) or converts to networkx (``nx.py``).
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from ..aval import Aval
from ..errors import GraphError, GraphFormatError, LazyArrayError, ParamError, fmt_shape
from ..ops import registry
from ..ops.index_shape import key_text
from . import draw as _draw
from . import draw_html as _draw_html
from . import nx as nx_view
from . import serialize
from .build import apply_node
from .node import Entry, Node, unique_names
from .passes.infer import bind_env, infer_avals
from .passes.sbp import infer_sbp as _infer_sbp
from .rewrite import count_uses
from .traverse import topo_order


def _all_entries(outputs) -> bool:
    """Whether every item of ``outputs`` is an ``Entry`` (a loop, not ``all`` over a generator: a
    symbol is made per recorded op of an import and per pass of a compile)."""
    for e in outputs:
        if e.__class__ is not Entry and not isinstance(e, Entry):
            return False
    return True


class Symbol:
    """A graph with named inputs and one or more outputs.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 3))
    >>> y = la.sym.relu(x * 2)
    >>> y.list_inputs(), y.infer_shape(x=(4, 3))[1]
    (['x'], [(4, 3)])
    """

    __slots__ = ("_outputs", "_order", "_names", "_ops", "_unused", "_uses")

    def __init__(self, outputs: list[Entry], unused_inputs: tuple[Node, ...] = ()):
        if not isinstance(outputs, (list, tuple)) or not _all_entries(outputs):
            raise ParamError(f"la.Symbol: outputs must be a list of graph entries (sym.outputs), got "
                             f"{type(outputs).__name__} {outputs!r}"[:200]
                             + "; build symbols with la.sym.var and la.sym.<op>, or la.get_symbol")
        self._outputs = tuple(outputs)
        self._order = None
        self._names = None
        self._ops = None
        self._uses = None
        # input nodes declared (``la.get_symbol(inputs=...)``) that no output reads: still inputs
        # (a CachedOp takes them), listed after the others. Passes build their results from the
        # outputs, so a rewritten graph has the inputs its outputs read.
        self._unused = tuple(unused_inputs)

    # -- structure -----------------------------------------------------------------------
    @property
    def outputs(self) -> tuple[Entry, ...]:
        return self._outputs

    def topo(self) -> list[Node]:
        """Every node, each after its inputs (deterministic)."""
        if self._order is None:
            order = topo_order(list(self._outputs))
            if self._unused:
                seen = {id(n) for n in order}
                order += [n for n in self._unused if id(n) not in seen]
            self._order = order
        return self._order

    @property
    def unused_inputs(self) -> tuple[Node, ...]:
        """The input nodes declared (``la.get_symbol(inputs=...)``) beside those the outputs read; a
        symbol made from its outputs alone has none (``dce`` then has nothing to drop)."""
        return self._unused

    def names(self) -> dict[int, str]:
        """A unique display name per node (``id(node) -> name``): given names, else ``op`` + counter."""
        if self._names is None:
            self._names = unique_names(self.topo())
        return self._names

    def op_names(self) -> frozenset:
        """The names of the ops the graph's nodes run (found once: every pass of a compile asks
        whether it has anything to rewrite before walking the graph)."""
        if self._ops is None:
            self._ops = frozenset({n.op.name for n in self.topo() if n.op is not None})
        return self._ops

    def use_counts(self) -> Mapping[int, int]:
        """``id(node) -> how many times it is read`` (``rewrite.use_counts``; counted once, read-only:
        the passes of a compile that find nothing to rewrite hand the next one this symbol as it is)."""
        if self._uses is None:
            self._uses = MappingProxyType(count_uses(self.topo(), self._outputs))  # (a pass that wrote to it raises)
        return self._uses

    def name_of(self, node: Node) -> str:
        return self.names()[id(node)]

    def input_nodes(self) -> list[Node]:
        return [n for n in self.topo() if n.op is None and n.kind == "var"]

    def constant_nodes(self) -> list[Node]:
        return [n for n in self.topo() if n.op is None and n.kind == "const"]

    def list_inputs(self) -> list[str]:
        """Names of the graph inputs (variables without values), in a stable order."""
        return [n.name for n in self.input_nodes()]

    def list_constants(self) -> list[str]:
        """Names of the constants (captured arrays) the graph carries values for."""
        return [self.name_of(n) for n in self.constant_nodes()]

    def constants(self) -> dict[str, object]:
        """``name -> backend value`` of every constant."""
        return {self.name_of(n): n.value for n in self.constant_nodes()}

    def list_outputs(self) -> list[str]:
        """Names of the outputs: ``<node>_output`` (``<node>_output<i>`` for multi-output nodes)."""
        out = []
        for e in self._outputs:
            base = self.name_of(e.node)
            n = len(e.node.avals) or 1
            out.append(f"{base}_output" if n == 1 else f"{base}_output{e.index}")
        return out

    def __len__(self) -> int:
        return len(self._outputs)

    def __getitem__(self, i) -> Symbol:
        if isinstance(i, str):
            names = self.list_outputs()
            if i not in names:
                raise KeyError(f"no output named {i!r}; outputs: {', '.join(names)}")
            i = names.index(i)
        return Symbol([self._outputs[i]])

    def get_internals(self) -> Symbol:
        """A symbol whose outputs are every output of every node (select with ``[name]``)."""
        entries = []
        for n in self.topo():
            k = len(n.avals) or 1
            entries.extend(Entry(n, i) for i in range(k))
        sym = Symbol(entries)
        sym._names = dict(self.names())
        return sym

    # -- inference --------------------------------------------------------------------------
    def infer_avals(self, **avals: Aval) -> dict[int, tuple[Aval, ...]]:
        return infer_avals(self.topo(), avals)

    def _given(self, shapes: dict, dtypes: dict) -> dict[str, Aval]:
        known = {n.name: n for n in self.input_nodes()}
        for name in list(shapes) + list(dtypes):
            if name not in known:
                raise GraphError(f"no graph input named {name!r}; inputs: {', '.join(known) or 'none'}")
        given = {}
        for name, node in known.items():
            a = node.avals[0]
            shape = tuple(shapes[name]) if name in shapes else a.shape
            dtype = dtypes.get(name, a.dtype)
            given[name] = Aval(shape, None if dtype is None else np.dtype(dtype), a.device, a.stype)
        return given

    def infer_shape(self, **shapes) -> tuple[dict, list]:
        """``(input_shapes, output_shapes)`` for the given input shapes, without computing.

        Inputs not given keep the shapes recorded with them; unknown results are ``None``.
        """
        given = self._given(shapes, {})
        avals = infer_avals(self.topo(), given, bind_env(self.input_nodes(), given, "infer_shape"))
        return ({k: a.shape for k, a in given.items()},
                [avals[id(e.node)][e.index].shape for e in self._outputs])

    def infer_type(self, **dtypes) -> tuple[dict, list]:
        """``(input_dtypes, output_dtypes)`` for the given input dtypes, without computing."""
        given = self._given({}, dtypes)
        avals = self.infer_avals(**given)
        return ({k: a.dtype for k, a in given.items()},
                [avals[id(e.node)][e.index].dtype for e in self._outputs])

    def infer_sbp(self, pieces: int = 2, **sbp_by_input) -> Symbol:
        """This graph run as a global graph over ``pieces`` pieces: every node annotated with the SBP
        of its outputs (``node.sbp``, printed after the aval, kept in the JSON), and ``boxing`` nodes
        where a consumer needs another SBP than its producer gives (``graph/passes/sbp.py``).

        Inputs not named are broadcast (``B``); values are ``la.sbp`` values or their text (``"S(0)"``).
        """
        return _infer_sbp(self, sbp_by_input, pieces)

    # -- invariants --------------------------------------------------------------------------
    def check(self) -> Symbol:
        """Check the graph invariants; raise ``GraphError`` naming the node and its neighbours.

        Topological order, entries pointing at existing outputs, op arity, variables with an
        aval, constants holding values of their aval, unique input names, and every node's
        avals agreeing with what its op's rules infer from its inputs.
        """
        order = self.topo()
        pos = {id(n): i for i, n in enumerate(order)}
        seen_inputs: set[str] = set()
        for i, node in enumerate(order):
            for e in node.inputs:
                if id(e.node) not in pos or pos[id(e.node)] >= i:
                    raise GraphError(self._bad(node, "an input comes after it in topological order"))
                k = len(e.node.avals) or 1
                if not 0 <= e.index < k:
                    raise GraphError(self._bad(node, f"reads output {e.index} of a node with {k} output(s)"))
            if node.op is None:
                if node.inputs:
                    raise GraphError(self._bad(node, "a variable has inputs"))
                if node.kind == "var":
                    if not node.name:
                        raise GraphError(self._bad(node, "a graph input has no name"))
                    if node.name in seen_inputs:
                        raise GraphError(self._bad(node, f"two graph inputs are named {node.name!r}"))
                    seen_inputs.add(node.name)
                elif node.kind == "const":
                    if node.value is None:
                        raise GraphError(self._bad(node, "a constant holds no value"))
                    v, a = node.value, node.avals[0]
                    if tuple(v.shape) != tuple(a.shape) or v.dtype != a.dtype:
                        raise GraphError(self._bad(node, f"constant value {v.dtype}{fmt_shape(v.shape)} "
                                                         f"disagrees with its aval {a}"))
                continue
            if len(node.avals) != node.op.outputs_for(node.params):
                raise GraphError(self._bad(node, f"has {len(node.avals)} avals for "
                                                 f"{node.op.outputs_for(node.params)} outputs"))
        avals = self.infer_avals()
        for node in order:
            if node.op is None:
                continue
            for have, want in zip(node.avals, avals[id(node)]):
                if have.shape is None or want.shape is None:
                    continue
                same_shape = all(h == w or h is None or w is None for h, w in zip(have.shape, want.shape))
                if len(have.shape) != len(want.shape) or not same_shape or have.dtype != want.dtype \
                        or have.device != want.device:
                    raise GraphError(self._bad(node, f"stored aval {have} disagrees with inferred {want}"))
        return self

    def _bad(self, node: Node, what: str) -> str:
        names = self.names()
        ins = ", ".join(names.get(id(e.node), "?") for e in node.inputs) or "none"
        users = [names[id(n)] for n in self.topo() if any(e.node is node for e in n.inputs)]
        line = node.source_line()
        return (f"graph check failed at node {names.get(id(node), node.label())!r}: {what} "
                f"(inputs: {ins}; used by: {', '.join(users) or 'none'}"
                + (f"; recorded at {line})" if line else ")"))

    # -- text IR --------------------------------------------------------------------------------
    def __str__(self) -> str:
        """The text IR: one line per node. Nodes recorded inside blocks come under a header line
        per block (``# 1.body.0 · Dense  (in 1 · ResBlock)``) whenever the block changes, so a
        100-node model reads as its layers."""
        names = self.names()
        lines = []
        block = None
        for node in self.topo():
            if node.op is not None and node.block != block:
                block = node.block
                lines.append(block_header(block))
            nm = names[id(node)]
            ty = ", ".join(_aval_text(a) for a in node.avals)
            if node.sbp is not None:
                ty += " sbp=" + ", ".join(str(s) for s in node.sbp)
            if node.op is None:
                if not _inline(node):
                    lines.append(f"%{nm} = {'input' if node.kind == 'var' else 'constant'} : {ty}")
                continue
            args = [_arg_text(e, names) for e in node.inputs]
            args += [f"{k}={_param_text(v)}" for k, v in node.params.items()]
            lines.append(f"%{nm} = {node.op.qualname}({', '.join(args)}) : {ty}")
        outs = ", ".join(f"%{names[id(e.node)]}" for e in self._outputs)
        lines.append(f"return {outs}")
        return "\n".join(lines)

    # -- files ---------------------------------------------------------------------------------
    def to_json(self, indent: int | None = None) -> str:
        """Versioned JSON (docs/graph-format.md); ``Symbol.from_json(s.to_json())`` is lossless."""
        return serialize.to_json(self, indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> Symbol:
        """Load from JSON text. Never runs code; ``GraphFormatError`` names what is malformed."""
        return _checked(cls(serialize.from_json(text)))

    def save(self, path: str) -> None:
        """Write the JSON to ``path`` atomically."""
        serialize.save(self, path)

    @classmethod
    def load(cls, path: str) -> Symbol:
        """Load a file written by ``save``."""
        return _checked(cls(serialize.load(path)))

    def to_networkx(self):
        """A ``networkx.DiGraph``: one node per graph node (attributes op, name, shape, dtype, ...)."""
        return nx_view.to_networkx(self)

    @classmethod
    def from_networkx(cls, graph) -> Symbol:
        """The symbol of a DiGraph made by ``to_networkx`` (possibly edited)."""
        return _checked(cls(nx_view.from_networkx(graph)))

    def __repr__(self) -> str:
        return (f"<Symbol {len(self.topo())} nodes, inputs {self.list_inputs()}, "
                f"outputs {self.list_outputs()}>")

    # -- drawing (graph/draw.py) --------------------------------------------------------------
    def _repr_svg_(self) -> str:
        return _draw.to_svg(self._outputs, names=self.names())

    def _repr_html_(self) -> str:
        return _draw_html.symbol_html(self._outputs, self.names(), self.list_inputs(), self.list_outputs())

    def draw(self, path, max_nodes: int | None = _draw.DEFAULT_MAX_NODES, blocks: str = "collapsed") -> str:
        """Write the graph as an SVG drawing to ``path`` (``.svg``, written atomically).

        ``blocks="collapsed"`` draws the nodes of each top-level block as one box (type, path,
        output shape, parameter count); ``"expanded"`` draws every node.
        """
        return _draw.write_svg(path, _draw.to_svg(self._outputs, names=self.names(), max_nodes=max_nodes,
                                                  blocks=blocks))


def block_header(block: tuple | None) -> str:
    """The text IR's header line for the nodes of one block path (``# (top level)`` for none).

    >>> block_header((("1", "Res"), ("body", "HybridSequential"), ("0", "Conv2D")))
    '# 1.body.0 · Conv2D  (in 1 · Res › 1.body · HybridSequential)'
    """
    if not block:
        return "# (top level)"
    name = ".".join(n for n, _ in block)
    outer = " › ".join(f"{'.'.join(n for n, _ in block[:i + 1])} · {t}" for i, (_, t) in enumerate(block[:-1]))
    return f"# {name} · {block[-1][1]}" + (f"  (in {outer})" if outer else "")


def _checked(sym: Symbol) -> Symbol:
    try:
        return sym.check()
    except LazyArrayError as exc:
        raise GraphFormatError(f"inconsistent graph: {exc}") from None


def load_symbol(path: str) -> Symbol:
    """Load a symbol file written by ``sym.save(path)``."""
    return Symbol.load(path)


def _inline(node: Node) -> bool:
    """Scalar constants print in place (``multiply(%x, 2.0)``) instead of as their own line."""
    return node.kind == "const" and node.avals[0].shape == () and node.value is not None


def _arg_text(e: Entry, names: dict) -> str:
    if e.node.op is None and _inline(e.node):
        return repr(e.node.value.item())  # (.item() works for NumPy and CuPy values alike)
    multi = e.node.op is not None and len(e.node.avals) > 1
    return f"%{names[id(e.node)]}" + (f".{e.index}" if multi else "")


def _aval_text(a: Aval) -> str:
    if a.shape is None:
        return f"{a.dtype or '?'}[?] @{a.device}"
    return str(a)


def _param_text(v) -> str:
    if isinstance(v, tuple) and any(isinstance(k, slice) or k is Ellipsis for k in v):
        return key_text(v)
    return str(v) if not isinstance(v, str) else repr(v)


# -- composing symbols with operators ------------------------------------------------------
def as_entry(x, op: str = "op"):
    """A single-output ``Symbol`` as its entry; numbers pass through (they become constants)."""
    if isinstance(x, Symbol):
        if len(x.outputs) != 1:
            raise GraphError(f"{op}: a symbol with {len(x.outputs)} outputs cannot be an input; select one "
                             "with sym[i]")
        return x.outputs[0]
    return x


def symbol_of(res) -> Symbol:
    return Symbol([res]) if isinstance(res, Entry) else Symbol(list(res))


def _binop(name: str, swap: bool = False):
    def f(self, other):
        a, b = (other, self) if swap else (self, other)
        return symbol_of(apply_node(registry.get(name), as_entry(a, name), as_entry(b, name)))

    return f


for _dunder, _name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
                       ("pow", "power"), ("matmul", "matmul")):
    setattr(Symbol, f"__{_dunder}__", _binop(_name))
    setattr(Symbol, f"__r{_dunder}__", _binop(_name, swap=True))
for _dunder, _name in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")):
    setattr(Symbol, f"__{_dunder}__", _binop(_name))
Symbol.__neg__ = lambda self: symbol_of(apply_node(registry.get("negative"), as_entry(self)))
