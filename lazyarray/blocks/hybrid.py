"""What ``hybridize()`` does, as named steps: trace, export, bind parameters, compile, run.

1. **trace**: run ``forward`` once under deferred compute (and ``autograd.pause`` with the
   current training mode), with the inputs named ``data`` (or ``data0..N``) and every
   parameter named by its ``collect_params()`` name. ``Parameter.update`` calls made during
   the trace (batch-norm running statistics) are collected, not applied.
2. **export**: ``la.get_symbol`` turns the recording into a ``Symbol`` whose outputs are the
   block's outputs followed by the updated parameter values.
3. **bind**: each graph input is resolved once to "call argument i" or "parameter p", so a
   call is a list comprehension.
4. **compile**: ``la.CachedOp(symbol)`` (it plans and caches per input signature).
5. **run**: call the cached op, write the extra outputs back into their parameters, and
   rebuild the block's output structure (nested tuples / lists / dicts: ``output_structure.py``). A plain call (nothing recorded) whose parameters are
   the arrays of the last such call runs that call's program directly (``_Memo``).

A trace is reused for a new input signature (the cached op just compiles a new plan) when
the graph is *shape-generic*: same ranks, dtypes and devices, no op with a shape baked into
its parameters (``reshape(shape=...)``, ``broadcast_to``, ``expand``, ``sum_to``) and the
graph's shape inference accepts the new shapes. Otherwise the block is traced again for
that signature. Python code that turns a shape into a number (``x.sum() / x.shape[0]``)
bakes it into the graph without a trace-visible sign: such blocks should use shape-generic
ops (``mean``, ``nn.flatten``, ``reshape_like``) or ``hybridize(static_shape=True)``.
"""
from __future__ import annotations

import operator
import warnings
from dataclasses import dataclass, field

from .. import autograd, guards
from ..aval import Aval
from ..deferred import deferred
from ..dim import Dim, SymbolicDimError, bind, has_symbols
from ..errors import BlockError, LazyArrayError
from ..executor.cached_op import CachedOp
from ..executor.call import SubGraph
from ..graph.node import BLOCK_SCOPE, Entry, const_node, var_node
from ..graph.passes.bind_dims import unbound_symbols
from ..graph.rewrite import gc_paused, rewrite
from ..graph.symbol import Symbol
from ..graph.traverse import topo_order
from ..ndarray import NDArray, make_array
from ..storage import copy_value
from ..tracing import UnusedInputWarning, get_symbol
from .output_structure import OutputStructure, flatten
from .parameter import Parameter, collect_updates

_SHAPE_BAKED_PARAMS = frozenset({"shape", "sizes"})


def input_names(n: int) -> list[str]:
    """Graph input names of a block called with ``n`` arrays: ``data`` or ``data0..data{n-1}``."""
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]


def signature(args) -> tuple:
    """What a compiled graph is specialized to: shape, dtype and device of every input."""
    return tuple((a.shape, a.dtype, a._device) for a in args)


