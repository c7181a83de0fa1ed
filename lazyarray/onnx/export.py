"""Our graphs -> ONNX models (``la.onnx.export``).

The walk has the shape of the MXNet writer (``lazyarray/mxnet/export.py``): the symbol's nodes in
topological order, each written by the converter of its registry op (``export_ops.CONVERTERS``).
Graph inputs without a value are the model's inputs (named as in the symbol); parameters and
captured constants become initializers under their names; the outputs are named as
``Symbol.list_outputs()`` names them. Control flow becomes ONNX sub-graphs (``cond`` -> ``If``,
``while_loop`` -> ``Loop``, ``foreach`` -> ``Scan``); ``call``/``fused`` sub-graphs are written
in place; cross-device copies are dropped (an ONNX model runs on one device).

**Opset 18 by default.** It is the first opset where every reduction takes its axes as an input
(ReduceMean/Max/Min/Prod... as ReduceSum since 13), so one converter serves them all; it has
LayerNormalization (17), Trilu (14), the Bitwise ops (18) and Pad with constant values as an
input; onnxruntime supports it since 1.14 and most other runtimes (TensorRT 8.6+, OpenVINO)
read it. ``opset=20`` or later writes ``gelu`` as ONNX's Gelu instead of its Erf/Tanh formula.

Models whose initializers exceed ``EXTERNAL_DATA_THRESHOLD`` bytes (protobuf cannot hold more
than 2 GB) keep their tensors in ``<file>.data`` beside the model (ONNX external data). Files are
written atomically: a failed export leaves no partial file.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import numpy as np

from ..creation import zeros
from ..dim import Dim, has_symbols, is_symbolic
from ..errors import GraphError, ParamError
from ..executor.cached_op import CachedOp
from ..executor.call import SubGraph
from ..fileio import remove_stale_temporaries, write_atomic
from ..graph.passes.bind_dims import bind_dims, substitute_dims
from ..graph.symbol import Symbol
from . import external_data
from .export_base import EXPORT_AVALS, elem_type, is_training_node, training_error
from .export_check import check_serves, default_batch_axes, size_sources
from .export_ops import CONVERTERS, NO_ONNX_FORM
from .export_sizes import has_symbolic, sizes_tensor

DEFAULT_OPSET = 18
MIN_OPSET = 18
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**26  # bytes of initializers; protobuf's limit is 2 GiB in all


def supported_ops() -> list[str]:
    """The registry ops ``la.onnx.export`` writes, sorted.

    >>> "conv2d" in supported_ops() and "layer_norm" in supported_ops()
    True
    """
    return sorted(CONVERTERS)


def _onnx():
    try:
        import onnx
        import onnx.helper  # noqa: F401
        import onnx.numpy_helper  # noqa: F401
    except ImportError:
        raise ImportError("la.onnx needs the onnx package: pip install 'lazyarray[onnx]'") from None
    return onnx


class _Ctx:
    """What every (sub-)graph of one model shares: the opset, the names taken, the initializers."""

    def __init__(self, opset: int, reserved):
        self.onnx = _onnx()
        self.opset = opset
        self.used: set[str] = set(reserved)
        self.initializers: list = []
        self.consts: dict = {}  # (dtype, shape, bytes) -> initializer name, so equal constants are shared
        self.labels: dict[int, str] = {}  # id(our node) -> its name, for messages and ONNX node names
        self.sources: dict[str, tuple[str, int]] = {}  # symbolic size -> (graph input, axis) it is read from
        self.sizes: dict[str, str] = {}  # expression text -> the tensor computing it (export_sizes.py)

    def fresh(self, hint: str) -> str:
        hint = hint or "t"
        if hint not in self.used:
            self.used.add(hint)
            return hint
        k = 1
        while f"{hint}_{k}" in self.used:
            k += 1
        self.used.add(f"{hint}_{k}")
        return f"{hint}_{k}"


class _Graph:
    """One ONNX graph being built (the model's, or a body of If/Loop/Scan)."""

    def __init__(self, ctx: _Ctx):
        self.ctx = ctx
        self.opset = ctx.opset
        self.nodes: list = []
        self._hint = "t"

    # -- building blocks the converters use ------------------------------------------------------
    def label(self, node) -> str:
        return self.ctx.labels.get(id(node)) or node.label()

    def op(self, op_type: str, inputs, n_out: int = 1, as_list: bool = False, **attrs):
        helper = self.ctx.onnx.helper
        outs = [self.ctx.fresh(f"{self._hint}" if n_out == 1 else f"{self._hint}_{i}") for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.ctx.fresh(f"{self._hint}/{op_type}"),
                                           **attrs))
        return outs if as_list or n_out != 1 else outs[0]

    def tensor(self, value: np.ndarray):
        return self.ctx.onnx.numpy_helper.from_array(np.array(value, order="C"))  # (ascontiguousarray makes 0-d 1-d)

    def const(self, value, hint: str = "const") -> str:
        value = np.asarray(value)
        key = (value.dtype.str, value.shape, value.tobytes())
        name = self.ctx.consts.get(key)
        if name is None:
            name = self.ctx.consts[key] = self.ctx.fresh(hint)
            t = self.tensor(value)
            t.name = name
            self.ctx.initializers.append(t)
        return name

    def ints(self, values, scalar: bool = False) -> str:
        values = list(values)
        if has_symbolic(values):  # sizes computed from the inputs' dynamic axes when the model runs
            return sizes_tensor(self, values, self.ctx.sources, scalar)
        arr = np.asarray(values, dtype=np.int64)
        return self.const(arr.reshape(()) if scalar else arr, "ints")

    def scalar(self, value, dtype) -> str:
        return self.const(np.asarray(value, dtype=dtype), "scalar")

    def cast(self, name: str, src, dst, force: bool = False) -> str:
        if src is None or dst is None or (np.dtype(src) == np.dtype(dst) and not force):
            return name
        return self.op("Cast", [name], to=elem_type(dst))

    # -- walking our graphs ----------------------------------------------------------------------
    def emit(self, sym: Symbol, bind: dict[int, str]) -> dict[tuple[int, int], str]:
        """Write every node of ``sym``; ``bind`` names the ONNX tensor of each of its graph inputs.
        Returns ``(id(node), output index) -> ONNX tensor name``."""
        names = sym.names()
        for n in sym.topo():
            self.ctx.labels.setdefault(id(n), names[id(n)])
        env: dict[tuple[int, int], str] = {}
        for node in sym.topo():
            if node.op is None:
                if id(node) in bind:
                    env[(id(node), 0)] = bind[id(node)]
                elif node.kind == "const":
                    value = node.value.get() if hasattr(node.value, "get") else node.value
                    env[(id(node), 0)] = self.const(np.asarray(value), self.label(node))
                else:
                    raise GraphError(f"cannot export to ONNX: graph input {node.name!r} of a sub-graph is not "
                                     "bound to a value")
                continue
            ins = [env[(id(e.node), e.index)] for e in node.inputs]
            self._hint = self.label(node)
            outs = CONVERTERS[node.op.name](self, node, ins)
            for i, t in enumerate(outs):
                env[(id(node), i)] = t
        return env

    def inline(self, sub, ins: list[str]) -> list[str]:
        """A sub-graph (``executor.call.SubGraph``) written into this graph, its inputs bound to ``ins``."""
        bind = {id(n): t for n, t in zip(sub.inputs, ins)}
        hint = self._hint
        env = self.emit(sub.sym, bind)
        self._hint = hint
        return [env[(id(e.node), e.index)] for e in sub.sym.outputs]

    def _graph(self, child: _Graph, name: str, inputs: list, outs: list[str], avals: list):
        """``child`` as a GraphProto whose outputs are fresh Identity copies of ``outs``."""
        helper = self.ctx.onnx.helper
        final = []
        for t, a in zip(outs, avals):
            o = child.ctx.fresh(f"{name}_out")
            child.nodes.append(helper.make_node("Identity", [t], [o], name=child.ctx.fresh(f"{name}/Identity")))
            final.append(helper.make_tensor_value_info(o, elem_type(a.dtype), None))
        return helper.make_graph(child.nodes, self.ctx.fresh(name), inputs, final)

    def body(self, sub, bind: list[str], name: str):
        """An If branch: no inputs; its nodes read the outer tensors ``bind`` directly."""
        child = _Graph(self.ctx)
        child._hint = self._hint
        outs = child.inline(sub, bind)
        return self._graph(child, f"{self._hint}_{name}", [], outs, sub.avals)

    def _value_info(self, hint: str, dtype, shape=None):
        name = self.ctx.fresh(hint)
        return name, self.ctx.onnx.helper.make_tensor_value_info(name, elem_type(dtype), shape)

    def loop_body(self, body_sub, cond_sub, node, n: int, free: list[str]):
        """Loop body: (iteration, condition, vars...) -> (condition, vars...)."""
        child = _Graph(self.ctx)
        child._hint = self._hint
        it, it_vi = self._value_info(f"{self._hint}_iter", np.int64, [])
        c, c_vi = self._value_info(f"{self._hint}_cond_in", np.bool_, [])
        state, infos = [], [it_vi, c_vi]
        for i in range(n):
            s, vi = self._value_info(f"{self._hint}_var{i}", node.avals[i].dtype)
            state.append(s)
            infos.append(vi)
        new = child.inline(body_sub, state + free)
        new = [child.cast(t, a.dtype, node.avals[i].dtype) for i, (t, a) in enumerate(zip(new, body_sub.avals))]
        more = child.inline(cond_sub, new + free)[0]
        more = child.op("Reshape", [child.cast(more, cond_sub.avals[0].dtype, np.dtype(bool)), child.ints([])])
        avals = [cond_sub.avals[0]._replace(dtype=np.dtype(bool))] + list(node.avals[:n])
        return self._graph(child, f"{self._hint}_body", infos, [more] + new, avals)

    def scan_body(self, sub, node, nd: int, ns: int, free: list[str], save_states: bool):
        """Scan body: (states..., data slices...) -> (new states..., per-step outputs...)."""
        child = _Graph(self.ctx)
        child._hint = self._hint
        n_y = sub.n_outputs - ns
        states, infos = [], []
        for i in range(ns):
            s, vi = self._value_info(f"{self._hint}_state{i}", node.avals[n_y + i].dtype)
            states.append(s)
            infos.append(vi)
        data = []
        for i in range(nd):
            e = node.inputs[i]
            d, vi = self._value_info(f"{self._hint}_slice{i}", e.node.avals[e.index].dtype)
            data.append(d)
            infos.append(vi)
        res = child.inline(sub, data + states + free)
        ys, new = res[:n_y], res[n_y:]
        saved = states if save_states else []
        outs = new + ys + saved
        avals = list(node.avals[n_y:n_y + ns]) + list(node.avals[:n_y]) + list(node.avals[n_y:n_y + ns])[:len(saved)]
        return self._graph(child, f"{self._hint}_body", infos, outs, avals), n_y + len(saved)


