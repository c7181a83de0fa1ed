"""The op registry: one declarative ``OpDef`` per operator.

An entry holds everything lazyarray knows about an op: its inputs and typed params,
the shape / dtype / storage rules that infer output avals without computing, the
kernel over an array module ``xp``, the gradient written with *other registered ops*
(so backward is itself a graph), and hints for the memory planner (in-place pairs,
views). Eager calls, lazy recording, ``la.sym``, the executor, export and autograd
all read the same entry.

Gradient and composite functions receive an *emitter* ``F``: a namespace whose
attributes are the registered ops (``F.multiply(g, y)``). The caller decides what an
op application means: a graph node (gradient pass, ``la.sym``) or an eager call.
"""
from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..aval import SUPPORTED_DTYPES, Aval, check_alloc, check_shape, is_supported
from ..caches import NamedCache
from ..dim import dim_max, has_symbols, is_symbolic, lenient
from ..errors import (
    AxisError,
    DeviceError,
    DTypeError,
    LazyArrayError,
    NoKernelError,
    ParamError,
    ShapeError,
    fmt_shape,
)
from ..tuning_table import current
from ..user_frames import warn
from .params import REQUIRED, Param

_REGISTRY: dict[str, OpDef] = {}
_new_tuple = tuple.__new__
STORAGE_FALLBACK_WARNED = NamedCache("storage fallback warnings given", 4096)  # (op, stypes)


