"""``SymbolBlock``: a block made from an exported graph (``prefix-symbol.json`` + parameters).

Its ``forward`` calls a ``CachedOp`` of the graph, so it runs compiled (with autograd),
and is inlined when called inside another block's trace (the cached op records the
graph's nodes under deferred compute). ``export`` writes its graph back unchanged, so an
exported, imported and re-exported model gives identical files.
"""
from __future__ import annotations

from typing import Any

from ..args import dict_arg, seq_arg, type_arg
from ..device import Device
from ..errors import GraphFormatError, LazyArrayError, ParamError, ShapeError
from ..executor.cached_op import CachedOp
from ..graph import serialize
from ..graph.passes.bind_dims import bind_dims
from ..graph.symbol import Symbol, load_symbol
from ..mxnet import load_arrays as load_mxnet_arrays
from ..mxnet import sniff as is_mxnet_file
from ..ndarray import NDArray, make_array
from ..onnx.load import load_arrays as load_onnx_arrays
from ..onnx.load import sniff as is_onnx_file
from .block import HybridBlock
from .hybrid import Compiled
from .output_structure import flatten
from .param_file import check_device, check_param_file, load_arrays, write_export
from .parameter import Parameter


class SymbolBlock(HybridBlock):
    """A block that computes ``outputs`` of a symbol from named ``inputs``; every other graph
    input is a parameter (``params``: name -> Parameter)."""

    def __init__(self, outputs: Symbol, inputs: list[str], params: dict[str, Parameter] | None = None):
        type_arg(outputs, "SymbolBlock", "outputs", Symbol, "a Symbol (la.sym.* or la.get_symbol)")
        inputs = [inputs] if isinstance(inputs, str) else seq_arg(
            inputs, "SymbolBlock", "inputs", "a list of the graph's input names, e.g. ['data']")
        if not all(isinstance(n, str) for n in inputs):
            raise ParamError(f"SymbolBlock: inputs must be names (str), got {inputs!r}"[:200]
                             + f"; the graph's inputs are {outputs.list_inputs()}")
        params = dict_arg(params, "SymbolBlock", "params", "a dict of name -> Parameter, or None")
        super().__init__()
        names = outputs.list_inputs()
        unknown = [n for n in inputs if n not in names]
        if unknown:
            raise LazyArrayError(f"SymbolBlock: {unknown} are not inputs of the graph; its inputs are {names}")
        object.__setattr__(self, "_symbol", outputs)
        object.__setattr__(self, "_input_names", list(inputs))
        object.__setattr__(self, "_op", CachedOp(outputs, parameters=[n for n in names if n not in inputs]))
        avals = {n.name: n.avals[0] for n in outputs.input_nodes()}
        for name in names:
            if name in inputs:
                continue
            p = params.get(name)
            if p is not None and not isinstance(p, Parameter):
                raise ParamError(f"SymbolBlock: params[{name!r}] must be a Parameter, got {type(p).__name__}; "
                                 f"wrap values with la.blocks.Parameter({name!r}, shape=...) or leave it out")
            if p is None:
                a = avals[name]
                if any(d is not None and not isinstance(d, int) for d in a.shape or ()):
                    raise GraphFormatError(
                        f"SymbolBlock: {name!r} is not one of the inputs {list(inputs)} and has the symbolic "
                        f"shape {a.shape}; a parameter needs a concrete shape (name it in input_names if it is "
                        "data)")
                p = Parameter(name, shape=tuple(d or 0 for d in a.shape or ()), dtype=a.dtype or "float32")
            self._params[name] = p  # graph names may contain dots: register directly, not as attributes

    @staticmethod
    def imports(symbol_file: str, input_names, param_file: str | None = None,
                device: Device | None = None, device_map=None, input_shapes: dict | None = None) -> SymbolBlock:
        """Load an exported model; parameter names, shapes and dtypes are checked against the graph.

        ``device`` places the parameters; ``device_map`` moves the graph itself while loading (a
        device, or a dict such as ``{"gpu(0)": "cpu(0)"}``): a model exported on a GPU loads on a
        machine without one. A malformed file raises ``GraphFormatError`` (naming the node, field
        or byte offset), an unusable device ``DeviceError`` with the fix, and parameters that do
        not fit the graph ``ShapeError``.

        MXNet 1.x files (``prefix-symbol.json`` + ``prefix-0000.params`` of ``HybridBlock.export``)
        are recognised by their content and converted (``la.mxnet``); ``input_shapes`` (name ->
        shape) is needed only by models whose ``Reshape`` codes or pooling depend on shapes.
        ONNX models (a ``.onnx`` name or ONNX content; the ``onnx`` extra) are converted by
        ``la.onnx``: their initializers become the block's parameters (``param_file`` stays None).

        >>> import lazyarray as la, tempfile, os
        >>> net = la.blocks.Dense(2, in_units=3); net.initialize(); net.hybridize()
        >>> _ = net(la.ones((1, 3)))
        >>> d = tempfile.mkdtemp(); sym_file, param_file = net.export(os.path.join(d, "m"))
        >>> back = la.blocks.SymbolBlock.imports(sym_file, ["data"], param_file)
        >>> bool((back(la.ones((1, 3))).asnumpy() == net(la.ones((1, 3))).asnumpy()).all())
        True
        """
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        if not all(isinstance(n, str) for n in names):
            raise LazyArrayError(f"SymbolBlock.imports: input_names must be strings, got {names!r}")
        if is_onnx_file(symbol_file):
            return _imports_onnx(symbol_file, names, param_file, device, input_shapes)
        if is_mxnet_file(symbol_file):
            return _imports_mxnet(symbol_file, names, param_file, device, input_shapes)
        sym = load_graph(symbol_file, device_map)
        block = SymbolBlock(sym, names)
        if param_file is not None:
            check_device(device, param_file)
            arrays, meta = load_arrays(param_file)
            check_params(sym, names, arrays, meta, symbol_file, param_file)
            block._load(arrays, meta, device)
        return block

    def _load(self, arrays: dict, meta: dict, device: Device | None) -> None:
        """Set the parameters from ``arrays`` (already checked by ``check_params``)."""
        frozen = set(meta.get("grad_null") or [])
        for name, p in self._params.items():
            if name in frozen:
                p.grad_req = "null"
            p.device = device
            p.set_data(arrays[name])

    @property
    def symbol(self) -> Symbol:
        return self._symbol

    def forward(self, *args: NDArray) -> Any:
        if len(args) != len(self._input_names):
            raise LazyArrayError(f"SymbolBlock takes {len(self._input_names)} inputs "
                                 f"({', '.join(self._input_names)}), got {len(args)}")
        bound = dict(zip(self._input_names, args))
        arrays = [bound[n] if n in bound else self._params[n].data() for n in self._op.sym.list_inputs()]
        return self._op(*arrays)

    def _trace_new(self, args, training) -> Compiled:
        """No trace: ``forward`` calls the cached op of ``symbol``, so a trace would record that graph's
        nodes again (inferring every node's avals once more: a tenth of an imported model's first call).
        Hybridize compiles the graph as it is, one for every signature (the cached op binds each one's
        sizes and raises where they do not fit the graph). A subclass's own ``forward``, missing
        arguments, uninitialized parameters or parameters copied on several devices are traced."""
        params = self._params
        if type(self).forward is not SymbolBlock.forward or len(args) != len(self._input_names) \
                or any(a is None for a in args) or not all(p.initialized and not p._copies for p in params.values()):
            return super()._trace_new(args, training)
        sym = self._symbol
        at = {n: i for i, n in enumerate(self._input_names)}
        sources = [at[n] if n in at else params[n] for n in sym.list_inputs()]
        structure = None  # (one output: the array itself, as forward returns it; several: a list)
        if len(sym.outputs) > 1:
            structure = flatten([make_array(None, e, e.aval.device) for e in sym.outputs], type(self).__name__)[1]
        return Compiled(sym, len(sym.outputs), structure, sources, [], generic=True, training=training, whole=True)

    def export_graph(self, specialize: bool = False) -> tuple[Symbol, dict[str, Parameter]]:
        """The graph this block was made from and its parameters (see ``HybridBlock.export_graph``;
        ``specialize``: its symbolic sizes bound to the last call's, where it was called)."""
        sym = self._symbol
        if specialize and self._last_sig is not None:
            sym = bind_dims(sym, self.traced_avals(sym), f"{type(self).__name__}.export")
        return sym, dict(self._params)

    def export(self, prefix: str, epoch: int = 0) -> tuple[str, str]:
        """Write the graph this block was made from (unchanged) and its current parameters."""
        return write_export(prefix, epoch, self._symbol.to_json(indent=1), self._params)


