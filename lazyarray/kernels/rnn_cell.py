"""foreach's ``compiled_cell``: a recurrent cell's whole time loop as one compiled call.

An imported LSTM or GRU (``onnx/import_rnn.py``) is one ``foreach`` per direction whose body is a
small cell: the recurrent product ``h @ R``, column slices per gate, bias adds, sigmoid / tanh and
the state update. ``inline_loop`` (``foreach.py``) runs it as written-out Python: some fifteen NumPy
calls per step, 25-35 us a step at a hidden size of 16, where the arithmetic is well under one.
Here the body is translated once into a table of ops over 2-D registers (``CellTable``), and
``scan_jit.run_scan`` runs every step of it in one compiled call. The values that depend only on
the free inputs are read from one packed array: where each is a free input or constant, or a
column slice of one (an imported GRU's per-gate weights and biases), the free inputs are packed as
they are and read in place (``_direct_layout``); otherwise the loop-invariant ops run by their
kernels once per call and their values are packed. What a call needs per input signature (each
register's rows, the offsets of the loaded values and initial states) is worked out once (``Frame``).

It takes bodies of one data input (``x_t``, [batch, n]) whose values are all at most 2-D, of the
data's float dtype, with a known number of columns, made of ``OPS`` (a ``getitem`` only as a column
slice, a ``matmul`` only by a loop-invariant matrix), without ``save_states`` (training keeps
``inline_loop``), whose products per step stay under ``foreach_cell_max_macs`` (the tuning table;
past it BLAS per step wins). A body's first ``foreach_jit_after`` calls run ``inline_loop``, so a
graph run once never waits for numba (the loop compiles once per dtype, then loads from the disk
cache). Values: see ``scan_jit`` (float64's exp / tanh of the C library, float32's sigmoid / tanh
within one rounding of the exact values where ``foreach_cell_fast_exp``, products summed in index
order: rtol 1e-5 in float32, 1e-12 in float64 against the reference).
"""
from __future__ import annotations

from operator import is_, itemgetter

import numpy as np

from .. import jit
from ..caches import NamedCache
from ..tuning_table import current as tuning
from . import scan_jit as sj

OPS = {"add": sj.ADD, "subtract": sj.SUBTRACT, "multiply": sj.MULTIPLY, "divide": sj.DIVIDE,
       "maximum": sj.MAXIMUM, "minimum": sj.MINIMUM, "sigmoid": sj.SIGMOID, "tanh": sj.TANH, "exp": sj.EXP,
       "relu": sj.RELU, "negative": sj.NEGATIVE, "getitem": sj.SLICE, "matmul": sj.MATMUL}
_F32 = np.dtype(np.float32)
_FLOATS = (_F32, np.dtype(np.float64))
TABLES = NamedCache("foreach compiled cells", 64)  # (id(body), (n_data, n_states, save_states)) -> Entry
LOOP = NamedCache("foreach compiled cell loop", 1)  # "scan" -> the compiled run_scan


