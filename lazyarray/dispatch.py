"""The dispatcher: the one code path every op call takes.

``apply(op, args, params, make)``:

1. normalizes inputs (arrays, Python scalars, NumPy arrays, nested lists) and params;
2. with deferred compute on: records a node (avals from the op's rules) and returns lazy arrays;
3. otherwise: materializes lazy inputs, runs the kernel, returns normal arrays; when a kernel
   fails, the op's rules are asked for the error, so it names the op, the shapes and the fix;
4. when autograd is recording and an input needs a gradient: adds the node to the graph.

Outputs are built by ``make(value, entry, device)``, which the array type passes in, so this
module needs only the fields it reads (``ArrayBase``), not the array type itself.
"""
from __future__ import annotations

import contextvars
import numbers
import weakref
from collections.abc import Callable
from sys import _getframe

import numpy as np

from . import guards
from .autograd import TRAINING, Leaf, Record, record_call, tracked_nodes
from .aval import Aval, check_scalar, is_supported
from .buffer import version
from .deferred import DEFERRED, MODE, RECORDING, fix_values, materialize, show
from .device import cpu, current_device, to_device
from .errors import (
    ERROR_CLASSES,
    DeviceError,
    DTypeError,
    LazyArrayError,
    OpFailed,
    fmt_shape,
)
from .executor.chain import grow as _chain_grow
from .executor.chain import key_of as _chain_key
from .graph.build import (
    SCALAR_BESIDE,
    apply_node,
    as_entries,
    flat_inputs,
    none_input,
    record_node,
    scalar_beside,
    zip_inputs,
)
from .graph.node import (
    BLOCK_SCOPE,
    IN_PACKAGE,
    SERIAL,
    Entry,
    Node,
    capture_node,
    const_node,
    user_source,
)
from .graph.traverse import topo_order
from .kernels.profile import timed
from .mode import AUTOCAST, PROFILING
from .ops import registry
from .ops.registry import OpDef, OpNamespace
from .storage import SPARSE_TYPES, densify, stype_of


class ArrayBase:
    """What the dispatcher reads of an array: its value (a backend array, or None while lazy), its
    graph entry (lazy arrays; arrays autograd tracks), its device, and its autograd state
    (``_ag``: a ``Leaf`` after ``attach_grad()``, a ``Record`` for a recorded result, else None)."""

    __slots__ = ("_value", "_entry", "_device", "_autograd", "__weakref__")

    # The eager hot path never sets ``_autograd`` (one store less per op, measurable on small
    # arrays); an unset slot reads as None here.
    @property
    def _ag(self):
        try:
            return self._autograd
        except AttributeError:
            return None

    @_ag.setter
    def _ag(self, state) -> None:
        self._autograd = state

    def _materialize(self):
        """The backend value, computing it (and what else is pending) if lazy."""
        v = self._value
        if v is None:
            v = materialize([self])[0]
        return v

    def _as_entry(self) -> Entry:
        """This array as a graph entry.

        A lazy array is its entry; under ``autograd.record()`` an array autograd tracks is the
        entry of its record or leaf, so gradients flow through; any other array is a constant
        capturing its buffer as it is now (its version is checked when the graph reads it).
        """
        e = self._entry
        v = self._value
        if v is None:
            return e
        ag = self._ag
        if ag is not None:
            if ag.__class__ is Leaf:
                e = self._entry = ag.entry_for(v)
                return e
            if MODE.get() & RECORDING:
                if MODE.get() & DEFERRED and ag.values is not None:
                    fix_values(ag.node, ag.values, ag.versions)  # a lazy graph will read these
                return e
        elif e is not None and e.node.kind == "const" and e.node.value is v and e.node.version == version(v):
            return e
        c = Entry(capture_node(v, Aval(v.shape, v.dtype, self._device, stype_of(v))))
        if ag is None and (e is None or e.node.kind == "const"):
            self._entry = c  # (a computed lazy array keeps the entry it was computed from)
        return c