# -- the export ---------------------------------------------------------------------------------
def _all_nodes(sym: Symbol, seen=None):
    """Every node of ``sym`` and of the sub-graphs its control-flow and call nodes hold."""
    seen = set() if seen is None else seen
    for node in sym.topo():
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield sym, node
        if node.op is not None:
            for v in node.params.values():
                if isinstance(v, SubGraph):
                    yield from _all_nodes(v.sym, seen)


def _check_exportable(sym: Symbol) -> None:
    training, missing = [], {}
    for owner, node in _all_nodes(sym):
        if node.op is None:
            continue
        if is_training_node(node):
            training.append((owner, node))
        elif node.op.name not in CONVERTERS:
            missing.setdefault(node.op.name, owner.name_of(node))
    if training:
        labels = {id(n): o.name_of(n) for o, n in training}
        raise training_error(lambda n: labels[id(n)], [n for _, n in training])
    if missing:
        listed = ", ".join(f"{op} (node {n!r}{': ' + NO_ONNX_FORM[op] if op in NO_ONNX_FORM else ''})"
                           for op, n in sorted(missing.items()))
        raise GraphError(f"cannot export to ONNX: no ONNX mapping for {listed}; the ops that export are: "
                         f"{', '.join(supported_ops())}")


def _dims(shape, dynamic: dict, name: str):
    if shape is None:
        return None
    return [dynamic.get(i, dynamic.get(i - len(shape))) or (f"{name}_dim{i}" if d is None else
                                                           str(d) if is_symbolic(d) else int(d))
            for i, d in enumerate(shape)]


