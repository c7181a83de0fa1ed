"""``Block`` and ``HybridBlock``: layers written as one imperative ``forward(self, *args)``.

Children and parameters register themselves when assigned as attributes, and
``collect_params()`` names every parameter by its attribute path (``"0.weight"``,
``"encoder.fc1.bias"``): stable across runs, and the names used in exported graphs and
parameter files.

``HybridBlock.hybridize()`` makes the next call trace ``forward`` once under deferred
compute and run the compiled graph from then on (see ``hybrid.py`` for the steps). A
hybridized block called while another block is being traced just runs its ``forward``,
so its ops are inlined into the enclosing graph.
"""
from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

import numpy as np

from ..autograd import TRAINING
from ..caches import NamedCache
from ..creation import zeros
from ..deferred import DEFERRED, MODE
from ..device import Device
from ..error_context import leaving_block
from ..errors import BlockError, DTypeError, GraphFormatError, LazyArrayError, ParamError, ShapeError
from ..executor.explain import Explanation, explain_profile
from ..executor.signature_cache import SignatureCache, causes_text, describe_change
from ..fileio import read_regular, write_atomic
from ..graph.node import BLOCK_SCOPE, source_text
from ..graph.passes.bind_dims import bind_dims
from ..graph.serialize import parse_json
from ..graph.symbol import Symbol
from ..kernels.profile import profile
from ..ndarray import NDArray
from ..onnx.export import export as onnx_export
from . import hybrid
from .hooks import HookHandle
from .output_structure import name_outputs
from .param_file import load_arrays, write_arrays, write_export
from .parameter import INIT_LOCK, MULTI_DEVICE, Constant, DeferredInitializationError, Parameter
from .parameter_dict import ParameterDict
from .summary import summary_table

_P = ParamSpec("_P")
_R_co = TypeVar("_R_co", covariant=True)