def apply(op: OpDef, args: tuple, params: dict, make):
    """Apply ``op`` to ``args`` with ``params``; returns an array (or a tuple for multi-output ops)."""
    if op.np_ufunc is not None and not params and len(args) == len(op.inputs):
        # A NumPy-ufunc op called as a function (``la.add(a, b)``) takes the same hot path as the
        # operator (``a + b``): the one copy of it lives in ``operator_method``.
        a = args[0]
        if isinstance(a, ArrayBase):
            return _operators(op, make)[0](*args)
        if len(args) == 2 and isinstance(args[1], ArrayBase):
            return _operators(op, make)[1](args[1], a)
    return _apply_general(op, args, params, make)


def _operators(op: OpDef, make) -> tuple:
    """``(forward, reversed)`` operator closures of a ufunc op, made once per op."""
    pair = _OPERATORS.get(op.name)
    if pair is None:
        pair = _OPERATORS[op.name] = (operator_method(op, make), operator_method(op, make, reverse=True))
    return pair


_OPERATORS: dict[str, tuple] = {}


# la.amp.autocast's policy while the mode's AUTOCAST bit is on: (op, args) -> args cast as the op wants them
AUTOCAST_POLICY: contextvars.ContextVar[Callable | None] = contextvars.ContextVar("lazyarray_autocast", default=None)


def _apply_general(op: OpDef, args: tuple, params: dict, make):
    """``apply`` past the ufunc hot path: validate params, then record or run."""
    mode = MODE.get()
    if mode & AUTOCAST:  # (never on the plain float32 path: the mode is 0 there)
        args = AUTOCAST_POLICY.get()(op, args)
    if op.params:
        params = op.make_params(params)  # a fresh dict: validated, defaults filled
        if op.uses_training and params["training"] is None:
            params["training"] = TRAINING.get()
    elif params:
        op.make_params(params)  # raises the unknown-parameter error
    else:
        params = {}  # never share the caller's (or a module-level) dict with a recorded node
    if mode & DEFERRED:
        return _record(op, args, params, make)
    if op.compose is not None:  # a composite runs as the ops it expands to
        return op.compose(OpNamespace(lambda o, *a, **p: apply(o, a, p, make)), *args, **params)
    return _eager(op, args, params, make)


def operator_method(op: OpDef, make, reverse: bool = False, wrapped: bool = False):
    """The array method behind a Python operator (``x + y``, ``2 * x``, ``-x``).

    Plain NumPy-backed operands take the dispatcher's hot path inlined here (per-op overhead is
    what decides small-array speed); everything else goes through ``apply``. ``wrapped``: the
    method is called by one frame of the package's own (``la.tanh``'s function), so the frame
    that recorded a node is looked for one level further out.
    """
    depth = 3 if wrapped else 2  # (_lazy_node's frame 0, the method's 1, then the caller)
    if len(op.inputs) == 1:
        return _unary_method(op, make, depth)
    return _binary_method(op, make, reverse, depth)


def _unary_method(op: OpDef, make, depth: int):
    """``operator_method`` of a one-input op: NumPy's ufunc inline when eager, else a node."""
    ufunc = op.np_ufunc
    get_mode, new = MODE.get, object.__new__

    def unary(self):
        mode = get_mode()
        if ufunc is not None and not mode:
            va = self._value
            if va.__class__ is _ND:
                try:
                    out = ufunc(va)
                except Exception:
                    pass  # re-run by apply() for the rule-based error (-bool: a DTypeError)
                else:
                    r = new(self.__class__)
                    r._value, r._entry, r._device = (out if out.__class__ is _ND else np.asarray(out)), \
                        None, self._device
                    return r
        elif ufunc is not None and mode == DEFERRED:
            # Recording hot path (deferred compute, autograd off): straight to a node.
            return _lazy_node(op, (self._entry if self._value is None else self._as_entry(),), self, depth)
        return _apply_general(op, (self,), {}, make)

    return unary


