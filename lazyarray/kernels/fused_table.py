"""The compiled loop's side of fused groups (``fused.py`` chooses): which ops have an exact
compiled form (``OPS``), a group or a run of its ops as a ``Table`` (``table_of``, ``build``;
``TABLES`` keeps them by structure), and ``run_table``, which runs a table over NumPy arrays by
the compiled loop of ``fused_jit.py`` (the layout of its inputs: ``layout``).

The compiled loop is one function for every group (the group is data), compiled once per process
per dtype and tuple length (``ARRAY_SLOTS``), made on first use (``LOOP``) by ``jit.compiled``
(cached on disk in the tuning table's ``jit_cache_dir``, so a later process loads it).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .. import jit
from ..threads import chunked
from . import fused_jit as J
from .fused_chunked import CHUNK_BYTES

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


def table_of(graph):
    """The group's ``Table``, or False when ``fused[numba]`` does not take it (an op without an
    exact compiled form, parameters, more than one dtype, too many inputs)."""
    order = [n for n in graph.sym.topo() if n.op is not None]
    dtype = graph.avals[0].dtype
    if dtype not in FLOATS or sum(not is_scalar(v) for v in graph.inputs) > ARRAY_SLOTS[1] or any(
            n.op.name not in OPS or n.params or n.avals[0].dtype != dtype for n in order) \
            or any(v.avals[0].dtype != dtype for v in graph.inputs):
        return False
    ref = {id(v): i for i, v in enumerate(graph.inputs)}
    for n in order:
        ref[id(n)] = len(ref)
    key = (dtype.str, tuple(is_scalar(v) for v in graph.inputs), tuple((n.op.name,) + tuple(ref[id(e.node)] for e in n.inputs)
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
    arrays = [k for k, v in enumerate(inputs) if not is_scalar(v)]
    scalars = [k for k, v in enumerate(inputs) if is_scalar(v)]
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
            scalar = is_scalar(v)
            rows.append((J.LOAD_SCALAR if scalar else J.LOAD, r, slots[k], 0))
        else:
            ins = [reg[id(e.node)] for e in v.inputs]
            rows.append((OPS[v.op.name], r, ins[0], ins[1] if len(ins) > 1 else ins[0]))
        if id(v) in store:
            rows.append((J.STORE, r, store[id(v)], 0))
    return Table(np.array(rows, np.int64).reshape(-1, 4), nregs, dtype, arrays, scalars)


def is_scalar(v) -> bool:
    """A value of one element (read as a scalar by the compiled loop)."""
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
    to the output's shape first (``copied``: their positions; one pass, as a chunked step reads it).
    So is a broadcast row shorter than a tile (a bias of 64 values): every op pays a fixed cost per
    tile, and tiles of 64 values made the loop 4x slower than the copy costs."""
    n = len(shape)
    full = [a.shape if a.ndim == n else (1,) * (n - a.ndim) + a.shape for a in arrays]
    contiguous = [a.flags.c_contiguous for a in arrays]
    size = 1
    for d in shape:
        size *= d
    for p in range(n + 1):
        got = _split(full, contiguous, shape, p)
        if got is not None:
            if got[1] >= min(J.TILE, size):
                return got + ((),)
            break
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