def _declared(shape, axes: dict):
    """``shape`` with each dynamic axis a symbol of its name (a symbolic dim already there stays)."""
    out = []
    for i, d in enumerate(shape):
        name = axes.get(i, axes.get(i - len(shape)))
        out.append(Dim(name) if name is not None and not is_symbolic(d) else d)
    return tuple(out)


def to_model(sym: Symbol, values: dict[str, np.ndarray] | None = None, *, input_shapes=None,
             dynamic_axes=None, opset: int | None = None, baked: dict | None = None):
    """The ``onnx.ModelProto`` of ``sym`` (``values``: name -> array of the inputs that are parameters)."""
    onnx = _onnx()
    helper = onnx.helper
    values = dict(values or {})
    opset = DEFAULT_OPSET if opset is None else int(opset)
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        raise ParamError(f"la.onnx.export: opset {opset} is not supported; give an opset from {MIN_OPSET} "
                         f"to {newest} (the installed onnx's newest)")
    _check_exportable(sym)
    data, shapes, dynamic = _data_inputs(sym, values, input_shapes, dynamic_axes)
    declared = {n.name: _declared(tuple(shapes[n.name]) if n.name in shapes else n.avals[0].shape,
                                  dynamic.get(n.name, {}))
                for n in data if (shapes.get(n.name) or n.avals[0].shape) is not None}
    check_serves(sym, data, declared, dynamic, baked)

    out_names = sym.list_outputs()
    ctx = _Ctx(opset, list(sym.names().values()) + out_names)
    ctx.sources = size_sources(declared)
    g = _Graph(ctx)
    bind, graph_inputs, given = _bind_inputs(sym, g, values, shapes, dynamic)
    polymorphic = dynamic or any(has_symbols(a.shape) for a in given.values())
    token = EXPORT_AVALS.set(_dynamic_avals(sym, given) if polymorphic else None)
    try:
        env = g.emit(sym, bind)
    finally:
        EXPORT_AVALS.reset(token)

    out_avals = _output_avals(sym, declared) if declared else _output_avals(sym, given)
    outputs = _graph_outputs(sym, g, env, out_names, out_avals)
    graph = helper.make_graph(g.nodes, "lazyarray", graph_inputs, outputs, initializer=ctx.initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="lazyarray",
                              ir_version=helper.find_min_ir_version_for(opsets))
    return model


