"""How a fused elementwise group (``executor/fusion.py``'s ``fused`` op) runs: ``fused[numba]``
or ``fused[chunked]``.

* ``fused[chunked]`` (``fused_chunked.py``): the group op by op with NumPy's ufuncs, chunk by
  chunk; every group, any dtype, with or without numba.
* ``fused[numba]`` (``fused_jit.py``): the group as a table of ops run by one compiled loop over
  tiles of the output, every intermediate in a tile-sized register: one pass, no Python per op.
  It takes groups whose values (inputs, intermediates, output) all have one float dtype and whose
  ops all have an exact compiled form (``OPS``: arithmetic, ``maximum``/``minimum``/``relu``
  with NumPy's NaN and signed-zero rules, ``sqrt``, rounding): the values are then NumPy's bit
  for bit, in float32 as in float64. (NumPy's ``exp``, ``tanh``, ``log`` ... are its own SIMD
  code, up to 3 ulp from the C library's that numba calls: groups with them stay chunked.) And
  it takes them where it pays (``pays``: many ops on a small output, where the chunked path's
  fixed cost per op decides; NumPy's vectorized loops and the threads win on large outputs).

**Tiers.** A group's first ``fused_jit_after`` calls (the tuning table; 2 by default) run
chunked; the call after builds its table and runs compiled. The compiled loop is one function
for every group (the group is data), compiled once per process per dtype and tuple length
(``ARRAY_SLOTS``; 2-9 s each on the development machine, by its load): a graph run once or
twice (``evaluate``, a first call, ``explain``) never waits for it, and a program called again
is one that is replayed. The count, rather than a background thread, keeps which path ran a
function of the calls made (tests and ``explain()`` can name it), and the table is
microseconds to build.

**Caches.** ``TABLES`` holds the tables by group structure, dtype and which operands are
scalars (bounded, ``clear()``), so programs with the same group share one. The compiled loop
lives in ``jit.compiled``'s table for the process; it is not written to disk: ``jit.compiled``
compiles with ``cache=False`` (``jit.py`` reads nothing from files by design), and with the
group as data a disk cache would save only the few compiles per process, not one per group.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..threads import chunked
from ..tuning_table import current
from . import fused_jit as J
from .fused_chunked import CHUNK_BYTES, run_chunked
from .impl import Choice, Impl
from .log import log_choice
from .profile import current as current_profile

# op name -> table code; every op here is exact in float32 and float64 (fused_jit.py)
OPS = {"add": J.ADD, "subtract": J.SUBTRACT, "multiply": J.MULTIPLY, "divide": J.DIVIDE, "negative": J.NEGATIVE,
       "positive": J.POSITIVE, "abs": J.ABS, "maximum": J.MAXIMUM, "minimum": J.MINIMUM, "relu": J.RELU,
       "square": J.SQUARE, "sqrt": J.SQRT, "floor": J.FLOOR, "ceil": J.CEIL, "trunc": J.TRUNC,
       "reciprocal": J.RECIPROCAL, "sign": J.SIGN}
FLOATS = (np.dtype("float32"), np.dtype("float64"))
# array inputs the compiled loop takes: one loop for groups of up to 4, one for up to 16 (a tuple
# of arrays is typed by its length; each length is a compile). A group with more runs chunked.
ARRAY_SLOTS = (4, 16)
# outputs the compiled loop writes (STORE rows): a group's root, or up to this many values of a
# segment of a mixed group (``fused_mixed.py``) read after it; one tuple length, one compile
OUT_SLOTS = 4


class TableCache:
    """Tables of fused groups by structure and dtype, at most ``size`` (least recently used go)."""

    def __init__(self, size: int = 512):
        self.size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            t = self._items.get(key)
            if t is not None:
                self._items.move_to_end(key)
            return t

    def put(self, key, table) -> None:
        with self._lock:
            self._items[key] = table
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


TABLES = TableCache()


class Table:
    """A group as the compiled loop's data: ``rows`` (one ``(code, dest, a, b)`` per op, loads
    first), ``nregs`` registers, its ``dtype``; ``arrays`` / ``scalars``: the positions of the
    inputs read as arrays and of those of one value (passed as one array of values); ``slots``:
    how many array inputs the compiled loop it runs on takes."""

    __slots__ = ("arrays", "dtype", "nregs", "rows", "scalars", "slots", "units")

    def __init__(self, rows, nregs, dtype, arrays, scalars):
        self.rows, self.nregs, self.dtype = rows, nregs, dtype
        self.arrays, self.scalars = tuple(arrays), tuple(scalars)
        self.slots = ARRAY_SLOTS[0] if len(arrays) <= ARRAY_SLOTS[0] else ARRAY_SLOTS[1]
        self.units = (dtype.type(0), dtype.type(1))


class _State:
    """Per fused group: calls so far, its table (None: not built yet; False: not eligible), whether
    the compiled loop pays for it, and the layout of its last call."""

    __slots__ = ("calls", "layout", "pays", "table")

    def __init__(self):
        self.calls = 0
        self.table = None
        self.pays = False  # (the compiled loop takes the group: it has a table and pays)
        self.layout = None  # (the array inputs' strides and shapes, the loop's strides, cols, copied)


def _state(graph) -> _State:
    s = graph.derived.get("fused")
    if s is None:
        s = graph.derived["fused"] = _State()
    return s


def table_of(graph):
    """The group's ``Table``, or False when ``fused[numba]`` does not take it (an op without an
    exact compiled form, parameters, more than one dtype, too many inputs)."""
    order = [n for n in graph.sym.topo() if n.op is not None]
    dtype = graph.avals[0].dtype
    if dtype not in FLOATS or sum(not _scalar(v) for v in graph.inputs) > ARRAY_SLOTS[1] or any(
            n.op.name not in OPS or n.params or n.avals[0].dtype != dtype for n in order) \
            or any(v.avals[0].dtype != dtype for v in graph.inputs):
        return False
    ref = {id(v): i for i, v in enumerate(graph.inputs)}
    for n in order:
        ref[id(n)] = len(ref)
    key = (dtype.str, tuple(_scalar(v) for v in graph.inputs), tuple((n.op.name,) + tuple(ref[id(e.node)] for e in n.inputs)
                                               for n in order))
    table = TABLES.get(key)
    if table is None:
        table = build(graph.inputs, order, dtype, [order[-1]])
        TABLES.put(key, table)
    return table


def build(inputs, order, dtype, exports) -> Table:
    """The table of the ops ``order`` (in graph order) over the values ``inputs`` (loaded: a
    group's operands, or values a mixed group computed before): loads, then one row per op, each
    value of ``exports`` stored (to output ``exports.index(v)``) right after it is computed;
    registers reused once their value's last reader has run."""
    values = list(inputs) + list(order)
    arrays = [k for k, v in enumerate(inputs) if not _scalar(v)]
    scalars = [k for k, v in enumerate(inputs) if _scalar(v)]
    slots = {k: i for i, k in enumerate(arrays)}
    slots.update({k: i for i, k in enumerate(scalars)})
    store = {id(v): i for i, v in enumerate(exports)}
    last: dict[int, int] = {}
    for k, n in enumerate(order):
        for e in n.inputs:
            last[id(e.node)] = k + len(inputs)
    free: list[int] = []
    reg: dict[int, int] = {}
    rows = []
    nregs = 0
    for k, v in enumerate(values):
        if k >= len(inputs):
            for e in v.inputs:  # registers read for the last time here are free for this op's result
                r = reg[id(e.node)]
                if last[id(e.node)] == k and r not in free:
                    free.append(r)
        if free:
            r = free.pop()
        else:
            r, nregs = nregs, nregs + 1
        reg[id(v)] = r
        if k < len(inputs):  # (array inputs and scalars numbered apart: ``Table.arrays``)
            scalar = _scalar(v)
            rows.append((J.LOAD_SCALAR if scalar else J.LOAD, r, slots[k], 0))
        else:
            ins = [reg[id(e.node)] for e in v.inputs]
            rows.append((OPS[v.op.name], r, ins[0], ins[1] if len(ins) > 1 else ins[0]))
        if id(v) in store:
            rows.append((J.STORE, r, store[id(v)], 0))
    return Table(np.array(rows, np.int64).reshape(-1, 4), nregs, dtype, arrays, scalars)


def _scalar(v) -> bool:
    return all(d == 1 for d in v.avals[0].shape)


# -- the compiled path -----------------------------------------------------------------------------
class _Loop:
    """The compiled loop, made on first use (``clear()`` forgets it; ``jit.compiled`` keeps numba's
    compiled code for the process)."""

    def __init__(self):
        self._made: list = []
        self._lock = threading.Lock()

    def get(self):
        if not self._made:
            with self._lock:
                if not self._made:
                    self._made.append(J.make_loop(jit.compiled))
        return self._made[0]

    def clear(self) -> None:
        self._made.clear()


LOOP = _Loop()


def layout(arrays, shape) -> tuple:
    """The output of ``shape`` as ``rows x cols`` and each input's (row, column) strides in values
    over it flat: ``(strides, cols, copied)``. Inputs of the output's shape, and scalars, walk the
    whole output as one row; a broadcast row (a bias) or column needs the split before its
    broadcast axes; any other input (a strided view, a broadcast in the middle) is copied broadcast
    to the output's shape first (``copied``: their positions; one pass, as a chunked step reads it)."""
    n = len(shape)
    full = [a.shape if a.ndim == n else (1,) * (n - a.ndim) + a.shape for a in arrays]
    contiguous = [a.flags.c_contiguous for a in arrays]
    for p in range(n + 1):
        got = _split(full, contiguous, shape, p)
        if got is not None:
            return got + ((),)
    copied = tuple(k for k, (s, c) in enumerate(zip(full, contiguous)) if not (c and s == shape))
    strides, cols = _split([shape] * len(arrays), [True] * len(arrays), shape, 0)
    return strides, cols, copied


def _split(shapes, contiguous, shape, p):
    cols = 1
    for d in shape[p:]:
        cols *= d
    strides = []
    for s, c in zip(shapes, contiguous):
        if not c:
            return None
        if s == shape:
            strides.append((cols, 1))
        elif s[p:] == shape[p:] and all(d == 1 for d in s[:p]):
            strides.append((0, 1))
        elif s[:p] == shape[:p] and all(d == 1 for d in s[p:]):
            strides.append((1, 0))
        else:
            return None
    return strides, cols


def _run_numba(xp, *arrays, graph, out=None):
    """``fused[numba]``: the group's table by the compiled loop; None where the group or this call's
    arrays do not suit it (no table: ``table_of``; not NumPy arrays of the table's dtype, an output
    not in C order)."""
    state = _state(graph)
    if state.table is None:
        _prepare(state, graph)
    table, shape = state.table, graph.avals[0].shape
    if not table:
        return None
    if out is None:
        out = np.empty(shape, table.dtype)
    elif out.__class__ is not np.ndarray or not out.flags.c_contiguous or out.dtype != table.dtype:
        return None
    for a in arrays:
        if a.__class__ is not np.ndarray:
            if not isinstance(a, np.generic):
                return None
            arrays = tuple(np.asarray(v) for v in arrays)  # (a NumPy scalar: a 0-d array)
        if a.dtype != table.dtype:
            return None
    if out.size == 0:
        return out
    run_table(table, arrays, (out,), shape, state)
    return out


def run_table(table: Table, arrays, outs, shape, state) -> None:
    """The compiled loop of ``table`` over its inputs ``arrays`` (NumPy arrays of its dtype; those
    at ``table.arrays`` read as arrays, those at ``table.scalars`` as one value each) into ``outs``
    (C-ordered arrays of ``shape``, at most ``OUT_SLOTS``), its tiles spread over the threads.
    ``state.layout`` keeps the loop's strides for the inputs' strides and shapes of the last call."""
    ins = [arrays[k] for k in table.arrays]
    key = tuple([a.strides for a in ins]) + tuple([a.shape for a in ins])
    lay = state.layout
    if lay is None or lay[0] != key:  # (a program's calls see one layout: planned once)
        strides, cols, copied = layout(ins, shape)
        strides += [(0, 0)] * (table.slots - len(strides))
        lay = state.layout = (key, np.array(strides, np.int64), cols, copied)
    _, st, cols, copied = lay
    flats = [_read_only(np.ascontiguousarray(np.broadcast_to(a, shape)) if k in copied else a).reshape(-1)
             for k, a in enumerate(ins)]
    flats += [_DUMMY[table.dtype]] * (table.slots - len(flats))
    scalars = np.fromiter([arrays[k].item() for k in table.scalars], table.dtype, len(table.scalars))
    flat_outs = tuple([o.reshape(-1) for o in outs]) + (_DUMMY_OUT[table.dtype],) * (OUT_SLOTS - len(outs))
    loop = LOOP.get()
    size = flat_outs[0].size
    tiles = (size // cols) * -(-cols // J.TILE)
    zero, one = table.units

    def work(bounds):
        for lo, hi in bounds:
            loop(table.rows, tuple(flats), st, scalars, flat_outs, cols, lo, hi, table.nregs, zero, one)

    # (numba releases the GIL)
    chunked(tiles, max(1, CHUNK_BYTES // (J.TILE * outs[0].itemsize)), size * outs[0].itemsize * len(outs), work)


def _read_only(a):
    """``a`` as a read-only view: numba types read-only arrays apart, and a tuple of inputs indexed
    at run time must be of one type (a graph's captured constants are read-only)."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


_DUMMY = {d: _read_only(np.zeros(1, d)) for d in FLOATS}  # (fills the array slots a group leaves empty)
_DUMMY_OUT = {d: np.zeros(1, d) for d in FLOATS}  # (fills the output slots: no STORE row writes them)


NUMBA = Impl("fused", "numba", _run_numba, "a group's calls after its first fused_jit_after, numba installed and "
             "on, one float dtype throughout, every op exact when compiled (fused.OPS), many ops on a small "
             "output (fused.pays), NumPy arrays, output in C order: one compiled loop over tiles of the output",
             threads=True, fallback="chunked")
CHUNKED = Impl("fused", "chunked", run_chunked, "any group: NumPy ufuncs op by op, chunk by chunk along axis 0 "
               "(whole arrays when the output fits one chunk)", threads=True)
IMPLS = (NUMBA, CHUNKED)
_CHOICES = {impl.name: Choice(impl) for impl in IMPLS}


def choose_fused(xp, graph, t) -> Choice:
    """What runs a call of the group ``graph`` under the tuning table ``t`` (its table is built on
    the first call that may take the compiled path)."""
    state = _state(graph)
    if xp is not np or state.calls < t.fused_jit_after or not jit.enabled():
        return _CHOICES["chunked"]
    if state.table is None:
        _prepare(state, graph)
    return _CHOICES["numba" if state.pays else "chunked"]


def _prepare(state: _State, graph) -> None:
    table = state.table = table_of(graph)
    state.pays = bool(table) and pays(len(table.rows) - len(graph.inputs), graph.avals[0].shape)


# What each path costs on the development machine (2 cores, float32, medians): the chunked path
# about 0.4 us per op plus ~0.15 ns per value; the compiled loop about 6 us per call plus ~1 ns per
# value and op (its tile loops are not vectorized as NumPy's are). It pays on small outputs of long
# groups: the 1,000-op chain on 4x4 (16 values) 0.3 ms against 2 ms chunked; 8 ops on 4x4 or 16
# ops on 64x64 run faster chunked.
CHUNKED_US_PER_OP, LOOP_US_PER_CALL, LOOP_NS_PER_VALUE = 0.4, 6.0, 1.0


def pays(n_ops: int, shape) -> bool:
    """True when the compiled loop is expected to beat the chunked path for ``n_ops`` ops over an
    output of ``shape`` (the cost model above)."""
    size = 1
    for d in shape:
        size *= d
    return n_ops * (CHUNKED_US_PER_OP - LOOP_NS_PER_VALUE * size / 1000) > LOOP_US_PER_CALL


def run_fused(xp, *arrays, graph, out=None):
    """A ``fused`` node's kernel on NumPy arrays, by the implementation ``choose_fused`` picks."""
    t = current()
    choice = choose_fused(xp, graph, t)
    _state(graph).calls += 1
    y = choice.impl.run(xp, *arrays, graph=graph, out=out)
    if y is None:  # (declined at run time: its fallback runs)
        choice = _CHOICES[choice.impl.fallback]
        y = choice.impl.run(xp, *arrays, graph=graph, out=out)
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    if t.log_kernels:
        log_choice(choice, *arrays)
    return y


def choose_for_call(xp, *arrays, graph, out=None) -> Choice:
    """``choose_fused`` for a call's arguments as the op takes them (``kernels.choose``)."""
    return choose_fused(xp, graph, current())