class _Forward(Protocol[_P, _R_co]):
    """For type checkers: a block's ``forward``, whose arguments and result ``block(...)`` has."""

    def forward(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...


class Block:
    """Base class of layers and models: override ``forward(self, *args)``.

    >>> import lazyarray as la
    >>> class Twice(la.blocks.Block):
    ...     def forward(self, x):
    ...         return x * 2
    >>> Twice()(la.array([1.0, 2.0])).asnumpy()
    array([2., 4.], dtype=float32)
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_children", OrderedDict())
        object.__setattr__(self, "_params", OrderedDict())
        object.__setattr__(self, "_containers", {})  # list/tuple/dict attribute -> child names it holds
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    # -- registration ----------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        if "_children" not in self.__dict__:
            raise BlockError(f"{type(self).__name__}.__init__ must call super().__init__() before "
                                 f"assigning attributes (got {name!r})")
        if name in self._children or name in self._params or isinstance(value, (Block, Parameter)):
            STRUCTURE.put(None, object())  # children or parameters change: traces made before are checked again
        self._children.pop(name, None)
        self._params.pop(name, None)
        if name in self._containers:
            for key in self._containers.pop(name):
                self._children.pop(key, None)
            STRUCTURE.put(None, object())
        if isinstance(value, (list, tuple, dict)) and not name.startswith("_"):
            # blocks held in a list or dict are children "name.0", "name.key" (PyTorch's ModuleList /
            # ModuleDict); the container is read again whenever the children are listed
            self._containers[name] = ()
            object.__setattr__(self, name, value)
            self._sync_containers()
            return
        if isinstance(value, Block):
            self._children[name] = value
        elif isinstance(value, Parameter):
            if not value.name:
                value.name = name
            self._params[name] = value
        object.__setattr__(self, name, value)

    def register_child(self, block: Block, name: str | None = None) -> Block:
        """Add ``block`` as a child (``name`` defaults to its position: ``"0"``, ``"1"``, ...)."""
        name = str(len(self._children)) if name is None else name
        self._children[name] = block
        STRUCTURE.put(None, object())
        return block

    def children(self) -> Iterator[tuple[str, Block]]:
        """``(name, block)`` of the direct children, blocks held in list/dict attributes included."""
        self._sync_containers()
        return iter(list(self._children.items()))

    def _sync_containers(self) -> None:
        """Register the blocks now held in list/tuple/dict attributes (appended since, or removed)."""
        for name, keys in self._containers.items():
            value = self.__dict__.get(name)
            items = value.items() if isinstance(value, dict) else enumerate(value) \
                if isinstance(value, (list, tuple)) else ()
            now = [(f"{name}.{k}", b) for k, b in items if isinstance(b, Block)]
            if tuple(k for k, _ in now) == keys and all(self._children.get(k) is b for k, b in now):
                continue
            for key in keys:
                self._children.pop(key, None)
            for key, b in now:
                self._children[key] = b
            self._containers[name] = tuple(k for k, _ in now)
            STRUCTURE.put(None, object())

    def apply(self, fn) -> Block:
        """Call ``fn(block)`` on every child block (recursively), then on this block; returns self.

        >>> import lazyarray as la
        >>> net = la.blocks.HybridSequential(); _ = net.add(la.blocks.Dense(2), la.blocks.Dense(1))
        >>> seen = []
        >>> _ = net.apply(lambda b: seen.append(type(b).__name__))
        >>> seen
        ['Dense', 'Dense', 'HybridSequential']
        """
        for _, child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- hooks -----------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook) -> HookHandle:
        """Call ``hook(block, args)`` before every ``forward``; a non-None result (a tuple) replaces
        the arguments. Returns a handle whose ``detach()`` removes the hook.

        A hybridized block runs the hooks of the blocks inside it only while tracing.

        >>> import lazyarray as la
        >>> net = la.blocks.Dense(2, in_units=3); net.initialize()
        >>> h = net.register_forward_pre_hook(lambda blk, args: print("in", args[0].shape))
        >>> _ = net(la.ones((1, 3)))
        in (1, 3)
        >>> h.detach()
        """
        return HookHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook) -> HookHandle:
        """Call ``hook(block, args, output)`` after every ``forward``; a non-None result replaces the
        output. Returns a handle whose ``detach()`` removes the hook.

        >>> import lazyarray as la
        >>> net = la.blocks.Dense(2, in_units=3); net.initialize()
        >>> h = net.register_forward_hook(lambda blk, args, out: print("out", out.shape))
        >>> _ = net(la.ones((1, 3)))
        out (1, 2)
        >>> h.detach()
        """
        return HookHandle(self._forward_hooks, hook)

    def _call_with_hooks(self, call, args):
        for hook in list(self._forward_pre_hooks.values()):
            new = hook(self, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        out = call(*args)
        for hook in list(self._forward_hooks.values()):
            new = hook(self, args, out)
            if new is not None:
                out = new
        return out

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """Every parameter of this block and its children, by hierarchical name: a ``ParameterDict``
        (a dict with ``setattr``, ``zero_grad``, ``reset_device``, ``initialize``, ``save``, ``load``).

        ``select`` keeps the names a regular expression matches from their start (as Gluon's
        ``re.match``), e.g. ``".*weight|.*bias"``.

        >>> import lazyarray as la
        >>> net = la.blocks.HybridSequential(); _ = net.add(la.blocks.Dense(2), la.blocks.Dense(1))
        >>> list(net.collect_params(".*weight"))
        ['0.weight', '1.weight']
        """
        out = ParameterDict()
        self._collect("", out, set())
        if select is not None:
            try:
                pattern = re.compile(select)
            except re.error as exc:
                raise ParamError(f"collect_params: select {select!r} is not a regular expression: {exc}; "
                                 "write e.g. '.*weight|.*bias'") from None
            out = ParameterDict((k, v) for k, v in out.items() if pattern.match(k))
        return out

    def _collect(self, prefix: str, out: dict, seen: set) -> None:
        for name, p in self._params.items():
            if id(p) not in seen:  # a shared parameter keeps its first name
                seen.add(id(p))
                out[prefix + name] = p
        for name, child in self.children():
            child._collect(f"{prefix}{name}.", out, seen)

    # -- parameters ------------------------------------------------------------------------
    def initialize(self, init=None, device: Device | None = None, force_reinit: bool = False) -> None:
        """Initialize every parameter: its own initializer if it has one, else ``init``, else Xavier
        (weights) or zeros (vectors).

        Parameters with unknown (0) dims are created at the first forward call. One already
        initialized is left as it is, with a warning, unless ``force_reinit=True``.
        """
        self.collect_params().initialize(init, device, force_reinit)

    def zero_grad(self) -> None:
        """Zero the gradient of every parameter."""
        self.collect_params().zero_grad()

    def share_parameters(self, shared: dict[str, Parameter]) -> Block:
        """Use the parameters of ``shared`` (``other.collect_params()``) in place of this block's own of
        the same names (those absent stay); returns self.

        >>> import lazyarray as la
        >>> a = la.blocks.Dense(2, in_units=3); b = la.blocks.Dense(2, in_units=3)
        >>> _ = b.share_parameters(a.collect_params())
        >>> b.weight is a.weight
        True
        """
        if not isinstance(shared, dict):
            raise ParamError(f"share_parameters takes a dict name -> Parameter (other.collect_params()), got "
                             f"{type(shared).__name__}")
        self._share("", shared)
        return self

    def _share(self, prefix: str, shared: dict) -> None:
        for name in list(self._params):
            p = shared.get(prefix + name)
            if p is not None:
                if not isinstance(p, Parameter):
                    raise ParamError(f"share_parameters: {prefix + name!r} maps to a {type(p).__name__}, "
                                     "not a Parameter")
                setattr(self, name, p)
        for name, child in self.children():
            child._share(f"{prefix}{name}.", shared)

    def cast(self, dtype) -> Block:
        """Cast every parameter (value and gradient) of this block and its children to ``dtype``, e.g.
        ``"float16"``; returns self. Feed inputs of that dtype afterwards.

        >>> import lazyarray as la
        >>> net = la.blocks.Dense(2, in_units=3); net.initialize()
        >>> _ = net.cast("float16")
        >>> net(la.ones((1, 3), dtype="float16")).dtype
        dtype('float16')
        """
        for _, child in self.children():
            child.cast(dtype)
        for p in self._params.values():
            p.cast(dtype)
        STRUCTURE.put(None, object())  # compiled graphs hold the old dtypes
        return self

    def save(self, prefix: str) -> tuple[str, str]:
        """Gluon 2's ``Block.save``: write ``prefix-model.json`` (the block tree: class names, the order
        of children and parameters) and ``prefix-model.params`` (values named by position in that tree,
        so renaming attributes does not matter), atomically. ``load(prefix)`` reads them back into a
        block of the same structure.

        >>> import lazyarray as la, tempfile, os
        >>> net = la.blocks.Dense(2, in_units=3); net.initialize()
        >>> prefix = os.path.join(tempfile.mkdtemp(), "m")
        >>> net.save(prefix)[0].endswith("m-model.json")
        True
        """
        arrays: dict[str, np.ndarray] = {}
        ids: dict[int, str] = {}

        def tree(block: Block) -> dict:
            params = []
            for p in block._params.values():
                if id(p) not in ids:  # a shared parameter is stored once
                    ids[id(p)] = f"param{len(ids)}"
                    arrays[ids[id(p)]] = np.ascontiguousarray(p.data().asnumpy())
                params.append(ids[id(p)])
            return {"type": type(block).__name__, "params": params,
                    "children": [tree(c) for _, c in block.children()]}

        model = {"format": "lazyarray.block", "version": 1, "model": tree(self)}
        json_path, params_path = f"{prefix}-model.json", f"{prefix}-model.params"
        write_arrays(params_path, arrays, {"version": 1})
        write_atomic(json_path, json.dumps(model, indent=1).encode())
        return json_path, params_path

    def load(self, prefix: str) -> None:
        """Load what ``save(prefix)`` wrote into this block, matching children and parameters by
        position; a different tree (class, number of children or parameters) raises ``ParamError``."""

        json_path = f"{prefix}-model.json"
        doc = parse_json(read_regular(json_path, "block file"), json_path)
        if not isinstance(doc, dict) or doc.get("format") != "lazyarray.block":
            raise GraphFormatError(f"{json_path!r} was not written by Block.save")
        arrays, _ = load_arrays(f"{prefix}-model.params")
        todo: list[tuple[Parameter, np.ndarray]] = []

        def match(block: Block, node, path: str) -> None:
            where = f"{json_path}: block {path or '(top)'}"
            if not isinstance(node, dict) or not isinstance(node.get("params"), list) or \
                    not isinstance(node.get("children"), list):
                raise GraphFormatError(f"{where}: malformed entry")
            if node.get("type") != type(block).__name__:
                raise ParamError(f"{where} is a {node.get('type')} in the file but a {type(block).__name__} here; "
                                 "load into a block built the same way")
            params, children = list(block._params.items()), list(block.children())
            if len(params) != len(node["params"]) or len(children) != len(node["children"]):
                raise ParamError(f"{where} has {len(node['params'])} parameters and {len(node['children'])} "
                                 f"children in the file, {len(params)} and {len(children)} here")
            for (name, p), key in zip(params, node["params"]):
                if key not in arrays:
                    raise GraphFormatError(f"{where}: parameter {key!r} missing from the parameter file")
                got, want = arrays[key].shape, p.shape
                if want is not None and (len(want) != len(got) or any(w and w != g for w, g in zip(want, got))):
                    raise ShapeError(f"{where}: parameter {name!r} is {tuple(got)} in the file, {want} here")
                todo.append((p, arrays[key]))
            for (name, child), sub in zip(children, node["children"]):
                match(child, sub, f"{path}.{name}" if path else name)

        match(self, doc.get("model"), "")
        for p, value in todo:  # nothing changes unless everything matched
            p.set_data(value)

    def save_parameters(self, path: str) -> None:
        """Write every parameter to ``path`` (safetensors: loading never runs code), atomically."""
        self.collect_params().save(path)

    def load_parameters(self, path: str, device: Device | None = None, allow_missing: bool = False,
                        ignore_extra: bool = False) -> None:
        """Load values written by ``save_parameters``; missing, extra or mis-shaped names are errors."""
        self.collect_params().load(path, device, allow_missing, ignore_extra)

    # -- calling -----------------------------------------------------------------------------
    if TYPE_CHECKING:  # ``net(x)`` takes what ``net.forward`` takes and gives what it returns
        def __call__(self: _Forward[_P, _R_co], *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...
    else:
        def __call__(self, *args):
            try:
                if self._forward_pre_hooks or self._forward_hooks:
                    return self._call_with_hooks(self.run_forward, args)
                return self.run_forward(*args)
            except LazyArrayError as exc:  # named once (its innermost block), its traceback ending at the user's line
                raise leaving_block(exc, self, child_name)  # noqa: B904 (the same error, raised again)

    def run_forward(self, *args):
        """``forward`` after filling unknown parameter dims (at the first call) from ``args``.

        While a graph is recorded (deferred compute, a hybridize trace), the nodes ``forward`` makes
        remember this block's path (``Node.block``): the block called first is the root (path
        ``()``), each child called inside it adds ``(its name in the parent, its type)``.
        """
        if any(p._deferred is not None and not p.shape_known for p in self._params.values()):
            with INIT_LOCK:  # first calls from several threads: one infers, the others then see it
                if any(p._deferred is not None and not p.shape_known for p in self._params.values()):
                    self._infer_shapes(args)
        if self._params:
            self._check_float_dtypes(args)
        if MULTI_DEVICE[0]:  # parameters on several devices: data() gives the copy on the input's device
            device = next((a.device for a in args if isinstance(a, NDArray)), None)
            if device is not None:
                with device:
                    return self._forward_in_scope(args)
        return self._forward_in_scope(args)

    def _check_float_dtypes(self, args) -> None:
        """The dtype policy (PyTorch's): a layer computes in its parameters' float dtype and refuses float
        inputs of another one, rather than promoting (float64 NumPy data would train silently in float64)."""
        own = {p.dtype for p in self._params.values() if p.dtype.kind == "f" and not isinstance(p, Constant)}
        if len(own) != 1:
            return
        (want,) = own
        for i, a in enumerate(args):
            if isinstance(a, NDArray) and a.dtype.kind == "f" and a.dtype != want:
                raise DTypeError(
                    f"{type(self).__name__}: input {i} is {a.dtype} but its parameters are {want}; convert the "
                    f"input with x.astype({str(want)!r}), or cast the network with net.cast({str(a.dtype)!r})")

    def _forward_in_scope(self, args):
        if not MODE.get() & DEFERRED:  # nothing is recorded as graph nodes: no block path to keep
            return self.forward(*args)
        token = BLOCK_SCOPE.set((self, self._path_in(BLOCK_SCOPE.get())))
        try:
            return self.forward(*args)
        finally:
            BLOCK_SCOPE.reset(token)

    def _path_in(self, scope) -> tuple:
        """This block's ``Node.block`` path when called inside ``scope`` (``(parent, parent path)``)."""
        if scope is None:
            return ()
        parent, path = scope
        return path + ((child_name(parent, self), type(self).__name__),)

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward(self, x)")

    def infer_shape(self, *args) -> None:
        """Fill the unknown (0) dims of this block's own parameters from the first inputs.

        Override it in blocks whose parameters depend on the input shape, e.g.
        ``self.weight.shape = (self.units, x.shape[1])``.
        """
        raise NotImplementedError

    def _infer_shapes(self, args) -> None:
        pending = [n for n, p in self._params.items() if p._deferred is not None and not p.shape_known]
        if type(self).infer_shape is Block.infer_shape:
            shapes = ", ".join(f"{n} {self._params[n].shape}" for n in pending)
            raise DeferredInitializationError(
                f"{type(self).__name__}: parameters with unknown (0) dims ({shapes}) need the input "
                f"shape; implement `def infer_shape(self, *args)` in {type(self).__name__} that sets "
                f"them, e.g. `self.{pending[0]}.shape = (..., x.shape[1])`, or give full shapes")
        if not args or args[0] is None:  # (the shapes are read from the inputs: there must be one)
            raise ParamError(f"{type(self).__name__}: the input must be an array (its shape sets the unknown "
                             f"dims of {', '.join(pending)}), got {'None' if args else 'no input'}; call the "
                             "block with a la.array")
        self.infer_shape(*args)
        still = [f"{n} {self._params[n].shape}" for n in pending if not self._params[n].shape_known]
        if still:
            raise DeferredInitializationError(
                f"{type(self).__name__}.infer_shape left unknown (0) dims in {', '.join(still)}; "
                "set every 0 dim from the input shapes")

    def explain(self, *args) -> Explanation:
        """Call the block once on ``args`` and say what ran: a hybridized block lists every step
        of its compiled program with the op, shapes, chosen implementation (for example
        ``nn.conv2d[winograd4, kernel kept]``), planned buffer and workspace; an imperative block
        lists its kernel calls one by one (``executor/explain.py``).

        >>> import lazyarray as la
        >>> net = la.blocks.Dense(4, in_units=3)
        >>> net.initialize()
        >>> net.hybridize()
        >>> "nn.dense[" in str(net.explain(la.ones((2, 3))))
        True
        """
        with profile() as prof:
            self(*args)
        return explain_profile(prof)

    def hybridize(self, active: bool = True, static_shape: bool = False) -> None:
        """Hybridize every ``HybridBlock`` inside this block (``active=False`` turns it off)."""
        for _, child in self.children():
            child.hybridize(active, static_shape)

    # -- display -----------------------------------------------------------------------------
    def summary(self, *inputs) -> None:
        """Print a table of the blocks ``self(*inputs)`` runs: name (attribute path) and type, output
        shape and own parameter count, then the totals (as Gluon's ``Block.summary``).

        It runs the block imperatively with forward hooks (hybridized blocks too: they are switched
        off during the call), in inference mode.

        >>> import lazyarray as la
        >>> net = la.blocks.HybridSequential(); _ = net.add(la.blocks.Dense(4), la.blocks.Dense(2))
        >>> net.initialize()
        >>> net.summary(la.ones((1, 3)))  # doctest: +NORMALIZE_WHITESPACE
        --------------------------------------------------------------------------------
                Layer (type)                                Output Shape         Param #
        ================================================================================
                       Input                                      (1, 3)               0
                   0 (Dense)                                      (1, 4)              16
                   1 (Dense)                                      (1, 2)              10
        (top) (HybridSequential)                                  (1, 2)               0
        ================================================================================
        Total params: 26
        Trainable params: 26
        Non-trainable params: 0
        --------------------------------------------------------------------------------
        """

        if not inputs:
            raise BlockError(f"{type(self).__name__}.summary needs example inputs to run the block: "
                             "net.summary(x)")
        print(summary_table(self, inputs))

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for name, child in self.children():
            text = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {text}")
        return "\n".join(lines) + ")" if len(lines) > 1 else f"{type(self).__name__}()"


class HybridBlock(Block):
    """A block that can be hybridized: traced once and run as a compiled graph.

    >>> import lazyarray as la
    >>> net = la.blocks.Dense(3, in_units=4)
    >>> net.initialize(); net.hybridize()
    >>> net(la.ones((2, 4))).shape
    (2, 3)
    """

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_active", False)
        object.__setattr__(self, "_static_shape", False)
        self._clear_cache()

    def _structure(self) -> tuple:
        """Identity of every child block and parameter below this block (what a trace baked in)."""
        return tuple((n, id(p), p.dtype) for n, p in self.collect_params().items()) + \
            tuple(id(b) for b in _descendants(self))

    def _check_structure(self) -> None:
        """Forget the traces when a child or a parameter was added, replaced or removed since."""
        now = self._structure()
        if now != self.__dict__.get("_traced_structure"):
            self._clear_cache(self._traces.size, self._traces.max_bytes)
            object.__setattr__(self, "_traced_structure", now)
        object.__setattr__(self, "_structure_epoch", STRUCTURE.peek(None))

    def guards(self) -> str:
        """The shape guards of this block's traces, one per line with the line that created it:
        a trace is reused for a new input signature only when all of its guards hold."""
        lines = []
        seen: set = set()
        for (training, sig), c in self._by_sig.items():
            if id(c) in seen:
                continue
            seen.add(id(c))
            head = f"trace for {'training' if training else 'inference'}, first signature " + \
                ", ".join("None" if a is None else f"{np.dtype(a[1])}{list(a[0])}" for a in sig)
            lines.append(head + (":" if c.guards else ": no guards (serves every signature of these ranks)"))
            lines += [f"  {g}" for g in c.guards]
        return "\n".join(lines) or "no traces yet"

    def _clear_cache(self, cache_size: int | None = None, cache_bytes: int | None = None) -> None:
        # (training, signature) -> Compiled, bounded: the least recently used signatures go. The
        # compiled programs (the memory) live in each trace's CachedOp, bounded there in entries and
        # bytes; ``max_bytes`` here is the budget handed to those CachedOps.
        traces = SignatureCache(f"hybridized {type(self).__name__}", cache_size, max_bytes=cache_bytes)
        object.__setattr__(self, "_traces", traces)
        object.__setattr__(self, "_by_sig", traces.items)
        # (training, None places) -> the Compileds that serve new shapes (newest first, at most 8):
        # a symbolic-batch trace serves the batches of its other sizes, so several may be kept
        object.__setattr__(self, "_generic", {})
        object.__setattr__(self, "_last_sig", None)
        object.__setattr__(self, "trace_count", 0)
        object.__setattr__(self, "_hot", None)  # (key, Compiled, compiles then) of the last plain call

    def hybridize(self, active: bool = True, static_shape: bool = False, cache_size: int | None = None,
                  cache_bytes: int | None = None) -> None:
        """Trace ``forward`` at the next call and run the compiled graph from then on.

        ``static_shape=True`` traces again for every new input signature instead of reusing
        a shape-generic graph. ``cache_size``: how many input signatures to keep compiled
        (default 64, or ``LAZYARRAY_CACHE_SIZE``); the least recently used go first.
        ``cache_bytes``: the bytes the compiled programs of one graph may hold together (their
        planned buffers; default 256 MiB, or ``LAZYARRAY_CACHE_BYTES``); past it the least recently
        used go too.
        """
        object.__setattr__(self, "_active", bool(active))
        object.__setattr__(self, "_static_shape", bool(static_shape))
        self._clear_cache(cache_size, cache_bytes)
        super().hybridize(active, static_shape)

    @property
    def hybridized(self) -> bool:
        return self._active

    @property
    def cached_op(self):
        """The ``CachedOp`` that ran the last hybridized call (``None`` before one).

        Show it in a notebook to see the memory plan of that call's signature and the graph
        compiled for it; ``cached_op.memory_plan(data=shape)`` plans other shapes.
        """
        sig = self._last_sig
        if sig is None:
            return None
        training = TRAINING.get()
        compiled = self._by_sig.get((training, sig)) or self._by_sig.get((not training, sig))
        return compiled.run if compiled is not None else None

    if TYPE_CHECKING:
        def __call__(self: _Forward[_P, _R_co], *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...
    else:
        def __call__(self, *args, _hooked: bool = False):
            # One frame from the caller to the compiled graph (the hooks' path calls back in with
            # ``_hooked``; its error is named once, by the outer call)
            try:
                if not _hooked and (self._forward_pre_hooks or self._forward_hooks):
                    return self._call_with_hooks(self._hooked_call, args)
                if not self._active or (mode := MODE.get()) & DEFERRED:  # imperative, or inlined into an enclosing trace
                    return self.run_forward(*args)
                if self.__dict__.get("_structure_epoch", _NEVER) is not STRUCTURE.peek(None):
                    self._check_structure()
                # The hot path of a hybridized call: one signature, one compare (or dict lookup), then the graph.
                try:  # (a computed array's value has its shape and dtype; a lazy one's is None: ``_odd_signature``)
                    if len(args) == 1:  # (the usual call: no comprehension's frame)
                        v = args[0]._value
                        sig = ((v.shape, v.dtype, args[0]._device),)
                    else:
                        sig = tuple([(v.shape, v.dtype, a._device) for a in args for v in (a._value,)])
                except AttributeError:
                    sig = self._odd_signature(args)
                key = (TRAINING.get(), sig)
                # The last plain call's (key, Compiled, compiles then): while no signature was compiled since
                # (its ``used`` stamp is still the newest), an equal key runs it without hashing the key, and
                # hands the stored key on, which the Compiled's memo then finds by identity.
                hot = self._hot
                if hot is not None and hot[2] == self._traces.epoch and hot[0] == key:
                    key, compiled = hot[0], hot[1]
                else:
                    compiled = self._compiled_for(args, key, mode)
                self.__dict__["_last_sig"] = sig
                return compiled(args, None if mode else key)  # (the key: a plain call's only, see Compiled)
            except LazyArrayError as exc:  # named once (its innermost block), its traceback ending at the user's line
                if _hooked:
                    raise
                raise leaving_block(exc, self, child_name)  # noqa: B904 (the same error, raised again)

    def _hooked_call(self, *args):
        """The call the forward hooks wrap (``_call_with_hooks``)."""
        return self(*args, _hooked=True)

    def _odd_signature(self, args) -> tuple:
        """The signature of a call whose arguments are not all computed arrays: None arguments (traced
        with None in that place, the trace serves calls with None there) and lazy ones (their recorded
        shapes and dtypes); anything else raises ``ParamError``."""
        bad = [a for a in args if a is not None and not isinstance(a, NDArray)]
        if bad:
            raise ParamError(f"a hybridized {type(self).__name__} takes arrays (or None), got "
                             f"{type(bad[0]).__name__}; wrap numbers and NumPy data with la.array(...)") from None
        return tuple([None if a is None else (a.shape, a.dtype, a._device) for a in args])

    def _compiled_for(self, args, key, mode) -> hybrid.Compiled:
        """The Compiled serving ``key`` (traced or compiled now where none does), remembered as the hot
        one (``_hot``) where the call is plain (``mode`` 0)."""
        compiled = self._by_sig.get(key)
        if compiled is None:
            compiled = self._compile_for(args, key[1], key[0])
        else:
            compiled.used = self._traces.epoch
        if not mode:
            self.__dict__["_hot"] = (key, compiled, self._traces.epoch)
        return compiled

    def _compile_for(self, args, sig, training) -> hybrid.Compiled:
        with INIT_LOCK:  # one thread traces a new signature; the others then find it
            return self._by_sig.get((training, sig)) or self._trace_for(args, sig, training)

    def _trace_for(self, args, sig, training) -> hybrid.Compiled:
        key = (training, tuple(a is None for a in sig))  # one shape-generic graph per mode and None places
        candidates = () if self._static_shape else self._generic.get(key, ())
        generic = next((c for c in candidates if c.accepts(sig)), None)
        if generic is not None:
            compiled = generic  # same graph: the cached op compiles a plan for the new shapes
        else:
            compiled = self._trace_new(args, training)
            compiled.run = hybrid.compile_symbol(compiled.symbol, self._traces.size, self._traces.max_bytes,
                                                 compiled.sources)
            object.__setattr__(self, "trace_count", self.trace_count + 1)
            if compiled.generic:
                self._generic[key] = [compiled] + self._generic.get(key, [])[:GENERIC_TRACES - 1]
        compiled.signatures.add(sig)
        self._traces.add((training, sig), compiled, _describe_signatures)
        return compiled

    def symbolic_shapes(self, args) -> tuple | None:
        """The shapes the first trace gives the array arguments: symbolic dims (``la.Dim``) where the
        block's graph may serve every size. Default: axis 0 is ``batch`` (``hybrid.batch_symbolic``);
        a block whose layout says otherwise (a time-major RNN) names its axes itself."""
        return hybrid.batch_symbolic(args)

    def _trace_new(self, args, training) -> hybrid.Compiled:
        """Trace ``forward`` with a symbolic batch (``la.Dim("batch")`` on axis 0), so one graph
        serves every batch size; where ``forward`` cannot be traced so (it branches on the batch,
        reads it as an int, or an op cannot take it symbolically) trace with the call's shapes."""
        shapes = None if self._static_shape else self.symbolic_shapes(args)
        if shapes is not None:
            try:
                return hybrid.trace(self, args, self.collect_params(), training, shapes)
            except (LazyArrayError, TypeError, ValueError, IndexError):
                pass  # (the concrete trace below raises what forward raises for these shapes)
        return hybrid.trace(self, args, self.collect_params(), training)

    # -- export --------------------------------------------------------------------------------
    def inference_symbol(self):
        """The inference-mode graph for the last input signature (traced now if needed)."""
        sig = self._last_sig
        if sig is None:
            raise BlockError(f"{type(self).__name__}.export: call the hybridized block on an input "
                                 "once first, so its graph can be traced (net.hybridize(); net(x))")
        compiled = self._by_sig.get((False, sig))
        if compiled is None:
            dummies = tuple(None if s is None else zeros(*s) for s in sig)
            compiled = hybrid.trace(self, dummies, self.collect_params(), False)
        return compiled

    def export(self, prefix: str, epoch: int = 0) -> tuple[str, str]:
        """Write ``prefix-symbol.json`` and ``prefix-%04d.params`` (safetensors), atomically.

        The graph is the inference-mode graph; the parameter file holds every parameter it reads.
        Returns the two paths.
        """
        sym, params = self.export_graph()
        return write_export(prefix, epoch, sym.to_json(indent=1), params)

    def export_onnx(self, path: str, *, input_shapes=None, dynamic_axes=None, dynamic_shapes=None,
                    opset: int | None = None) -> str:
        """Write the inference graph as an ONNX model (``la.onnx.export(self, path, ...)``); returns ``path``.
        Needs the ``onnx`` extra (``pip install 'lazyarray[onnx]'``); tests/onnx/test_onnx_export.py runs it::

            net = la.blocks.Dense(2, in_units=3); net.initialize()
            net.export_onnx("m.onnx", input_shapes=(1, 3))  # the batch axis is dynamic
        """
        return onnx_export(self, path, input_shapes=input_shapes, dynamic_axes=dynamic_axes,
                           dynamic_shapes=dynamic_shapes, opset=opset)

    def baked_axes(self) -> dict:
        """Input name -> {axis: source line} of the sizes the last trace of ``forward`` read as Python
        ints (its guards): the graph holds those sizes, so an export cannot declare them dynamic."""
        compiled = self.inference_symbol()
        n = sum(1 for s in compiled.sources if isinstance(s, int))
        names = hybrid.input_names(n)
        out: dict = {}
        for g in compiled.guards:
            if g.input < len(names):
                out.setdefault(names[g.input], {})[g.dim] = source_text(g.source) if g.source else "a shape read"
        return out

    def export_graph(self, specialize: bool = False) -> tuple[Symbol, dict[str, Parameter]]:
        """``(graph, parameters)`` that ``export`` writes: the inference-mode graph of the model's
        outputs, and the parameter of each of its inputs that is one (the others are data inputs).
        Every exporter (our format, MXNet files) starts here. The graph keeps the symbolic batch of
        its trace; ``specialize=True`` gives it the shapes of the last call instead."""
        compiled = self.inference_symbol()
        sym, srcs = hybrid.fold_captures(compiled.symbol, compiled.sources)  # captured arrays: constants
        sources = dict(zip(sym.list_inputs(), srcs))
        if len(sym.outputs) > compiled.num_outputs:  # parameter updates, discarded draws: not the model's
            sym = Symbol(list(sym.outputs[:compiled.num_outputs]))
        if compiled.structure is not None:  # tuples / lists / dicts: outputs named by their paths
            sym = name_outputs(sym, compiled.structure.names)
        if specialize:
            sym = bind_dims(sym, self.traced_avals(sym), f"{type(self).__name__}.export")
        return sym, {n: sources[n] for n in sym.list_inputs() if isinstance(sources[n], Parameter)}

    def traced_avals(self, sym: Symbol) -> dict:
        """The data inputs of ``sym`` (a graph of this block) with the shapes of the last call."""
        sig = [s for s in (self._last_sig or ()) if s is not None]
        shapes = dict(zip(hybrid.input_names(len(sig)), (s[0] for s in sig)))
        return {n.name: n.avals[0]._replace(shape=tuple(shapes[n.name])) for n in sym.input_nodes()
                if n.name in shapes}


# None -> a token replaced whenever any block's children or parameters change: a hybridized block
# checks its structure again when the token is not the one it saw (clear(): every block checks again)
STRUCTURE = NamedCache("block structure epoch", 1)
_NEVER = object()  # (the token a block that never checked saw)
GENERIC_TRACES = 8  # traces per mode kept to serve new signatures without tracing again


def child_name(parent: Block, child: Block) -> str:
    """The name ``parent`` holds ``child`` by; its type's name when it is not a registered child of
    ``parent`` (held in a list, shared)."""
    return next((n for n, c in parent._children.items() if c is child), type(child).__name__)


def _descendants(block: Block):
    for _, child in block.children():
        yield child
        yield from _descendants(child)


def _describe_signatures(old, new) -> tuple[list, str]:
    """What changed between two block signatures ``(training, ((shape, dtype, device), ...))``."""
    none = ((), None, None)  # a None argument
    causes = describe_change(range(len(new[1])), [a or none for a in old[1]], [a or none for a in new[1]],
                             "training mode" if old[0] != new[0] else "")

    def sig_text(s):
        return "(" + ", ".join("None" if a is None else f"{np.dtype(a[1])}{list(a[0])} @{a[2]}" for a in s[1]) + \
            f"; training={s[0]})"

    return causes, (f"This time {causes_text(causes, 'argument')} changed: last signature {sig_text(old)}, "
                    f"new one {sig_text(new)}")