@dataclass
class Compiled:
    """One traced graph of a block, bound and compiled."""

    symbol: Symbol
    num_outputs: int  # the block's own outputs; then parameter updates, then draws nothing uses
    structure: OutputStructure | None  # how the outputs nest (None: one array, decided at trace time)
    sources: list  # per graph input: int (call argument) or Parameter
    updates: list[Parameter]
    generic: bool
    training: bool
    guards: list = field(default_factory=list)  # guards.Guard: the Python shape reads of the trace
    # traced with a symbolic batch that op parameters hold: serves every batch, the other sizes as traced
    symbolic: bool = False
    # a graph made for every signature, not a trace (an imported model's: ``SymbolBlock._trace_new``)
    whole: bool = False
    run: object = None
    signatures: set = field(default_factory=set)
    memo: dict = field(default_factory=dict, repr=False)  # (training, block signature) -> _Memo
    evictions_seen: int = 0  # the cached op's evictions when the memo last dropped evicted programs
    last: tuple | None = field(default=None, repr=False)  # (key, _Memo) of the memo's last hit, None when it changed

    def accepts(self, sig: tuple) -> bool:
        """Can this graph serve ``sig`` by recompiling (no retrace)? Its guards must hold."""
        if self.whole:  # (its cached op binds each signature's sizes, and raises where they do not fit)
            return True
        if not self.generic or not self.signatures:
            return False
        ref = next(iter(self.signatures))
        if len(ref) != len(sig) or any((a is None) != (b is None) for a, b in zip(ref, sig)):
            return False  # None arguments must stay in the same places
        ref, sig = arrays_only(ref), arrays_only(sig)
        if not all(g.holds(sig) for g in self.guards):
            return False
        if self.symbolic:  # the other sizes as traced, the batch bound per call (dim.bind checks)
            names = input_names(len(sig))
            declared = {n.name: n.avals[0].shape for n in self.symbol.input_nodes() if n.name in names}
            if any(a[1] != b[1] or a[2] is not b[2] for a, b in zip(ref, sig)):
                return False
            try:
                bind({k: v for k, v in declared.items()}, {n: s[0] for n, s in zip(names, sig)}, "hybridize")
            except LazyArrayError:
                return False
            return True
        if any(len(a[0]) != len(b[0]) or a[1] != b[1] or a[2] is not b[2] for a, b in zip(ref, sig)):
            return False
        names = input_names(len(sig))
        try:
            self.symbol.infer_shape(**{n: s[0] for n, s in zip(names, sig)})
        except LazyArrayError:
            return False
        return True

    def __call__(self, args: tuple, key=None):
        """Run on the call's arguments; ``key``: the block's (training, signature) of them, given for
        a plain call only (no mode of ``MODE`` on: nothing recorded, deferred or profiled), which lets
        it skip the cached op's signature (``_Memo``)."""
        if key is not None:
            last = self.last  # (the memo of the last plain call: compared, not hashed)
            m = last[1] if last is not None and last[0] == key else self._memo_of(key)
            vals = m.values_if_held(args) if m is not None else None
            out = self.run.run_program(m.program, vals) if vals is not None else self._run_plain(self._arrays(args), key)
        else:
            out = self.run(*self._arrays(args))
        if self.structure is None and out.__class__ is not list:  # one output, nothing else
            return out
        if out.__class__ is list and not self.updates and len(out) == self.num_outputs and self.structure is not None:
            return self.structure.regroup(out)  # (several outputs, nothing else: ``out`` is a fresh list)
        outs = out if isinstance(out, (list, tuple)) else [out]
        for p, v in zip(self.updates, outs[self.num_outputs:]):
            p.set_data(v)
        if self.structure is None:
            return outs[0]
        return self.structure.regroup(outs[:self.num_outputs])

    def _memo_of(self, key):
        m = self.memo.get(key)
        if m is not None:
            self.last = (key, m)
        return m

    def _arrays(self, args: tuple) -> list:
        """The graph's input arrays for a call: its arguments and the parameters' arrays, in order."""
        return [args[s] if s.__class__ is int else s._data for s in self.sources]

    def _run_plain(self, arrays: list, key):
        """A plain call the memo could not serve: through the cached op, then remember its program."""
        memo = self.memo
        out = self.run(*arrays)
        c = self.run.program_for(arrays)
        if c is not None:
            self.last = None  # (the memo changes: looked up again)
            if len(memo) >= _MEMO_SIGNATURES and key not in memo:
                memo.clear()
            cache = self.run._signatures
            if cache.evictions != self.evictions_seen:  # the memo must not keep evicted programs alive
                self.evictions_seen = cache.evictions
                live = {id(p) for p in cache.items.values()}
                for k in [k for k, m in memo.items() if id(m.program) not in live]:
                    del memo[k]
            memo[key] = _Memo(self.sources, arrays, c)
        return out