def _imports_mxnet(symbol_file: str, names: list[str], param_file, device, input_shapes) -> SymbolBlock:
    """``SymbolBlock.imports`` of MXNet 1.x files: the converted graph and its parameters."""
    check_device(device, param_file or symbol_file)
    sym, arrays = load_mxnet_arrays(symbol_file, param_file, input_shapes)
    return _bound(sym, arrays, names, device, lambda missing: (
        f"{param_file!r} has no values for the graph inputs {missing} of {symbol_file!r}; "
        f"pass them as input_names if they are data inputs (given: {names})"))


def _imports_onnx(path: str, names: list[str], param_file, device, input_shapes) -> SymbolBlock:
    """``SymbolBlock.imports`` of an ONNX model: initializers are the parameters, by their ONNX names."""
    if param_file is not None:
        raise LazyArrayError(f"SymbolBlock.imports: {path!r} is an ONNX model, which holds its own "
                             f"parameters (initializers); pass param_file=None, not {param_file!r}")
    check_device(device, path)
    sym, arrays = load_onnx_arrays(path, input_shapes)
    return _bound(sym, arrays, names, device, lambda missing: (
        f"{path!r}: the graph inputs {missing} are neither initializers nor among input_names {names}; "
        "pass every data input's name"))


def _bound(sym, arrays: dict, names: list[str], device, message) -> SymbolBlock:
    """A block over a converted graph with ``arrays`` as its parameters; every other input must be named
    in ``names`` (``message(missing)`` says what is wrong otherwise)."""
    block = SymbolBlock(sym, names)
    missing = sorted(n for n in sym.list_inputs() if n not in names and n not in arrays)
    if missing:
        raise ShapeError(message(missing))
    block._load(arrays, {}, device)
    return block