@dataclass(eq=False)
class OpDef:
    """One operator. ``kernel(xp, *arrays, **params)`` returns the output (a tuple if several).

    * ``inputs``: input names; ``"*seq"`` = a sequence of arrays, ``"bias?"`` = optional.
    * ``shape(in_shapes, **params)`` / ``dtype(in_dtypes, **params)``: output shape(s) / dtype(s);
      ``None`` means the default (unary: keep; binary: broadcast / promote like NumPy).
    * ``storage(in_stypes, in_shapes, **params)``: output stypes when the op has a kernel for
      these storage types, else ``None`` (sparse inputs then fall back to dense with a warning).
      ``in_shapes`` may hold ``None`` dims; Python scalars come as ``()``.
    * ``sparse_kernel(xp, *values, **params)``: the kernel run when the storage rule answers and
      an input or an output is sparse; it works on the stored values only (``kernel`` stays
      dense in, dense out). When it *is* ``kernel``, that kernel takes every storage type.
    * ``grad(F, inputs, outputs, g, **params)``: one gradient (or None) per input.
    * ``inplace``: ``(input, output)`` pairs that may share a buffer; ``view``: output 0 may
      alias input 0 (reshape, transpose, expand, basic indexing); ``writes_out``: a function
      kernel that honours ``out=`` (string kernels naming a ufunc always do), so the executor
      hands it a planned buffer instead of letting it allocate; a kernel of several outputs
      then takes ``out=(buf0, buf1, ...)``, one buffer per output (shapes and dtypes as the
      rules say, C-contiguous), writes every output there and returns them.
    * ``compose(F, *inputs, **params)``: a composite op expands into other ops instead of
      having a kernel (e.g. dropout = mask * x).
    * ``workspace(in_avals, **params)``: ``(what, shape, dtype)`` of the large temporaries the
      kernel allocates besides its outputs (padded copies, im2col columns), so ``infer`` checks
      their sizes too, before the kernel runs.
    """

    name: str
    inputs: tuple[str, ...]
    kernel: Callable | str | None
    params: tuple[Param, ...] = ()
    shape: Callable | None = None
    dtype: Callable | None = None
    storage: Callable | None = None
    sparse_kernel: Callable | None = None
    grad: Callable | None = None
    inplace: tuple[tuple[int, int], ...] = ()
    view: bool = False
    num_outputs: int | Callable = 1  # or ``(params) -> int`` for ops whose output count is a parameter
    namespace: str = ""
    compose: Callable | None = None
    device: Callable | None = None  # (in_avals, **params) -> Device, for copy ops
    elementwise: bool = False
    random: bool = False
    writes_out: bool = False  # the kernel writes its result(s) into ``out=`` (ufunc kernels do)
    sparse_from_dense: bool = False  # the storage rule can make sparse outputs from dense inputs
    workspace: Callable | None = None  # (in_avals, **params) -> [(what, shape, dtype)] the kernel allocates
    # The kernel returns arrays it made for this call and hands over (a compiled sub-graph's
    # outputs): callers skip the alias check and the output normalisation.
    owns_outputs: bool = False
    doc: str = ""
    # The kernels layer's runner (``kernels/``: ``runner(xp, *arrays, **params)`` chooses one of the
    # op's named implementations and runs it); None: the reference ``kernel`` runs every call.
    runner: Callable | None = field(default=None, repr=False)
    _param_map: dict = field(default_factory=dict, repr=False)
    _bound: dict = field(default_factory=dict, repr=False)
    _dtype_cache: dict = field(default_factory=dict, repr=False)  # (dtypes, params) -> dtype rule result
    _infer_cache: dict = field(default_factory=dict, repr=False)  # (avals, params) -> output avals
    plain: bool = field(default=True, repr=False)
    n_required: int = field(default=0, repr=False)
    variadic: bool = field(default=False, repr=False)
    uses_training: bool = field(default=False, repr=False)
    np_ufunc: Any = field(default=None, repr=False)

    def __post_init__(self):
        self._param_map = {p.name: p for p in self.params}
        # Fast-path facts the dispatcher reads on every call.
        self.plain = not any(n.startswith("*") or n.endswith("?") for n in self.inputs)
        self.n_required = sum(1 for n in self.inputs if not n.endswith("?"))
        self.variadic = any(n.startswith("*") for n in self.inputs)
        self.uses_training = "training" in self._param_map
        # A NumPy ufunc kernel of a param-free elementwise op: the dispatcher's eager fast path.
        ufunc = getattr(np, self.kernel, None) if isinstance(self.kernel, str) else None
        self.np_ufunc = ufunc if (isinstance(ufunc, np.ufunc) and self.elementwise and self.plain
                                  and not self.params and self.compose is None and self.num_outputs == 1
                                  ) else None

    def outputs_for(self, params: dict) -> int:
        """How many outputs this op gives with ``params`` (a node knows its own: ``len(node.avals)``)."""
        n = self.num_outputs
        return n if n.__class__ is int else n(params)

    # -- params -----------------------------------------------------------------
    def make_params(self, given: dict) -> dict:
        """Validate ``given`` and fill defaults. Unknown or missing params raise ``ParamError``."""
        pm = self._param_map
        for k in given:
            if k not in pm:
                known = ", ".join(pm) or "none"
                raise ParamError(f"{self.name}: unknown parameter {k!r}; known parameters: {known}")
        out = {}
        for p in self.params:
            if p.name in given:
                v = p.type.convert(given[p.name], self.name, p.name)
            elif p.default is REQUIRED:
                raise ParamError(f"{self.name}: missing required parameter {p.name!r}")
            else:
                v = p.default
            if p.check is not None and v is not None:
                p.check(v, self.name)
            out[p.name] = v
        return out

    # -- kernels ----------------------------------------------------------------
    def bind(self, xp):
        """The kernel specialised for array module ``xp``: ``f(*arrays, **params)``."""
        f = self._bound.get(xp)
        if f is None:
            if self.runner is not None:  # the kernels layer chooses per call
                f = functools.partial(self.runner, xp)
            elif isinstance(self.kernel, str):  # a ufunc / function of the array module
                f = getattr(xp, self.kernel)
            elif self.kernel is None:
                raise NoKernelError(f"{self.name} is a composite op and has no kernel")
            else:
                f = functools.partial(self.kernel, xp)
            self._bound[xp] = f
        return f

    def set_runner(self, runner: Callable | None) -> None:
        """Route this op's calls through ``runner`` (the kernels layer installs it; None: the reference)."""
        self.runner = runner
        self._bound.clear()

    def bind_sparse(self, xp):
        """The sparse kernel specialised for ``xp`` (see ``uses_sparse_kernel``)."""
        f = self._bound.get((xp, "sparse"))
        if f is None:
            if self.sparse_kernel is None:
                raise NoKernelError(f"{self.name}: the storage rule chose a sparse kernel, but the op has none")
            f = self._bound[(xp, "sparse")] = functools.partial(self.sparse_kernel, xp)
        return f

    @property
    def differentiable(self) -> bool:
        return self.grad is not None

    @property
    def makes_arrays(self) -> bool:
        """An op with no array inputs and a ``device`` param (fill, iota, random draws): its public
        functions (``la.<op>``, ``la.sym.<op>``) put the result on the default device when not told."""
        return not self.inputs and any(p.name == "device" for p in self.params)

    def __repr__(self) -> str:
        return f"<op {self.qualname}>"

    @property
    def qualname(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


def register(op: OpDef) -> OpDef:
    """Add ``op`` to the registry (names are unique)."""
    if op.name in _REGISTRY:
        raise ValueError(f"op {op.name!r} registered twice")
    _REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    """The op called ``name``; ``KeyError`` with the close names when unknown."""
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown op {name!r}{hint}") from None


def is_registered(op: OpDef) -> bool:
    """True when ``op`` is the registry's op of its name (not an op made on the fly)."""
    return _REGISTRY.get(op.name) is op


def all_ops() -> list[OpDef]:
    """Every registered op, sorted by name (registry-driven tests iterate this)."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


# -- shape rules ------------------------------------------------------------------
def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting over shapes with ``None`` (unknown) and symbolic dims."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dim = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if d is None:
                dim = None if dim in (1, None) else dim
            elif dim in (1, None):
                dim = d
            elif dim != d and (is_symbolic(d) or is_symbolic(dim)):
                # a symbol against a size (or another symbol): valid sizes are equal or one is 1,
                # and the larger is the result either way (each call checks its concrete sizes)
                dim = dim_max(dim, d)
            elif dim != d:
                raise ShapeError(
                    "cannot broadcast shapes " + " and ".join(fmt_shape(x) for x in shapes)
                    + f" (dim {i - ndim} is {dim} vs {d}); make the sizes equal or 1, "
                    "e.g. with reshape or expand_dims"
                )
        out.append(dim)
    return tuple(out)


def _broadcast_fast(shapes: list) -> tuple:
    """``broadcast_shapes`` with the common cases first: equal shapes, or shapes and scalars."""
    first = None
    for s in shapes:
        if s == ():
            continue
        if first is None:
            first = s
        elif s != first:
            return broadcast_shapes(*shapes)
    return () if first is None else first


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    """``axis`` in ``[-ndim, ndim)`` -> ``[0, ndim)``; ``AxisError`` otherwise."""
    if not -ndim <= axis < ndim:
        raise AxisError(f"{op}: axis {axis} is out of range for an array of {ndim} dims "
                        f"(valid: {-ndim}..{ndim - 1})")
    return axis % ndim if ndim else 0


@functools.lru_cache(maxsize=4096)
def _ufunc_dtype(ufunc_name: str, dtypes: tuple) -> tuple:
    """NumPy's own type resolution for a ufunc, without computing anything."""
    ufunc = getattr(np, ufunc_name)
    resolved = ufunc.resolve_dtypes(tuple(dtypes) + (None,) * ufunc.nout)
    return tuple(resolved[ufunc.nin:])


def _default_dtype(op: OpDef, dtypes, params):
    if op.elementwise and isinstance(op.kernel, str) and isinstance(getattr(np, op.kernel), np.ufunc):
        out = _ufunc_dtype(op.kernel, tuple(dtypes))
        return out[0] if op.outputs_for(params) == 1 else list(out)
    return dtypes[0]


def infer(op: OpDef, in_avals: list[Aval], params: dict) -> tuple[Aval, ...]:
    """Output avals of ``op`` applied to ``in_avals`` with validated ``params``.

    Raises the matching ``LazyArrayError`` subclass with the op, the input avals and a fix.
    This is the one place every shape rule runs (recording, eager calls of non-elementwise ops,
    ``la.sym``, CachedOp compiles), so sizes are checked here: input and output shapes must be
    ints in ``[0, 2**63)`` whose byte count fits the address space (``ShapeError``), and an output
    that a kernel allocates (not a view) or a declared ``workspace`` must fit the allocation limit
    (``OutOfMemoryError``, see ``aval.max_alloc_bytes``). Unsupported input dtypes (complex, ...)
    raise ``DTypeError``. Recording calls this for every node: results are memoized per (input avals, params), since
    rules are pure functions and a traced model repeats the same few signatures many times.
    """
    try:
        key = (tuple(in_avals), tuple(params.items())) if params else tuple(in_avals)
        cached = op._infer_cache.get(key)
    except TypeError:  # unhashable params (slices in an index key before Python 3.12)
        key = cached = None
    if cached is not None:
        return cached
    out = _infer(op, in_avals, params)
    # (results about symbolic dims are not kept: a lenient answer must not stand for a later question)
    if key is not None and not any(has_symbols(a.shape) for a in in_avals):
        if len(op._infer_cache) > 4096:
            op._infer_cache.clear()
        op._infer_cache[key] = out
    return out


def _infer(op: OpDef, in_avals: list[Aval], params: dict) -> tuple[Aval, ...]:
    device = in_avals[0].device if in_avals else None
    sparse = False
    for a in in_avals:
        if a.device is not device and op.device is None:
            listing = ", ".join(str(a) for a in in_avals)
            raise DeviceError(
                f"{op.name}: inputs live on different devices ({listing}); move them to one "
                f"device first, e.g. x.to({in_avals[0].device})"
            )
        if a.stype != "default":
            sparse = True
    _check_inputs(op, in_avals)
    if op.device is not None:
        device = op.device(in_avals, **params)
    shapes = [a.shape for a in in_avals]
    dtypes = tuple(a.dtype for a in in_avals)
    try:
        if op.shape is not None:
            try:
                shape = op.shape(shapes, **params)
            except LazyArrayError as exc:
                if not any(has_symbols(s) for s in shapes):
                    raise
                shape = _unknown_where_symbolic(op, shapes, params, exc)
        else:
            shape = _broadcast_fast(shapes)
        dtype = _dtype_rule(op, dtypes, params)
    except LazyArrayError as exc:
        raise _with_context(exc, op, in_avals) from None
    except TypeError as exc:  # NumPy's type resolution refused the dtypes
        listing = ", ".join(str(d) for d in dtypes)
        raise DTypeError(f"{op.name}: not defined for dtypes ({listing}): {exc}") from None
    n = op.outputs_for(params)
    if n == 1 and not sparse and not op.sparse_from_dense:  # dense in, dense out
        # tuple.__new__ skips NamedTuple's Python-level __new__ (this line runs once per recorded node)
        out = (_new_tuple(Aval, (tuple(shape), dtype if isinstance(dtype, np.dtype) else np.dtype(dtype),
                                 device, "default")),)
    else:
        shapes_out = [shape] if n == 1 else list(shape)
        dtypes_out = dtypes_for(dtype, n)
        stypes = output_stypes(op, [a.stype for a in in_avals], params, n, shapes)
        out = tuple(Aval(tuple(s), np.dtype(d), device, st) for s, d, st in zip(shapes_out, dtypes_out, stypes))
    _check_outputs(op, in_avals, params, out)
    return out


def _unknown_where_symbolic(op: OpDef, shapes: list, params: dict, exc: LazyArrayError) -> tuple:
    """A rule that cannot decide something about symbolic dims (``b`` against 3, ``b < 10``) runs
    again with its undecidable checks passing (``dim.lenient``), else with those dims unknown
    (``None``, as for a data-dependent size); where neither answers, its first error ``exc``
    stands. Nothing is assumed for running: the executor infers again with the concrete sizes of
    each call before anything runs."""
    try:
        with lenient():  # the rule's checks pass where the sizes cannot decide them
            return op.shape(shapes, **params)
    except LazyArrayError:
        pass
    try:
        return op.shape([None if s is None else tuple(None if is_symbolic(d) else d for d in s) for s in shapes],
                        **params)
    except LazyArrayError:
        raise exc from None


def _check_inputs(op: OpDef, in_avals) -> None:
    """Input avals lazyarray can compute with: supported dtypes, shapes of valid sizes."""
    for a in in_avals:
        if not is_supported(a.dtype):
            names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
            raise _with_context(DTypeError(f"{op.name}: input dtype {a.dtype} is not supported; "
                                           f"lazyarray computes with {names}"), op, in_avals)
        if a.shape is not None:
            try:
                check_shape(op.name, a.shape, a.dtype if a.stype == "default" else None, "input")
            except LazyArrayError as exc:
                raise _with_context(exc, op, in_avals) from None


def _check_outputs(op: OpDef, in_avals, params: dict, out) -> None:
    """Output (and workspace) sizes: valid shapes; within the allocation limit unless a view."""
    try:
        for i, a in enumerate(out):
            what = "result" if len(out) == 1 else f"output {i}"
            if a.stype != "default":  # sparse: only the stored values are allocated
                check_shape(op.name, a.shape, None, what)
            elif op.view:  # may alias its input (broadcast_to, expand): NumPy allocates nothing
                check_shape(op.name, a.shape, a.dtype, what)
            else:
                check_alloc(op.name, a.shape, a.dtype, what)
        if op.workspace is not None and all(a.known for a in in_avals if a.shape is not None):
            for what, shape, dtype in op.workspace(in_avals, **params):
                check_alloc(op.name, shape, dtype, what)
    except LazyArrayError as exc:
        raise _with_context(exc, op, in_avals) from None


def _dtype_rule(op: OpDef, dtypes: tuple, params: dict):
    """The op's dtype rule, memoized per (input dtypes, params): rules are pure functions."""
    try:
        key = (dtypes, tuple(params.items())) if params else dtypes
        hash(key)
    except TypeError:  # e.g. slices in an index key (unhashable before Python 3.12)
        key = None
    cache = op._dtype_cache
    if key is not None:
        dtype = cache.get(key)
        if dtype is not None:
            return dtype
    dtype = op.dtype(dtypes, **params) if op.dtype is not None else _default_dtype(op, dtypes, params)
    if key is not None:
        cache[key] = dtype
    return dtype


def dtypes_for(dtype, n):
    if isinstance(dtype, (tuple, list)):
        return list(dtype)
    return [dtype] * n


def output_stypes(op: OpDef, stypes: list[str], params: dict, n: int, shapes=None) -> list[str]:
    """Storage rule: dense in, dense out; sparse without a sparse rule falls back to dense."""
    if op.storage is not None and (op.sparse_from_dense or any(st != "default" for st in stypes)):
        out = op.storage(stypes, _shapes(stypes, shapes), **params)
        if out is not None:
            return list(out)
    return ["default"] * n


def _shapes(stypes, shapes):
    return [None] * len(stypes) if shapes is None else [None if s is None else tuple(s) for s in shapes]


def has_sparse_kernel(op: OpDef, stypes: list[str], params: dict, shapes=None) -> bool:
    """True when the storage rule takes these storage types (no dense fallback needed)."""
    return op.storage is not None and op.storage(stypes, _shapes(stypes, shapes), **params) is not None


def uses_sparse_kernel(op: OpDef, stypes: list[str], params: dict, shapes=None) -> bool | None:
    """Which kernel runs on inputs of ``stypes``: True = ``sparse_kernel``, False = the dense
    ``kernel``, None = the dense kernel after densifying the sparse inputs (the fallback).

    The sparse kernel runs when the storage rule answers and an input or an output is sparse,
    so dense-in dense-out calls of an op with a storage rule still take the dense kernel.
    """
    sparse_in = any(s != "default" for s in stypes)
    if op.storage is None:
        return None if sparse_in else False
    out = op.storage(stypes, _shapes(stypes, shapes), **params)
    if out is None:
        return None if sparse_in else False
    return op.sparse_kernel is not None and (sparse_in or any(s != "default" for s in out))


def warn_fallback(op: OpDef, stypes) -> None:
    """Warn once per (op, storage types) that sparse inputs were densified.

    The tuning table's ``storage_fallback_warn`` (``LAZYARRAY_STORAGE_FALLBACK_WARN=0`` at import,
    ``la.tuning(storage_fallback_warn=False)``) silences it.
    """
    if not current().storage_fallback_warn or not STORAGE_FALLBACK_WARNED.once((op.name, tuple(stypes))):
        return
    warn(
        f"{op.name}: no kernel for storage types ({', '.join(stypes)}); the sparse inputs were "
        "converted to dense, which costs memory and time. Convert explicitly with "
        ".tostype('default') to silence this, or set LAZYARRAY_STORAGE_FALLBACK_WARN=0.",
        StorageFallbackWarning,
    )


class StorageFallbackWarning(UserWarning):
    """A sparse input was densified because the op has no sparse kernel."""


def _with_context(exc: LazyArrayError, op: OpDef, in_avals) -> LazyArrayError:
    msg = str(exc)
    if not msg.startswith(op.name + ":"):
        msg = f"{op.name}: {msg}"
    if in_avals:
        msg += " [inputs: " + ", ".join(f"{a.dtype}{fmt_shape(a.shape)}" for a in in_avals) + "]"
    new = type(exc)(msg)
    return new


class OpNamespace:
    """Registered ops as attributes, each applied through ``apply(op, *args, **params)``.

    Gradient and composite functions are written against such a namespace ``F``; the
    gradient pass passes one that builds graph nodes.
    """

    def __init__(self, apply: Callable[..., Any]):
        self._apply = apply
        self._cache: dict[str, Callable] = {}

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        f = self._cache.get(name)
        if f is None:
            f = functools.partial(self._apply, get(name))
            self._cache[name] = f
        return f
