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
* the output of such a pair keeps the input's place: an in-place chain is placed as one
  interval of steps;
* placement is offline, greedy by size: largest first, each value (chain) at the lowest
  offset of its device's line of memory (a multiple of ``align``) where it meets no placed
  value alive at an overlapping step (``_place``);
* a value handed out (``escapes``) is owned by the caller, so it becomes a buffer of exactly
  its size: values that die before it is written may sit inside it, none may straddle its
  edges. Those buffers are listed in ``escaping_buffers``: the executor allocates them anew
  for every run. The rest of the line is cut into buffers at its gaps (stretches no value
  covers are never allocated) and reused run after run; each value is a view of its buffer
  at ``offset_of``.

Under a joint forward + backward schedule, the forward values that backward reads stay
alive exactly until their last backward reader, and nothing else does.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from . import plan_view

ALIGN = 64  # byte alignment of every planned value's offset (any dtype, SIMD loads, cache lines)


_SET = object.__setattr__  # (the frozen classes' one write, at construction)


@dataclass(frozen=True, init=False)
class Value:
    """One value of the schedule: ``nbytes`` on ``device``.

    ``external``: given from outside (input, parameter, constant): no buffer, never written.
    ``view_of``: index of the value whose memory this one aliases (reshape, transpose, ...), at
    byte ``view_at`` of it: a part of a concatenation its producer writes in place
    (``concat_in_place.py``) may alias a value written later, so ``view_of`` may point forward.
    ``escapes``: handed out after the run (an output): lives to the end of the schedule.
    """

    nbytes: int
    device: object = "cpu(0)"
    external: bool = False
    view_of: int | None = None
    escapes: bool = False
    name: str = ""
    runtime: str = ""  # why a step's output is allocated by its kernel at run time (e.g. "csr"), if so
    view_at: int = 0  # byte offset of this view in the memory of ``view_of``
    # ``(images, image stride in bytes)`` of a part written in place at a batch stride (its images
    # apart by the concatenation's image: ``concat_in_place.py``); () for a contiguous view
    view_stride: tuple = ()

    def __init__(self, nbytes: int, device: object = "cpu(0)", external: bool = False, view_of: int | None = None,
                 escapes: bool = False, name: str = "", runtime: str = "", view_at: int = 0, view_stride: tuple = ()):
        # (the fields in one write: a compile makes a value per slot, and the dataclass's own
        # frozen ``__init__`` costs one ``object.__setattr__`` per field, twice this)
        _SET(self, "__dict__", {"nbytes": nbytes, "device": device, "external": external, "view_of": view_of,
                                "escapes": escapes, "name": name, "runtime": runtime, "view_at": view_at,
                                "view_stride": view_stride})


@dataclass(frozen=True, init=False)
class Step:
    """One op of the schedule: reads ``inputs``, writes ``outputs`` (value indices).

    ``inplace``: ``(input position, output position)`` pairs the op allows to share a buffer.
    """

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    inplace: tuple[tuple[int, int], ...] = ()
    name: str = ""
    workspace: int = 0  # scratch bytes the step's kernel uses while it runs (``ops/scratch.py``)

    def __init__(self, inputs: tuple[int, ...], outputs: tuple[int, ...], inplace: tuple[tuple[int, int], ...] = (),
                 name: str = "", workspace: int = 0):
        _SET(self, "__dict__", {"inputs": inputs, "outputs": outputs, "inplace": inplace, "name": name,
                                "workspace": workspace})