class BoundedDict(dict):
    """A dict of at most ``size`` keys (emptied when a new one would pass it): per-batch arrays of a table."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def __setitem__(self, key, value) -> None:
        if key not in self and len(self) >= self.size:
            self.clear()
        super().__setitem__(key, value)


class CellTable:
    """A body as registers and ops. Register k holds ``cols[k]`` columns and the batch's rows where
    ``rows[k]`` (else one row, broadcast). ``ops``: the step's table rows; ``loads``: (register, node)
    of the loop-invariant values read as registers; ``matrices``: the loop-invariant right operands
    of the products ([K, N], packed first, at ``matrix_at``); ``hoisted``: the loop-invariant op nodes
    (their kernels run once per call); ``outs``: the output registers (step outputs, then next
    states); ``states``: the state registers; ``macs``: multiply-adds per batch row and step."""

    def __init__(self, body, dtype):
        self.dtype = dtype
        self.body_inputs = list(body.inputs)
        self.consts: list = []
        self.regs: dict[int, int] = {}  # id(node) -> register
        self.rows: list[bool] = []
        self.cols: list[int] = []
        self.ops: list[tuple] = []
        self.loads: list[tuple] = []
        self.matrices: list = []
        self.matrix_at: list[int] = []
        self.hoisted: list = []
        self.fixed: set[int] = set()
        self.outs: list[int] = []
        self.states: list[int] = []
        self.macs = 0

    def freeze(self) -> None:
        """The table as the arrays the compiled loop reads."""
        self.cols_array = np.array(self.cols, np.int64)
        self.states_array = np.array(self.states, np.int64)
        self.outs_array = np.array(self.outs, np.int64)
        self._rows = np.array(self.rows, bool)
        self.width, self.one = max(self.cols), self.dtype.type(1)
        self.const_values = {id(n): np.asarray(n.value, n.avals[0].dtype) for n in self.consts}
        self.free_used = [(k, id(n)) for k, n in enumerate(self.body_inputs) if id(n) in self.fixed]
        # the loop-invariant ops' kernels, bound once (each call runs them on the call's free inputs)
        self.hoisted_calls = [(id(n), n.op.bind(np), tuple(id(e.node) for e in n.inputs), dict(n.params))
                              for n in self.hoisted]
        self.direct = _direct_layout(self)
        # per direct source: (the call's array index, None) or (None, the constant's values, flat)
        self.direct_parts = [(key, None) if kind == "in" else (None, self.const_values[key].ravel())
                             for (kind, key), _ in (self.direct[0] if self.direct else ())]
        self.direct_shapes = {k: tuple(self.body_inputs[k].avals[0].shape) for k, n in self.direct_parts if n is None}
        ops, m = [], 0
        for row in self.ops:  # (a product's matrix: its offset in the pack and its row length)
            if row[0] == sj.MATMUL:
                at, ld = self.direct[1][m] if self.direct else (self.matrix_at[m], self.cols[row[1]])
                row, m = (row[0], row[1], row[2], at, ld), m + 1
            ops.append(row)
        self.table_array = np.array(ops, np.int64).reshape(-1, 5)

    def add(self, node, geometry) -> int:
        k = self.regs[id(node)] = len(self.rows)
        self.rows.append(geometry[0])
        self.cols.append(geometry[1])
        return k

    def reg(self, node) -> int | None:
        """The register of ``node`` (a loop-invariant value gets one, loaded before the loop, when first read)."""
        k = self.regs.get(id(node))
        if k is None and id(node) in self.fixed:
            g = _geometry(node.avals[0], self.dtype)
            if g is not None:
                k = self.add(node, g)
                self.loads.append((k, node))
        return k


def _source(t: CellTable, n):
    """(the free input or constant ``n`` is, or whose columns ``lo..`` it slices with step 1; ``lo``),
    or None where ``n`` is another loop-invariant op's value."""
    if id(n) not in t.hoisted_ids:
        return n, 0
    if n.op.name != "getitem" or id(n.inputs[0].node) in t.hoisted_ids:
        return None
    src = n.inputs[0].node
    shape = tuple(src.avals[0].shape)
    if not 1 <= len(shape) <= 2 or not all(isinstance(d, int) for d in shape):
        return None
    key = n.params.get("key")
    if len(shape) == 1 and isinstance(key, tuple) and len(key) == 1 and isinstance(key[0], slice):
        lo, _, step = key[0].indices(shape[0])  # (a 1-D bias sliced without an Ellipsis)
        return (src, lo) if step == 1 else None
    lo = _slice_of(n, shape[-1])
    return None if lo is None else (src, lo)


def _direct_layout(t: CellTable):
    """Where every product's matrix and every loaded value is a free input or constant of the body, or
    a column slice of one (an imported GRU slices its recurrent weights and biases per gate): the pack
    is those inputs and constants as they are, each read in place. ``(sources: ("in", k) / ("const",
    id) with their sizes, per matrix (offset, row length), per load (register, offset))``; None
    (the loop-invariant ops run per call, their values packed) otherwise."""
    t.hoisted_ids = {id(n) for n in t.hoisted}
    inputs = {id(n): k for k, n in enumerate(t.body_inputs)}
    sources, at = {}, [0]

    def offset(src) -> int | None:
        shape = tuple(src.avals[0].shape)
        if np.dtype(src.avals[0].dtype) != t.dtype or not all(isinstance(d, int) for d in shape):
            return None
        if id(src) not in sources:
            kind = ("in", inputs[id(src)]) if id(src) in inputs else ("const", id(src))
            sources[id(src)] = (kind, int(np.prod(shape)), at[0])
            at[0] += int(np.prod(shape))
        return sources[id(src)][2]

    matrices, loads = [], []
    for m in t.matrices:
        got = _source(t, m)
        off = offset(got[0]) if got is not None and len(got[0].avals[0].shape) == 2 else None
        if off is None:
            return None
        matrices.append((off + got[1], got[0].avals[0].shape[1]))
    for k, n in t.loads:
        got = _source(t, n)
        if got is None or t.rows[k]:
            return None  # (a value with the batch's rows: packed per call)
        src, lo = got
        if src is n and int(np.prod(n.avals[0].shape)) != t.cols[k]:
            return None  # (a value broadcast over its register's columns: packed by _flat)
        if src is not n and len(src.avals[0].shape) == 2 and src.avals[0].shape[0] != 1:
            return None  # (columns of several rows: not one run of the source)
        off = offset(src)
        if off is None:
            return None
        loads.append((k, off + lo))
    return [(kind, size) for kind, size, _ in sources.values()], matrices, loads