# -- loading, shared by SymbolBlock.imports and `lazyarray inspect` ---------------------------------
def load_graph(symbol_file: str, device_map=None) -> Symbol:
    """The checked graph of a symbol file, optionally moved by ``device_map`` (see ``imports``)."""
    if device_map is None:
        return load_symbol(symbol_file)
    sym = Symbol(serialize.load(symbol_file, device_map=device_map))
    try:
        return sym.check()
    except LazyArrayError as exc:
        raise GraphFormatError(f"inconsistent graph: {exc}") from None


def check_params(sym: Symbol, input_names, arrays: dict, meta: dict, symbol_file: str, param_file: str) -> None:
    """Check the arrays and metadata of ``param_file`` (from ``load_arrays``) against the graph
    ``sym`` of ``symbol_file``: the one check ``SymbolBlock.imports`` and ``lazyarray inspect`` share.

    ``GraphFormatError`` when the file records a different graph (an interrupted export, or files
    mixed up); ``ShapeError`` naming every graph input (other than ``input_names``) missing from
    ``arrays``, every array that is not a graph input, and every array whose shape or dtype
    differs from the graph's (dims the graph leaves unknown match any size).
    """
    check_param_file(symbol_file, meta, param_file)  # the pair an export wrote together, never a mix
    avals = {n.name: n.avals[0] for n in sym.input_nodes()}
    want = [n for n in avals if n not in input_names]
    missing = sorted(n for n in want if n not in arrays)
    extra = sorted(n for n in arrays if n not in avals or n in input_names)
    bad = []
    for name in want:
        if name not in arrays:
            continue
        a, have = avals[name], arrays[name]
        shape = tuple(have.shape)
        if a.shape is not None and (len(shape) != len(a.shape) or any(
                w is not None and w != g for w, g in zip(a.shape, shape))):
            bad.append(f"{name!r}: file {shape}, graph {tuple(a.shape)}")
        elif a.dtype is not None and have.dtype != a.dtype:
            bad.append(f"{name!r}: file dtype {have.dtype}, graph {a.dtype}")
    problems = []
    if missing:
        problems.append(f"missing parameters {missing}")
    if extra:
        problems.append(f"parameters not in the graph {extra}")
    if bad:
        problems.append("mis-shaped parameters " + "; ".join(bad))
    if problems:
        raise ShapeError(f"{param_file!r} does not match the graph of {symbol_file!r}: " + "; ".join(problems))