@dataclass
class MemoryPlan:
    """Where every value lives. Print it for a table.

    ``buffer_of[v]``: buffer index of value ``v`` (views: their base's; external: ``None``);
    ``offset_of[v]``: where in that buffer its bytes start.
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
    offset_of: list[int | None] = field(default_factory=list)  # byte offset of each value in its buffer
    align: int = 1  # offsets are multiples of this
    workspace_of: dict[int, int] = field(default_factory=dict)  # step -> the value of its workspace
    concats_in_place: frozenset = frozenset()  # concatenate steps their parts' steps write (concat_in_place.py)

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
                at = f"@{self.offset_of[v]:,}" if self.offset_of and self.offset_of[v] else ""
                holders.setdefault(b, []).append(f"{name}{at}[{self.start[v]}..{self.end[v]}]")
        for b, size in enumerate(self.buffer_size):
            tag = " (out)" if b in self.escaping_buffers else ""
            rows.append((f"#{b}{tag}", str(self.buffer_device[b]), f"{size:,}",
                         plan_view.values_text(holders.get(b, []))))
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
        if self.concats_in_place:
            lines.append(f"concats_in_place  {len(self.concats_in_place):>14}  (parts written in place: views of the result)")
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
        value's device; external values have no buffer. Values may share a buffer at different
        offsets; only overlapping bytes need disjoint lifetimes.
        """
        allowed = {(i, o) for _, i, o in self.inplace}
        bases = [v for v in range(len(self.values)) if self.base[v] == v and self.buffer_of[v] is not None]
        for v in range(len(self.values)):
            val = self.values[v]
            if val.external:
                assert self.buffer_of[v] is None, f"external value {v} has a buffer"
                continue
            if self.base[v] != v:
                if val.view_at:  # a part written in place lies inside its base's memory
                    lo, hi = self._offset(self.base[v]), self._offset(v) + view_span(val)
                    assert lo < self._offset(v) and hi <= lo + self.values[self.base[v]].nbytes, \
                        f"view {v} outside its base {self.base[v]}"
                continue
            b = self.buffer_of[v]
            assert b is not None, f"value {v} has no buffer"
            off = self._offset(v)
            assert off >= 0 and off % max(self.align, 1) == 0, f"value {v} at a misaligned offset {off}"
            assert self.buffer_size[b] >= off + val.nbytes, f"buffer {b} too small for value {v} at {off}"
            assert self.buffer_device[b] == val.device, f"buffer {b} on the wrong device for value {v}"
        by_buffer: dict[int, list[int]] = {}
        for v in bases:
            by_buffer.setdefault(self.buffer_of[v], []).append(v)
        for b, held in by_buffer.items():
            for i, u in enumerate(held):
                for w in held[i + 1:]:
                    lo_u, lo_w = self._offset(u), self._offset(w)
                    if lo_u + self.values[u].nbytes <= lo_w or lo_w + self.values[w].nbytes <= lo_u:
                        continue  # different bytes of the buffer
                    a, c = (u, w) if self.start[u] <= self.start[w] else (w, u)
                    if max(self.end[a], self.start[a]) < self.start[c]:
                        continue  # disjoint lifetimes
                    ok = self.end[a] == self.start[c] and lo_u == lo_w and _chain(allowed, a, c)
                    assert ok, f"values {a} and {c} are live together in the same bytes of buffer {b}"
        for b in self.escaping_buffers:  # handed to the caller: exactly one output's size
            outs = {self.base[v] for v, val in enumerate(self.values) if val.escapes and self.buffer_of[v] == b}
            assert len(outs) == 1, f"escaping buffer {b} holds outputs {sorted(outs)}"
            assert self.buffer_size[b] == self.values[outs.pop()].nbytes, f"escaping buffer {b} not exact size"
        for _, i, o in self.inplace:
            assert self.values[i].nbytes == self.values[o].nbytes, "in-place pair of different sizes"
            assert not self.values[i].external, "in-place write over an external value"


    def _offset(self, v: int) -> int:
        return self.offset_of[v] or 0 if self.offset_of else 0


def view_span(val: Value) -> int:
    """The bytes from a view's first to its last byte: its size, or for a part at a batch stride
    (``view_stride``) every image but the last a stride apart, then the last image's bytes."""
    if not val.view_stride:
        return val.nbytes
    images, stride = val.view_stride
    return (images - 1) * stride + val.nbytes // images


def _chain(allowed: set, a: int, b: int) -> bool:
    """True when ``b`` took ``a``'s buffer in place, possibly through a chain of in-place writes."""
    return (a, b) in allowed


