"""ONNX model files -> our ``Symbol`` (``la.onnx.load``) and ``SymbolBlock.imports`` of ``.onnx`` files.

The file is parsed by the ``onnx`` package (protobuf only: loading never runs code) and checked
with ``onnx.checker``; anything unreadable, truncated or inconsistent raises ``GraphFormatError``
naming the file and the problem, never a bare protobuf error. The converters implement the default
operator set at version 13 and later; an older model (opset 7-12) is brought to 13 first by
``opset_upgrade.py`` (``onnx.version_converter``), or read as is when its operators did not change.

Nodes are converted one by one in the file's (topological) order by ``CONVERTERS``; every
operator the table lacks is named in one error before anything is built. Initializers become
named constants (``load``) or named graph inputs with their values beside (``load_arrays``, what
``SymbolBlock.imports`` binds as parameters), except a scalar (0-d) initializer the file does not
list among its graph inputs: ONNX says such an initializer is a constant, torch's exporter writes every
Python number of the model's code that way (a GELU's 1/sqrt(2), an exponent 3, a mask's -inf), and as
a constant of the graph it is what the graph passes read (``x ** 3 -> x * x * x``, GELU recognised)
rather than a parameter they cannot. Graph inputs that are not initializers are the
symbol's inputs, shaped from the file or from ``input_shapes``. A dynamic dim of the file is a
symbolic dim (``la.Dim``) named by its ``dim_param`` (``batch``), or ``<input>_<axis>`` where the
file names none; shape computations on such dims (``Shape``, ``Gather``, ``Concat``, arithmetic)
are evaluated when loading as expressions of those symbols (``shape_values.py``), so the graph runs
at every size the file declares. ``input_shapes`` pins the inputs it names: their sizes are then
fixed, and a call at other sizes raises a ``ShapeError`` instead of running a graph built for them.
"""
from __future__ import annotations

import os
import re
import stat

import numpy as np

from .. import sym as S
from ..device import current_device
from ..dim import Dim, has_symbols, is_symbolic
from ..errors import GraphFormatError, LazyArrayError
from ..executor.interpret import interpret
from ..fileio import read_regular
from ..graph.build import shapes_memoized
from ..graph.node import RECORD_SOURCE, check_capture, user_source
from ..graph.rewrite import gc_paused
from ..graph.symbol import Symbol
from . import external_data, narrow
from .image import IMAGE_CONVERTERS
from .import_bitcast import BITCAST_CONVERTERS
from .import_causal_conv import CAUSAL_CONV_CONVERTERS
from .import_control import CONTROL_CONVERTERS, Body
from .import_crop import CROP_CONVERTERS
from .import_deform_conv import DEFORM_CONV_CONVERTERS
from .import_detection import DETECTION_CONVERTERS
from .import_flex_attention import FLEX_ATTENTION_CONVERTERS
from .import_grid import GRID_CONVERTERS
from .import_index import INDEX_CONVERTERS
from .import_linear_attention import LINEAR_ATTENTION_CONVERTERS
from .import_lrn import LRN_CONVERTERS
from .import_ml import ML_CONVERTERS
from .import_nn import NN_CONVERTERS
from .import_ops import CONVERTERS as _BASE
from .import_ops import NotKnownWhenLoading, OnnxNode, check_fold, constant, np_dtype
from .import_quant import QLINEAR_CONVERTERS, QUANT_CONVERTERS
from .import_rnn import RNN_CONVERTERS
from .import_roi_align import ROI_ALIGN_CONVERTERS
from .import_scatter import SCATTER_CONVERTERS
from .import_sequence import (
    SEQUENCE_CONVERTERS,
    STRUCTURED,
    TAKES_STRUCTURED,
    Opt,
    Seq,
    flat_values,
    item_name,
    layout_of,
    tensors_of,
)
from .import_shape import SHAPE_CONVERTERS
from .import_signal import SIGNAL_CONVERTERS
from .import_tfidf import TFIDF_CONVERTERS
from .import_transformer import TRANSFORMER_CONVERTERS
from .import_unpool import UNPOOL_CONVERTERS
from .known_values import DEFERRED, FOLD_OPS, VALUE_INPUTS, Folded, Known, Missing, Sizes, fold
from .narrow import has_narrow, narrow_format, round_output, storage_dtype, value_types, widen
from .opset_upgrade import DEFAULT_DOMAINS as _DEFAULT_DOMAINS
from .opset_upgrade import default_opset, upgrade
from .shape_values import OPS as SHAPE_VALUE_OPS
from .shape_values import evaluate as evaluate_shape_value
from .shape_values import is_symbolic_array, normalized, of_dims
from .tensor_values import PLAIN_TYPES, attribute_value, tensor_array

CONVERTERS = {**_BASE, **SHAPE_CONVERTERS, **NN_CONVERTERS, **INDEX_CONVERTERS, **QUANT_CONVERTERS, **CONTROL_CONVERTERS,
              **LRN_CONVERTERS}  # ONNX op_type -> converter: the one import table