def _data_inputs(sym: Symbol, values: dict, input_shapes, dynamic_axes) -> tuple:
    """``(data inputs, their given shapes, dynamic axes by input name)``, checked: ``values`` and
    ``dynamic_axes`` name graph inputs (parameters and data inputs)."""
    inputs = sym.input_nodes()
    names = {n.name for n in inputs}
    unknown = [k for k in values if k not in names]
    if unknown:
        raise ParamError(f"la.onnx.export: parameters {unknown} are not graph inputs; inputs: {sorted(names)}")
    data = [n for n in inputs if n.name not in values]
    shapes = _given_shapes(input_shapes, [n.name for n in data])
    dynamic = {k: {int(a): str(v.name if isinstance(v, Dim) else v) for a, v in axes.items()}
               for k, axes in (dynamic_axes or {}).items()}
    bad = [k for k in dynamic if k not in {n.name for n in data}]
    if bad:
        raise ParamError(f"la.onnx.export: dynamic_axes names {bad}, which are not data inputs; data inputs: "
                         f"{[n.name for n in data]}")
    return data, shapes, dynamic


def _bind_inputs(sym: Symbol, g: _Graph, values: dict, shapes: dict, dynamic: dict) -> tuple:
    """``(bind, graph inputs, given avals)``: parameters and captured constants become initializers,
    data inputs graph inputs (their dynamic axes named, unknown in ``given``)."""
    ctx = g.ctx
    helper = ctx.onnx.helper
    bind, graph_inputs, given = {}, [], {}
    for n in sym.input_nodes():
        bind[id(n)] = n.name
        a = n.avals[0]
        if n.name in values:
            v = np.asarray(values[n.name])
            if a.dtype is not None and v.dtype != a.dtype:
                v = v.astype(a.dtype)
            t = g.tensor(v)
            t.name = n.name
            ctx.initializers.append(t)
            continue
        shape = tuple(shapes[n.name]) if n.name in shapes else a.shape
        dtype = a.dtype if a.dtype is not None else np.dtype("float32")
        dims = _dims(shape, dynamic.get(n.name, {}), n.name)
        graph_inputs.append(helper.make_tensor_value_info(n.name, elem_type(dtype), dims))
        if shape is not None:
            ax = dynamic.get(n.name, {})
            given[n.name] = a._replace(shape=tuple(None if (i in ax or i - len(shape) in ax or is_symbolic(d)) else d
                                                   for i, d in enumerate(shape)), dtype=dtype)
    for n in sym.constant_nodes():  # captured constants keep their names (reserved above)
        bind[id(n)] = name = sym.name_of(n)
        t = g.tensor(np.asarray(n.value.get() if hasattr(n.value, "get") else n.value))
        t.name = name
        ctx.initializers.append(t)
    return bind, graph_inputs, given


