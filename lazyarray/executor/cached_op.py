"""``CachedOp``: a Symbol compiled once per input signature and run on arrays.

Named steps, per new signature (shapes, dtypes, devices, storage types, training flag
and which inputs want gradients):

1. ``_specialize``: place the graph for the signature (``placement``: avals, devices,
   copy nodes), then simplify (``dce``, ``cse``, ``constant_fold``, the algebraic rewrites of
   ``passes/algebra.py`` such as ``x**3 -> x*x*x``, ``sink_slices`` (rows nobody reads are not
   computed: ``dense(h)[:, 0] -> dense(h[:, 0])``), ``cse``, ``dce``);
2. ``_split_backward`` (only when an input wants a gradient): the gradient pass builds the
   backward graph, and rewrites of the joint graph let the forward compute what the backward
   would recompute (``forward_saves``: gelu's slope, layer norm's statistics); the forward
   values it reads become extra ("saved") outputs of the
   forward program, and the backward graph reads them as inputs;
3. ``compile_program``: plan memory and lay out the flat steps (``program.py``).

Autograd: under ``autograd.record()``, when an input wants a gradient, a call is recorded
as **one** ``call`` **node** (``executor/call.py``) whose sub-graphs are the compiled forward
and backward graphs of that signature. Its outputs are the user's outputs followed by the
saved values (hidden: no array shows them); its gradient is another ``call`` node that reads
the saved values, the inputs backward needs and the head gradients, and runs the compiled
backward program. The gradient pass, ``backward()`` and materialization treat both like any other
node, so gradients flow through a ``CachedOp`` into eager code around it and back.

Inside deferred compute, a call records the symbol's nodes inline (so an outer trace
sees through it and compiles everything as one graph).
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import guards, jit
from ..args import seq_arg
from ..autograd import TRAINING, record_result
from ..aval import Aval
from ..deferred import DEFERRED, MODE, RECORDING, show
from ..dim import has_symbols, is_symbolic, substitute
from ..errors import GraphError, ParamError, fmt_shape
from ..graph import draw_html
from ..graph import svg as S
from ..graph.build import record_node
from ..graph.node import Entry, Node, unique_names, user_source, var_node
from ..graph.passes.algebra import simplify
from ..graph.passes.attention import fuse_attention
from ..graph.passes.attention_masks import narrow_attention_masks
from ..graph.passes.batch_norm_relu import batch_norm_relu
from ..graph.passes.bind_dims import dims_in
from ..graph.passes.channel_shuffle import channel_shuffle
from ..graph.passes.constant_fold import constant_fold
from ..graph.passes.conv_activation import conv_activation
from ..graph.passes.conv_residual import conv_residual
from ..graph.passes.cse import cse
from ..graph.passes.dce import dce
from ..graph.passes.drop_kept_dims import drop_kept_dims
from ..graph.passes.fold_batch_norm import fold_batch_norm
from ..graph.passes.forward_saves import forward_saves
from ..graph.passes.gelu import fuse_gelu, fuse_gelu_tanh
from ..graph.passes.gradient import gradient
from ..graph.passes.identity_gather import identity_gathers
from ..graph.passes.infer import bind_env, inline_env
from ..graph.passes.layer_norm import fuse_layer_norm
from ..graph.passes.layer_scale import layer_scale_residual
from ..graph.passes.matmul_bias import matmul_bias
from ..graph.passes.merge_projections import merge_projections
from ..graph.passes.patch_embedding import patch_embeddings
from ..graph.passes.placement import placement
from ..graph.passes.pool_before_batch_norm import pool_before_batch_norm
from ..graph.passes.pool_relu import pool_relu
from ..graph.passes.relu_after_max_pool import relu_after_max_pool
from ..graph.passes.scan_projection import scan_projection
from ..graph.passes.shape_fills import shape_fills
from ..graph.passes.sink_slices import sink_slices
from ..graph.passes.squeeze_excite import squeeze_excite
from ..graph.passes.stack_views import stack_views
from ..graph.rewrite import gc_paused, rewrite
from ..graph.symbol import Symbol
from ..graph.traverse import topo_order
from ..kernels.profile import profile
from ..ndarray import NDArray, array_from, make_array
from ..storage import stype_of
from . import plan_view
from .call import SubGraph, call_node, call_params
from .explain import Explanation, explain_profile
from .fusion import fuse, fusion_enabled
from .param_cache import hoisted_program
from .plan import MemoryPlan
from .program import compile_program
from .signature_cache import SignatureCache, causes_text, describe_change


class _Compiled:
    """What one signature compiles to."""

    __slots__ = ("backward", "call", "devices_all", "joint", "n_out", "out_avals", "out_devices", "program", "sym",
                 "used")

    def __init__(self, sym, program, out_devices):
        self.sym = sym
        self.program = program
        self.out_devices = out_devices
        self.call = None  # the params of the ``call`` node a training call records
        self.backward = None  # (bwd program, saved input positions, wrt positions)
        self.joint = None  # (outputs, inputs) of the joint forward + backward graph, for the plan
        self.n_out = len(out_devices)
        self.devices_all = out_devices  # with the saved values' devices (training signatures)
        self.out_avals = None  # the avals of a training call's values: one signature, one layout


def held_bytes(c: _Compiled) -> int:
    """The bytes a compiled signature holds between runs: the buffers of its memory plans (forward,
    and backward for a training signature), which its programs keep for the next run."""
    progs = (c.program, c.backward[0] if c.backward is not None else None)
    return sum(p.plan.peak_bytes for p in progs if getattr(p, "plan", None) is not None) \
        + getattr(c.program, "kept_bytes", 0)


class CachedOp:
    """A symbol compiled per input signature; call it with arrays.

    >>> import lazyarray as la
    >>> x = la.ones((2, 3))
    >>> with la.deferred():
    ...     y = la.relu(x * 2 - 1)
    >>> op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    >>> op(la.full((2, 3), 3.0)).asnumpy()
    array([[5., 5., 5.],
           [5., 5., 5.]], dtype=float32)
    >>> plan = op.memory_plan(x=(256, 1024))   # x * 2, then - 1 and relu in place
    >>> plan.peak_bytes, plan.num_buffers
    (1048576, 1)
    """

    def __init__(self, sym: Symbol, cache_size: int | None = None, fuse: bool | None = None,
                 cache_bytes: int | None = None, parameters=()):
        if not isinstance(sym, Symbol):
            raise ParamError(f"CachedOp takes a Symbol, got {type(sym).__name__}; "
                             "make one with la.get_symbol(outputs, inputs={...}) or la.load_symbol(path)")
        self.sym = sym
        self.fuse = fusion_enabled(fuse)  # elementwise groups run as fused chunked kernels (fusion.py)
        self._inputs = sym.input_nodes()
        self._names = [n.name for n in self._inputs]
        self._pos = {nm: i for i, nm in enumerate(self._names)}
        # bounded in entries and in bytes (see signature_cache.py): the least recently used go
        self._signatures = SignatureCache("CachedOp", cache_size, max_bytes=cache_bytes)
        self._cache = self._signatures.items  # (the hot path reads the dict directly)
        self._lock = threading.Lock()
        self._last_key = None
        # inputs that are parameters: plain calls compute what depends on them only once (param_cache.py)
        self.parameters = frozenset(seq_arg(parameters, "CachedOp", "parameters", "a list of input names, e.g. ['w']"))
        unknown = sorted(str(n) for n in self.parameters if n not in self._pos)
        if unknown:
            raise ParamError(f"CachedOp: parameters {unknown} are not inputs of the symbol; its inputs are {self._names}")

    @property
    def num_compiles(self) -> int:
        """How many programs this op has compiled (one per new input signature)."""
        return self._signatures.epoch

    # -- calling --------------------------------------------------------------------------------
    def __call__(self, *args: NDArray | np.ndarray, **named: NDArray | np.ndarray) -> Any:  # an NDArray, or a list
        if named:
            args = self._order(args, named)
        if len(args) != len(self._names):
            raise ParamError(f"CachedOp: takes {len(self._names)} input(s) ({', '.join(self._names)}), "
                             f"got {len(args)}")
        mode = MODE.get()
        if mode & DEFERRED:
            return self._inline(args)
        # The hot path: computed NDArrays (a lazy one's value is None, a foreign object is no NDArray).
        vals = [a._value for a in args if a.__class__ is NDArray]
        try:
            key = [(v.shape, v.dtype, a._device, v.__class__) for a, v in zip(args, vals)]
        except AttributeError:  # a lazy array: computed below
            key = None
        if key is None or len(vals) != len(args):
            arrays, vals, key = self._values(args)
        else:
            arrays = args
        mask = None
        if mode & RECORDING:
            mask = tuple([a._ag is not None for a in arrays])
            if not any(mask):
                mask = None
        key.append(TRAINING.get())
        key.append(mask)
        key = tuple(key)
        c = self._cache.get(key)
        if c is None:
            c = self._compile(key, vals, arrays, mask)
            with jit.first_run():  # (NumPy kernels: compiled ones load or compile from the second run)
                return self._record(c, arrays, vals) if mask is not None else _wrap(c, c.program.run(vals))
        c.used = self._signatures.epoch
        if mask is not None:
            return self._record(c, arrays, vals)
        return _wrap(c, c.program.run(vals))

    def explain(self, *args, **named) -> Explanation:
        """Run this call once and say what ran: every step of the compiled program with its op,
        shapes, chosen implementation (``conv2d[winograd4, kernel kept]``), planned buffer and
        workspace, then the plan's totals (``executor/explain.py``).

        >>> import lazyarray as la
        >>> x = la.sym.var("x", shape=(2, 3))
        >>> text = str(la.CachedOp(la.sym.relu(x * 2)).explain(la.ones((2, 3))))
        >>> "relu[" in text
        True
        """
        with profile() as prof:
            self(*args, **named)
        return explain_profile(prof)

    def program_for(self, arrays) -> _Compiled | None:
        """What a plain call (nothing recorded, nothing deferred) with ``arrays`` runs, if compiled:
        for a caller that keeps it while its inputs keep their signature (a hybridized block's
        parameters; ``run_program``). None where the call would compile or convert first."""
        if len(arrays) != len(self._names) or any(a.__class__ is not NDArray or a._value is None for a in arrays):
            return None
        key = [(a._value.shape, a._value.dtype, a._device, a._value.__class__) for a in arrays]
        key.append(TRAINING.get())
        key.append(None)
        return self._cache.get(tuple(key))

    def run_program(self, c: _Compiled, vals: list):
        """Run ``c`` (from ``program_for``) on the arrays' values: a plain call without its signature."""
        c.used = self._signatures.epoch
        outs = c.program.run(vals)
        if c.n_out == 1:  # (``_wrap``'s usual case, without its frame)
            return make_array(outs[0], None, c.out_devices[0])
        return _wrap(c, outs)

    def _values(self, args):
        """The arrays, their computed values and the signature key of a call's arguments (converting
        NumPy data, computing lazy arrays)."""
        arrays = [a if a.__class__ is NDArray else self._convert(a, i) for i, a in enumerate(args)]
        vals = []
        key = []
        for a in arrays:
            v = a._value
            if v is None:
                v = a._materialize()
            vals.append(v)
            key.append((v.shape, v.dtype, a._device, v.__class__))
        return arrays, vals, key

    def _order(self, args, named):
        full = list(args) + [None] * (len(self._names) - len(args))
        if len(args) > len(self._names):
            raise ParamError(f"CachedOp: takes {len(self._names)} input(s) ({', '.join(self._names)}), "
                             f"got {len(args)} positional and {len(named)} named")
        for k, v in named.items():
            if k not in self._pos:
                raise ParamError(f"CachedOp: no input named {k!r}; inputs: {', '.join(self._names)}")
            if self._pos[k] < len(args):  # (Python's own rule for a function's arguments)
                raise ParamError(f"CachedOp: got multiple values for input {k!r} (positional argument "
                                 f"{self._pos[k]} and {k}=...); inputs: {', '.join(self._names)}")
            full[self._pos[k]] = v
        missing = [nm for nm, v in zip(self._names, full) if v is None]
        if missing:
            raise ParamError(f"CachedOp: missing input(s) {', '.join(missing)}; inputs: {', '.join(self._names)}")
        return full

    def _convert(self, a, i):
        if isinstance(a, (np.ndarray, list, tuple, float, int)):
            return array_from(a, self._inputs[i].avals[0].device)
        raise TypeError(f"CachedOp: input {self._names[i]!r} is a {type(a).__name__}; pass an NDArray")

    def _record(self, c: _Compiled, arrays, vals):
        """Run the forward program and record the call as one autograd node."""
        outs = c.program.run(vals)
        # Each argument's entry and the record or leaf behind it (under recording, a tracked array's
        # entry is its record's or leaf's: ``_as_entry``), read off the arrays in one pass
        entries = tuple([a._as_entry() for a in arrays])
        parents = tuple([getattr(a, "_autograd", None) for a in arrays])
        avals = c.out_avals
        if avals is None:  # (the program of one input signature always makes the same values)
            avals = c.out_avals = tuple(Aval(tuple(v.shape), v.dtype, d, stype_of(v))
                                        for v, d in zip(outs, c.devices_all))
        node = call_node(c.call, entries, avals, user_source(3))  # (from __call__'s caller)
        res = [make_array(outs[i], None, c.out_devices[i]) for i in range(c.n_out)]
        record_result(node, outs, parents, res)
        return res[0] if c.n_out == 1 else res

    def _inline(self, args):
        """Inside deferred compute: record the symbol's nodes in place of the call."""
        given: dict[int, Entry] = {}
        for node, a in zip(self._inputs, args):
            if not isinstance(a, NDArray):
                a = self._convert(a, self._pos[node.name])
            given[id(node)] = a._as_entry()
        # the symbolic sizes of the graph at the callers' shapes, substituted into size parameters
        env = inline_env(self._inputs, {n.name: given[id(n)].aval for n in self._inputs}, "CachedOp")
        if any(isinstance(v, int) for v in env.values()):  # sizes of this call baked into the trace
            self._guard_sizes(given)

        def visit(node: Node, ins):
            if node.op is None:  # an input takes the caller's array; a constant stays itself
                return (given[id(node)],) if id(node) in given else (Entry(node, 0),)
            params = node.params
            if env and has_symbols(tuple(params.values())):
                params = {k: substitute(v, env) for k, v in params.items()}
            # re-inferred for the inputs; ``ins`` are flat like ``node.inputs`` (a ``*seq`` op's list too)
            res = record_node(node.op, list(ins), params, source=node.source)
            return (res,) if isinstance(res, Entry) else res

        outs = []
        for ent in rewrite(self.sym, visit).outputs:
            arr = make_array(None, ent, ent.aval.device)
            show(arr, ent)
            outs.append(arr)
        return outs[0] if len(outs) == 1 else outs

    def _guard_sizes(self, given: dict) -> None:
        """Inlined into a hybridize trace, the graph's size parameters take the sizes of this call:
        the trace then holds them, so it guards the block-input dims they come from (a later call
        at other sizes traces again instead of reusing baked sizes)."""
        trace = guards.active()
        if trace is None:
            return
        used = set()
        for node in self.sym.topo():
            if node.op is not None:
                for v in node.params.values():
                    if has_symbols((v,)):
                        used |= {name for d in dims_in(v) for name in d.symbols()}
        for node in self._inputs:
            shape = node.avals[0].shape
            axes = [i for i, d in enumerate(shape or ()) if is_symbolic(d) and used & set(d.symbols())]
            if axes:
                trace.read_dims(given[id(node)], axes)

    # -- compiling ------------------------------------------------------------------------------
    def _compile(self, key, vals, arrays, mask) -> _Compiled:
        with self._lock:
            c = self._cache.get(key)
            if c is not None:
                return c
            given = {nm: Aval(tuple(v.shape), v.dtype, a._device, stype_of(v))
                     for nm, v, a in zip(self._names, vals, arrays)}
            with gc_paused():  # (passes build thousands of short-lived nodes)
                c = self._build(given, mask)
            self._signatures.add(key, c, self._describe, held_bytes(c))
            self._last_key = key
            return c

    def _describe(self, old, new) -> tuple[list, str]:
        """What changed between two signatures: causes (input, field) and the text of both."""
        causes = describe_change(self._names, old[:-2], new[:-2],
                                 "training or gradient request" if old[-2:] != new[-2:] else "")
        return causes, (f"This time {causes_text(causes)} changed: last signature {_sig_text(old, self._names)}, "
                        f"new one {_sig_text(new, self._names)}")

    def _build(self, given: dict[str, Aval], mask) -> _Compiled:
        sym = _specialize(self.sym, given, inference=mask is None)
        inputs = _input_nodes(sym, self._names)
        if mask is None:
            prog = hoisted_program(sym, inputs, self.parameters, self.fuse, sym.names()) \
                if self.parameters else None
            if prog is not None:  # (its steps on parameters only run once, in their own program)
                return _Compiled(sym, prog, [e.aval.device for e in sym.outputs])
            outs = fuse(list(sym.outputs)) if self.fuse else list(sym.outputs)
            prog = compile_program(outs, inputs, names=sym.names())
            return _Compiled(Symbol(outs), prog, [e.aval.device for e in sym.outputs])
        wrt = [i for i, m in enumerate(mask) if m and given[self._names[i]].dtype.kind == "f"]
        return _split_backward(sym, inputs, wrt, self.fuse)

    def compiled(self, **shapes) -> Symbol:
        """The graph compiled for inputs of ``shapes`` (name -> shape; the symbol's own where
        omitted): placed, simplified and fused, as ``print`` shows it.

        >>> import lazyarray as la
        >>> x = la.sym.var("x", shape=(4,))
        >>> print(la.CachedOp(la.sym.tanh(x * 2) + 1).compiled())
        %x = input : float32[4] @cpu(0)
        %fused[multiply,tanh,add] = fused(%x, 2.0, 1.0, graph=<SubGraph inputs=['in0', 'in1', 'in2'] outputs=1 nodes=6>) : float32[4] @cpu(0)
        return %fused[multiply,tanh,add]
        """
        sym = _specialize(self.sym, self._given(shapes, "compiled"), inference=True)
        return Symbol(fuse(list(sym.outputs))) if self.fuse else sym

    def _given(self, shapes: dict, what: str) -> dict[str, Aval]:
        given = {}
        for nm, node in zip(self._names, self._inputs):
            a = node.avals[0]
            shape = tuple(shapes.pop(nm)) if nm in shapes else a.shape
            if shape is None or not Aval(shape, a.dtype, a.device).known:
                raise ParamError(f"{what}: the shape of input {nm!r} is unknown or symbolic ({shape}); pass it, "
                                 f"e.g. op.{what}({nm}=(64, 784))")
            given[nm] = Aval(shape, a.dtype, a.device, a.stype)
        if shapes:
            raise ParamError(f"{what}: no input named {', '.join(shapes)}; inputs: {', '.join(self._names)}")
        return given

    def memory_plan(self, wrt=None, **shapes) -> MemoryPlan:
        """The memory plan for inputs of ``shapes`` (name -> shape), without running.

        ``wrt``: input names to differentiate; the plan then covers forward and backward
        as one schedule (saved forward values live until backward reads them).
        Dtypes, devices and storage types are those the symbol records for its inputs.
        """
        sym = _specialize(self.sym, self._given(shapes, "memory_plan"), inference=not wrt)
        inputs = _input_nodes(sym, self._names)
        if not wrt:
            outs = fuse(list(sym.outputs)) if self.fuse else list(sym.outputs)
            return compile_program(outs, inputs, names=sym.names()).plan
        wrt_idx = [self._pos[w] for w in wrt]
        c = _split_backward(sym, inputs, wrt_idx)
        outs, ins = c.joint
        # Forward nodes keep the names the plain plan shows; backward nodes get their own.
        return compile_program(outs, ins, names=unique_names(topo_order(outs), sym.names())).plan

    def __repr__(self) -> str:
        return f"<CachedOp inputs={self._names} compiled={len(self._cache)}>"

    def _repr_html_(self) -> str:
        """Notebook display: the memory plan of the most recently compiled signature (forward, and
        backward for a training signature), then the graph that was compiled for it."""
        n = len(self._cache)
        tags = ('<span class="la-tag la-kind">CachedOp</span><span class="la-tag">inputs: '
                f'{S.esc(", ".join(self._names) or "none")}</span><span class="la-tag">{n} compiled '
                f'signature{"s" if n != 1 else ""}</span>')
        parts = [f'<div class="la-hd">{tags}</div>']
        c = self._cache.get(self._last_key) if self._last_key is not None else None
        if c is None:
            parts.append('<div class="la-note">Nothing compiled yet: the first call with arrays compiles '
                         'a program for their signature. <code>op.memory_plan(**shapes)</code> shows a plan '
                         'without running.</div>')
            sym, what = self.sym, "the symbol"
        else:
            parts.append(f'<div class="la-note">Most recently compiled signature: '
                         f'<code>{S.esc(_sig_text(self._last_key, self._names))}</code></div>')
            training = c.backward is not None
            parts.append(plan_view.plan_body(c.program.plan, "forward plan" if training else "memory plan"))
            if training and c.backward[0] is not None:
                parts.append(plan_view.plan_body(c.backward[0].plan, "backward plan"))
            sym, what = c.sym, "the graph compiled for this signature (placed and simplified)"
        parts.append(draw_html.to_html(list(sym.outputs), names=sym.names(), summary=what))
        return f'<div class="la-plan"><style>{S.esc(plan_view.HTML_CSS)}</style>{"".join(parts)}</div>'


