"""Our graphs -> MXNet 1.x files (``prefix-symbol.json`` + ``prefix-0000.params``) that MXNet 1.9.1
loads with ``gluon.SymbolBlock.imports`` and runs with outputs equal to ours.

Each registry op of the graph is written as the MXNet operator computing the same thing
(``_WRITERS``: ``dense`` -> ``FullyConnected(flatten=False)``, ``conv2d`` -> ``Convolution``,
``add`` with a number -> ``_plus_scalar``, ...). Graph inputs with a value (parameters, constants)
go to the ``.params`` file, BatchNorm's statistics as ``aux:`` states; the others are the model's
data inputs. Ops without an MXNet counterpart are listed in one ``GraphError``.

The pair is atomic as a set: the symbol file records the name and SHA-256 of the parameter file
written with it (graph attribute ``lazyarray_params``, a ``str`` attribute MXNet keeps and ignores)
and is committed first, then the parameter file. A kill between the two leaves the new symbol beside
the old parameters, which ``la.mxnet.load`` refuses by name (``symbol_file.check_params_file``).
"""
from __future__ import annotations

import importlib
import json
import math
import os

import numpy as np

from ..args import type_arg
from ..creation import zeros
from ..errors import GraphError
from ..fileio import write_atomic
from ..graph.node import Entry, Node
from ..graph.symbol import Symbol
from .params_file import params_bytes
from .symbol_file import PARAMS_RECORD

MXNET_VERSION = 10901  # the files follow MXNet 1.9.1's writer