def plan_memory(values: list[Value], steps: list[Step], align: int = ALIGN) -> MemoryPlan:
    """Assign buffers to the values of a schedule.

    >>> vals = [Value(16, external=True), Value(16), Value(16), Value(16, escapes=True)]
    >>> steps = [Step((0,), (1,)), Step((1,), (2,), inplace=((0, 0),)), Step((2,), (3,))]
    >>> p = plan_memory(vals, steps)
    >>> p.buffer_of, p.peak_bytes, p.lower_bound_bytes, p.naive_bytes
    ([None, 0, 0, 1], 32, 32, 48)
    """
    values, steps, workspace_of = _with_workspace(values, steps)
    n, last = len(values), len(steps)
    base, start, end = _lifetimes(values, steps)
    escaping_bases = {base[v] for v, val in enumerate(values) if val.escapes}
    inplace = _inplace_pairs(values, steps, base, end, escaping_bases)
    # In-place chains share one offset: each chain is placed as one interval of steps.
    root = list(range(n))
    for _, u, o in inplace:
        root[o] = root[u]
    span = _chain_spans(values, base, start, end, root, escaping_bases)
    outside = {root[w] for w in workspace_of.values()}  # (kept out of the caller's buffers: see _place)
    buffer_of, offset_of, sizes, devices, escaping_buffers = _buffers(values, span, last, align, outside)
    for v in range(n):  # in-place chains share their first value's memory, views their base's
        if base[v] == v and root[v] != v:
            buffer_of[v], offset_of[v] = buffer_of[root[v]], offset_of[root[v]]
    _, view_at = view_bases(values)
    for v in range(n):
        if base[v] != v:
            b_off = offset_of[base[v]]
            buffer_of[v], offset_of[v] = buffer_of[base[v]], None if b_off is None else b_off + view_at[v]
    lower = _lower_bound(values, steps, base, start, end)
    naive = sum(val.nbytes for v, val in enumerate(values) if base[v] == v and not val.external)
    return MemoryPlan(values, steps, base, start, end, buffer_of, sizes, devices,
                      frozenset(escaping_buffers), inplace, lower, naive, offset_of, align, workspace_of)


def _lifetimes(values: list[Value], steps: list[Step]) -> tuple[list, list, list]:
    """``(base, start, end)`` per value: the value whose memory it is (views: their base's), the
    step that writes it and the last step its memory must survive (handed out: the end)."""
    n, last = len(values), len(steps)
    base, _ = view_bases(values)
    start = [-1] * n
    for i, st in enumerate(steps):
        for o in st.outputs:
            start[o] = i
    for v in range(n):  # a base written after a view of it (a concatenation's part): alive from the view
        if base[v] != v and start[v] >= 0 and (start[base[v]] < 0 or start[v] < start[base[v]]):
            start[base[v]] = start[v]
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
    return base, start, end


def view_bases(values: list[Value]) -> tuple[list[int], list[int]]:
    """``(base, at)`` per value: the value whose memory it is and its byte offset there (views
    of views follow the chain, which may point forward; a value that is no view: itself, 0)."""
    n = len(values)
    base, at = list(range(n)), [0] * n
    done = [False] * n
    for v in range(n):
        path = []
        u = v
        while not done[u] and values[u].view_of is not None:
            path.append(u)
            u = values[u].view_of
            assert len(path) <= n, "a cycle of views"
        b, off = (base[u], at[u]) if done[u] or values[u].view_of is None else (u, 0)
        for w in reversed(path):
            off += values[w].view_at
            base[w], at[w], done[w] = b, off, True
        done[u] = True
    return base, at


def _chain_spans(values, base, start, end, root, escaping_bases) -> dict[int, list]:
    """Chain root -> ``[first step, last step, escapes]`` of every planned in-place chain."""
    span: dict[int, list] = {}
    for v in range(len(values)):
        if base[v] != v or values[v].external or start[v] < 0:
            continue
        sp = span.get(root[v])
        e = max(end[v], start[v])
        if sp is None:
            span[root[v]] = [start[v], e, v in escaping_bases]
        else:
            sp[0], sp[1], sp[2] = min(sp[0], start[v]), max(sp[1], e), sp[2] or v in escaping_bases
    return span


