"""How a fused elementwise group (``executor/fusion.py``'s ``fused`` op) runs: ``fused[numba]``,
``fused[mixed]`` or ``fused[chunked]``; ``choose_fused`` picks one per call.

* ``fused[chunked]`` (``fused_chunked.py``): the group op by op with NumPy's ufuncs, chunk by
  chunk; every group, any dtype, with or without numba.
* ``fused[numba]`` (``fused_table.py``, ``fused_jit.py``): the group as a table of ops run by one
  compiled loop over tiles of the output, every intermediate in a tile-sized register: one pass,
  no Python per op. It takes groups whose values (inputs, intermediates, output) all have one
  float dtype and whose ops all have an exact compiled form (``OPS``: arithmetic,
  ``maximum``/``minimum``/``relu`` with NumPy's NaN and signed-zero rules, ``sqrt``, rounding,
  ``sign``): the values are then NumPy's bit for bit, in float32 as in float64.
* ``fused[mixed]`` (``fused_mixed.py``): a group with other ops too (``exp``, ``tanh``, ``log``,
  ``sigmoid``, ops with parameters): each run of exact ops is one call of the compiled loop, every
  other op its NumPy kernel; bit for bit NumPy's values as well. (Numba's ``exp``, ``log``,
  ``tanh`` are the C library's, one value at a time, 4-10x slower than NumPy's SIMD loops, and
  not NumPy's values: float32 computed in float64 and rounded is up to 2 ulp (exp) and 3 (log)
  from NumPy's, float64 1-3 ulp, ``benchmarks/fusion.py --ulp``; so they are not compiled.) Only
  for outputs that fit one chunk (small outputs: a call's fixed cost is what decides there).

Each compiled path takes a group where it pays (``pays``, ``mixed_pays``: the cost model below):
many ops on a small output, where the chunked path's fixed cost per op decides; NumPy's
vectorized loops and the threads win on large outputs. ``admission`` holds every condition of
both compiled paths: it says which path takes a group.

**Tiers.** A group's first ``fused_jit_after`` calls (the tuning table; 2 by default) run
chunked; the call after builds its table or plan and runs compiled. The compiled loop is one
function for every group (the group is data), compiled once per process per dtype and tuple
length (``ARRAY_SLOTS``; seconds each on the development machine, by its load) and cached on
disk (``jit.compiled``; a later process loads it): a graph run once or twice (``evaluate``, a
first call, ``explain``) never waits for it, and a program called again is one that is replayed.
The count, rather than a background thread, keeps which path ran a function of the calls made
(tests and ``explain()`` can name it), and the table is microseconds to build.

**Groups that end in a reduction** (``sum``/``mean``/``max``/``min`` over the last axis,
``fused_chunked.REDUCTIONS``) run chunked, shown as ``fused[chunked, ends in sum]``: each block
of rows is computed into scratch and reduced by NumPy's own reduction, so the values are the
unfused ops' bit for bit. The compiled paths do not take them: their sums would not be NumPy's
pairwise ones, and at the sizes where such groups run (rows of a transformer's hidden size)
``pays`` says the compiled loop loses to NumPy's SIMD loops anyway.

**Caches.** ``TABLES`` holds the tables by group structure, dtype and which operands are
scalars (bounded, ``clear()``), so programs with the same group share one.
"""
from __future__ import annotations

from types import MappingProxyType

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..tuning_table import current
from . import fused_jit as J
from .fused_chunked import REDUCTIONS, run_chunked, steps_of
from .fused_mixed import plan_of, run_mixed
from .fused_table import ARRAY_SLOTS, FLOATS, OPS, TABLES, TableCache, run_table, table_of
from .impl import Choice, Impl
from .log import log_choice
from .profile import current as current_profile
from .runner import Bound, counted_until, direct

__all__ = ["ARRAY_SLOTS", "FLOATS", "IMPLS", "J", "OPS", "REDUCTIONS", "TABLES", "TableCache", "admission",
           "bind_fused", "choose_fused", "mixed_pays", "pays", "run_fused", "table_of"]