def _graph_outputs(sym: Symbol, g: _Graph, env: dict, out_names: list, out_avals: list) -> list:
    """The graph's output value infos; a producing node writes an output name directly, else an
    ``Identity`` does (a value output twice, or an input)."""
    ctx = g.ctx
    helper = ctx.onnx.helper
    produced = {o for nd in g.nodes for o in nd.output}
    counts: dict[str, int] = {}
    for e in sym.outputs:
        t = env[(id(e.node), e.index)]
        counts[t] = counts.get(t, 0) + 1
    renames, outputs, taken = {}, [], set()
    for e, want, a in zip(sym.outputs, out_names, out_avals):
        t = env[(id(e.node), e.index)]
        if want in taken:  # one value output twice ([y, y], y and an inference dropout of it): a
            want = ctx.fresh(want)  # graph output is written once (SSA), so the repeat gets a name of its own
        taken.add(want)
        if t in produced and counts[t] == 1 and t not in renames:
            renames[t] = want  # the producing node writes the output name directly
        else:
            g.nodes.append(helper.make_node("Identity", [t], [want], name=ctx.fresh(f"{want}/Identity")))
        dims = None if a.shape is None else [f"{want}_dim{i}" if d is None else str(d) if is_symbolic(d) else int(d)
                                             for i, d in enumerate(a.shape)]
        outputs.append(helper.make_tensor_value_info(want, elem_type(a.dtype or np.float32), dims))
    if renames:
        _rename(g.nodes, renames)
    return outputs


def _rename(nodes, renames: dict[str, str]) -> None:
    """Rename tensors in ``nodes`` and in the bodies of their sub-graphs (which may read them)."""
    for nd in nodes:
        for k, t in enumerate(nd.input):
            if t in renames:
                nd.input[k] = renames[t]
        for k, t in enumerate(nd.output):
            if t in renames:
                nd.output[k] = renames[t]
        for attr in nd.attribute:
            if attr.HasField("g"):
                _rename(attr.g.node, renames)
                for o in attr.g.output:
                    if o.name in renames:
                        o.name = renames[o.name]