# -- compile steps ---------------------------------------------------------------------------------
def _specialize(sym: Symbol, given: dict[str, Aval], inference: bool = False) -> Symbol:
    """Placement for the signature, then simplification (and, for graphs no gradient runs
    through, batch norms folded into the convolution or dense layer before them, max pools of
    the other batch norms pooled first where the norm's scales allow, relus moved after the
    max pools that read them, the other batch norms' relus and convolutions' activations made one step
    with them)."""
    # (the sizes bound in the walk that places every node and infers its avals: bind_dims's work)
    placed = placement(sym, given, dims=bind_env(sym.input_nodes(), given, "CachedOp"))
    for node in placed.topo():
        for a in node.avals:
            if a.shape is None or a.dtype is None:
                raise GraphError(f"CachedOp: cannot infer the aval of {node.label()!r} from the inputs "
                                     f"{_given_text(given)}; give every graph input a shape")
    if inference:
        placed = pool_relu(relu_after_max_pool(pool_before_batch_norm(fold_batch_norm(placed))))
        placed = drop_kept_dims(scan_projection(squeeze_excite(conv_activation(conv_residual(batch_norm_relu(placed))))))
    merged = cse(dce(placed))
    simpler = sink_slices(simplify(constant_fold(shape_fills(stack_views(merged)))))
    # cse and dce again only where a pass changed something (each returns its symbol as it is when
    # it has nothing to do, and a second cse of a merged graph finds nothing)
    simple = merged if simpler is merged else dce(cse(simpler))
    if not inference:
        return simple
    gelus = fuse_gelu_tanh(fuse_gelu(simple))
    attention = narrow_attention_masks(fuse_attention(fuse_layer_norm(identity_gathers(patch_embeddings(gelus)))))
    return layer_scale_residual(channel_shuffle(merge_projections(matmul_bias(attention))))