def _s(v) -> str:
    """An attribute as MXNet's parameter printer writes it."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join("None" if x is None else str(int(x)) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("inf" if v > 0 else "-inf")
    return str(v)


class _Writer:
    def __init__(self, sym: Symbol, values: dict[str, np.ndarray]):
        self.sym = sym
        self.values = values  # name -> array of every input with a value
        self.nodes: list[dict] = []
        self.index: dict[int, int] = {}  # id(our node) -> MXNet node index
        self.aux: set[str] = set()
        self.arrays: dict[str, np.ndarray] = {}

    def add(self, op: str, name: str, inputs: list[int], attrs: dict | None = None) -> int:
        d = {"op": op, "name": name, "inputs": [[i, 0, 0] for i in inputs]}
        if attrs:
            d["attrs"] = {k: _s(v) for k, v in attrs.items()}
        self.nodes.append(d)
        return len(self.nodes) - 1

    def ref(self, e: Entry) -> int:
        return self.index[id(e.node)]

    def run(self) -> dict:
        unsupported: dict[str, str] = {}
        for node in self.sym.topo():
            if node.op is not None and node.op.name not in _WRITERS:
                unsupported.setdefault(node.op.name, self.sym.name_of(node))
        if unsupported:
            listed = ", ".join(f"{op} (node {n!r})" for op, n in sorted(unsupported.items()))
            raise GraphError(f"cannot write an MXNet 1.x symbol: no MXNet operator for {listed}; "
                             "docs/mxnet.md lists the ops that export")
        for node in self.sym.topo():
            name = self.sym.name_of(node)
            if node.op is None:
                if node.kind == "const" and node.avals[0].shape == ():
                    continue  # numbers are written into the scalar ops that read them
                if node.kind == "const":
                    value = node.value
                    self.arrays[name] = np.asarray(value.get() if hasattr(value, "get") else value)
                elif name in self.values:
                    self.arrays[name] = self.values[name]
                self.index[id(node)] = self.add("null", name, [])
                continue
            self.index[id(node)] = _WRITERS[node.op.name](self, node, name)
        outs = []
        for e in self.sym.outputs:
            if e.index != 0 or id(e.node) not in self.index:
                raise GraphError("cannot write an MXNet 1.x symbol: an output is a number or a second output")
            outs.append([self.index[id(e.node)], 0, 0])
        row, ptr = 0, [0]
        for d in self.nodes:
            row += 3 if d["op"] == "BatchNorm" else 1
            ptr.append(row)
        return {"nodes": self.nodes, "arg_nodes": [i for i, d in enumerate(self.nodes) if d["op"] == "null"],
                "node_row_ptr": ptr, "heads": outs, "attrs": {"mxnet_version": ["int", MXNET_VERSION]}}


# -- one writer per registry op -----------------------------------------------------------------------
def _scalar_of(e: Entry):
    n = e.node
    if n.op is None and n.kind == "const" and n.avals[0].shape == ():
        return float(np.asarray(n.value.get() if hasattr(n.value, "get") else n.value))
    return None


def _shape(e: Entry) -> tuple:
    return e.node.avals[e.index].shape


def _same(mx_op: str, **fixed):
    def write(w: _Writer, node: Node, name: str) -> int:
        return w.add(mx_op, name, [w.ref(e) for e in node.inputs], dict(fixed))
    return write


def _act(kind: str):
    return _same("Activation", act_type=kind)


_SCALAR_OPS = {"add": ("_plus_scalar", "_plus_scalar"), "subtract": ("_minus_scalar", "_rminus_scalar"),
               "multiply": ("_mul_scalar", "_mul_scalar"), "divide": ("_div_scalar", "_rdiv_scalar"),
               "power": ("_power_scalar", "_rpower_scalar"), "maximum": ("_maximum_scalar", "_maximum_scalar"),
               "minimum": ("_minimum_scalar", "_minimum_scalar")}
_BROADCAST = {"add": "broadcast_add", "subtract": "broadcast_sub", "multiply": "broadcast_mul",
              "divide": "broadcast_div", "power": "broadcast_power", "maximum": "broadcast_maximum",
              "minimum": "broadcast_minimum"}


def _binary(opname: str):
    def write(w: _Writer, node: Node, name: str) -> int:
        a, b = node.inputs
        sa, sb = _scalar_of(a), _scalar_of(b)
        if sb is not None and sa is None:
            return w.add(_SCALAR_OPS[opname][0], name, [w.ref(a)], {"scalar": sb})
        if sa is not None and sb is None:
            return w.add(_SCALAR_OPS[opname][1], name, [w.ref(b)], {"scalar": sa})
        if sa is not None:
            raise GraphError(f"cannot write node {name!r}: {opname} of two numbers (fold constants first)")
        return w.add(_BROADCAST[opname], name, [w.ref(a), w.ref(b)])
    return write


def _dense(w: _Writer, node: Node, name: str) -> int:
    units = _shape(node.inputs[1])[0]
    return w.add("FullyConnected", name, [w.ref(e) for e in node.inputs],
                 {"num_hidden": units, "no_bias": len(node.inputs) == 2, "flatten": False})


def _two(v) -> tuple:
    v = tuple(v)
    return v * (2 // len(v))


def _conv2d(w: _Writer, node: Node, name: str) -> int:
    ws = _shape(node.inputs[1])
    p = node.params
    groups = p.get("groups", 1)
    return w.add("Convolution", name, [w.ref(e) for e in node.inputs],
                 {"kernel": tuple(ws[2:]), "num_filter": ws[0], "stride": _two(p.get("stride", (1, 1))),
                  "pad": _two(p.get("padding", (0, 0))), "dilate": _two(p.get("dilation", (1, 1))),
                  "num_group": groups, "no_bias": len(node.inputs) == 2})


def _conv2d_transpose(w: _Writer, node: Node, name: str) -> int:
    ws = _shape(node.inputs[1])
    p = node.params
    groups = p.get("groups", 1)
    return w.add("Deconvolution", name, [w.ref(e) for e in node.inputs],
                 {"kernel": tuple(ws[2:]), "num_filter": ws[1] * groups, "stride": _two(p.get("stride", (1, 1))),
                  "pad": _two(p.get("padding", (0, 0))), "adj": _two(p.get("output_padding", (0, 0))),
                  "dilate": _two(p.get("dilation", (1, 1))), "num_group": groups,
                  "no_bias": len(node.inputs) == 2})


def _batch_norm(w: _Writer, node: Node, name: str) -> int:
    x, gamma, beta, mean, var = node.inputs
    fix_gamma = gamma.node.op is not None and gamma.node.op.name == "ones_like" and gamma.node.inputs[0].node.op is None
    if fix_gamma:
        gamma = gamma.node.inputs[0]
    for e in (mean, var):
        if e.node.op is not None:
            raise GraphError(f"cannot write node {name!r}: MXNet's BatchNorm reads its mean and variance "
                             "from variables (auxiliary states), here they are computed")
        w.aux.add(w.sym.name_of(e.node))
    return w.add("BatchNorm", name, [w.ref(e) for e in (x, gamma, beta, mean, var)],
                 {"eps": node.params.get("eps", 1e-5), "axis": node.params.get("axis", 1), "fix_gamma": fix_gamma,
                  "use_global_stats": True, "momentum": 0.9})


def _pool(kind: str):
    def write(w: _Writer, node: Node, name: str) -> int:
        p = node.params
        k = _two(p.get("kernel", (2, 2)))
        s = tuple(ki if si == 0 else si for ki, si in zip(k, _two(p.get("stride", (0, 0)))))
        attrs = {"pool_type": kind, "kernel": k, "stride": s, "pad": _two(p.get("padding", (0, 0))),
                 "pooling_convention": "full" if p.get("ceil_mode", False) else "valid"}
        if kind == "avg":
            attrs["count_include_pad"] = p.get("count_include_pad", True)
        return w.add("Pooling", name, [w.ref(node.inputs[0])], attrs)
    return write


def _getitem(w: _Writer, node: Node, name: str) -> int:
    key = node.params["key"]
    key = key if isinstance(key, tuple) else (key,)
    shape = _shape(node.inputs[0])
    if Ellipsis in key and shape is None:
        return _slice_axis(w, node, name, key)
    if key.count(Ellipsis) == 1:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - len(key) + 1) + key[at + 1:]
    begin, end, step, drop = [], [], [], False
    for k in key:
        if isinstance(k, slice):
            if k.step is not None and k.step < 1:
                raise GraphError(f"cannot write node {name!r}: MXNet slices need a positive step")
            begin.append(k.start)
            end.append(k.stop)
            step.append(k.step)
        elif isinstance(k, (int, np.integer)):
            begin.append(int(k))
            end.append(int(k) + 1 if k != -1 else None)
            step.append(None)
            drop = True
        else:
            raise GraphError(f"cannot write node {name!r}: only basic slicing exports to MXNet, key {key}")
    idx = w.add("slice", name if not drop else name + "_slice", [w.ref(node.inputs[0])],
                {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)})
    if not drop:
        return idx
    out = _shape(Entry(node, 0))
    if None in out:
        raise GraphError(f"cannot write node {name!r}: an integer index on a dim of unknown size")
    return w.add("Reshape", name, [idx], {"shape": out})


def _slice_axis(w: _Writer, node: Node, name: str, key: tuple) -> int:
    """``x[..., a:b, :, :]`` on an input of unknown rank: MXNet's ``slice_axis`` with a negative axis."""
    after = key[key.index(Ellipsis) + 1:]
    cut = [i for i, k in enumerate(after) if k != slice(None)]
    if Ellipsis in after or key.index(Ellipsis) != 0 or len(cut) != 1 or not isinstance(after[cut[0]], slice) \
            or after[cut[0]].step not in (None, 1):
        raise GraphError(f"cannot write node {name!r}: slicing {key} of an input of unknown rank")
    k = after[cut[0]]
    return w.add("slice_axis", name, [w.ref(node.inputs[0])],
                 {"axis": cut[0] - len(after), "begin": k.start or 0, "end": k.stop})