def _buffers(values, span: dict, last: int, align: int, outside: set):
    """Place the chains on each device's line of memory and cut the lines into buffers:
    ``(buffer_of, offset_of, sizes, devices, escaping_buffers)`` (per chain root)."""
    n = len(values)
    by_device: dict[object, list[int]] = {}
    for r in span:
        by_device.setdefault(values[r].device, []).append(r)
    offset_of: list[int | None] = [None] * n
    buffer_of: list[int | None] = [None] * n
    sizes: list[int] = []
    devices: list[object] = []
    escaping_buffers: set[int] = set()
    for dev, roots in by_device.items():
        items = [(values[r].nbytes, span[r][0], span[r][1], span[r][2]) for r in roots]
        at = _place(items, last, align, {k for k, r in enumerate(roots) if r in outside})
        spans = _cut(items, at)
        first = len(sizes)
        for a, b, e in spans:
            if e:
                escaping_buffers.add(len(sizes))
            sizes.append(b - a)
            devices.append(dev)
        starts = [a for a, _, _ in spans]
        for k, r in enumerate(roots):
            j = bisect.bisect_right(starts, at[k]) - 1  # spans are disjoint: a block is inside exactly one
            buffer_of[r], offset_of[r] = first + j, at[k] - spans[j][0]
    return buffer_of, offset_of, sizes, devices, escaping_buffers


def _cut(items: list, at: list[int]) -> list[tuple[int, int, bool]]:
    """A line's buffers, ``(start, end, escapes)`` sorted: each escaping chain's block (exact size,
    owned by the caller), and the merged stretches the other chains cover outside those blocks."""
    blocks = sorted((at[k], at[k] + items[k][0], items[k][3], k) for k in range(len(items)))
    esc = [(a, b) for a, b, e, _ in blocks if e]
    runs: list[list[int]] = []
    j = 0  # blocks and esc are both sorted by offset; esc ranges are disjoint
    for a, b, e, _ in blocks:
        while j < len(esc) and esc[j][1] <= a:
            j += 1
        if e or j < len(esc) and esc[j][0] <= a and b <= esc[j][1]:
            continue
        if runs and a <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    return sorted([(a, b, True) for a, b in esc] + [(a, b, False) for a, b in runs])


def _lower_bound(values, steps, base, start, end) -> int:
    """A true lower bound of any plan under the steps' in-place rules: the largest live set, less
    at each step what an output may share with an input dying there (declared pair, same size and
    device)."""
    last = len(steps)
    delta = [0] * (last + 2)  # sweep: +bytes where a value starts, -bytes after it ends
    for v in range(len(values)):
        if base[v] == v and not values[v].external and start[v] >= 0:
            delta[start[v]] += values[v].nbytes
            delta[max(end[v], start[v]) + 1] -= values[v].nbytes
    lower = live = 0
    for i in range(last):
        live += delta[i]
        lower = max(lower, live - _shareable_bytes(values, base, end, steps[i], i))
    return lower


def _with_workspace(values: list[Value], steps: list[Step]) -> tuple[list, list, dict]:
    """Each step's workspace as one more value, written by the step and read by nobody: it lives
    at that step only, on the device of the step's first output, and is placed like any value."""
    workspace_of: dict[int, int] = {}
    more_values, more_steps = list(values), list(steps)
    for i, st in enumerate(steps):
        on = st.outputs[:1] or st.inputs[:1]
        if st.workspace <= 0 or not on:
            continue
        workspace_of[i] = len(more_values)
        more_values.append(Value(st.workspace, values[on[0]].device, name=f"{st.name or f's{i}'} workspace"))
        more_steps[i] = Step(st.inputs, st.outputs + (workspace_of[i],), st.inplace, st.name, st.workspace)
    return more_values, more_steps, workspace_of


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