def _geometry(aval, dtype):
    """(rows are the batch's, columns) of a value, or None where the loop cannot hold it."""
    shape = tuple(aval.shape)
    if np.dtype(aval.dtype) != dtype or len(shape) > 2 or (shape and not isinstance(shape[-1], int)):
        return None
    return (len(shape) == 2 and shape[0] != 1), (shape[-1] if shape else 1)


def _slice_of(node, cols_in: int):
    """The first column of a ``getitem`` that slices the last of two axes with step 1, else None."""
    key = node.params.get("key")
    if not isinstance(key, tuple) or len(key) != 2 or not isinstance(key[1], slice):
        return None
    if key[0] is not Ellipsis and key[0] != slice(None):
        return None
    lo, _, step = key[1].indices(cols_in)
    return lo if step == 1 else None


def _matmul_row(t: CellTable, n, d: int, a: int | None):
    """``h @ R`` with R loop-invariant and 2-D [K, N], K the columns of h; else None."""
    w = n.inputs[1].node
    shape = tuple(n.inputs[1].aval.shape)
    if a is None or id(w) not in t.fixed or len(shape) != 2 or not all(isinstance(s, int) for s in shape) \
            or shape[0] != t.cols[a] or len(n.inputs[0].aval.shape) != 2 or np.dtype(w.avals[0].dtype) != t.dtype:
        return None
    at = sum(int(np.prod(m.avals[0].shape)) for m in t.matrices)
    t.matrices.append(w)
    t.matrix_at.append(at)
    t.macs += shape[0] * shape[1]
    return (sj.MATMUL, d, a, at, 0)


def _op_row(t: CellTable, n, d: int):
    """The table row of op node ``n`` (register ``d``), or None where the loop does not take it."""
    code = OPS.get(n.op.name)
    if code is None or len(n.avals) != 1:
        return None
    if code == sj.MATMUL:
        return _matmul_row(t, n, d, t.reg(n.inputs[0].node))
    ins = [t.reg(e.node) for e in n.inputs]
    if any(k is None for k in ins):
        return None
    if code == sj.SLICE:
        lo = _slice_of(n, t.cols[ins[0]]) if len(n.inputs[0].aval.shape) == 2 else None
        return None if lo is None else (code, d, ins[0], 0, lo)
    if code in sj.BINARY:
        return (code, d, ins[0], ins[1], 0) if len(ins) == 2 else None
    return (code, d, ins[0], 0, 0) if len(ins) == 1 else None


def build(body, n_states: int) -> CellTable | None:
    """The body's table (one data input, ``n_states`` states, the rest free), or None where the
    compiled loop does not take it."""
    data = body.inputs[0].avals[0]
    dtype = np.dtype(data.dtype)
    if dtype not in _FLOATS:
        return None
    t = CellTable(body, dtype)
    t.fixed = {id(n) for n in body.inputs[1 + n_states:]}
    for n in body.inputs[:1 + n_states]:
        g = _geometry(n.avals[0], dtype)
        if g is None or len(n.avals[0].shape) != 2:
            return None
        t.add(n, g)
    t.ops.append((sj.LOAD_X, 0, 0, 0, 0))
    t.states = list(range(1, 1 + n_states))
    for n in body.sym.topo():
        if id(n) in t.regs or id(n) in t.fixed:
            continue
        if n.kind == "const" or (n.kind == "op" and all(id(e.node) in t.fixed for e in n.inputs)):
            t.fixed.add(id(n))
            (t.hoisted if n.kind == "op" else t.consts).append(n)
            continue
        g = _geometry(n.avals[0], dtype) if n.kind == "op" else None
        row = _op_row(t, n, t.add(n, g)) if g is not None else None
        if row is None:
            return None
        t.ops.append(row)
    t.outs = [t.reg(e.node) for e in body.sym.outputs]
    n_y = len(t.outs) - n_states
    if any(k is None or t.rows[k] != t.rows[0] for k in t.outs + t.states) or \
            any(t.cols[t.outs[n_y + s]] != t.cols[t.states[s]] for s in range(n_states)):
        return None  # (every output and state has the data's rows; a next state, its state's columns)
    t.freeze()
    return t