def _dynamic_avals(sym: Symbol, given: dict):
    """Every node's avals with the dynamic axes unknown (``None`` if inference cannot redo them)."""
    try:
        avals = sym.infer_avals(**given)
    except Exception:  # noqa: BLE001 (the recorded avals then)
        return None
    # sizes computed from symbols (an iota of the batch) are as unknown to the converters as the axes
    return {k: tuple(a._replace(shape=tuple(None if is_symbolic(d) else d for d in a.shape))
                     if a.shape is not None and has_symbols(a.shape) else a for a in v) for k, v in avals.items()}


def _output_avals(sym: Symbol, given: dict):
    """The outputs' avals for the declared input shapes (dynamic axes symbolic or unknown; recorded
    avals if inference cannot tell)."""
    if given and all(isinstance(v, tuple) for v in given.values()):  # declared shapes: name -> shape
        known = {n.name: n.avals[0] for n in sym.input_nodes()}
        given = {k: known[k]._replace(shape=v) for k, v in given.items() if k in known}
    try:
        avals = sym.infer_avals(**given)
        return [avals[id(e.node)][e.index] for e in sym.outputs]
    except Exception:  # noqa: BLE001 (a graph inference cannot redo for these shapes: no shapes then)
        return [e.node.avals[e.index]._replace(shape=None) for e in sym.outputs]


def _given_shapes(input_shapes, data_names: list[str]) -> dict:
    if input_shapes is None:
        return {}
    if isinstance(input_shapes, dict):
        return {k: tuple(v) for k, v in input_shapes.items()}
    shapes = list(input_shapes)
    if all(isinstance(d, int) for d in shapes):
        shapes = [shapes]
    if len(shapes) != len(data_names):
        raise ParamError(f"la.onnx.export: {len(shapes)} input shapes for {len(data_names)} data inputs "
                         f"{data_names}; give one shape per data input (or a dict name -> shape)")
    return dict(zip(data_names, (tuple(s) for s in shapes)))


def _numpy(v) -> np.ndarray:
    if hasattr(v, "asnumpy"):
        return v.asnumpy()
    return np.asarray(v.get() if hasattr(v, "get") else v)


def _resolve(obj, input_shapes, params):
    """``(symbol, parameter values, input shapes, default dynamic axes, baked sizes)`` of what
    ``export`` was given (baked: input name -> {axis: source} of sizes a trace read as ints)."""
    if isinstance(obj, Symbol):
        return obj, {k: _numpy(v) for k, v in (params or {}).items()}, input_shapes, None, {}
    if isinstance(obj, CachedOp):
        return obj.sym, {k: _numpy(v) for k, v in (params or {}).items()}, input_shapes, None, {}
    if hasattr(obj, "export_graph"):  # a HybridBlock
        block = obj
        if input_shapes is not None:
            shapes = _block_shapes(input_shapes)
            if not block.hybridized:
                block.hybridize()
            # the dtypes of the block's last call (token ids stay integers); float32 for a block never called
            last = block._last_sig if block._last_sig is not None and len(block._last_sig) == len(shapes) else None
            dtypes = [sig[1] if isinstance(sig, tuple) and len(sig) > 1 else "float32" for sig in last] \
                if last is not None else ["float32"] * len(shapes)
            block(*[zeros(tuple(s), dtype=d) for s, d in zip(shapes, dtypes)])
        elif block._last_sig is None and isinstance(getattr(block, "symbol", None), Symbol):  # a SymbolBlock
            sym = block.symbol
            ps = {k: v for k, v in block.collect_params().items() if k in sym.list_inputs()}
            return sym, {k: _numpy(p.data()) for k, p in ps.items()}, None, _batch_axes(sym, ps), {}
        elif block._last_sig is None:
            raise ParamError(f"la.onnx.export: {type(block).__name__} has not been called yet: call it on an "
                             "input once (net.hybridize(); net(x)) or give input_shapes=(1, 3, 224, 224) to "
                             "trace it")
        sym, ps = block.export_graph()
        values = {k: _numpy(p.data()) for k, p in ps.items()}
        baked = block.baked_axes()
        axes = default_batch_axes(sym, values, baked)
        if not axes and has_symbols_in_inputs(sym):  # traced with a symbolic batch it does not keep on axis 0
            sym = bind_dims(sym, block.traced_avals(sym), "la.onnx.export")
        return sym, values, None, axes, baked
    raise ParamError(f"la.onnx.export: expected a Symbol, a CachedOp or a HybridBlock, got {type(obj).__name__}")