def _pad(w: _Writer, node: Node, name: str) -> int:
    pw = node.params["pad_width"]
    shape = _shape(node.inputs[0])
    nd = len(shape) if shape is not None else len(np.asarray(pw).reshape(-1, 2))
    pw = np.broadcast_to(np.asarray(pw, dtype=np.int64).reshape(-1, 2) if np.ndim(pw) else
                         np.full((1, 2), pw), (nd, 2))
    if node.params.get("mode", "constant") != "constant":
        raise GraphError(f"cannot write node {name!r}: only constant padding exports to MXNet")
    return w.add("pad", name, [w.ref(node.inputs[0])],
                 {"mode": "constant", "pad_width": tuple(int(v) for v in pw.ravel()),
                  "constant_value": float(node.params.get("constant_values", 0.0))})


def _reduce(mx_op: str):
    def write(w: _Writer, node: Node, name: str) -> int:
        attrs = {"keepdims": bool(node.params.get("keepdims", False))}
        axis = node.params.get("axis")
        if axis is not None:
            attrs["axis"] = tuple(axis) if isinstance(axis, (tuple, list)) else (int(axis),)
        return w.add(mx_op, name, [w.ref(node.inputs[0])], attrs)
    return write


def _expand_dims(w: _Writer, node: Node, name: str) -> int:
    """MXNet's expand_dims takes one axis: one node per axis, in increasing order."""
    axis = node.params["axis"]
    axes = sorted(axis) if isinstance(axis, (tuple, list)) else [axis]
    if any(a < 0 for a in axes) and len(axes) > 1:
        raise GraphError(f"cannot write node {name!r}: several negative expand_dims axes {axes}")
    idx = w.ref(node.inputs[0])
    for k, a in enumerate(axes):
        idx = w.add("expand_dims", name if k == len(axes) - 1 else f"{name}_{k}", [idx], {"axis": int(a)})
    return idx


