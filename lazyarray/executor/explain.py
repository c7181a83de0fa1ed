"""``explain()``: what a call runs, step by step, with the implementation each step chose.

``CachedOp.explain(*arrays)`` and ``HybridBlock.explain(*arrays)`` run the call once inside
``la.profile()`` (so the choices shown are the ones really made, for these arrays) and turn the
profile into an ``Explanation``: for each compiled program that ran, one row per step with the
node, ``op[implementation, notes]``, its input and output shapes, where its output lives (a
planned buffer ``#b@offset``, handed to the caller, or allocated by the kernel) and its workspace
(the scratch bytes its op declares, and the planned buffer that holds them while it runs), then the
memory plan's totals. Eager kernel calls (a block that is not hybridized) are listed
as they ran.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 3))
    >>> op = la.CachedOp(la.sym.relu(x * 2))
    >>> print(op.explain(la.ones((2, 3))))
    program: 2 steps, peak 24 bytes in 1 buffer (lower bound 24)
    step  node       op[implementation]  inputs     output  memory          workspace
       0  multiply0  multiply[multiply]  [2,3], []  [2,3]   #0 (to caller)  -
       1  relu0      relu[maximum]       [2,3]      [2,3]   #0 (to caller)  -
"""
from __future__ import annotations

from html import escape

from ..errors import fmt_shape
from ..kernels.profile import Profile
from ..ops.scratch import planned_workspace_bytes, workspace_bytes
from .concat_in_place import IN_PLACE
from .param_cache import KEPT
from .program import Program
from .units_major import UNITS_MAJOR

_HEAD = ("step", "node", "op[implementation]", "inputs", "output", "memory", "workspace")


class Explanation:
    """The text of ``explain()`` (print it), with its rows as data: ``programs`` is a list of
    ``(program, rows)``, each row a dict with the columns' names; ``eager`` the eager calls."""

    def __init__(self, programs: list, eager: list):
        self.programs = programs
        self.eager = eager

    @property
    def steps(self) -> list[dict]:
        """Every compiled step's row, programs in the order they ran."""
        return [row for _, rows in self.programs for row in rows]

    def text(self) -> str:
        parts = []
        for prog, rows in self.programs:
            plan = prog.plan
            n_cat = len(plan.concats_in_place)
            n_views = len(prog.made_once) - n_cat
            once = f" (and {n_views} views made once)" if n_views else ""
            if n_cat:
                once += f" (and {n_cat} concatenations written in place)"
            if prog.kept:
                once += f" (and {len(prog.kept)} steps computed once: parameters)"
            parts.append(f"program: {len(prog.steps)} steps{once}, peak {plan.peak_bytes:,} bytes in {plan.num_buffers} "
                         f"buffer{'s' if plan.num_buffers != 1 else ''} (lower bound {plan.lower_bound_bytes:,})")
            parts.append(_table([_HEAD] + [tuple(str(r[k]) for k in _HEAD) for r in rows]))
        if self.eager:
            parts.append(f"eager: {len(self.eager)} kernel calls, one by one (not compiled: hybridize() "
                         "a block, or run a graph through la.CachedOp, to plan them)")
            head = ("call", "op[implementation]", "inputs")
            parts.append(_table([head] + [(str(i), e.key, ", ".join(fmt_shape(s) for s in e.shapes))
                                          for i, e in enumerate(self.eager)]))
        return "\n".join(parts) if parts else "nothing ran"

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return f"<pre>{escape(self.text())}</pre>"