class Entry:
    """A body's table (None: the compiled loop does not take it), its calls so far, its output avals
    per input signature and its ``Frame`` per input signature."""

    __slots__ = ("body", "key", "table", "calls", "out_avals", "at")

    def __init__(self, body, key, table):
        self.body, self.key, self.table, self.calls = body, key, table, 0
        self.out_avals: dict = {}  # input signature -> the op's output (shapes, dtypes), see foreach._outputs
        # input signature -> (the op's output (shapes, dtypes), the Frame or None): a compiled call's one look-up
        self.at = BoundedDict(8)


def entry(body, n_data: int, n_states: int, save_states: bool) -> Entry:
    """The body's entry, its table built on first sight."""
    key = (n_data, n_states, save_states)
    e = TABLES.peek((id(body), key))
    if e is None or e.body is not body:
        e = Entry(body, key, build(body, n_states) if n_data == 1 and not save_states else None)
        TABLES.put((id(body), key), e)
    return e


def takes(e: Entry, arrays) -> bool:
    """Whether this call runs compiled: a table, numba on, past the first calls, products small enough."""
    return e.calls >= tuning().foreach_jit_after and fits(e, arrays)


def fits(e: Entry, arrays) -> bool:
    """``takes`` but for the body's first calls: whether such a call runs compiled once they are past."""
    t, x = e.table, arrays[0]
    if t is None or not jit.enabled() or x.ndim != 3 or x.dtype != t.dtype or x.shape[1] == 0:
        return False
    return t.macs * x.shape[1] <= tuning().foreach_cell_max_macs


def _loop():
    got = LOOP.peek("scan")
    if got is None:
        got = sj.make_scan(jit.compiled)
        LOOP.put("scan", got)
    return got


def _flat(v, rows: int, cols: int):
    """``v`` as the ``rows`` x ``cols`` values of its register, flat (broadcast where it is smaller)."""
    if v.size == rows * cols and (v.ndim == 0 or v.shape[-1] == cols):
        return np.ravel(v)
    return np.broadcast_to(v, (rows, cols)).ravel()


class Frame:
    """A table's call at one input signature, worked out once (``frame``): each register's rows
    (``rows``), the (register, offset) of every value loaded before the loop from the packed array
    (``fixed``: loop-invariant values after the products' matrices, then the initial states),
    each packed part's size (``sizes``), the registers' shape, whether the one step output is
    written straight into its buffer (``one_y``) or through ``y_shape``, and the int64 arrays the
    compiled loop reads as one (``meta``, ``scan_jit.meta_of``)."""

    __slots__ = ("rows", "fixed", "sizes", "regs_shape", "one_y", "y_shape", "meta")


def frame(e: Entry, sig: tuple, out_shapes) -> Frame | None:
    """The ``Frame`` of a call whose arrays have the shapes and dtypes ``sig`` (data, states, free
    inputs) and whose outputs have ``out_shapes``; None where the call does not fit the table (a
    data, state or directly read free input size other than the table's, a batch the body's values
    were not traced to span)."""
    t, fr = e.table, None
    (x_shape, _), states = sig[0], sig[1:1 + len(t.states)]
    steps, batch, n = x_shape
    direct = t.direct[0] if t.direct else ()
    if n == t.cols[0] and (batch == 1 or t.rows[0]) and \
            all(shape == (batch, t.cols[k]) for (shape, _), k in zip(states, t.states)) and \
            all(sig[key][0] == t.direct_shapes[key] for (kind, key), _ in direct if kind == "in"):
        fr = Frame()
        fr.rows = np.where(t._rows, batch, 1).astype(np.int64)
        _lay_out(t, fr, batch)
        fr.regs_shape = (len(t.rows), batch * t.width)
        n_y = len(t.outs) - len(t.states)
        fr.y_shape = (steps, batch, sum(t.cols[k] for k in t.outs[:n_y]))
        fr.one_y = n_y == 1 and tuple(out_shapes[0]) == fr.y_shape
        fr.meta = sj.meta_of(t.table_array, fr.rows, t.cols_array, fr.fixed, t.states_array, t.outs_array,
                             fr.regs_shape[1])
    return fr


