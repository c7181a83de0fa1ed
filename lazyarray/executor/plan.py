"""The memory planner: liveness over a schedule, buffer reuse and in-place writes.

Pure and small: it sees a schedule of steps over abstract values (sizes, devices, which
value is a view of which) and decides which buffer holds each value. It never looks at
arrays, ops or the graph, so it is tested on random schedules (``tests/executor``).

Rules:

* a value lives from the step that produces it to the last step that reads it or any
  view of it; a value handed out after the run (``escapes``) lives to the end;
* external values (graph inputs, parameters, constants) have no buffer and are never
  written;
* a step's output may take the buffer of an input when the step declares the pair
  in-place-safe, the input dies at that step, has the same size and device, and no other
  input of the step aliases it;
* otherwise it takes the free buffer of its device that fits best by size (the smallest
  that is large enough, else the largest free one, grown), else a new buffer;
* a value handed out (``escapes``) is owned by the caller, so its buffer must be exactly its
  size and never shared with a later run: it takes an input's buffer in place, or a free
  one, only when that buffer has exactly its size, else a new buffer of its own.
  Those buffers are listed in ``escaping_buffers``: the executor allocates them anew for
  every run; everything else is reused run after run.

Under a joint forward + backward schedule, the forward values that backward reads stay
alive exactly until their last backward reader, and nothing else does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import plan_view


@dataclass(frozen=True)
class Value:
    """One value of the schedule: ``nbytes`` on ``device``.

    ``external``: given from outside (input, parameter, constant): no buffer, never written.
    ``view_of``: index of the value whose memory this one aliases (reshape, transpose, ...).
    ``escapes``: handed out after the run (an output): lives to the end of the schedule.
    """

    nbytes: int
    device: object = "cpu(0)"
    external: bool = False
    view_of: int | None = None
    escapes: bool = False
    name: str = ""
    runtime: str = ""  # why a step's output is allocated by its kernel at run time (e.g. "csr"), if so


@dataclass(frozen=True)
class Step:
    """One op of the schedule: reads ``inputs``, writes ``outputs`` (value indices).

    ``inplace``: ``(input position, output position)`` pairs the op allows to share a buffer.
    """

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    inplace: tuple[tuple[int, int], ...] = ()
    name: str = ""


@dataclass
class MemoryPlan:
    """Where every value lives. Print it for a table.

    ``buffer_of[v]``: buffer index of value ``v`` (views: their base's; external: ``None``).
    ``start[v]`` / ``end[v]``: the steps between which the value's memory must survive.
    """

    values: list[Value]
    steps: list[Step]
    base: list[int]
    start: list[int]
    end: list[int]
    buffer_of: list[int | None]
    buffer_size: list[int]
    buffer_device: list[object]
    escaping_buffers: frozenset[int]
    inplace: list[tuple[int, int, int]] = field(default_factory=list)  # (step, input value, output value)
    lower_bound_bytes: int = 0
    naive_bytes: int = 0

    @property
    def peak_bytes(self) -> int:
        """Bytes of all planned buffers: the memory one run holds at its peak."""
        return sum(self.buffer_size)

    @property
    def num_buffers(self) -> int:
        return len(self.buffer_size)

    @property
    def runtime_values(self) -> list[tuple[str, str]]:
        """``(name, why)`` of the values no buffer is planned for because their size is only known
        when they are computed (sparse outputs, data-dependent shapes): allocated at run time."""
        return [(v.name or f"v{i}", v.runtime) for i, v in enumerate(self.values) if v.runtime]

    def table(self) -> str:
        """A text table: one row per buffer (device, size, the values it holds), then totals."""
        rows = [("buffer", "device", "bytes", "values (step range)")]
        holders: dict[int, list[str]] = {}
        for v, b in enumerate(self.buffer_of):
            if b is not None and self.base[v] == v:
                name = self.values[v].name or f"v{v}"
                holders.setdefault(b, []).append(f"{name}[{self.start[v]}..{self.end[v]}]")
        for b, size in enumerate(self.buffer_size):
            tag = " (out)" if b in self.escaping_buffers else ""
            rows.append((f"#{b}{tag}", str(self.buffer_device[b]), f"{size:,}", ", ".join(holders.get(b, []))))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = ["  ".join(r[i].ljust(widths[i]) if i != 2 else r[i].rjust(widths[i]) for i in range(3))
                 + "  " + r[3] for r in rows]
        lines += [f"run time  {str(self.values[i].device):<{widths[1]}}  {'?':>{widths[2]}}  {nm} "
                  f"({why}: allocated by its kernel when run)" for i, (nm, why) in
                  ((i, (v.name or f"v{i}", v.runtime)) for i, v in enumerate(self.values) if v.runtime)]
        lb = self.lower_bound_bytes
        ratio = f"{self.peak_bytes / lb:.3f}x" if lb else "-"
        lines += [
            f"peak_bytes        {self.peak_bytes:>14,}  ({ratio} of lower bound)",
            f"lower_bound_bytes {lb:>14,}  (largest set of simultaneously live values)",
            f"naive_bytes       {self.naive_bytes:>14,}  (one buffer per value)",
            f"num_buffers       {self.num_buffers:>14}  ({len(self.inplace)} in-place writes)",
        ]
        return "\n".join(lines)

    __str__ = table

    def _repr_html_(self) -> str:
        """Notebook display: the numbers, a timeline of buffer lifetimes, run-time allocations."""
        return plan_view.plan_html(self)

    def __repr__(self) -> str:
        return (f"<MemoryPlan peak={self.peak_bytes:,} lower_bound={self.lower_bound_bytes:,} "
                f"naive={self.naive_bytes:,} buffers={self.num_buffers}>")

    def check(self) -> None:
        """Raise ``AssertionError`` when an invariant breaks (used by the property tests).

        No two values whose lifetimes overlap share a buffer unless one was written in place
        over the other at the step where the first dies; buffers are large enough and on the
        value's device; external values have no buffer.
        """
        allowed = {(i, o) for _, i, o in self.inplace}
        bases = [v for v in range(len(self.values)) if self.base[v] == v and self.buffer_of[v] is not None]
        for v in range(len(self.values)):
            val = self.values[v]
            if val.external:
                assert self.buffer_of[v] is None, f"external value {v} has a buffer"
                continue
            if self.base[v] != v:
                continue
            b = self.buffer_of[v]
            assert b is not None, f"value {v} has no buffer"
            assert self.buffer_size[b] >= val.nbytes, f"buffer {b} too small for value {v}"
            assert self.buffer_device[b] == val.device, f"buffer {b} on the wrong device for value {v}"
        for i, u in enumerate(bases):
            for w in bases[i + 1:]:
                if self.buffer_of[u] != self.buffer_of[w]:
                    continue
                a, b = (u, w) if self.start[u] <= self.start[w] else (w, u)
                if self.end[a] < self.start[b]:
                    continue  # disjoint lifetimes
                ok = self.end[a] == self.start[b] and _chain(allowed, a, b)
                assert ok, f"values {a} and {b} are live together in buffer {self.buffer_of[a]}"
        for _, i, o in self.inplace:
            assert self.values[i].nbytes == self.values[o].nbytes, "in-place pair of different sizes"
            assert not self.values[i].external, "in-place write over an external value"


def _chain(allowed: set, a: int, b: int) -> bool:
    """True when ``b`` took ``a``'s buffer in place, possibly through a chain of in-place writes."""
    return (a, b) in allowed


def plan_memory(values: list[Value], steps: list[Step]) -> MemoryPlan:
    """Assign buffers to the values of a schedule.

    >>> vals = [Value(16, external=True), Value(16), Value(16), Value(16, escapes=True)]
    >>> steps = [Step((0,), (1,)), Step((1,), (2,), inplace=((0, 0),)), Step((2,), (3,))]
    >>> p = plan_memory(vals, steps)
    >>> p.buffer_of, p.peak_bytes, p.lower_bound_bytes, p.naive_bytes
    ([None, 0, 0, 1], 32, 32, 48)
    """
    n, last = len(values), len(steps)
    base = list(range(n))
    for v, val in enumerate(values):
        if val.view_of is not None:
            base[v] = base[val.view_of]
    start = [-1] * n
    for i, st in enumerate(steps):
        for o in st.outputs:
            start[o] = i
    end = list(start)
    for i, st in enumerate(steps):
        for u in st.inputs:
            b = base[u]
            end[b] = max(end[b], i)
    for v, val in enumerate(values):
        if val.escapes:
            end[base[v]] = last
    for v in range(n):  # a view must keep its base alive as long as the view itself is alive
        if base[v] != v and end[v] > end[base[v]]:
            end[base[v]] = end[v]
    escaping_bases = {base[v] for v, val in enumerate(values) if val.escapes}
    dies_at: list[list[int]] = [[] for _ in range(last + 1)]
    for v in range(n):
        if base[v] == v and not values[base[v]].external and start[v] >= 0:
            dies_at[max(end[v], start[v])].append(v)

    buffer_of: list[int | None] = [None] * n
    sizes: list[int] = []
    devices: list[object] = []
    free: dict[object, list[int]] = {}
    holder: dict[int, int] = {}  # buffer -> the base value currently holding it
    inplace: list[tuple[int, int, int]] = []
    escaping_buffers: set[int] = set()
    for i, st in enumerate(steps):
        taken: set[int] = set()
        for pos, o in enumerate(st.outputs):
            val = values[o]
            if val.external or base[o] != o:
                continue
            out = o in escaping_bases
            b = _inplace_buffer(values, base, end, buffer_of, holder, st, i, pos, o, taken)
            if b is not None and out and sizes[b] != val.nbytes:
                b = None  # an output's buffer is exactly its size: nothing larger stays pinned
            if b is not None:
                inplace.append((i, holder[b], o))
            else:
                pool = free.setdefault(val.device, [])
                b = _exact_fit(pool, sizes, val.nbytes) if out else _best_fit(pool, sizes, val.nbytes)
                if b is None:
                    b = len(sizes)
                    sizes.append(val.nbytes)
                    devices.append(val.device)
            taken.add(b)
            buffer_of[o] = b
            holder[b] = o
            if o in escaping_bases:
                escaping_buffers.add(b)
        for v in dies_at[i]:
            b = buffer_of[v]
            if b is not None and holder.get(b) == v and v not in escaping_bases:
                del holder[b]
                free.setdefault(devices[b], []).append(b)
    for v in range(n):
        if base[v] != v:
            buffer_of[v] = buffer_of[base[v]]
    delta = [0] * (last + 2)  # sweep: +bytes where a value starts, -bytes after it ends
    for v in range(n):
        if base[v] == v and not values[v].external and start[v] >= 0:
            delta[start[v]] += values[v].nbytes
            delta[max(end[v], start[v]) + 1] -= values[v].nbytes
    # A true lower bound of any plan under the steps' in-place rules: at each step, an output that
    # may take the buffer of an input dying there (declared pair, same size and device) shares it.
    lower = live = 0
    for i in range(last):
        live += delta[i]
        lower = max(lower, live - _shareable_bytes(values, base, end, steps[i], i))
    naive = sum(val.nbytes for v, val in enumerate(values) if base[v] == v and not val.external)
    return MemoryPlan(values, steps, base, start, end, buffer_of, sizes, devices,
                      frozenset(escaping_buffers), inplace, lower, naive)


def _shareable_bytes(values, base, end, st: Step, i: int) -> int:
    """Bytes step ``i`` could save by writing outputs over inputs that die there (each input and
    each output at most once): what no plan can be forced to hold twice."""
    used_in: set[int] = set()
    used_out: set[int] = set()
    saved = 0
    for ip, op in st.inplace:
        if ip >= len(st.inputs) or op >= len(st.outputs):
            continue
        u, o = st.inputs[ip], st.outputs[op]
        uv, ov = values[u], values[o]
        if u in used_in or o in used_out or base[u] != u or base[o] != o or uv.external or ov.external:
            continue
        if uv.escapes or end[u] != i or uv.nbytes != ov.nbytes or uv.device != ov.device:
            continue
        used_in.add(u)
        used_out.add(o)
        saved += ov.nbytes
    return saved


def _inplace_buffer(values, base, end, buffer_of, holder, st: Step, i: int, pos: int, o: int, taken):
    """The buffer of an input that output ``pos`` of step ``i`` may overwrite, or None."""
    for ip, op in st.inplace:
        if op != pos:
            continue
        u = st.inputs[ip]
        uv = values[u]
        if uv.external or base[u] != u or uv.escapes or end[u] != i:
            continue
        if uv.nbytes != values[o].nbytes or uv.device != values[o].device:
            continue
        b = buffer_of[u]
        if b is None or b in taken or holder.get(b) != u:
            continue
        # Another input reading the same memory through a view would see it change mid-step.
        if any(base[w] == u and w != u for w in st.inputs):
            continue
        return b
    return None


def _exact_fit(free: list[int], sizes: list[int], nbytes: int) -> int | None:
    """A free buffer of exactly ``nbytes`` (an output's: it is allocated anew for every run)."""
    for b in free:
        if sizes[b] == nbytes:
            free.remove(b)
            return b
    return None


def _best_fit(free: list[int], sizes: list[int], nbytes: int) -> int | None:
    """Take the smallest free buffer that fits; else grow the largest free one; else None."""
    if not free:
        return None
    fits = [b for b in free if sizes[b] >= nbytes]
    if fits:
        b = min(fits, key=lambda k: sizes[k])
    else:
        b = max(free, key=lambda k: sizes[k])
        sizes[b] = nbytes
    free.remove(b)
    return b