def _input_nodes(sym: Symbol, names: list[str]) -> list[Node]:
    """The symbol's input nodes in the CachedOp's order (a stand-in for inputs the passes removed)."""
    have = {n.name: n for n in sym.input_nodes()}
    return [have.get(nm) or var_node(nm, Aval((), np.dtype("float32"), None)) for nm in names]


def _split_backward(sym: Symbol, inputs: list[Node], wrt: list[int], fused: bool = False) -> _Compiled:
    """Forward program with saved outputs, backward program, and the node op that ties them."""
    fwd_outs = list(sym.outputs)
    heads = [var_node(f"__head{i}", e.aval) for i, e in enumerate(fwd_outs)]
    # Integer and boolean outputs (argmax, nonzero, masks) carry no gradient: only the others get heads.
    diff = [i for i, e in enumerate(fwd_outs) if e.aval.dtype is not None and e.aval.dtype.kind in "fc"]
    grads = gradient([fwd_outs[i] for i in diff], [Entry(heads[i]) for i in diff], [Entry(inputs[i]) for i in wrt])
    # rewrites that see forward and backward together (the forward computes what the backward reuses)
    new_outs, grads = forward_saves(fwd_outs, grads)
    if new_outs != fwd_outs:
        fwd_outs = new_outs
        sym = Symbol(fwd_outs)
    fwd_ids = {id(n) for n in sym.topo()}
    live = [g for g in grads if g is not None]
    saved = _saved_entries(live, fwd_ids)
    bwd = _backward_symbol(live, saved, fwd_ids)
    bwd_inputs_by_name = {n.name: n for n in bwd.input_nodes()} if bwd is not None else {}
    input_names = [n.name for n in inputs]
    saved_in = [i for i, nm in enumerate(input_names) if nm in bwd_inputs_by_name]
    head_used = [i for i in range(len(heads)) if f"__head{i}" in bwd_inputs_by_name]
    order = [f"__saved{k}" for k in range(len(saved))] + [input_names[i] for i in saved_in] \
        + [f"__head{i}" for i in head_used]
    if bwd is not None and fused:  # the gradient was built from unfused ops; both programs fuse now
        bwd = Symbol(fuse(list(bwd.outputs)))
    fwd_all = fuse(fwd_outs + saved) if fused else fwd_outs + saved
    # the saved values only the backward reads: the forward may store them units-major, and the
    # backward then plans its products to match (executor/units_major.py)
    fwd_prog = compile_program(fwd_all, inputs, names=sym.names(),
                               free_outputs=range(len(fwd_outs), len(fwd_all)))
    saved_orders = {k: fwd_prog.out_orders[len(fwd_outs) + k] for k in range(len(saved))}
    bwd_prog = compile_program(list(bwd.outputs), [bwd_inputs_by_name.get(nm) or var_node(nm, Aval((), None, None))
                                                   for nm in order], names=bwd.names(),
                               input_orders=saved_orders) if bwd is not None else None
    c = _Compiled(sym, fwd_prog, [e.aval.device for e in fwd_outs])
    grad_pos = [i for i, g in zip(wrt, grads) if g is not None]
    n_out, n_saved = len(fwd_outs), len(saved)
    bwd_graph = SubGraph(bwd, order, bwd_prog) if bwd is not None else None
    c.call = call_params(SubGraph(Symbol(fwd_all), input_names, fwd_prog), backward=bwd_graph,
                         saved=tuple(range(n_out, n_out + n_saved)), inputs_read=tuple(saved_in),
                         heads_read=tuple(head_used), grad_pos=tuple(grad_pos))
    c.devices_all = [e.aval.device for e in fwd_outs + saved]
    c.backward = (bwd_prog, saved_in, grad_pos)
    c.joint = (fwd_outs + live, inputs + heads)
    return c


