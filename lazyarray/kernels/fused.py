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
  code, up to 3 ulp from the C library's that numba calls: groups with them stay chunked.)

**Tiers.** A group's first ``fused_jit_after`` calls (the tuning table; 2 by default) run
chunked; the call after builds its table and runs compiled. The compiled loop is one function
for every group (the group is data), compiled once per process per dtype (2-9 s on the
development machine, by its load): a graph run once or twice (``evaluate``, a first call,
``explain``) never waits for it, and a program called again is one that is replayed. The count,
rather than a background thread, keeps which path ran a function of the calls made (tests and
``explain()`` can name it), and the table is microseconds to build.

**Caches.** ``TABLES`` holds the tables by group structure and dtype (bounded, ``clear()``), so
programs with the same group share one. The compiled loop lives in ``jit.compiled``'s table for
the process; it is not written to disk (``jit.compiled`` compiles with ``cache=False``, and the
one loop for all groups makes a disk cache worth only its one compile per process).
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
       "reciprocal": J.RECIPROCAL}
FLOATS = (np.dtype("float32"), np.dtype("float64"))
MAX_INPUTS = 16  # input slots the compiled loop takes (a group with more runs chunked)


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
    first), ``nregs`` registers, its ``dtype``, ``n_in`` inputs."""

    __slots__ = ("dtype", "n_in", "nregs", "rows", "units")

    def __init__(self, rows, nregs, dtype, n_in):
        self.rows, self.nregs, self.dtype, self.n_in = rows, nregs, dtype, n_in
        self.units = (dtype.type(0), dtype.type(1))


class _State:
    """Per fused group: calls so far and its table (None: not built yet; False: not eligible)."""

    __slots__ = ("calls", "table")

    def __init__(self):
        self.calls = 0
        self.table = None


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
    if dtype not in FLOATS or len(graph.inputs) > MAX_INPUTS or any(
            n.op.name not in OPS or n.params or n.avals[0].dtype != dtype for n in order) \
            or any(v.avals[0].dtype != dtype for v in graph.inputs):
        return False
    ref = {id(v): i for i, v in enumerate(graph.inputs)}
    for n in order:
        ref[id(n)] = len(ref)
    key = (dtype.str, len(graph.inputs), tuple((n.op.name,) + tuple(ref[id(e.node)] for e in n.inputs)
                                               for n in order))
    table = TABLES.get(key)
    if table is None:
        table = _build(graph.inputs, order, dtype)
        TABLES.put(key, table)
    return table


def _build(inputs, order, dtype) -> Table:
    """Loads, then one row per op; registers reused once their value's last reader has run."""
    values = list(inputs) + order
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
        if k < len(inputs):
            rows.append((J.LOAD, r, k, 0))
        else:
            ins = [reg[id(e.node)] for e in v.inputs]
            rows.append((OPS[v.op.name], r, ins[0], ins[1] if len(ins) > 1 else ins[0]))
    return Table(np.array(rows, np.int64).reshape(-1, 4), nregs, dtype, len(inputs))


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
    """The output of ``shape`` as ``rows x cols`` and each input as a flat array with (row, column)
    strides in values: ``(flat inputs, strides, cols)``. Inputs of the output's shape, and scalars,
    walk the whole output as one row; a broadcast row (a bias) or column needs the split before
    its broadcast axes; any other input (a strided view, a broadcast in the middle) is copied
    broadcast to the output's shape first (one pass, as a chunked step would read it)."""
    n = len(shape)
    full = [a if a.ndim == n else a.reshape((1,) * (n - a.ndim) + a.shape) for a in arrays]
    for p in range(n + 1):
        got = _split(full, shape, p)
        if got is not None:
            return got
    full = [a if a.size == 1 or (a.shape == shape and a.flags.c_contiguous) else
            np.ascontiguousarray(np.broadcast_to(a, shape)) for a in full]
    return _split(full, shape, 0)


def _split(arrays, shape, p):
    cols = 1
    for d in shape[p:]:
        cols *= d
    flats, strides = [], []
    for a in arrays:
        if a.size == 1:
            st = (0, 0)
        elif not a.flags.c_contiguous:
            return None
        elif a.shape == shape:
            st = (cols, 1)
        elif a.shape[p:] == shape[p:] and all(d == 1 for d in a.shape[:p]):
            st = (0, 1)
        elif a.shape[:p] == shape[:p] and all(d == 1 for d in a.shape[p:]):
            st = (1, 0)
        else:
            return None
        flats.append(a.reshape(-1))
        strides.append(st)
    return flats, strides, cols


def _run_numba(xp, *arrays, graph, out=None):
    """``fused[numba]``: the group's table by the compiled loop; None where this call's arrays do
    not suit it (not NumPy arrays of the table's dtype, an output not in C order)."""
    table = _state(graph).table
    shape = graph.avals[0].shape
    if out is None:
        out = np.empty(shape, table.dtype)
    elif out.__class__ is not np.ndarray or not out.flags.c_contiguous or out.dtype != table.dtype:
        return None
    if out.size == 0:
        return out
    for a in arrays:
        if a.__class__ is not np.ndarray:
            if not isinstance(a, np.generic):
                return None
            arrays = tuple(np.asarray(v) for v in arrays)  # (a NumPy scalar: a 0-d array)
        if a.dtype != table.dtype:
            return None
    flats, strides, cols = layout(arrays, shape)
    while len(flats) < MAX_INPUTS:  # always as many slots: one compile per dtype
        flats.append(flats[0])
        strides.append((0, 0))
    ins, st = tuple(_read_only(a) for a in flats), np.array(strides, np.int64)
    flat = out.reshape(-1)
    loop = LOOP.get()
    tiles = (out.size // cols) * -(-cols // J.TILE)
    zero, one = table.units

    def work(bounds):
        for lo, hi in bounds:
            loop(table.rows, ins, st, flat, cols, lo, hi, table.nregs, zero, one)

    chunked(tiles, max(1, CHUNK_BYTES // (J.TILE * out.itemsize)), out.nbytes, work)  # (numba releases the GIL)
    return out


def _read_only(a):
    """``a`` as a read-only view: numba types read-only arrays apart, and a tuple of inputs indexed
    at run time must be of one type (a graph's captured constants are read-only)."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


NUMBA = Impl("fused", "numba", _run_numba, "a group's calls after its first fused_jit_after, numba installed and "
             "on, one float dtype throughout, every op exact when compiled (fused.OPS), NumPy arrays, output in "
             "C order: one compiled loop over tiles of the output", threads=True, fallback="chunked")
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
        state.table = table_of(graph)
    return _CHOICES["numba" if state.table else "chunked"]


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