def _binary_method(op: OpDef, make, reverse: bool, depth: int):
    """``operator_method`` of a two-input op (``reverse``: ``other <op> self``)."""
    ufunc = op.np_ufunc
    get_mode, new = MODE.get, object.__new__
    last = [None]  # (aval, number, entry): the last scalar operand recorded, from _SCALARS_BY_AVAL

    def binary(self, other):
        mode = get_mode()
        if ufunc is not None and not mode:
            va = self._value
            if va.__class__ is _ND:
                if other.__class__ in _PY_NUMBERS:
                    vb = other
                elif isinstance(other, ArrayBase) and other._device is self._device:
                    vb = other._value
                    if vb.__class__ is not _ND:
                        vb = None
                else:
                    vb = None
                if vb is not None:
                    try:
                        out = ufunc(vb, va) if reverse else ufunc(va, vb)
                    except Exception:
                        pass  # re-run by apply() for the rule-based error
                    else:
                        r = new(self.__class__)
                        r._value, r._entry, r._device = (out if out.__class__ is _ND else np.asarray(out)), \
                            None, self._device
                        return r
        elif ufunc is not None and mode == DEFERRED:
            # Recording hot path (deferred compute, autograd off): two arrays, or an array and a
            # Python number, straight to a node.
            ea = self._entry if self._value is None else self._as_entry()
            if other.__class__ in _PY_NUMBERS:
                a0 = ea.node.avals[ea.index]
                hit = last[0]  # (this operator's last scalar: the same number object, the same aval)
                if hit is not None and hit[0] is a0 and hit[1] is other:
                    eb = hit[2]
                else:
                    eb = _scalar_entry(op, a0, other, last)
                if eb is not None:
                    return _lazy_node(op, (eb, ea) if reverse else (ea, eb), self, depth)
            elif isinstance(other, ArrayBase):
                eb = other._entry if other._value is None else other._as_entry()
                return _lazy_node(op, (eb, ea) if reverse else (ea, eb), self, depth)
        return _apply_general(op, (other, self) if reverse else (self, other), {}, make)

    return binary


def _scalar_entry(op: OpDef, a0: Aval, number, last: list):
    """The constant entry of a Python ``number`` beside an array of aval ``a0`` (None: the
    general path decides), memoized by the identity of the aval; a memo hit becomes the
    operator's ``last``."""
    at = (id(a0), number.__class__, number)  # (hashing a dtype costs more than the rest)
    hit = _SCALARS_BY_AVAL.get(at)
    if hit is not None and hit[0] is a0:
        eb = hit[1]
        last[0] = (a0, number, eb)
        return eb
    if a0.dtype is None or a0.stype != "default":
        return None
    eb = SCALAR_BESIDE.get((number.__class__, number, a0.dtype, a0.device))
    if eb is None:
        return scalar_beside(number, a0, op)
    if len(_SCALARS_BY_AVAL) >= 4096:  # (only shared constants: never a zero, a NaN or a range-adjusted int)
        _SCALARS_BY_AVAL.clear()
    _SCALARS_BY_AVAL[at] = (a0, eb)
    return eb