def _saved_entries(live: list[Entry], fwd_ids: set) -> list[Entry]:
    """The entries of the forward graph (nodes ``fwd_ids``) that the gradients ``live`` read, in
    the order the backward graph meets them, then the gradients that are forward values."""
    saved: list[Entry] = []
    seen: set = set()
    for node in topo_order(live, stop=lambda n: id(n) in fwd_ids):
        reads = list(node.inputs) if id(node) not in fwd_ids else []
        for e in reads:
            if id(e.node) in fwd_ids and e.node.op is not None and (id(e.node), e.index) not in seen:
                seen.add((id(e.node), e.index))
                saved.append(e)
    for g in live:
        if id(g.node) in fwd_ids and g.node.op is not None and (id(g.node), g.index) not in seen:
            seen.add((id(g.node), g.index))
            saved.append(g)
    return saved


def _backward_symbol(live: list[Entry], saved: list[Entry], fwd_ids: set) -> Symbol | None:
    """The gradients as a graph of their own: each saved forward entry becomes the variable
    ``__saved{k}``, simplified; None when no gradient is left."""
    if not live:
        return None
    saved_vars = {(id(e.node), e.index): var_node(f"__saved{k}", e.aval) for k, e in enumerate(saved)}

    def cut(node: Node, ins):
        if id(node) in fwd_ids:
            if node.op is None:
                return node
            return tuple(Entry(saved_vars[(id(node), i)]) if (id(node), i) in saved_vars else Entry(node, i)
                         for i in range(len(node.avals)))
        return None

    return dce(cse(simplify(constant_fold(cse(rewrite(Symbol(live), cut))))))


def _given_text(given: dict[str, Aval]) -> str:
    return ", ".join(f"{k}: {a}" for k, a in given.items())


def _sig_text(key, names) -> str:
    if key is None:
        return "(none)"
    parts = [f"{nm}: {np.dtype(dt)}{fmt_shape(shape)} @{dev}" for nm, (shape, dt, dev, _) in zip(names, key)]
    return "(" + ", ".join(parts) + f"; training={key[-2]}, grad={key[-1]})"


def _wrap(c, outs: list):
    """A plain run's output values as arrays: one array, or a list of them."""
    if c.n_out == 1:
        return make_array(outs[0], None, c.out_devices[0])
    return [make_array(v, None, d) for v, d in zip(outs, c.out_devices)]

