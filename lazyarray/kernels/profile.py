"""``la.profile()``: per-kernel wall time of real runs, eager and compiled, like ``torch.profiler``.

    >>> import lazyarray as la
    >>> with la.profile() as prof:
    ...     y = la.tanh(la.ones((64, 64)) @ la.ones((64, 64)))
    >>> [e.key for e in prof.events]
    ['matmul[blas]', 'tanh[tanh]']
    >>> print(prof.table())                                          # doctest: +SKIP
    op[implementation]  calls   total ms    mean us  % time
    matmul[blas]            1      0.031       31.0    61.2
    tanh[tanh]              1      0.020       19.6    38.8

Each event is one kernel call: eager calls from the dispatcher, compiled ones from the
program's run loop (one per step, named after the graph node). The op's chosen implementation
(``Choice``) is noted by its runner while it runs. ``prof.export_chrome_trace(path)`` writes the
Chrome trace-event JSON that Perfetto (ui.perfetto.dev) and chrome://tracing open.

Profiling turns on the ``PROFILING`` bit of the mode (``mode.py``): the dispatcher's fast paths
check the mode anyway, so code outside ``la.profile()`` pays nothing for it.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from dataclasses import dataclass

from ..fileio import write_atomic
from ..jit import compile_ns_within
from ..mode import MODE, PROFILING, set_mode_bit
from .impl import Choice

_CURRENT: contextvars.ContextVar[Profile | None] = contextvars.ContextVar("lazyarray_profile", default=None)


@dataclass(frozen=True)
class Event:
    """One timed kernel call. ``impl``: the implementation's label (``winograd4, kernel kept``;
    ``reference`` for an op with one kernel). ``where``: ``eager``, ``compiled`` (a program's step) or ``interpreted`` (a few kernels
    of a lazy graph run in order when it is computed); ``step``: the
    step's index in its program (compiled); ``node``: the graph node's name (compiled)."""

    name: str
    impl: str
    shapes: tuple
    start_ns: int
    dur_ns: int
    thread: int
    where: str
    step: int | None = None
    node: str = ""
    program: int | None = None

    @property
    def key(self) -> str:
        return f"{self.name}[{self.impl}]"


class Profile:
    """The events of one ``la.profile()`` block (see the module)."""

    def __init__(self):
        self.events: list[Event] = []
        self.programs: dict = {}  # id -> each compiled program that ran (kept while the profile is)
        self._choice: Choice | None = None
        self._lock = threading.Lock()

    # -- recording (the dispatcher, the program's run loop and the runners call these) ------------------
    def chose(self, choice: Choice) -> None:
        """Note the implementation the kernel being timed chose."""
        self._choice = choice

    def take_choice(self, default: str = "reference") -> str:
        """The label of the implementation noted since the last call (``default`` where none was)."""
        c, self._choice = self._choice, None
        return default if c is None else c.label()

    def _label_for(self, op, bound: Choice | None = None) -> str:
        """``take_choice`` for a call of ``op``: a choice noted by another op's runner inside it (a
        fused group's relu) is not ``op``'s, which then ran ``bound`` (a compiled step's bound choice)
        or its own kernel. A program step that runs several ops (``nn.dense+relu``,
        ``executor/epilogue.py``) takes the choice of any of them."""
        c = self._choice
        names = [q.rsplit(".", 1)[-1] for q in op.split("+")] if isinstance(op, str) else (op.name,)
        if c is not None and c.impl.op not in names:
            self._choice = c = None
        if c is None and bound is not None:
            return bound.label()
        return self.take_choice(reference_label(op))

    def saw(self, program) -> None:
        """Note a compiled program whose steps are being timed (``Event.program`` is its id)."""
        self.programs[id(program)] = program

    def add(self, op, shapes: tuple, start_ns: int, where: str, step=None, node: str = "",
            program=None, bound: Choice | None = None) -> None:
        """Record a kernel call of ``op`` (an ``OpDef``, or a name) that started at ``start_ns``;
        ``bound``: the choice a compiled step's ``Bound`` ran, where nothing noted another."""
        end = time.perf_counter_ns()
        name = op if isinstance(op, str) else op.qualname
        compiling = compile_ns_within(start_ns, end)  # (numba compiling a kernel on its first call: its own row)
        tid = threading.get_native_id()
        e = Event(name, self._label_for(op, bound), shapes, start_ns + compiling, end - start_ns - compiling, tid, where,
                  step, node, program)
        with self._lock:
            if compiling:
                self.events.append(Event(name, "numba compile", shapes, start_ns, compiling, tid, where, step, node,
                                         program))
            self.events.append(e)

    # -- reading ---------------------------------------------------------------------------------------
    def totals(self) -> list[tuple]:
        """``(op[impl], calls, total ns)`` per op and implementation, the longest first."""
        acc: dict[str, list] = {}
        for e in self.events:
            a = acc.setdefault(e.key, [0, 0])
            a[0] += 1
            a[1] += e.dur_ns
        return sorted(((k, n, t) for k, (n, t) in acc.items()), key=lambda r: (-r[2], r[0]))

    def table(self, limit: int | None = None) -> str:
        """The totals as a text table, sorted by total time."""
        rows = self.totals()
        everything = sum(t for _, _, t in rows) or 1
        width = max([len("op[implementation]")] + [len(k) for k, _, _ in rows])
        lines = [f"{'op[implementation]':<{width}}  {'calls':>6}  {'total ms':>9}  {'mean us':>9}  {'% time':>6}"]
        for k, n, t in rows[:limit]:
            lines.append(f"{k:<{width}}  {n:>6}  {t / 1e6:>9.3f}  {t / 1e3 / n:>9.1f}  {100 * t / everything:>6.1f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Profile {len(self.events)} events>\n{self.table(limit=10)}"

    def chrome_trace(self) -> dict:
        """The events as Chrome trace-event JSON (complete events, ``ph: "X"``, times in us)."""
        pid = os.getpid()
        t0 = min((e.start_ns for e in self.events), default=0)
        trace = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "lazyarray"}}]
        for e in self.events:
            args = {"implementation": e.impl, "shapes": [list(s) if s is not None else None for s in e.shapes]}
            if e.step is not None:
                args.update(step=e.step, node=e.node)
            trace.append({"name": e.key, "cat": e.where, "ph": "X", "ts": (e.start_ns - t0) / 1e3,
                          "dur": e.dur_ns / 1e3, "pid": pid, "tid": e.thread, "args": args})
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def export_chrome_trace(self, path: str) -> None:
        """Write the Chrome trace (``chrome_trace()``) to ``path`` atomically; open it in Perfetto."""
        write_atomic(os.fspath(path), json.dumps(self.chrome_trace()).encode())


def reference_label(op) -> str:
    """How an op's own kernel is named where the kernels layer has no choice for it: the NumPy
    function it is (``add``), else ``reference``."""
    kernel = getattr(op, "kernel", None)
    return kernel if isinstance(kernel, str) else "reference"


def timed(op, kernel, where: str):
    """``kernel`` (``op``'s, bound to an array module) timing each call into the profile being
    recorded: for an evaluator that binds kernels once per run."""
    def run(*args, **params):
        start = time.perf_counter_ns()
        out = kernel(*args, **params)
        _CURRENT.get().add(op, tuple(getattr(a, "shape", None) for a in args), start, where)
        return out

    return run


def current() -> Profile | None:
    """The profile being recorded in this thread / task, or None."""
    return _CURRENT.get()


@contextlib.contextmanager
def profile():
    """Time every kernel that runs inside (eager calls and compiled steps); yields the ``Profile``."""
    prof = Profile()
    token = _CURRENT.set(prof)
    mode = set_mode_bit(PROFILING, True)
    try:
        yield prof
    finally:
        MODE.reset(mode)
        _CURRENT.reset(token)