def _lazy_node(op: OpDef, entries: tuple, like, depth: int = 2):
    """``_lazy(like, record_node(op, entries, {}))`` for the operator hot paths: a param-free op
    whose output avals the chain or the rule memo knows (else the general path). The node is
    ``graph.node.op_node``'s, built inline (a call less per recorded op; a test checks both)."""
    frame = _getframe(depth)
    code = frame.f_code
    lasti = frame.f_lasti
    # A chain going on (executor/chain.py): the previous op's key knows this op's key among its
    # successors, and with it the output avals (a function of the op and the input avals, which
    # the key stands for) and the call site this position was last recorded from.
    if len(entries) == 1:
        e = entries[0]
        b = None
        prev = e.node.chain
        k = prev.succ if prev is not None else None
        fast = k is not None and k.op is op and k.leaf is None
    else:
        e, f = entries
        b = f.node.avals[f.index]
        prev = e.node.chain
        if prev is not None and f.node.op is None:
            k = prev.succ
            fast = k is not None and k.op is op and (k.leaf is b or k.leaf == b)
        else:
            fast = False
    if fast and k.site_code is code and k.site_lasti == lasti:
        avals = k.avals
        source = k.site_source
    else:
        avals = _rule_avals(op, e.node.avals[e.index], b)
        if avals is None:
            made = record_node(op, entries, {}, skip=3)
            if made.__class__ is Entry:  # (one output: a chain may go on from it)
                made.node.chain = _chain_key(op, entries, made.node.avals)
            return _lazy(like, made)
        source, k = _site_and_key(op, entries, avals, prev, k if fast else None, frame, depth)
    node = _new(Node)
    node.source = source
    scope = _block_scope()
    node.block = scope[1] or None if scope is not None else None
    node.op = op
    node.inputs = entries
    node.params = {}
    node.name = None
    node.kind = "op"
    node.avals = avals
    node.value = None
    node.version = None
    node.serial = _next_serial()
    node.sbp = None
    node.chain = k
    entry = _new(Entry)
    entry.node = node
    entry.index = 0
    r = _new(like.__class__)
    r._value = None
    r._entry = entry
    r._device = avals[0].device
    node.shown = _weakref(r)  # (deferred.show's one-array form)
    return r


def _rule_avals(op: OpDef, a: Aval, b: Aval | None):
    """The output avals of a one-output, param-free ``op`` on input avals ``a`` (and ``b``) from
    the rule memo, or None when it does not know them.

    Memoized by the identity of the input avals (hashing avals costs more): the entry holds the
    op and the avals, so their ids are never another's while it exists."""
    at = (id(op), id(a), id(b))
    hit = _AVALS_BY_ID.get(at)
    if hit is not None and hit[0] is op and hit[1] is a and hit[2] is b:
        return hit[3]
    avals = op._infer_cache.get((a,) if b is None else (a, b))
    if avals is None or len(avals) != 1:
        return None
    if len(_AVALS_BY_ID) >= 4096:
        _AVALS_BY_ID.clear()
    _AVALS_BY_ID[at] = (op, a, b, avals)
    return avals


def _site_and_key(op: OpDef, entries: tuple, avals: tuple, prev, known, frame, depth: int) -> tuple:
    """``(source, chain key)`` of the node ``_lazy_node`` records from ``frame`` when the chain
    did not know its call site (``known``: the chain's key for this op, else None)."""
    # The user's frame is most often ``depth`` frames out of _lazy_node (every frame before it is
    # ours: see graph.node.user_source), reached without making frame objects for the frames
    # between. Call sites are memoized by (id(code), bytecode offset): hashing a code object and
    # decoding a line number cost more than the rest of the node; the entry keeps the code
    # alive, so its id is never another's while the entry exists.
    code = frame.f_code
    lasti = frame.f_lasti
    site = _SITES.get((id(code), lasti))
    if site is not None and site[0] is code:
        source = site[1]
    else:
        source = _site_source(frame, code, depth + 2)
    b = entries[1] if len(entries) == 2 else None
    if known is not None and known.avals is avals:
        k = known
    elif prev is not None and (b is None or b.node.op is None):
        k = _chain_grow(prev, op, avals, 0, None if b is None else b.node.avals[b.index])
    else:
        k = _chain_key(op, entries, avals)
    if k is not None and IN_PACKAGE.get(code) is False:  # (a site in the package: looked for further out)
        k.site_code, k.site_lasti, k.site_source = code, lasti, source
    return source, k