CONVERTERS.update({**SCATTER_CONVERTERS, **SIGNAL_CONVERTERS, **RNN_CONVERTERS,
                   **QLINEAR_CONVERTERS, **TRANSFORMER_CONVERTERS, **CROP_CONVERTERS,
                   **UNPOOL_CONVERTERS, **GRID_CONVERTERS,
                   **DETECTION_CONVERTERS, **BITCAST_CONVERTERS,
                   **CAUSAL_CONV_CONVERTERS, **LINEAR_ATTENTION_CONVERTERS,
                   **FLEX_ATTENTION_CONVERTERS, **DEFORM_CONV_CONVERTERS,
                   **ROI_ALIGN_CONVERTERS, **ML_CONVERTERS, **TFIDF_CONVERTERS,
                   **SEQUENCE_CONVERTERS, **IMAGE_CONVERTERS})  # families added later, each claimed only when all its node cases pass
# op -> the inputs its converter reads only as known values (``known_values.VALUE_INPUTS``), while it converts it
_VALUE_INPUTS = {op: pos for op, (fn, pos) in VALUE_INPUTS.items() if CONVERTERS.get(op) is fn}


def _onnx():
    try:
        import onnx
    except ImportError:
        raise LazyArrayError("reading ONNX files needs the onnx package: pip install 'lazyarray[onnx]'") from None
    return onnx


def sniff(path) -> bool:
    """Whether ``path`` looks like an ONNX model: a ``.onnx`` name, or a protobuf whose first field
    is ``ir_version`` (byte ``0x08``), as every ONNX writer emits it."""
    if isinstance(path, (str, os.PathLike)) and str(path).lower().endswith(".onnx"):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # (a FIFO would block the open; the loader that gets it says what it is)
        with open(path, "rb") as f:
            return f.read(1) == b"\x08"
    except (OSError, TypeError, ValueError):
        return False


def read_model(path):
    """The checked ``onnx.ModelProto`` of a file (``GraphFormatError`` when it is not a usable model).

    Only a regular file is read (a device or a FIFO is refused before opening); tensors kept in
    external data files are read from the model's folder only (``external_data.py``)."""
    _onnx()  # the clear error without the onnx extra, before touching the file
    name = os.path.basename(str(path))
    data = read_regular(path, "ONNX file")
    return parse_model(data, f"ONNX file {name!r}", folder=os.path.dirname(os.path.abspath(path)))


def parse_model(data: bytes, what: str = "ONNX model", folder: str | None = None):
    """Parse and check serialized ModelProto bytes; every failure is a ``GraphFormatError``.

    ``folder``: the model file's folder, where its external data files are (``external_data.py``);
    without one, a model with external tensors is refused (never read from the current directory)."""
    onnx = _onnx()
    if not data:
        raise GraphFormatError(f"{what}: the file is empty")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # noqa: BLE001 (protobuf's DecodeError, RuntimeWarning-as-error, ...)
        raise GraphFormatError(f"{what}: not a readable ONNX model (truncated or not protobuf): "
                               f"{type(exc).__name__}: {exc}") from None
    if model.ir_version <= 0 or not model.opset_import or not model.graph.output:
        raise GraphFormatError(f"{what}: not an ONNX model (ir_version {model.ir_version}, "
                               f"{len(model.opset_import)} opset imports, {len(model.graph.output)} graph outputs); "
                               "the file may be truncated or of another format")
    # (one walk serves the check and the reading; none where no "location": the checker refuses those)
    found = external_data.external_tensors(model) if external_data.LOCATION_KEY in data else []
    check_model(model, what, found)  # (external tensors: checked as placeholders, before any file is read)
    external_data.resolve(model, folder, what, found)
    return model