_MEMO_SIGNATURES = 8  # block signatures a compiled graph remembers the program of
_is = operator.is_
_DATA = operator.attrgetter("_data")
_VALUE = operator.attrgetter("_value")


class _Memo:
    """The program a block signature ran, and what the cached op chose it by that the block's
    signature does not say: the parameters (the same arrays holding the same values: an array's
    device, and its value's shape, dtype and class, never change under it) and the class of each
    argument's value (dense, sparse; the block's signature has their shapes, dtypes and devices).
    While they hold, a call runs the program without building the cached op's signature, and
    without listing the parameters' arrays: the checks walk them in C (``map``), and the input
    values start from a copy of the parameters' values (batch-1 MLP: 1.38 -> 1.13 us a call)."""

    __slots__ = ("sources", "arrays", "values", "args_at", "classes", "template", "program")

    def __init__(self, sources, arrays, program):
        self.sources = [s for s in sources if s.__class__ is not int]  # parameters (and other holders)
        self.arrays = [a for s, a in zip(sources, arrays) if s.__class__ is not int]  # their arrays then
        self.values = [a._value for a in self.arrays]  # and those arrays' values
        self.args_at = [(i, s) for i, s in enumerate(sources) if s.__class__ is int]  # (input, argument)
        self.classes = [arrays[i]._value.__class__ for i, _ in self.args_at]
        self.template = [None if s.__class__ is int else a._value for s, a in zip(sources, arrays)]
        self.program = program

    def values_if_held(self, args):
        """The program's input values for the call's arguments if this memo still applies, else None."""
        arrays = self.arrays
        if not (all(map(_is, map(_DATA, self.sources), arrays)) and all(map(_is, map(_VALUE, arrays), self.values))):
            return None
        vals = self.template.copy()
        for (i, k), cls in zip(self.args_at, self.classes):
            v = args[k]._value
            if v.__class__ is not cls:
                return None
            vals[i] = v
        return vals


class CopyOf:
    """A graph input bound to the copy of a parameter on one device (``initialize(device=[...])``)."""

    __slots__ = ("param", "device")

    def __init__(self, param: Parameter, device):
        self.param, self.device = param, device

    @property
    def _data(self):
        return self.param._copies[self.device]


class Captured:
    """A graph input bound to a user's array that ``forward`` read without it being an argument or
    a parameter (a closure, a global): read live at every call, as eager code reads it."""

    __slots__ = ("_data",)

    def __init__(self, holder: NDArray):
        self._data = holder


def _bind_captures(entries: list, named: dict) -> dict:
    """The user's arrays the trace captured (constants recorded at a buffer version), each made a
    named graph input (``named`` gains them) -> its ``Captured`` source.

    A snapshot would be silently stale after ``w[:] = ...`` where the eager block reads the new
    values; an input reads the array's buffer at each call instead (a rebinding of the Python
    name, ``w = other``, is not seen: the trace read that object)."""
    bound = {id(a._value) for a in named.values() if a._value is not None}
    out: dict = {}
    for node in topo_order(entries):
        if node.op is None and node.kind == "const" and node.version is not None and id(node.value) not in bound:
            bound.add(id(node.value))
            name = f"_captured{len(out)}"
            while name in named:
                name = "_" + name
            holder = make_array(node.value, None, node.avals[0].device)
            named[name] = holder
            out[name] = Captured(holder)
    return out


def fold_captures(sym: Symbol, sources: list) -> tuple[Symbol, list]:
    """``(sym, sources)`` with the captured inputs (``Captured``) made constants holding a copy of
    their values now: what an exported file or a graph shipped to workers carries."""
    caps = {n: s for n, s in zip(sym.list_inputs(), sources) if isinstance(s, Captured)}
    if not caps:
        return sym, sources
    by_name = dict(zip(sym.list_inputs(), sources))

    def visit(node, ins):
        if node.op is None and node.kind == "var" and node.name in caps:
            return const_node(copy_value(caps[node.name]._data._value), node.avals[0], name=node.name)
        return None

    folded = rewrite(sym, visit)
    return folded, [by_name[n] for n in folded.list_inputs()]