# (id(aval), type, value) -> (aval, entry): scalar_beside's memo by the identity of the array's aval
_SCALARS_BY_AVAL: dict = {}
_AVALS_BY_ID: dict = {}  # (id(op), id(aval), id(aval) or id(None)) -> (op, aval, aval, output avals)
_SITES: dict = {}  # (id(code), f_lasti) -> (code, (file, line)) of user code that recorded nodes


def _site_source(frame, code, skip: int):
    """``(file, line)`` of the node ``_lazy_node`` records from ``frame`` (memoized when the frame is
    the user's; else the first frame outside the package, ``skip`` frames out from here)."""
    if IN_PACKAGE.get(code) is not False:
        return user_source(skip + 1)
    source = (code.co_filename, frame.f_lineno)
    if len(_SITES) >= 4096:
        _SITES.clear()
    _SITES[(id(code), frame.f_lasti)] = (code, source)
    return source


def _lazy(like, entry: Entry):
    """A lazy array (of ``like``'s type) showing ``entry``, for a node just recorded (no array
    shows it yet; autograd state stays unset, which reads as None)."""
    r = _new(like.__class__)
    node = entry.node
    r._value, r._entry, r._device = None, entry, node.avals[0].device
    node.shown = _weakref(r)  # (deferred.show's one-array form)
    return r


_new = object.__new__


def _eager(op: OpDef, args: tuple, params: dict, make):
    if op.plain and len(args) != len(op.inputs):
        zip_inputs(op, args)  # raises the arity error
    device = None
    vals = []
    host = None  # positions of NumPy / list inputs that must follow the arrays' device
    for name, a in (zip(op.inputs, args) if op.plain else _flat(op, args)):
        if isinstance(a, ArrayBase):
            v = a._value
            if v is None:
                v = a._materialize()
            d = a._device
            if device is None:
                device = d
            elif d is not device:
                _device_error(op, args)
            vals.append(v)
        elif isinstance(a, (numbers.Number, np.bool_, np.number)):
            vals.append(a if a.__class__ in _PY_NUMBERS else check_scalar(a, op.name))
        elif a is None:  # (a missing optional input never gets here: _flat drops it)
            raise none_input(op, name)
        else:
            host = host or []
            host.append(len(vals))
            vals.append(_host_array(a, op))
    if device is None:
        device = current_device()
    if host and device.kind != "cpu":
        for i in host:
            vals[i] = to_device(vals[i], _CPU0, device)
    xp = device.xp
    out_device = device
    if not op.elementwise:
        # Elementwise ops are checked by NumPy itself (broadcasting, dtypes); for the others the
        # rules run first, so eager calls reject exactly what a recorded graph would.
        avals = _check_rules(op, vals, params, device)
        if op.device is not None:  # copy_to: the result lives where the rule says
            out_device = avals[0].device
    kernel = op.bind(xp)
    if op.storage is not None or any(v.__class__ in SPARSE_TYPES for v in vals):
        kernel, vals = _storage_kernel(op, kernel, vals, params, xp)
    try:
        if MODE.get() & PROFILING:
            out = timed(op, kernel, "eager")(*vals, **params)
        else:
            out = kernel(*vals, **params)
    except Exception as exc:
        raise _kernel_error(op, args, vals, params, device, exc) from None
    if op.outputs_for(params) == 1:
        if out.__class__ in _SCALARS:  # NumPy returns scalars for 0-d results; keep arrays
            out = np.asarray(out)
        res = make(out, None, out_device)
        if MODE.get() & RECORDING:
            _record_eager(op, args, params, [res], [out], out_device)
        return res
    return _eager_results(op, args, params, make, out, out_device)