def check_model(model, what: str = "ONNX model", external: list | None = None) -> None:
    """``onnx.checker`` on ``model``; its complaint becomes a ``GraphFormatError``. ``external``: the
    model's ``external_data.external_tensors`` when the caller has them."""
    onnx = _onnx()
    checked = model
    if external_data.external_tensors(model) if external is None else external:
        # the checker would look for external files relative to the current directory: check a copy
        # without them (read_model reads them from the model's folder, with its own checks)
        checked = external_data.placeholder_copy(model)
    if any(vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape") for vi in model.graph.output):
        # onnx.checker asks every graph output for a shape, which the spec and onnxruntime do not:
        # check a copy whose shapeless outputs get an empty one (the checker does not infer shapes)
        if checked is model:
            checked = onnx.ModelProto()
            checked.CopyFrom(model)
        for vi in checked.graph.output:
            if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
                vi.type.tensor_type.shape.SetInParent()
    try:
        onnx.checker.check_model(checked)
    except Exception as exc:  # noqa: BLE001 (ValidationError and the C++ checker's others)
        raise GraphFormatError(f"{what}: the ONNX checker rejects the model: {exc}") from None


_NONE: frozenset = frozenset()
_TENSOR_ATTR = 4  # onnx.AttributeProto.TENSOR


def load(path, input_shapes: dict | None = None) -> Symbol:
    """The ``Symbol`` of an ONNX model file; initializers become named constants.

    ``input_shapes`` (``{"data": (1, 3, 224, 224)}``, optional) fixes input shapes the file leaves
    symbolic; converters that need a shape (``Reshape`` with 0, ``Shape``, ``Expand``, ``Resize``)
    read it at load time. Malformed files raise ``GraphFormatError``; unsupported operators are
    all named in one error.

    >>> import lazyarray as la, numpy as np, tempfile, os
    >>> onnx = __import__("pytest").importorskip("onnx")
    >>> from onnx import helper, TensorProto
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> path = os.path.join(tempfile.mkdtemp(), "relu.onnx")
    >>> onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    >>> sym = la.onnx.load(path)
    >>> la.CachedOp(sym)(la.array(np.array([-1.0, 2.0], np.float32))).asnumpy()
    array([0., 2.], dtype=float32)
    """
    return to_symbol(read_model(path), f"ONNX file {os.path.basename(str(path))!r}", input_shapes, resolved=True)[0]


def load_arrays(path, input_shapes: dict | None = None) -> tuple[Symbol, dict[str, np.ndarray]]:
    """``(Symbol, name -> NumPy array)``: initializers are named graph inputs with their values beside
    (only those the graph reads as tensors), as ``SymbolBlock.imports`` binds them."""
    return to_symbol(read_model(path), f"ONNX file {os.path.basename(str(path))!r}", input_shapes, params=True,
                     resolved=True)


def to_symbol(model, what: str = "ONNX model", input_shapes: dict | None = None, params: bool = False,
              resolved: bool = False) -> tuple[Symbol, dict[str, np.ndarray]]:
    """Convert a checked ``ModelProto``; see ``load`` and ``load_arrays``. ``resolved``: ``read_model``
    made it just now (its external tensors are read in: not looked for again). The cyclic GC is paused
    meanwhile, as for a compile (``gc_paused``: a conversion makes thousands of nodes, entries and
    expressions and no cycle to collect; a full collection that fell in it, over a heap holding onnx,
    onnxruntime and numba, cost 10-60 ms of a 20-70 ms import on the development machine)."""
    with gc_paused():
        conv = Conversion(model, what, input_shapes, params, resolved=resolved)
    return conv.symbol, conv.arrays


def _fixed_scalar(arr: np.ndarray, name: str, graph_inputs: set) -> bool:
    """Whether the initializer ``name`` is a constant of the graph, not a parameter: a scalar (0-d)
    the file does not also list as a graph input (an input overridable at run time, ONNX's rule)."""
    return arr.ndim == 0 and name not in graph_inputs


def _plain_shapes(shapes: dict) -> bool:
    """Whether the ``input_shapes`` given hold no symbolic size (the conversion's symbols are then its
    own: one ``la.Dim`` of default bounds per ``dim_param``, so its shape questions may be memoized)."""
    for shape in shapes.values():
        if not isinstance(shape, (tuple, list)):
            return False
        for d in shape:
            if is_symbolic(d):
                return False
    return True


class Conversion:
    """One conversion of a ``ModelProto``: ``symbol``, ``arrays`` (the initializers bound as graph
    inputs when ``params``) and ``read_inputs``.

    ``input_values`` (name -> NumPy array) lets converters read graph inputs that must be known at
    load time (a ``Reshape`` shape fed as an input, as ONNX's node tests do): the graph is then
    specialized to those values, and ``read_inputs`` names the inputs that were read, so a caller
    (the ``onnx.backend``) converts again when they change.
    """

    def __init__(self, model, what: str, input_shapes: dict | None, params: bool = False,
                 input_values: dict | None = None, resolved: bool = False):
        self.onnx = _onnx()
        if not resolved:  # (``read_model``'s models have none left)
            external_data.refuse_external(model, what)  # (onnx would read them relative to the current directory)
        model = upgrade(model, what, lambda m: check_model(m, what))  # opset 7-12 -> 13 (opset_upgrade.py)
        self.model, self.what, self.params = model, what, params
        self.graph = model.graph
        self.opset = default_opset(model, what)
        self.input_shapes = dict(input_shapes or {})
        # graph input name -> its value (a tensor; a list for a sequence, None for an empty optional)
        self.given = dict(input_values or {})
        self.input_values = {k: v for name, value in self.given.items() for k, v in flat_values(name, value).items()}
        self.read_inputs: set[str] = set()
        self.device = current_device()
        # value -> ONNX element type, for narrow formats (narrow.py); ``unchecked``: none assumed, ``_attrs`` checks
        declared = narrow.declares_narrow(self.graph)
        self.types: dict[str, int] = value_types(model) if declared else {}
        self.unchecked = not declared
        # every node converted is the caller's line (no converter is user code): found once
        token = RECORD_SOURCE.set(RECORD_SOURCE.get() or user_source())
        try:
            # (each node's avals inferred once per distinct question: see build.SHAPE_MEMO)
            with shapes_memoized(_plain_shapes(self.input_shapes)):
                self.symbol, self.arrays = self._run_once()
        finally:
            RECORD_SOURCE.reset(token)
        self.reads = {}  # (what it held is needed no more: the nodes live on in the symbol)

    def _run_once(self) -> tuple[Symbol, dict[str, np.ndarray]]:
        """``_run``; again with the value types when it finds a narrow format after all (or fails on
        a model that has one: the conversion that knew it from the start would have been this one)."""
        try:
            return self._run()
        except Exception as exc:  # noqa: BLE001 (re-raised unless narrow formats explain it)
            if not self.unchecked or not (isinstance(exc, narrow.NarrowFound) or has_narrow(self.model)):
                raise
        self.types, self.unchecked = value_types(self.model), False
        self.read_inputs = set()
        return self._run()

    def _reset(self) -> None:
        """The state of a conversion about to start (``_run``)."""
        self.env: dict[str, Symbol] = {}
        self.consts: dict[str, np.ndarray] = {}  # values known at load time
        # values known at load time as expressions of the symbolic dims (object arrays: shape_values.py)
        self.sizes: dict[str, np.ndarray] = {}
        self.inits: dict[str, np.ndarray] = {}
        self.used_params: dict[str, np.ndarray] = {}
        self.layout: list = []  # per graph output, how its tensors regroup (import_sequence.layout_of)
        self.scope: _Scope | None = None  # inside a control-flow body: how to read the enclosing graph
        # id(node) -> (node, the graph inputs it reads that are not initializers, whether it or a node
        # before it has a symbolic size parameter): each node walked once (``_reads``)
        self.reads: dict[int, tuple] = {}

    def _run(self) -> tuple[Symbol, dict[str, np.ndarray]]:
        self._reset()
        ops = self._check_ops(self.graph, self.what)
        for t in self.graph.initializer:
            self.inits[t.name] = self.consts[t.name] = self._initializer(t, self.what)
        self.graph_inputs = {vi.name for vi in self.graph.input}
        for vi in self.graph.input:
            if vi.name not in self.inits:
                self.env[vi.name] = self._input(vi)
        for k, (nd, op) in enumerate(zip(self.graph.node, ops)):
            self._convert(k, nd, None, op)
        outs = []
        for vi in self.graph.output:
            value = self._value(vi.name, f"{self.what}: graph output {vi.name!r}")
            self.layout.append(layout_of(value))
            outs += [t.outputs[0] for t in tensors_of(value)]
        if not outs:
            raise GraphFormatError(f"{self.what}: the graph computes no tensor (its outputs are empty sequences or "
                                   "optionals)")
        sym = Symbol(outs)
        # Every node was recorded through its op's rules (record_node infers its avals from its inputs'),
        # in order, so Symbol.check()'s invariants hold by construction; inferring the whole graph again
        # cost 20-35% of an import (BERT: about 100 ms). The one a file can break: two inputs of one name.
        inputs = sym.list_inputs()
        if len(set(inputs)) != len(inputs):
            twice = sorted({n for n in inputs if inputs.count(n) > 1})
            raise GraphFormatError(f"{self.what}: inconsistent graph: two graph inputs are named {twice[0]!r}")
        used = set(inputs)
        return sym, {k: v for k, v in self.used_params.items() if k in used}

    def _check_ops(self, graph, what: str) -> list[str]:
        """The op_type of each node of ``graph`` (read once), after checking that every one converts."""
        unknown: dict[str, list[str]] = {}
        ops = [nd.op_type for nd in graph.node]
        for k, (nd, op_type) in enumerate(zip(graph.node, ops)):
            op = op_type if nd.domain in _DEFAULT_DOMAINS else f"{nd.domain}.{op_type}"
            if op not in CONVERTERS:
                unknown.setdefault(op, []).append(nd.name or f"#{k}")
        if unknown:
            listed = "; ".join(f"{op} (node{'s' if len(v) > 1 else ''} {', '.join(repr(x) for x in v[:3])}"
                               f"{', ...' if len(v) > 3 else ''})" for op, v in sorted(unknown.items()))
            raise GraphFormatError(f"{what}: {len(unknown)} ONNX operator(s) not supported: {listed}. "
                                   "The supported operators are the keys of lazyarray.onnx.load.CONVERTERS "
                                   "(python benchmarks/onnx_conformance.py shows how well each passes ONNX's tests)")
        return ops

    def _input(self, vi):
        where = f"{self.what}: graph input {vi.name!r}"
        if vi.type.HasField("sequence_type") or vi.type.HasField("optional_type"):
            return self._structured_input(vi, where)
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None:
            raise GraphFormatError(f"{where}: only tensor, sequence and optional inputs are supported (not maps)")
        dtype = storage_dtype(tt.elem_type)
        if dtype is None:
            dtype = np_dtype(tt.elem_type, where)
        shape = self.input_shapes.get(vi.name)
        pinned = shape is not None
        if shape is None and tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else self._symbol(vi.name, k, d.dim_param)
                          for k, d in enumerate(tt.shape.dim))
        return S.var(vi.name, shape=None if shape is None else tuple(shape), dtype=dtype, pinned=pinned)

    def _symbol(self, name: str, axis: int, param: str) -> Dim:
        """The symbolic dim of a graph input's dynamic axis: one per ``dim_param`` name (inputs that
        share it share the size), else one per input and axis."""
        text = re.sub(r"\W", "_", param or f"{name}_{axis}")
        if not text.isidentifier():
            text = "d_" + text
        return Dim(text)

    def _structured_input(self, vi, where: str):
        """A sequence or optional graph input: its structure from the given value (or ``input_shapes``:
        a list of shapes for a sequence), one graph input per tensor (``import_sequence``)."""
        name, t = vi.name, vi.type
        inner = t.optional_type.elem_type if t.HasField("optional_type") else t
        if name in self.given:
            value = self.given[name]
        elif isinstance(self.input_shapes.get(name), list) and inner.HasField("sequence_type"):
            item = inner.sequence_type.elem_type
            if not item.HasField("tensor_type"):
                raise GraphFormatError(f"{where}: only sequences of tensors are supported")
            dtype = np_dtype(item.tensor_type.elem_type, where)
            value = [np.empty(shape, dtype) for shape in self.input_shapes[name]]
        else:
            raise GraphFormatError(f"{where}: a sequence or optional input needs its structure when loading: give "
                                   "input_shapes={name: [shape, ...]} (one shape per tensor of the sequence)")
        if t.HasField("optional_type") and value is None:
            return Opt(None)
        if inner.HasField("sequence_type") != isinstance(value, (list, tuple)):
            raise GraphFormatError(f"{where}: the model types it {'a sequence' if inner.HasField('sequence_type') else 'a tensor'}"
                                   f", the value given is {'a list' if isinstance(value, (list, tuple)) else 'not a list'}")
        if isinstance(value, (list, tuple)):
            got = Seq(tuple(S.var(item_name(name, k), shape=np.shape(v), dtype=np.asarray(v).dtype)
                            for k, v in enumerate(value)))
        else:
            got = S.var(name, shape=np.shape(value), dtype=np.asarray(value).dtype)
        return Opt(got) if t.HasField("optional_type") else got

    def _value(self, name: str, where: str) -> Symbol:
        s = self._raw(name, where)
        return s.symbol() if s.__class__ in DEFERRED else s

    def _raw(self, name: str, where: str):
        """``_value``, but a value known at load time as it is (``Sizes``, ``_Known``: no graph node made yet)."""
        s = self.env.get(name)
        if isinstance(s, Missing):
            s.fail()
        if s is not None:
            return s
        if self.scope is not None:  # a body reading the enclosing graph's value by name
            outer = self.scope.outer_value(self, name, where)
            if isinstance(outer, STRUCTURED):
                raise GraphFormatError(f"{where}: reads the sequence or optional value {name!r} of the enclosing graph; "
                                       "lazyarray carries those only where their structure is known when loading, "
                                       "not into Loop/Scan/If bodies")
            if not outer.input_nodes():  # constants only: the body holds them itself
                s = outer
            else:  # an operand of the control-flow node, an input of the body
                a = outer.outputs[0].aval
                s = S.var(name, shape=a.shape, dtype=a.dtype)
                self.scope.captured[name] = outer
            self.env[name] = s
            return s
        if name in self.inits:
            arr = self.inits[name]
            if self.params and not _fixed_scalar(arr, name, self.graph_inputs):
                s = S.var(name, shape=arr.shape, dtype=arr.dtype)
                self.used_params[name] = arr
            else:
                s = constant(arr, name)
            self.env[name] = s
            return s
        raise GraphFormatError(f"{where}: reads {name!r}, which no graph input, initializer or earlier node "
                               "produces (ONNX lists nodes in topological order)")

    def _const_of(self, nd, i: int, what: str) -> np.ndarray:
        name = nd.input[i]
        if name in self.consts:
            return self.consts[name]
        if name in self.sizes:
            return self.sizes[name]
        s = self._value(name, f"{self.what}: node {nd.name!r} ({nd.op_type})")
        arr = self._evaluate(s, f"{self.what}: node {nd.name!r} ({nd.op_type}): input {i} ({what}, {name!r})")
        self.consts[name] = arr
        return arr

    def _evaluate(self, s: Symbol, what: str) -> np.ndarray:
        """The value of ``s`` when it is known at load time (computed from initializers, constants and the
        graph inputs given values), else a ``GraphFormatError`` starting with ``what``."""
        if not isinstance(s, Symbol):
            raise GraphFormatError(f"{what} must be a tensor, not a sequence or optional value")
        node = s.outputs[0].node
        if node.kind == "const" and len(s.outputs) == 1:  # (a Constant's value: read as it is, nothing to run)
            check_capture(node)
            v = node.value
            return np.asarray(v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else v)
        reads, symbolic = self._reads(s)
        free = sorted(name for name in reads if name not in self.input_values)
        if not free and symbolic:
            raise NotKnownWhenLoading(f"{what} must be known when the model is loaded, but it depends on the "
                                      "dynamic sizes of the inputs; lazyarray needs it as a fixed value")
        if free:
            raise NotKnownWhenLoading(
                f"{what} must be known when the "
                f"model is loaded (an initializer, a Constant or computed from them), but it depends on the graph "
                f"input(s) {free}; lazyarray needs it as a fixed value")
        given = set(reads)
        check_fold(s, what)  # (what it computes now is bounded: MAX_FOLD_BYTES)
        self.read_inputs |= given
        values = {**self.inits, **{k: self.input_values[k] for k in given}}
        vals = interpret(list(s.outputs), known=lambda node: [self.device.xp.asarray(values[node.name])]
                         if node.kind == "var" else None)
        v = vals[0]
        return np.asarray(v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else v)

    def _reads(self, s: Symbol) -> tuple[frozenset, bool]:
        """``(names, symbolic)``: the graph inputs other than initializers that ``s`` reads, and whether
        a node of it has a symbolic size parameter (its value depends on the call). Kept per node for
        the whole conversion, so asking of value after value walks each node once, not the graph
        above each (an import of a transformer asked it of some 100 values)."""
        memo = self.reads
        for node in _unvisited(s.outputs, memo):
            if node.op is None:
                names = frozenset((node.name,)) if node.kind == "var" and node.name not in self.inits else _NONE
                memo[id(node)] = (node, names, False)
                continue
            names, symbolic = _NONE, has_symbols(tuple(node.params.values()))
            for e in node.inputs:
                _, more, sym = memo[id(e.node)]
                names, symbolic = names | more if more else names, symbolic or sym
            memo[id(node)] = (node, names, symbolic)
        names, symbolic = _NONE, False
        for e in s.outputs:
            _, more, sym = memo[id(e.node)]
            names, symbolic = names | more, symbolic or sym
        return names, symbolic

    def _attrs(self, nd, where: str) -> dict:
        helper, nh = self.onnx.helper, self.onnx.numpy_helper
        out = {}
        for a in nd.attribute:
            if a.ref_attr_name:
                raise GraphFormatError(f"{where}: attribute {a.name!r} refers to a function attribute")
            v = attribute_value(a, helper)
            if self.unchecked and narrow.narrow_attribute(a, v):
                raise narrow.NarrowFound(where)
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif isinstance(v, self.onnx.TensorProto):
                if storage_dtype(v.data_type) is None:
                    np_dtype(v.data_type, f"{where}: attribute {a.name!r}")
                v = widen(np.array(tensor_array(v, nh)))
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [x.decode("utf-8", "replace") for x in v]
            out[a.name] = v
        return out

    def _subgraph(self, graph, where: str, in_avals: list) -> Body:
        """Convert the body ``graph`` of a control-flow node: its inputs are vars of ``in_avals``
        (``(shape, dtype)``, ``None`` for what the file says); values of enclosing graphs it reads by
        name become extra inputs (``Body.captured``, outer name -> outer Symbol), constants are copied in."""
        where = f"{where} body {graph.name!r}"
        ops = self._check_ops(graph, where)
        if len(in_avals) != len(graph.input):
            raise GraphFormatError(f"{where}: takes {len(graph.input)} inputs, the node gives it {len(in_avals)}")
        env: dict = {}
        for vi, (shape, dtype) in zip(graph.input, in_avals):
            if dtype is None or shape is None:
                file_var = self._input(vi)
                a = file_var.outputs[0].aval
                shape, dtype = a.shape if shape is None else shape, a.dtype if dtype is None else dtype
            env[vi.name] = S.var(vi.name, shape=shape, dtype=dtype)
        self._body_initializers(graph, env)
        scope = _Scope(self.env, self.scope)
        saved = self.env, self.scope
        self.env, self.scope = env, scope
        try:
            for k, (nd, op) in enumerate(zip(graph.node, ops)):
                self._convert(k, nd, where, op)
            outs = [self._value(vi.name, f"{where}: output {vi.name!r}") for vi in graph.output]
        finally:
            self.env, self.scope = saved
        return Body([vi.name for vi in graph.input], [env[vi.name] for vi in graph.input], outs, scope.captured)

    def _body_initializers(self, graph, env: dict) -> None:
        """A body graph's initializers: known values, and constants in its ``env``."""
        for t in graph.initializer:
            arr = self._initializer(t, f"{self.what}: body {graph.name!r}")
            self.consts[t.name] = arr
            env[t.name] = constant(arr, t.name)

    def _initializer(self, t, where: str) -> np.ndarray:
        """The value of an initializer of the main graph or of a body (``where`` names the graph)."""
        if not t.name:
            raise GraphFormatError(f"{where}: an initializer has no name")
        if storage_dtype(t.data_type) is None:
            np_dtype(t.data_type, f"{where}: initializer {t.name!r}")
        try:
            return widen(np.array(tensor_array(t, self.onnx.numpy_helper)))
        except Exception as exc:  # noqa: BLE001 (size mismatch between dims and data)
            raise GraphFormatError(f"{where}: initializer {t.name!r} is malformed: {exc}") from None

    def _inline(self, graph, where: str, args=()) -> list:
        """The outputs of a body ``graph`` given the values ``args`` for its inputs (an ``If`` branch
        chosen at load time, a ``SequenceMap`` body at one position), converted into the enclosing
        graph: its nodes read the enclosing values by name, and its own names stay local to it."""
        where = f"{where} body {graph.name!r}"
        ops = self._check_ops(graph, where)
        if len(graph.input) != len(args):
            raise GraphFormatError(f"{where}: takes {len(graph.input)} inputs, the node gives it {len(args)}")
        saved = self.env, self.consts
        # its names are its own: a body converted again (per SequenceMap position, per unrolled Loop
        # iteration) must not read values cached from the last time
        self.env, self.consts = dict(saved[0]), dict(saved[1])
        self.env.update({vi.name: a for vi, a in zip(graph.input, args)})
        try:
            self._body_initializers(graph, self.env)
            for k, (nd, op) in enumerate(zip(graph.node, ops)):
                self._convert(k, nd, where, op)
            return [self._value(vi.name, f"{where}: output {vi.name!r}") for vi in graph.output]
        finally:
            self.env, self.consts = saved

    def _convert(self, k: int, nd, what: str | None = None, op_type: str | None = None) -> None:
        # (``op_type``: read already, or None; each protobuf field read once: a read builds a new Python
        # object each time, 1-10 us; a repeated field as a slice, one call, not list()'s read per item)
        op_type = nd.op_type if op_type is None else op_type
        in_names, default_domain = nd.input[:], nd.domain in _DEFAULT_DOMAINS
        if op_type == "Constant" and default_domain and not in_names and not self.types and self._constant(nd):
            return
        label = nd.name
        where = f"{what or self.what}: node {label or '#' + str(k)!r} ({op_type})"
        inputs = [None if not name else self._raw(name, where) for name in in_names]
        if op_type not in TAKES_STRUCTURED or not default_domain:
            for name, x in zip(in_names, inputs):
                if isinstance(x, STRUCTURED):
                    raise GraphFormatError(f"{where}: reads {name!r}, a sequence or optional value; only the "
                                           "Sequence*/Optional* operators, Identity, If and Loop take those")
        while inputs and inputs[-1] is None:  # trailing omitted optional inputs
            inputs.pop()
        if default_domain and (self._sizes_of(nd, inputs, op_type, in_names)
                               or op_type in FOLD_OPS and self._folded(k, nd, what, in_names, op_type)):
            return
        self._convert_node(nd, op_type, in_names, default_domain, inputs, where, label)

    def _convert_node(self, nd, op_type: str, in_names: list, default_domain: bool, inputs: list, where, label) -> None:
        """``nd`` (named ``label``) converted by its converter (``_convert``: once it knows no cheaper way)."""
        values = _VALUE_INPUTS.get(op_type) if default_domain else None  # (read as values: no node made)
        inputs = [x.symbol() if x.__class__ in DEFERRED and (values is None or i not in values) else x
                  for i, x in enumerate(inputs)]
        types = self.types
        out_names = nd.output[:]
        node = OnnxNode(op_type, label, inputs, self._attrs(nd, where), self.opset, where, len(out_names),
                        in_types=tuple(types.get(name, 0) for name in in_names) if types else (0,) * len(in_names),
                        const_of=lambda i, what: self._const_of(nd, i, what),
                        subgraph=lambda attr, in_avals: self._subgraph(self._graph_attr(nd, attr, where), where,
                                                                       in_avals),
                        inline=lambda attr, args=(): self._inline(self._graph_attr(nd, attr, where), where, args),
                        evaluate=lambda s, what: self._evaluate(s, f"{where}: {what}"))
        try:
            outs = CONVERTERS[op_type if default_domain else f"{nd.domain}.{op_type}"](node)
        except GraphFormatError:
            raise
        except LazyArrayError as exc:
            raise GraphFormatError(f"{where}: {exc}") from None
        for j, name in enumerate(out_names):
            if not name:
                continue
            if j >= len(outs) or outs[j] is None:
                self.env[name] = Missing(name, where, j)
                continue
            self.env[name] = self._in_format(outs[j], name, node, where)

    def _folded(self, k: int, nd, what: str | None, in_names: list, op_type: str) -> bool:
        """Compute ``nd`` when loading if its inputs are all small known integers (``known_values.fold``:
        a size that came out concrete, on its way to a ``Reshape``'s shape); True when it did. Its graph
        node is made, by its converter, only where a converter reads the value as a tensor."""
        consts = self.consts
        if self.types or not in_names or any(name and name not in consts for name in in_names) or len(nd.output) != 1:
            return False
        values = [consts[name] if name else None for name in in_names]
        value = fold(op_type, values, self._attrs(nd, f"{self.what}: node {nd.name!r} ({op_type})") if nd.attribute
                     else {}, self.opset)
        if value is None:
            return False
        name = nd.output[0]
        env = self.env

        def convert():  # (as ``_convert`` would have converted it; its own inputs made the same way)
            label = nd.name
            where = f"{what or self.what}: node {label or '#' + str(k)!r} ({op_type})"
            inputs = [None if not n else self._raw(n, where) for n in in_names]
            while inputs and inputs[-1] is None:
                inputs.pop()
            saved, self.env = self.env, env
            try:
                self._convert_node(nd, op_type, in_names, True, inputs, where, label)
                return env[name]
            finally:
                self.env = saved
        value.flags.writeable = False
        consts[name] = value
        env[name] = Folded(value, convert)
        return True

    def _constant(self, nd) -> bool:
        """A ``Constant`` whose one attribute is a plain numeric ``value`` tensor, converted as
        ``constant_op`` converts it (one read of its bytes, no converter machinery: a transformer has a
        hundred of them) and its value kept as known at load time; False for any other."""
        attrs = nd.attribute
        if len(attrs) != 1 or len(nd.output) != 1:
            return False
        a = attrs[0]
        if a.name != "value" or a.type != _TENSOR_ATTR or a.ref_attr_name or a.t.data_type not in PLAIN_TYPES:
            return False
        arr = np.array(tensor_array(a.t, self.onnx.numpy_helper))  # (ours alone: the node keeps it, uncopied)
        arr.flags.writeable = False  # (as the constant node would make it)
        name = nd.output[0]
        self.env[name] = Known(arr, owned=True)  # (its node made only where a converter reads it as a tensor)
        self.consts[name] = arr
        return True

    def _sizes_of(self, nd, inputs: list, op_type: str, in_names: list) -> bool:
        """Evaluate ``nd`` when loading if it computes sizes from symbolic dims (``Shape`` of an input
        with a dynamic batch axis, arithmetic on such sizes); True when it did. (``op_type``, ``in_names``:
        ``nd``'s, as ``_convert`` read them: every node asks, most of them to hear no.)"""
        if op_type in ("Shape", "Size") and len(inputs) == 1 and isinstance(inputs[0], (Symbol, Sizes)):
            shape = inputs[0].value.shape if inputs[0].__class__ is Sizes else inputs[0].outputs[0].aval.shape
            if shape is None or None in shape or all(isinstance(d, int) for d in shape):
                return False  # (concrete: the converter folds it; unknown: it explains)
            if op_type == "Size":
                total = 1
                for d in shape:
                    total = total * d
                value = np.empty((), dtype=object)
                value[()] = total
                return self._store_sizes(nd, [value])
            attrs = {a.name: a.i for a in nd.attribute}
            start, end = attrs.get("start", 0), attrs.get("end")
            return self._store_sizes(nd, [of_dims(shape[slice(start, end)])])
        sizes = self.sizes
        if not sizes or op_type not in SHAPE_VALUE_OPS or sizes.keys().isdisjoint(in_names):
            return False
        values = []
        for name in in_names[:len(inputs)]:
            if not name:
                values.append(None)
            elif name in self.sizes:
                values.append(self.sizes[name])
            elif name in self.consts:
                values.append(self.consts[name])
            else:
                x = self.env.get(name)
                if not isinstance(x, Symbol) or any(self._reads(x)):
                    return False  # (reads a value known only when the graph runs)
                values.append(self._const_of(nd, in_names.index(name), "a size"))
        attrs = self._attrs(nd, f"{self.what}: node {nd.name!r} ({op_type})")
        outs = evaluate_shape_value(op_type, values, attrs, self.opset)
        return outs is not None and self._store_sizes(nd, outs)

    def _store_sizes(self, nd, outs: list) -> bool:
        for name, value in zip(nd.output, outs):
            value = normalized(np.asarray(value) if not isinstance(value, np.ndarray) else value)
            if is_symbolic_array(value):
                self.sizes[name] = value
                self.env[name] = Sizes(value, self.device)  # (a node only where a converter reads it)
            else:
                arr = np.asarray(value)
                arr = arr.astype(np.int64) if arr.dtype == object else arr
                self.consts[name] = arr
                self.env[name] = Known(arr)
        return True

    def _in_format(self, s: Symbol, name: str, node: OnnxNode, where: str) -> Symbol:
        """An output rounded into its narrow format when ONNX types it so (narrow.py)."""
        if not self.types:
            return s
        fmt = narrow_format(self.types.get(name, 0))
        if fmt is not None:
            return round_output(s, fmt)
        if name not in self.types and any(narrow_format(t) for t in node.in_types):
            raise GraphFormatError(f"{where}: output {name!r} reads values of a narrow format "
                                   f"({', '.join(sorted({narrow_format(t) for t in node.in_types} - {None}))}) "
                                   "but ONNX shape inference gives it no element type, so lazyarray cannot tell "
                                   "whether to round it; declare its type in the graph's value_info")
        return s

    def _graph_attr(self, nd, attr: str, where: str):
        for a in nd.attribute:
            if a.name == attr and a.type == self.onnx.AttributeProto.GRAPH:
                return a.g
        raise GraphFormatError(f"{where}: needs the graph attribute {attr!r}")


def _unvisited(outputs, memo: dict) -> list:
    """The nodes above ``outputs`` that ``memo`` (keyed by ``id(node)``) lacks, each after its inputs:
    a post-order walk that stops at known nodes (``topo_order``'s creation order is not needed here,
    and its sort cost more than the walk when asked of value after value)."""
    order: list = []
    seen: set = set()
    stack = [(e.node, False) for e in reversed(outputs)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in memo or id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((e.node, False) for e in reversed(node.inputs) if id(e.node) not in memo)
    return order


class _Scope:
    """The enclosing graph of a body being converted: its names, and the values the body captured."""

    def __init__(self, env: dict, parent):
        self.env, self.parent = env, parent
        self.captured: dict[str, Symbol] = {}

    def outer_value(self, conv: Conversion, name: str, where: str) -> Symbol:
        saved = conv.env, conv.scope
        conv.env, conv.scope = self.env, self.parent
        try:
            return conv._value(name, where)
        finally:
            conv.env, conv.scope = saved