class _State:
    """Per fused group: calls so far, its table and mixed plan (None: not built yet; False: not
    eligible), the compiled path that takes it (``path``: "numba", "mixed" or "chunked", None
    before it is decided), and the layout of its last call."""

    __slots__ = ("calls", "layout", "path", "plan", "table")

    def __init__(self):
        self.calls = 0
        self.table = None
        self.plan = None
        self.path = None
        self.layout = None  # (the array inputs' strides and shapes, the loop's strides, cols, copied)


def _state(graph) -> _State:
    s = graph.derived.get("fused")
    if s is None:
        s = graph.derived["fused"] = _State()
    return s


def _prepared(graph, arrays, out, which: str):
    """The group's prepared table or plan (``which``) with this call's arrays and output as the
    compiled paths take them, or None where the group or the arrays do not suit it (no table /
    plan; not NumPy arrays of its dtype; an output not in C order)."""
    state = _state(graph)
    if state.path is None:
        _prepare(state, graph)
    made = getattr(state, which)
    if not made:
        return None
    got = _numpy_args(arrays, out, graph.avals[0].shape, made.dtype)
    return None if got is None else (state, made, *got)


def _run_numba(xp, *arrays, graph, out=None):
    """``fused[numba]``: the group's table by the compiled loop (None: ``_prepared`` declined)."""
    got = _prepared(graph, arrays, out, "table")
    if got is None:
        return None
    state, table, arrays, out = got
    if out.size:
        run_table(table, arrays, (out,), graph.avals[0].shape, state)
    return out


def _run_mixed(xp, *arrays, graph, out=None):
    """``fused[mixed]``: the group's plan (``fused_mixed.py``; None: ``_prepared`` declined)."""
    got = _prepared(graph, arrays, out, "plan")
    if got is None:
        return None
    _, plan, arrays, out = got
    if out.size:
        run_mixed(plan, arrays, out)
    return out


def _numpy_args(arrays, out, shape, dtype):
    """``(arrays, out)`` when the call's operands are NumPy arrays (or NumPy scalars, made 0-d
    arrays) of ``dtype`` and ``out`` is None (then made) or a C-ordered array of it; else None."""
    if out is None:
        out = np.empty(shape, dtype)
    elif out.__class__ is not np.ndarray or not out.flags.c_contiguous or out.dtype != dtype:
        return None
    for a in arrays:
        if a.__class__ is not np.ndarray:
            if not isinstance(a, np.generic):
                return None
            arrays = tuple(np.asarray(v) for v in arrays)  # (a NumPy scalar: a 0-d array)
        if a.dtype != dtype:
            return None
    return arrays, out


NUMBA = Impl("fused", "numba", _run_numba, "a group's calls after its first fused_jit_after, numba installed and "
             "on, one float dtype throughout, every op exact when compiled (fused.OPS), many ops on a small "
             "output (fused.pays), NumPy arrays, output in C order: one compiled loop over tiles of the output",
             threads=True, fallback="chunked")
MIXED = Impl("fused", "mixed", _run_mixed, "a group's calls after its first fused_jit_after, numba installed and "
             "on, one float dtype throughout, ops without an exact compiled form among runs of exact ones "
             "(fused_mixed.plan_of), an output that fits one chunk, where it pays (fused.mixed_pays): each run "
             "of exact ops one compiled loop, every other op its NumPy kernel", threads=True, fallback="chunked")
CHUNKED = Impl("fused", "chunked", run_chunked, "any group: NumPy ufuncs op by op, chunk by chunk along axis 0 "
               "(whole arrays when the output fits one chunk)", threads=True)
IMPLS = (NUMBA, MIXED, CHUNKED)
_CHOICES = {impl.name: Choice(impl) for impl in IMPLS}
_ENDS_IN = MappingProxyType({name: Choice(CHUNKED, (f"ends in {name}",)) for name in REDUCTIONS})