def _storage_kernel(op: OpDef, kernel, vals: list, params: dict, xp) -> tuple:
    """``(kernel, vals)`` for inputs that may be sparse: the op's sparse kernel when it takes
    these storage types, else the dense kernel on densified inputs (with a fallback warning)."""
    stypes = [stype_of(v) for v in vals if v is not None]
    shapes = [getattr(v, "shape", ()) for v in vals if v is not None]
    which = registry.uses_sparse_kernel(op, stypes, params, shapes)
    if which:
        return op.bind_sparse(xp), vals
    if which is None:
        registry.warn_fallback(op, stypes)
        return kernel, [densify(v, xp) for v in vals]
    return kernel, vals


def _eager_results(op: OpDef, args: tuple, params: dict, make, out, device) -> tuple:
    """The arrays of a multi-output op's eager results (recorded for autograd when needed)."""
    res = tuple(make(np.asarray(o) if o.__class__ in _SCALARS else o, None, device) for o in out)
    if MODE.get() & RECORDING:
        _record_eager(op, args, params, list(res), list(out), device)
    return res


def _check_rules(op: OpDef, vals: list, params: dict, device) -> tuple:
    avals = []
    for v in vals:
        if v is None:
            continue
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            avals.append(Aval(tuple(v.shape), v.dtype, device, stype_of(v)))
        else:  # a Python scalar: typed the way NumPy treats it next to the arrays
            avals.append(Aval((), np.result_type(*[a.dtype for a in avals], v), device))
    return registry.infer(op, avals, params)


def _record_eager(op, args, params, results, outs, device) -> None:
    """Record an eagerly computed op for autograd when an input needs a gradient."""
    arrays = [a for _, a in _flat(op, args) if isinstance(a, ArrayBase)]
    if not any(a._ag is not None for a in arrays):
        return
    entries = as_entries(op, _inputs_as_entries(op, args))
    avals = tuple(Aval(o.shape, o.dtype, device, stype_of(o)) for o in outs)
    record_call(Node(op, tuple(entries), params, avals, source=user_source()), list(outs), arrays, results)


def _record(op: OpDef, args: tuple, params: dict, make):
    """Deferred compute: record a node, return lazy arrays (with an autograd record when
    ``autograd.record()`` is on and an input needs a gradient)."""
    inputs = _inputs_as_entries(op, args)
    if op.compose is not None:
        res = apply_node(op, *inputs, **params)
    else:
        res = record_node(op, as_entries(op, inputs), params)
    single = type(res) is Entry
    res = (res,) if single else res
    if op.random:
        trace = guards.active()
        if trace is not None:  # a hybridize trace keeps even a draw nothing uses (see blocks/hybrid.py)
            trace.draws.extend(res)
    outs = tuple(make(None, e, e.aval.device) for e in res)
    for o in outs:
        show(o, o._entry)
    if MODE.get() & RECORDING:
        arrays = [a for _, a in _flat(op, args) if isinstance(a, ArrayBase)]
        if any(a._ag is not None for a in arrays):
            _record_lazy(list(res), outs, arrays)
    return outs[0] if single else outs


def _record_lazy(res: list[Entry], outs, arrays) -> None:
    """Autograd records for the nodes just recorded lazily (a composite op records several),
    linked to the records and leaves of the input arrays."""
    by_node = tracked_nodes(arrays)
    inputs = set(by_node)
    for node in topo_order(res, stop=lambda n: id(n) in inputs):
        if id(node) in by_node or node.op is None:
            continue
        parents = tuple(by_node.get(id(e.node)) for e in node.inputs)
        if any(p is not None for p in parents):
            by_node[id(node)] = Record(node, None, parents)
    for o, e in zip(outs, res):
        o._ag = by_node.get(id(e.node))


def _inputs_as_entries(op: OpDef, args: tuple) -> list:
    """Arrays -> entries (normal arrays become constants); scalars stay for ``apply_node``."""
    if op.plain or not op.variadic:  # (missing optional inputs are dropped later, by as_entries)
        return [a._as_entry() if isinstance(a, ArrayBase) else _entry_of(a, op) for a in args]
    out = []
    for name, a in zip_inputs(op, args):
        if name.startswith("*"):
            out.append([_entry_of(x, op) for x in a])
        else:
            out.append(_entry_of(a, op))
    return out