def _matmul(w: _Writer, node: Node, name: str) -> int:
    a, b = node.inputs
    ra, rb = len(_shape(a)), len(_shape(b))
    if ra == rb == 2:
        return w.add("dot", name, [w.ref(a), w.ref(b)])
    if ra == rb == 3:
        return w.add("batch_dot", name, [w.ref(a), w.ref(b)])
    raise GraphError(f"cannot write node {name!r}: matmul of {ra}-D and {rb}-D arrays has no MXNet operator")


def _transpose(w: _Writer, node: Node, name: str) -> int:
    axes = node.params.get("axes")
    return w.add("transpose", name, [w.ref(node.inputs[0])], {"axes": tuple(axes)} if axes else {})


def _dropout(w: _Writer, node: Node, name: str) -> int:
    attrs = {"p": float(node.params.get("p", 0.5))}
    if node.params.get("training"):
        attrs["mode"] = "always"
    return w.add("Dropout", name, [w.ref(node.inputs[0])], attrs)


def _take(w: _Writer, node: Node, name: str) -> int:
    return w.add("take", name, [w.ref(e) for e in node.inputs], {"axis": int(node.params.get("axis", 0)),
                                                                  "mode": "clip"})


def _with(mx_op: str, **params):
    """An op whose MXNet attributes are some of our params, renamed (ours -> theirs)."""
    def write(w: _Writer, node: Node, name: str) -> int:
        attrs = {theirs: node.params[ours] for ours, theirs in params.items() if ours in node.params}
        if "dtype" in attrs:
            attrs["dtype"] = str(attrs["dtype"])
        if mx_op == "Concat":
            attrs["num_args"] = len(node.inputs)
        return w.add(mx_op, name, [w.ref(e) for e in node.inputs], attrs)
    return write