def choose_fused(xp, graph, t) -> Choice:
    """What runs a call of the group ``graph`` under the tuning table ``t`` (its table is built on
    the first call that may take the compiled path)."""
    state = _state(graph)
    ends = steps_of(graph).ends
    if ends:  # (the compiled paths take no reduction: see "Groups that end in a reduction")
        return _ENDS_IN[ends]
    if xp is not np or state.calls < t.fused_jit_after or not jit.enabled():
        return _CHOICES["chunked"]
    if state.path is None:
        _prepare(state, graph)
    return _CHOICES[state.path]


def _prepare(state: _State, graph) -> None:
    state.path, state.table, state.plan = admission(graph)


def admission(graph) -> tuple:
    """Which compiled path takes the group ``graph`` (every condition of both in one place):
    ``(path, table, plan)``, ``path`` "numba" (every op exact: ``table_of``, and it ``pays``),
    "mixed" (a ``fused_mixed.plan_of`` plan, where ``mixed_pays``) or "chunked"; ``table`` and
    ``plan`` False where the group has none. (Numba being on, the call count and NumPy arrays
    are the chooser's and the runners' part.)"""
    if steps_of(graph).ends:
        return "chunked", False, False
    shape = graph.avals[0].shape
    table = table_of(graph)
    if table:
        return ("numba" if pays(_n_ops(table), shape) else "chunked"), table, False
    plan = plan_of(graph)
    return ("mixed" if plan and mixed_pays(plan, shape) else "chunked"), False, plan


# What each path costs on the development machine (2 cores, float32, process time, medians of 7
# alternating rounds; a chain of multiply-adds around one exp, /tmp scripts now in
# benchmarks/fusion.py's "fused[mixed]" rows): the chunked path about 0.4 us per op plus ~0.07 ns
# per value and op; a call of the compiled loop about 7 us (Python's share: layouts, views, the
# dispatch of numba's arguments) plus ~0.3 ns per value and op (its tile loops run near scalar
# speed: NumPy's SIMD loops are 4x faster per value). It pays on small outputs of long groups:
# 101 ops on 4x4 0.46x the chunked time, 401 ops 0.15x; 21 ops on 4x4 1.3x, 101 ops on 64x64 1.7x.
CHUNKED_US_PER_OP, LOOP_US_PER_CALL, LOOP_NS_PER_VALUE = 0.4, 7.0, 0.3


def pays(n_ops: int, shape, calls: int = 1) -> bool:
    """True when ``calls`` calls of the compiled loop running ``n_ops`` exact ops over an output of
    ``shape`` are expected to beat the chunked path's call per op (the cost model above)."""
    size = 1
    for d in shape:
        size *= d
    return n_ops * (CHUNKED_US_PER_OP - LOOP_NS_PER_VALUE * size / 1000) > LOOP_US_PER_CALL * calls


def mixed_pays(plan, shape) -> bool:
    """``pays`` for a ``fused_mixed`` plan: its exact ops against its calls of the compiled loop
    (its other ops cost the same on both paths)."""
    tables = [st.table for st in plan.steps if st.table is not None]
    return pays(sum(_n_ops(t) for t in tables), shape, len(tables))


def _n_ops(table) -> int:
    return int((table.rows[:, 0] > J.LOAD).sum())


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


def bind_fused(xp, *arrays, graph, out=None) -> Bound | None:
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_fused``'s choice for the group, run
    directly (the group's table or plan and the call's layout still checked per call by the
    implementation; the chunked path where it declines). The choice is fixed by the group, the
    tuning table and numba but for the tiers: while the group has run fewer than ``fused_jit_after``
    calls, the bound function counts each (as ``run_fused``) and binds again when the count
    passes. None for a GPU group (the op's kernel runs ``fusion_gpu``)."""
    if xp is not np:
        return None
    t, state = current(), _state(graph)
    after = t.fused_jit_after
    tiered = state.calls < after and jit.enabled() and not steps_of(graph).ends  # (else the count decides nothing)

    def make(arrays, out) -> Bound:
        choice = choose_fused(xp, graph, t)
        return Bound(choice, direct(choice, _CHOICES, xp, keywords={"graph": graph}))

    return counted_until(state, after, tiered, make, arrays, out)


BINDERS = {"fused": bind_fused}