def has_symbols_in_inputs(sym: Symbol) -> bool:
    return any(has_symbols(n.avals[0].shape) for n in sym.input_nodes() if n.avals[0].shape is not None)


def _batch_axes(sym: Symbol, values) -> dict:
    """A loaded model's (``SymbolBlock``) default dynamic axes: the ones its inputs declare
    symbolic; for a graph with concrete inputs, axis 0 where the batch really is axis 0."""
    axes = {n.name: {i: str(d) for i, d in enumerate(n.avals[0].shape) if d.__class__ is Dim}
            for n in sym.input_nodes() if n.name not in values and n.avals[0].shape}
    axes = {k: v for k, v in axes.items() if v}
    return axes or default_batch_axes(sym, values, {})


def _block_shapes(input_shapes) -> list:
    if isinstance(input_shapes, dict):
        return [tuple(s) for s in input_shapes.values()]
    shapes = list(input_shapes)
    return [tuple(shapes)] if all(isinstance(d, int) for d in shapes) else [tuple(s) for s in shapes]


def _named_as_declared(sym: Symbol, dynamic_axes: dict) -> Symbol:
    """``sym`` with each symbol of an input axis the caller names renamed to that name
    (``dynamic_axes={"data": {0: "n"}}`` on a graph traced with ``batch``); the others as they are."""
    env = {}
    for n in sym.input_nodes():
        for axis, name in (dynamic_axes or {}).get(n.name, {}).items():
            shape = n.avals[0].shape
            d = shape[int(axis)] if shape is not None and -len(shape) <= int(axis) < len(shape) else None
            old = d.as_symbol() if is_symbolic(d) else None
            if old is not None and old != str(name):
                env[old] = Dim(str(name))
    return substitute_dims(sym, env) if env else sym


def _from_dynamic_shapes(dynamic_shapes: dict) -> dict:
    """torch.export's form ``{"data": {0: la.Dim("batch")}}`` as ``dynamic_axes`` (axis -> name)."""
    if not isinstance(dynamic_shapes, dict):
        raise ParamError(f"la.onnx.export: dynamic_shapes must map input names to {{axis: la.Dim(name)}}, got "
                         f"{type(dynamic_shapes).__name__}")
    out = {}
    for name, axes in dynamic_shapes.items():
        if axes is None:
            continue
        if not isinstance(axes, dict) or not all(isinstance(d, Dim) for d in axes.values()):
            raise ParamError(f"la.onnx.export: dynamic_shapes[{name!r}] must map axes to la.Dim(name), got {axes!r}")
        out[name] = {int(a): d.name for a, d in axes.items()}
    return out