def arrays_only(sig: tuple) -> tuple:
    """A signature without its None arguments (the graph's inputs are the arrays)."""
    return tuple(a for a in sig if a is not None)


def batch_symbolic(args: tuple) -> tuple | None:
    """The shapes a symbolic trace gives the array arguments: axis 0 ``la.Dim("batch")`` for every
    one whose axis 0 has the first one's size; None when there is no such batch (no arrays, or a 0-d
    first one)."""
    arrays = [a for a in args if a is not None]
    if not arrays or not arrays[0].shape:
        return None
    n, batch = arrays[0].shape[0], Dim("batch")
    return tuple((batch,) + tuple(a.shape[1:]) if a.shape and a.shape[0] == n else tuple(a.shape) for a in arrays)


def trace(block, args: tuple, params: dict[str, Parameter], training: bool, shapes: tuple | None = None) -> Compiled:
    """Steps 1-3: trace ``block.forward`` on placeholders shaped like ``args``, export the symbol and
    bind its inputs.

    The placeholders are lazy arrays standing for graph variables, so the trace records how the
    outputs depend on the inputs and nothing of their values: Python shape reads become guards,
    value reads raise ``TraceError`` (``lazyarray/guards.py``). Parameters ``forward`` reads that
    are not the block's own (tied weights held by reference) become inputs too.

    The cyclic GC is paused meanwhile, as for a compile (``gc_paused``): a trace makes thousands of
    nodes that outlive it, which made a process's first trace pay a full collection of its whole
    heap (50-110 ms beside numba and onnx; more than the rest of an imported BERT's first call).
    """
    with gc_paused():
        return _trace(block, args, params, training, shapes)


def _trace(block, args: tuple, params: dict[str, Parameter], training: bool, shapes: tuple | None) -> Compiled:
    positions = [i for i, a in enumerate(args) if a is not None]  # None arguments stay None in the trace
    arrays = [args[i] for i in positions]
    names = input_names(len(arrays))
    shapes = shapes or tuple(tuple(a.shape) for a in arrays)  # (symbolic ones: batch_symbolic)
    variables = [var_node(nm, Aval(s, a.dtype, a._device, a.stype)) for nm, a, s in zip(names, arrays, shapes)]
    placeholders = [make_array(None, Entry(v), a._device) for v, a in zip(variables, arrays)]
    call_args = list(args)
    for i, ph in zip(positions, placeholders):
        call_args[i] = ph
    tracer = guards.Trace(type(block).__name__, variables)
    scope = BLOCK_SCOPE.set(None)  # the traced block is the root of the block paths of its graph
    try:
        with guards.tracing(tracer), autograd.pause(train_mode=training), deferred(), \
                collect_updates() as pending:
            out = block.run_forward(*call_args)
    finally:
        BLOCK_SCOPE.reset(scope)
    args = placeholders
    outs, structure = ([out], None) if isinstance(out, NDArray) else flatten(out, type(block).__name__)
    params = _with_params_read(params, tracer, names)
    named = dict(zip(names, args))
    device = arrays[0]._device if arrays else None
    for name, p in params.items():
        if p.initialized:
            named[name] = p._copy_on(device) if p._copies else p._data
    updates = _recorded_updates(block, pending, params)
    kept = [o._entry for o in outs] + [v._entry for _, v in updates]
    reached = {id(n) for n in topo_order(kept)}
    # A draw nothing uses still runs (as a discarded output): eager code draws it too, so the
    # draws after it come out the same for the same seed.
    unused_draws = [make_array(None, e, e.aval.device) for e in tracer.draws if id(e.node) not in reached]
    captured = _bind_captures(kept + [e._entry for e in unused_draws], named)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedInputWarning)  # unused parameters are fine
        sym = get_symbol(outs + [v for _, v in updates] + unused_draws, inputs=named)
    sym = Symbol(list(sym.outputs))  # the graph's inputs are those it reads (no unused parameter is bound)
    sources = _input_sources(sym, dict(zip(names, positions)), captured, params, named, device)
    if any(has_symbols(v.avals[0].shape) for v in variables) and unbound_symbols(sym):
        # (forward read the batch of an input the graph does not take: no call could bind it)
        raise SymbolicDimError(f"{type(block).__name__}: the traced graph computes with the batch of an input it "
                               "does not read")
    generic = is_shape_generic(sym)
    # a symbolic batch with sizes in op parameters (reshape(batch, -1)): other sizes as traced
    symbolic = not generic and any(has_symbols(v.avals[0].shape) for v in variables)
    return Compiled(sym, len(outs), structure, sources, [p for p, _ in updates],
                    generic=generic or symbolic, training=training, guards=list(tracer.guards),
                    symbolic=symbolic)