def _table(rows: list[tuple]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = {0}  # numbers
    return "\n".join("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in rows)


def explain_profile(prof: Profile) -> Explanation:
    """The ``Explanation`` of everything ``prof`` recorded."""
    impls: dict = {}
    order: list[Program] = []
    for e in prof.events:
        if e.where == "compiled":
            prog = prof.programs[e.program]
            if e.program not in impls:
                impls[e.program] = {}
                order.append(prog)
            impls[e.program][e.step] = e.impl
    programs = [(prog, step_rows(prog, impls[id(prog)])) for prog in order]
    return Explanation(programs, [e for e in prof.events if e.where == "eager"])


def step_rows(prog: Program, impls: dict) -> list[dict]:
    """One row per step of ``prog``; ``impls``: step index -> the implementation label it ran."""
    plan = prog.plan
    handed = set(prog.out_slots)
    rows = [_kept_row(specs) for specs in prog.kept]  # (param_cache.py: computed before, not by this run)
    k = 0  # the plan's step of each program step's first spec (a merged step runs two)
    for i, specs in enumerate(prog.step_specs):
        k = _made_once_rows(prog, k, rows, handed)
        sp = specs[0]
        node = sp.node
        ops = "+".join(s.node.op.qualname for s in specs)
        outs = ", ".join(fmt_shape(a.shape) for a in specs[-1].node.avals)
        if sp.order is not None:  # (a planned memory order: executor/batch_last.py, units_major.py)
            outs += " units major" if tuple(sp.order) == UNITS_MAJOR else " batch last"
        rows.append({"step": i, "node": sp.name, "op[implementation]": f"{ops}[{impls.get(i, 'reference')}]",
                     "inputs": ", ".join(fmt_shape(e.aval.shape) for e in node.inputs),
                     "output": outs, "memory": _where(plan, specs[-1].outs[0] if specs[-1].outs else None, handed),
                     "workspace": _workspace(plan, k, node)})
        k += len(specs)
    _made_once_rows(prog, k, rows, handed)
    return rows


def _kept_row(specs) -> dict:
    """The row (step ``-``) of a step computed once from parameters only (``executor/param_cache.py``)."""
    node = specs[0].node
    return {"step": "-", "node": specs[0].name,
            "op[implementation]": f"{'+'.join(s.node.op.qualname for s in specs)}[{KEPT}]",
            "inputs": ", ".join(fmt_shape(e.aval.shape) for e in node.inputs),
            "output": ", ".join(fmt_shape(a.shape) for a in specs[-1].node.avals), "memory": "kept", "workspace": "-"}


def _made_once_rows(prog: Program, k: int, rows: list, handed) -> int:
    """Rows (step ``-``) for the views made with each buffer set from plan step ``k`` on
    (``executor/set_views.py``) and the concatenations written in place (``concat_in_place.py``);
    the plan step after them."""
    while k in prog.made_once:
        sp = prog.made_once[k]
        how = IN_PLACE if k in prog.plan.concats_in_place else "view made once"
        rows.append({"step": "-", "node": sp.name, "op[implementation]": f"{sp.node.op.qualname}[{how}]",
                     "inputs": ", ".join(fmt_shape(e.aval.shape) for e in sp.node.inputs),
                     "output": fmt_shape(sp.node.avals[0].shape), "memory": _where(prog.plan, sp.outs[0], handed),
                     "workspace": "-"})
        k += 1
    return k


def _where(plan, slot, handed) -> str:
    if slot is None:
        return "-"
    b = plan.buffer_of[slot] if slot < len(plan.buffer_of) else None
    if b is None:
        return "to caller" if slot in handed else "kernel allocates"
    at = plan.offset_of[slot] if plan.offset_of else 0
    tag = " (to caller)" if b in plan.escaping_buffers else ""
    return f"#{b}@{at:,}{tag}" if at else f"#{b}{tag}"


def _workspace(plan, k: int, node) -> str:
    """The scratch bytes the node's op declares (``OpDef.workspace``) and, in a compiled program,
    the planned buffer that holds them while the step runs (``#b@offset``); ``- (reads none)`` where
    the plan gave a CPU step none, its bound kernel reading no scratch (``program._binds_without_scratch``)."""
    avals = [e.aval for e in node.inputs]
    n = workspace_bytes(node.op, avals, node.params)
    w = plan.workspace_of.get(k)
    if w is None and n and planned_workspace_bytes(node.op, avals, node.params):
        return "- (reads none)"
    if w is None or not n:
        return _bytes(n)
    at = plan.offset_of[w]
    return f"{_bytes(n)} #{plan.buffer_of[w]}@{at:,}" if at else f"{_bytes(n)} #{plan.buffer_of[w]}"


def _bytes(n: int) -> str:
    if n == 0:
        return "-"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