_WRITERS = {
    "dense": _dense, "conv2d": _conv2d, "batch_norm": _batch_norm, "max_pool2d": _pool("max"),
    "avg_pool2d": _pool("avg"), "conv2d_transpose": _conv2d_transpose,
    "relu": _act("relu"), "sigmoid": _act("sigmoid"), "tanh": _act("tanh"),
    **{op: _same(op) for op in ("exp", "log", "sqrt", "square", "abs", "negative", "sin", "cos", "sign",
                                "ones_like", "zeros_like", "reshape_like")},
    "copy": _same("_copy"), "stop_gradient": _same("BlockGrad"), "flatten": _same("Flatten"),
    **{op: _binary(op) for op in _SCALAR_OPS},
    "reshape": _with("Reshape", shape="shape"), "transpose": _transpose,
    "concatenate": _with("Concat", axis="dim"), "getitem": _getitem, "pad": _pad,
    "mean": _reduce("mean"), "sum": _reduce("sum"), "max": _reduce("max"), "min": _reduce("min"),
    "expand_dims": _expand_dims, "matmul": _matmul,
    "softmax": _with("softmax", axis="axis"), "log_softmax": _with("log_softmax", axis="axis"),
    "take": _take, "cast": _with("Cast", dtype="dtype"), "dropout": _dropout,
}
EXPORTABLE = tuple(sorted(_WRITERS))


def to_mxnet(sym: Symbol, values: dict[str, np.ndarray]) -> tuple[dict, dict[str, np.ndarray], set[str]]:
    """``(symbol JSON dict, params arrays, aux names)`` of ``sym``; ``values`` holds the arrays of
    the graph inputs that are parameters (all other inputs are data inputs)."""
    type_arg(sym, "la.mxnet.to_mxnet", "sym", Symbol, "a Symbol (la.sym.*, la.get_symbol or block.export_graph())")
    type_arg(values, "la.mxnet.to_mxnet", "values", dict, "a dict of parameter name -> array")
    w = _Writer(sym, values)
    doc = w.run()
    return doc, w.arrays, w.aux


def export(block_or_symbol, prefix: str, input_shapes=None, params: dict | None = None,
           epoch: int = 0) -> tuple[str, str]:
    """Write ``prefix-symbol.json`` and ``prefix-%04d.params`` in MXNet 1.x format, atomic as a set
    (the symbol file records the parameter file's digest: see the module docstring).

    ``block_or_symbol``: a hybridizable block (called once, or give ``input_shapes``: a shape or a
    list of shapes to trace it with), a ``SymbolBlock``, or a ``Symbol`` with ``params`` (name ->
    array) for its parameter inputs. Returns the two paths.

    >>> import lazyarray as la, tempfile, os
    >>> net = la.blocks.Dense(2, in_units=3); net.initialize()
    >>> d = tempfile.mkdtemp()
    >>> files = la.mxnet.export(net, os.path.join(d, "m"), input_shapes=(1, 3))
    >>> sym, params = la.mxnet.load(*files)
    >>> sorted(params)
    ['bias', 'weight']
    """
    if isinstance(block_or_symbol, Symbol):
        sym = block_or_symbol
        values = {k: _numpy(v) for k, v in (params or {}).items()}
    elif hasattr(block_or_symbol, "export_graph"):
        block = block_or_symbol
        if input_shapes is not None:
            shapes = [input_shapes] if all(isinstance(d, int) for d in input_shapes) else list(input_shapes)
            block.hybridize()
            block(*[zeros(tuple(s)) for s in shapes])
        sym, ps = block.export_graph(specialize=True)  # (MXNet 1.x files: the shapes of the last call)
        values = {k: _numpy(p.data()) for k, p in ps.items()}
    else:
        raise GraphError(f"la.mxnet.export: expected a block or a Symbol, got {type(block_or_symbol).__name__}")
    doc, arrays, aux = to_mxnet(sym, values)
    sym_path, param_path = f"{prefix}-symbol.json", f"{prefix}-{epoch:04d}.params"
    data = params_bytes(arrays, aux)
    doc["attrs"][PARAMS_RECORD] = ["str", f"{os.path.basename(param_path)} {importlib.import_module('hashlib').sha256(data).hexdigest()}"]
    # the symbol first: a kill before the second rename leaves a symbol whose record the old
    # parameters do not match (refused by name), never old weights silently under a new graph
    write_atomic(sym_path, json.dumps(doc, indent=2).encode())
    write_atomic(param_path, data)
    return sym_path, param_path


def _numpy(v) -> np.ndarray:
    if hasattr(v, "asnumpy"):
        return v.asnumpy()
    return np.asarray(v)