def _lay_out(t: CellTable, fr: Frame, batch: int) -> None:
    """``fr.sizes`` (each packed part's) and ``fr.fixed`` (the (register, offset) of each value loaded
    before the loop): the table's direct sources, else its matrices and loaded values, then the states."""
    states = [batch * t.cols[k] for k in t.states]
    if t.direct:
        sources, _, loads = t.direct
        fr.sizes = [size for _, size in sources] + states
        at = np.cumsum([sum(size for _, size in sources)] + states)[:-1]
        fixed = list(loads) + list(zip(t.states, at))
    else:
        fr.sizes = [int(np.prod(m.avals[0].shape)) for m in t.matrices] + \
            [int(fr.rows[k]) * t.cols[k] for k, _ in t.loads] + states
        at = np.cumsum([0] + fr.sizes)[len(t.matrices):-1]
        fixed = list(zip([k for k, _ in t.loads] + t.states, at))
    fr.fixed = np.array(fixed, np.int64).reshape(-1, 2)


def _pack(t: CellTable, fr: Frame, arrays):
    """The loop-invariant values (the direct sources as they are, else the products' matrices and
    the loaded values) and the initial states packed as ``fr`` lays them out; None where a value
    does not fit its register at this call's sizes."""
    if t.direct:  # (every size checked by ``frame``)
        parts = [arrays[k].ravel() if k is not None else c for k, c in t.direct_parts]
        parts += [s.ravel() for s in arrays[1:1 + len(t.states)]]
    else:
        parts = _invariants(t, fr, arrays)
        if parts is None:
            return None
        parts += [s.ravel() for s in arrays[1:1 + len(t.states)]]
        if any(p.size != size for p, size in zip(parts, fr.sizes)):
            return None
    pack = np.concatenate(parts)
    return pack if pack.dtype == t.dtype else pack.astype(t.dtype)


def _invariants(t: CellTable, fr: Frame, arrays):
    """The loop-invariant ops run on this call's free inputs: the products' matrices and the loaded
    values, flat; None where a value does not fit its register."""
    env = dict(t.const_values)
    for k, key in t.free_used:
        env[key] = arrays[k]
    for key, kernel, ins, params in t.hoisted_calls:
        env[key] = kernel(*[env[i] for i in ins], **params)
    parts = [np.ravel(env[id(m)]) for m in t.matrices]
    for k, n in t.loads:
        try:
            parts.append(_flat(env[id(n)], int(fr.rows[k]), t.cols[k]))
        except ValueError:
            return None
    return parts


def math_flags(dtype) -> int:
    """``run_scan``'s flags for float32's sigmoid and tanh (the tuning table's ``foreach_cell_fast_exp``
    and ``foreach_cell_f32_math``; none for float64)."""
    tune = tuning()
    if dtype != _F32 or not tune.foreach_cell_fast_exp:
        return 0
    return sj.FAST | sj.FAST32 if tune.foreach_cell_f32_math else sj.FAST


def caller(t: CellTable, fr: Frame, n_y: int, n_args: int, fallback, early=None):
    """``fn(*arrays, out=None)``, the bound function of a compiled step whose arrays have the shapes ``fr``
    was made for and whose ``out`` (the step outputs, then the final states) are C-ordered buffers of
    the op's output shapes (``foreach.bind_foreach`` checks both once): ``run`` with what it looks up
    per call (the compiled loop, the tuning table's ``foreach_cell_fast_exp``, which arrays are packed,
    the final states' buffers) found once, ``fallback(*arrays, out=out)`` where it declines (nothing
    written). ``early``: ``(entry, after, first)``: while the entry has run fewer than ``after`` calls,
    ``first`` runs the call (and counts it): the body's tier checked here, in the one function the step
    calls (no layer of Python per call between the step and the compiled loop)."""
    loop, fast = _loop(), math_flags(t.dtype)
    e, after, first = early if early is not None else (None, 0, None)
    n_s = len(t.states)
    if not t.direct or not fr.one_y or n_s > 2 or n_args < 1 + n_s:
        def slow(*arrays, out=None):
            if e is not None and e.calls < after:
                e.calls += 1
                return first(*arrays, out=out)
            return out if run(t, fr, arrays, out[:n_y], out[n_y:]) else fallback(*arrays, out=out)

        return slow
    parts, empty, meta, dtype = _parts(t, n_s), np.empty((0, 0), t.dtype), fr.meta, t.dtype
    f0_at, f1_at = (n_y, n_y + n_s - 1) if n_s else (None, None)
    memo: list = [None]  # (the parts of the last pack, when none can change; that pack)
    counted = e if e is not None else Entry(None, None, None)  # (``calls`` 0: never under ``after`` 0)

    def go(*arrays, out=None):
        if counted.calls < after:
            counted.calls += 1
            return first(*arrays, out=out)
        cur, last = parts(arrays), memo[0]
        if last is not None and all(map(is_, cur, last[0])):
            pack = last[1]
        else:
            pack = np.concatenate(cur, axis=None)  # (each part flattened: ``_pack``'s values)
            if pack.dtype != dtype:
                pack = pack.astype(dtype)
            memo[0] = (cur, pack) if all(map(_frozen, cur)) else None
        x, flags = arrays[0], fast
        if not x.flags.c_contiguous:
            x, flags = data(x, fast)
        if f0_at is None:
            loop(meta, pack, x, out[0], empty, empty, empty, flags)
        else:
            loop(meta, pack, x, out[0], out[f0_at], out[f1_at], empty, flags)
        return out

    return go