def _with_params_read(params: dict, tracer, names: list) -> dict:
    """``params`` and the parameters ``forward`` read that are not the block's own (tied weights
    held by reference: bound as inputs, never folded), under names no input takes."""
    params = dict(params)
    by_param = {id(p): n for n, p in params.items()}
    for p in tracer.params_read.values():
        if id(p) not in by_param:
            name = p.name or "param"
            while name in params or name in names:
                name = "_" + name
            params[name] = p
            by_param[id(p)] = name
    return params


def _recorded_updates(block, pending: list, params: dict) -> list:
    """``(parameter, new value)`` of the updates ``forward`` made, recorded (not computed): the graph
    computes the new value at every call. Only the block's parameters may be updated."""
    own = {id(p) for p in params.values()}
    updates = []
    for p, value in pending:
        if id(p) not in own:
            raise BlockError(f"{type(block).__name__}: forward updated parameter {p.name!r}, which is "
                                 "not one of the block's collect_params()")
        with deferred():
            updates.append((p, value.detach()))
    return updates


def _input_sources(sym: Symbol, by_name: dict, captured: dict, params: dict, named: dict, device) -> list:
    """Where each input of ``sym`` comes from at a call: an argument position, a captured array,
    a parameter (or a copy of it on the arguments' device)."""
    sources = []
    for name in sym.list_inputs():
        if name in by_name:
            sources.append(by_name[name])
        elif name in captured:
            sources.append(captured[name])
        else:
            p = params[name]
            sources.append(CopyOf(p, device) if p._copies and named[name] is not p._data else p)
    return sources


def is_shape_generic(sym: Symbol) -> bool:
    """False when an op carries a shape in its parameters (the graph is specialized to it)."""
    for node in sym.topo():
        if node.op is not None and _SHAPE_BAKED_PARAMS.intersection(node.params):
            return False
        if node.op is not None and any(isinstance(v, SubGraph) and not is_shape_generic(v.sym)
                                       for v in node.params.values()):  # a control-flow body
            return False
    return True


def compile_symbol(sym: Symbol, cache_size: int | None = None, cache_bytes: int | None = None,
                   sources=()) -> CachedOp:
    """Step 4: the cached op that runs ``sym`` (it compiles one program per input signature, keeping
    at most ``cache_size`` holding at most ``cache_bytes`` together). The block warns about recompiles
    itself, so the op stays quiet. ``sources``: where each input comes from; the parameters' inputs
    are named to the op (what reads only them is computed once: ``executor/param_cache.py``)."""
    params = [n for n, s in zip(sym.list_inputs(), sources) if isinstance(s, (Parameter, CopyOf))]
    op = CachedOp(sym, cache_size, cache_bytes=cache_bytes, parameters=params)
    op._signatures.warn_at = float("inf")
    return op