def _inplace_pairs(values, steps, base, end, escaping_bases) -> list[tuple[int, int, int]]:
    """``(step, input, output)``: each output written over an input that dies at its step (a
    declared pair, same size and device, not external, not handed out, not read through a view
    by the same step, each input taken by at most one output)."""
    pairs = []
    for i, st in enumerate(steps):
        taken: set[int] = set()
        for pos, o in enumerate(st.outputs):
            ov = values[o]
            if ov.external or base[o] != o:
                continue
            for ip, op in st.inplace:
                if op != pos or ip >= len(st.inputs):
                    continue
                u = st.inputs[ip]
                uv = values[u]
                if uv.external or base[u] != u or u in escaping_bases or end[u] != i or u in taken:
                    continue
                if uv.nbytes != ov.nbytes or uv.device != ov.device:
                    continue
                # Another input reading the same memory through a view would see it change mid-step.
                if any(base[w] == u and w != u for w in st.inputs):
                    continue
                taken.add(u)
                pairs.append((i, u, o))
                break
    return pairs


_BUCKET = 32  # steps per bucket of the lifetime index


def _place(items: list[tuple[int, int, int, bool]], last: int, align: int, outside=frozenset()) -> list[int]:
    """Offsets on one line of memory for ``items`` = ``(nbytes, first step, last step, escapes)``.

    Greedy by size: largest first, each at the lowest aligned offset where it collides with no
    placed item alive at an overlapping step. An escaping item becomes a buffer of its own, so
    no item may straddle its edges: an earlier (larger) item may only coincide with it exactly,
    and a later one must fit inside it or stay out of it. Placed items are indexed by buckets of
    steps, so each placement looks only at items alive near its own lifetime. Items in ``outside``
    (steps' workspaces) stay out of escaping items' blocks: memory handed to the caller is taken back
    only when nothing else holds it, and a kernel's arena holds its workspace.
    """
    order = sorted(range(len(items)), key=lambda k: (-items[k][0], items[k][1], k))
    nb = last // _BUCKET + 2
    starts: list[list[tuple]] = [[] for _ in range(nb)]  # items whose lifetime starts in the bucket
    spans: list[list[tuple]] = [[] for _ in range(nb)]  # items alive in the bucket, started before it
    placed: list[tuple[int, int, int, int]] = []  # (offset, end offset, first step, last step)
    blocks: list[tuple[int, int]] = []  # escaping items' byte ranges, sorted
    at = [0] * len(items)
    for k in order:
        size, s, e, esc = items[k]
        q0, q1 = s // _BUCKET, e // _BUCKET
        ivs = [(a, b, _TAKEN) for a, b, s2, e2 in spans[q0] if s <= e2]
        for q in range(q0, q1 + 1):
            ivs += [(a, b, _TAKEN) for a, b, s2, e2 in starts[q] if s2 <= e and s <= e2]
        if esc:
            ivs += [(a, b, _EXACT if b - a == size else _TAKEN) for a, b, s2, e2 in placed if e < s2 or e2 < s]
        ivs.sort()
        off = _lowest(ivs, size, align, () if esc else blocks, k in outside)
        at[k] = off
        item = (off, off + size, s, e)
        starts[q0].append(item)
        for q in range(q0 + 1, q1 + 1):
            spans[q].append(item)
        placed.append(item)
        if esc:
            bisect.insort(blocks, (off, off + size))
    return at


_TAKEN, _EXACT = 0, 1  # byte range in use; byte range free to coincide with exactly


def _lowest(ivs: list[tuple[int, int, int]], size: int, align: int, blocks=(), outside: bool = False) -> int:
    """The lowest offset (a multiple of ``align``) where ``size`` bytes meet the rules of ``ivs``
    (sorted) and lie wholly inside (unless ``outside``) or wholly outside each of the disjoint,
    sorted ``blocks``."""
    off, moved = 0, True
    while moved:
        moved = skipped = False
        for a, b, rule in ivs:
            if a >= off + size:
                break  # sorted by start: nothing further reaches back to off
            if b <= off:
                continue
            if rule == _EXACT and a == off:
                skipped = True
                continue
            off = a if rule == _EXACT and a > off else -(-b // align) * align
            moved = skipped  # an earlier range may reach past the new offset only if one was let be
        if blocks:
            j = bisect.bisect_right(blocks, (off, float("inf"))) - 1  # the block at or before off
            for a, b in blocks[max(j, 0):]:
                if a >= off + size:
                    break
                if b <= off or a <= off and off + size <= b and not outside:
                    continue
                off = a if a > off and size <= b - a and not outside else -(-b // align) * align
                moved = True
                break
    return off