def data(x, flags: int) -> tuple:
    """(what the compiled loop reads for the data ``x``, which is not C-ordered: the C-ordered array
    whose time-reversed view ``x`` is (a backward direction's ``x[::-1]``, read back to front: no
    copy), else a C-ordered copy; ``flags`` with ``scan_jit.REVERSED`` where the former)."""
    back = x[::-1]
    if x.shape[0] > 1 and back.flags.c_contiguous:
        return back, flags | sj.REVERSED
    return np.ascontiguousarray(x), flags


def _frozen(a) -> bool:
    """Whether ``a``'s values cannot change under a pack made of them: a read-only array whose memory
    is a read-only array's own (the kept values of a program's parameter-only steps and views of them,
    ``executor/param_cache.py``: replaced by new arrays when a parameter changes; the body's constants,
    ``_frozen_copy``). A view of writeable memory is not (its base may be written)."""
    while isinstance(a, np.ndarray) and not a.flags.writeable:
        if a.base is None:
            return True
        a = a.base
    return False


def _frozen_copy(c):
    c = np.array(c)
    c.flags.writeable = False
    return c


def _parts(t: CellTable, n_s: int):
    """``parts(arrays)``: what ``_pack`` packs for a direct layout, in its order (the free inputs read
    directly and the constants, then the initial states), as one ``itemgetter`` call where no constant
    is among them."""
    fixed = [k if k is not None else _frozen_copy(c) for k, c in t.direct_parts] + list(range(1, 1 + n_s))
    if len(fixed) > 1 and all(isinstance(p, int) for p in fixed):
        return itemgetter(*fixed)
    return lambda arrays: [arrays[p] if isinstance(p, int) else p for p in fixed]


def run(t: CellTable, fr: Frame, arrays, ys, finals) -> bool:
    """Run the body's steps over ``arrays`` (data, states, free inputs) in one compiled call, writing
    the step outputs into ``ys`` and the final states into ``finals`` (C-ordered arrays of the
    op's output shapes); False (nothing written) where a value does not fit the table."""
    pack = _pack(t, fr, arrays)
    if pack is None:
        return False
    fast = math_flags(t.dtype)
    x, flags = (arrays[0], fast) if arrays[0].flags.c_contiguous else data(arrays[0], fast)
    rest = np.empty((max(len(t.states) - 2, 0), fr.regs_shape[1]), t.dtype)  # (the states after two, flat)
    y = ys[0] if fr.one_y else np.empty(fr.y_shape, t.dtype)
    f = (list(finals[:2]) + [finals[0]])[:2] if finals else [np.empty((0, 0), t.dtype)] * 2  # (the loop's two)
    _loop()(fr.meta, pack, x, y, f[0], f[1], rest, flags)
    if not fr.one_y:
        at = 0
        for k, out in zip(t.outs, ys):
            out[...] = y[:, :, at:at + t.cols[k]]
            at += t.cols[k]
    for r, out in zip(rest, finals[2:]):
        out[...] = r[:out.size].reshape(out.shape)
    return True


def scan(e: Entry, arrays, ys, finals) -> bool:
    """``run`` with the call's ``Frame`` (the step outputs' shapes read from ``ys``); False (nothing
    written) where this call does not fit the table."""
    fr = frame(e, tuple([(a.shape, a.dtype) for a in arrays]), [y.shape for y in ys])
    return fr is not None and run(e.table, fr, arrays, ys, finals)