def _entry_of(a, op):
    if isinstance(a, ArrayBase):
        return a._as_entry()
    if a.__class__ in _PY_NUMBERS or a is None or isinstance(a, (numbers.Number, np.bool_, np.number)):
        return a if a.__class__ in _PY_NUMBERS or a is None else check_scalar(a, op.name)
    v = np.array(_host_array(a, op), copy=True)  # the graph's own read-only copy, not the caller's array
    return Entry(const_node(v, Aval(v.shape, v.dtype, current_device())))


_weakref = weakref.ref
_block_scope = BLOCK_SCOPE.get
_next_serial = SERIAL.__next__
_flat = flat_inputs  # (name, value) pairs: *seq inputs flattened, missing optionals dropped


def _host_array(a, op: OpDef):
    """NumPy arrays keep their dtype; lists follow ``la.array`` (Python floats -> float32)."""
    if isinstance(a, np.ndarray):
        if not is_supported(a.dtype):  # complex, strings, ...: refused as la.array refuses them
            raise DTypeError(f"{op.name}: NumPy array input of dtype {a.dtype} is not supported; "
                             "lazyarray computes with bool, int, uint, float and complex dtypes")
        return a
    try:
        arr = np.asarray(a)
    except Exception:
        arr = None
    if arr is None or arr.dtype == object or arr.dtype.kind in "USV":
        raise DTypeError(f"{op.name}: cannot use {type(a).__name__} as an array input; "
                             "pass a lazyarray, a NumPy array or a list of numbers")
    if not is_supported(arr.dtype):
        raise DTypeError(f"{op.name}: {type(a).__name__} input of dtype {arr.dtype} is not supported; "
                         "lazyarray computes with bool, int, uint, float and complex dtypes")
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    return arr.astype(np.complex64) if arr.dtype == np.complex128 else arr


def _aval_of(a) -> Aval | None:
    if isinstance(a, ArrayBase):
        if a._value is not None:
            v = a._value
            return Aval(v.shape, v.dtype, a._device, stype_of(v))
        return a._entry.aval
    return None


def _device_error(op: OpDef, args) -> None:
    avals = [_aval_of(a) for _, a in _flat(op, args)]
    listing = ", ".join(str(a) for a in avals if a is not None)
    first = next(a for a in avals if a is not None)
    raise DeviceError(
        f"{op.name}: inputs live on different devices ({listing}); move them to one device "
        f"first, e.g. y = y.to({first.device})"
    )


def _kernel_error(op: OpDef, args, vals, params, device, exc) -> Exception:
    """Turn a kernel failure into the error the op's rules give for these inputs."""
    if isinstance(exc, LazyArrayError):
        return exc
    try:  # the rules know the op's constraints and phrase the fix
        apply_node(op, *_inputs_as_entries(op, args), source=(None, 0), **params)
    except LazyArrayError as rule_error:
        return rule_error
    except Exception:
        pass
    shapes = ", ".join(
        f"{v.dtype}{fmt_shape(v.shape)}" for v in vals if hasattr(v, "shape") and hasattr(v, "dtype")
    )
    kind = next((w for t, w in ERROR_CLASSES.items() if isinstance(exc, t)), OpFailed)
    return kind(f"{op.name} failed on inputs [{shapes}]: {exc}")
_CPU0 = cpu(0)
_ND = np.ndarray
_PY_NUMBERS = frozenset((float, int, bool))
_SCALARS = frozenset(np.sctypeDict.values()) - {np.ndarray}


def clear() -> None:
    """Forget the recording memos (scalars by aval, output avals by input avals, user call sites:
    4096 entries each at most; the operator methods made per op)."""
    _SCALARS_BY_AVAL.clear()
    _AVALS_BY_ID.clear()
    _SITES.clear()
    _OPERATORS.clear()