def export(obj, path: str, *, input_shapes=None, dynamic_axes=None, dynamic_shapes=None, opset: int | None = None,
           params: dict | None = None) -> str:
    """Write ``obj`` (a ``Symbol``, a ``CachedOp`` or a ``HybridBlock``) as an ONNX model at ``path``.

    * A block is exported in its inference form (dropout is the identity, batch norm uses its
      running statistics); one that has not been called yet is traced on ``input_shapes`` (a
      shape, or a list of shapes). Its parameters become initializers with their names, and
      the batch axis (0) of every input is dynamic unless ``dynamic_axes`` says otherwise.
    * A ``Symbol`` or ``CachedOp``: every graph input is a model input, unless ``params`` (name ->
      array) gives it a value; ``input_shapes`` (a dict name -> shape, or one shape per input)
      overrides the recorded shapes.
    * ``dynamic_axes={"data": {0: "batch"}}`` or ``dynamic_shapes={"data": {0: la.Dim("batch")}}``
      (torch.export's form) makes dimensions symbolic. The file then computes with the sizes it
      is given (the graph's size computations become ONNX shape ops), and an axis the graph holds
      fixed (a size baked when tracing, a model loaded with ``input_shapes``) raises ``ShapeError``
      naming the node and its source line; no file is written then.
    * ``opset``: 18 (default) or later (see the module docstring).

    An op without an ONNX mapping raises ``GraphError`` naming it and listing the ops that
    export; so do training graphs (gradients, dropout masks). Returns ``path``.

    >>> import lazyarray as la, tempfile, os, numpy as np, onnxruntime as ort
    >>> net = la.blocks.Dense(2, in_units=3); net.initialize()
    >>> path = la.onnx.export(net, os.path.join(tempfile.mkdtemp(), "dense.onnx"), input_shapes=(1, 3))
    >>> x = np.ones((4, 3), np.float32)   # batch 4: the batch axis is dynamic
    >>> y, = ort.InferenceSession(path).run(None, {"data": x})
    >>> np.allclose(y, net(la.array(x)).asnumpy(), atol=1e-6)
    True
    """
    sym, values, shapes, dynamic, baked = _resolve(obj, input_shapes, params)
    if dynamic_axes is not None and dynamic_shapes is not None:
        raise ParamError("la.onnx.export: give dynamic_axes or dynamic_shapes, not both")
    if dynamic_shapes is not None:
        dynamic_axes = _from_dynamic_shapes(dynamic_shapes)
    if dynamic_axes is not None:
        dynamic = dynamic_axes
        sym = _named_as_declared(sym, dynamic_axes)
    model = to_model(sym, values, input_shapes=shapes, dynamic_axes=dynamic, opset=opset, baked=baked)
    write_model(model, path)
    return path


def write_model(model, path: str, external_threshold: int | None = None) -> None:
    """Write ``model`` to ``path`` atomically; with more than ``external_threshold`` bytes of
    initializers (default ``EXTERNAL_DATA_THRESHOLD``) its tensors go to ``<name>.data`` beside it.

    The two files are atomic as a set: both are staged in a temporary folder beside ``path``, the data
    file is renamed into place first and the model second, and both carry the same random generation
    id (the model's metadata ``lazyarray.external_data``, the data file's trailer: ``external_data.py``).
    A kill before the first rename leaves the old model; between the two, a new data file beside the old
    model, which ``la.onnx.load`` refuses by name; after, the new model. The next write removes the
    staging folders of killed writers."""
    onnx = _onnx()
    threshold = EXTERNAL_DATA_THRESHOLD if external_threshold is None else external_threshold
    size = sum(len(t.raw_data) for t in model.graph.initializer)
    if size <= threshold:
        onnx.checker.check_model(model)
        write_atomic(path, model.SerializeToString())
        return
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    location = base + ".data"
    remove_stale_temporaries(path)
    generation = os.urandom(16).hex()  # (not secrets: it imports hashlib, which loads OpenSSL)
    _record_generation(model, location, generation)
    tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-{os.getpid()}-", dir=directory)
    try:
        onnx.save_model(model, os.path.join(tmp, base), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=0)
        with open(os.path.join(tmp, location), "ab") as f:  # after every tensor: readers never see it
            f.write(external_data.trailer(generation))
        onnx.checker.check_model(os.path.join(tmp, base))
        for name in (location, base):
            _sync_file(os.path.join(tmp, name))
        # the data first: a reader that sees the new model file finds its data beside it; one that
        # sees the new data beside the old model is refused (the generations differ)
        os.replace(os.path.join(tmp, location), os.path.join(directory, location))
        os.replace(os.path.join(tmp, base), path)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)


def _record_generation(model, location: str, generation: str) -> None:
    """Record in ``model``'s metadata which data file generation it was written with."""
    kept = [p for p in model.metadata_props if p.key != external_data.GENERATION_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    entry = model.metadata_props.add()
    entry.key, entry.value = external_data.GENERATION_KEY, f"{location} {generation}"


def _sync_file(path: str) -> None:
    """Flush a staged file to disk before it is renamed into place (a crash keeps whole files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
