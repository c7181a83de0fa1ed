"""Running recorded sub-graphs for materialization: one-shot, or a compiled program reused.

``run_recorded(d)`` is what ``deferred.materialize`` calls with the sub-graph it described
(``structure.describe``: numbered slots and a structural key), then:

* a structure compiled before (same ops, params, wiring, leaf avals; see ``structure.py``)
  runs its cached ``Program`` on this graph's leaf values: recording the same code again on
  new data compiles nothing;
* a structure seen for the second time is compiled (``compile_program``: memory plan, in-place
  buffers) and cached;
* the first sighting runs node by node (``oneshot.py``): planning a graph that runs once costs
  more than it saves. Graphs with large values are compiled even the first time (the plan's
  reused buffers save page faults on every node), but that program is not kept: a graph
  computed once leaves no planned buffers behind.

The cache is LRU: at most the tuning table's ``cache_size`` programs (64, ``LAZYARRAY_CACHE_SIZE``),
whose planned buffers together stay under its ``graph_cache_bytes`` (64 MiB). A program is built from a template copy of the graph whose
leaves are variables, so it holds no user array, constant or known value (only its own planned
buffers); values are never part of the key. ``LAZYARRAY_GRAPH_CACHE=0`` (at import) or
``la.tuning(graph_cache=False)`` turns the cache off.
A cached program that fails re-runs the graph node by node, so the error names the line that
recorded the failing node in *this* graph.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..graph.node import Entry, Node, var_node
from ..tuning_table import current
from .oneshot import run_once
from .program import SMALL_GRAPH, Program, compile_program
from .signature_cache import default_size
from .structure import Described, input_values, max_bytes

ONESHOT_MAX_BYTES = 256 * 1024  # values larger than this: compile even a graph seen once

_PROGRAMS: OrderedDict = OrderedDict()  # key -> Program
_SEEN: OrderedDict = OrderedDict()  # keys run once, node by node
_LOCK = threading.Lock()
_BYTES = [0]
_STATS = {"hits": 0, "compiles": 0, "oneshot": 0}


def enabled() -> bool:
    """The tuning table's ``graph_cache`` (``LAZYARRAY_GRAPH_CACHE`` at import)."""
    return current().graph_cache


def run_recorded(d: Described) -> list:
    """Values of ``d``'s outputs (fresh buffers the caller owns), from its leaves' values."""
    args = input_values(d)
    key = d.key if len(d.ops) > SMALL_GRAPH else None
    if key is not None:
        with _LOCK:
            prog = _PROGRAMS.get(key)
            if prog is not None:
                _PROGRAMS.move_to_end(key)
                _STATS["hits"] += 1
        if prog is not None:
            try:
                return prog.run(args)
            except Exception:  # the error of this graph, naming its own lines
                return run_once(d, args)
        if _seen(key):
            prog = compile_described(d)
            _store(key, prog)
            return prog.run(args)
    if len(d.ops) > SMALL_GRAPH and (max_bytes(d) or 0) > ONESHOT_MAX_BYTES and d.dense:
        return compile_described(d).run(args)  # (planned, not kept: its buffers go with it)
    _STATS["oneshot"] += 1
    return run_once(d, args)


def _seen(key) -> bool:
    """True when ``key`` ran before (then it is compiled now); else remember it."""
    with _LOCK:
        if _SEEN.pop(key, None) is not None:
            return True
        _SEEN[key] = True
        while len(_SEEN) > 4 * default_size():
            _SEEN.popitem(last=False)
    return False


def compile_described(d: Described) -> Program:
    """A program for ``d``'s structure: its leaves become variables (in slot order), its op
    nodes copies reading them, so the program keeps no value of this graph."""
    at: dict[int, Entry] = {}
    variables = []
    for k, (s, (node, i)) in enumerate(zip(d.in_slots, d.inputs)):
        v = var_node(f"in{k}", node.avals[i])
        variables.append(v)
        at[s] = Entry(v)
    for node, ins, first in d.steps:
        copy = Node(node.op, tuple(at[s] for s in ins), dict(node.params), node.avals, name=node.name,
                    source=node.source)
        for j in range(len(node.avals)):
            at[first + j] = Entry(copy, j)
    _STATS["compiles"] += 1
    return compile_program([at[s] for s in d.out_slots], variables)


def _program_bytes(prog: Program) -> int:
    return prog.plan.peak_bytes if prog.plan is not None else 0


def _store(key, prog: Program) -> None:
    size = _program_bytes(prog)
    budget = current().graph_cache_bytes
    if size > budget:
        return
    with _LOCK:
        old = _PROGRAMS.pop(key, None)
        if old is not None:
            _BYTES[0] -= _program_bytes(old)
        _PROGRAMS[key] = prog
        _BYTES[0] += size
        while len(_PROGRAMS) > default_size() or _BYTES[0] > budget:
            _, gone = _PROGRAMS.popitem(last=False)
            _BYTES[0] -= _program_bytes(gone)


def clear() -> None:
    """Forget every cached program and every structure seen (the next materialization is cold)."""
    with _LOCK:
        _PROGRAMS.clear()
        _SEEN.clear()
        _BYTES[0] = 0


def stats() -> dict:
    """Counters since import: ``hits`` (cached programs run), ``compiles``, ``oneshot`` runs, and
    ``size`` (programs cached now)."""
    return {**_STATS, "size": len(_PROGRAMS)}
