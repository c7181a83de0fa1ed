"""A compiled program's steps with the kernels layer's choices bound in: each step of an op that has a
binder (``kernels.bind``) calls its chosen implementation directly instead of the op's runner, which
would ask the chooser, the tuning table and the mode on every call.

What a choice hangs on is fixed by the program (the step's avals, the memory order the planner gave
each value, whether its output goes to a planned buffer) except the tuning table in force and the
thread count (``la.tuning``, ``la.config``, ``la.set_num_threads``): a program keeps its steps bound
for one pair (``Bindings.current``) and binds again when a run finds another. A step binds at its
first run under that pair (not in the program's very first run, ``jit.first_run``, whose BLAS probe
answers provisionally), by the same chooser its runner asks, on the run's own arrays; facts that
only a call shows (a weight kept by its version) stay checked per call inside the bound function
(``kernels/conv2d.py``). Runs with the kernels log on (``log_kernels``) take the runners' steps, which
say what they chose (the same choices: ``tests/executor/test_binding.py``); runs under ``la.profile()``
time the bound steps, each named by the choice it ran (``Bound.choice``, ``Program._run_timed``).
"""
from __future__ import annotations

from collections.abc import Callable

from ..jit import in_first_run
from ..kernels import bind, binds
from ..tuning_table import Tuning

# what a maker returns: the step's closure with its choice bound in, and the ``Bound`` (None: the
# op's binder declined and the closure calls its runner)
Maker = Callable  # maker(slots) -> (step, Bound | None)


class Bindings:
    """The steps of a program as bound for one tuning table and thread count.

    ``plain``: the program's steps calling the runners; ``makers``: step index -> the maker of that
    step's bound closure. ``current``: (table, threads, steps, chosen), replaced as a whole so that
    a run on another thread reads one consistent binding; ``chosen``: step index -> ``Bound``."""

    __slots__ = ("plain", "makers", "current")

    def __init__(self, plain: list, makers: dict[int, Maker]):
        self.plain = plain
        self.makers = makers
        self.current = (None, 0, plain, {})

    def steps_for(self, table: Tuning, threads: int) -> list:
        """The steps to run under ``table`` and ``threads`` (a run's slow path: the pair changed).
        Each bindable step binds at its first run; the kernels log wants the runners' notes."""
        if table.log_kernels:
            steps, chosen = self.plain, {}
        else:
            steps, chosen = list(self.plain), {}
            for i, make in self.makers.items():
                steps[i] = _binding_at_first_run(steps, chosen, i, make, self.plain[i])
        self.current = (table, threads, steps, chosen)
        return steps

    def chosen(self) -> dict:
        """Step index -> the ``Bound`` of each step bound so far under the last pair."""
        return dict(self.current[3])


def _binding_at_first_run(steps: list, chosen: dict, i: int, make: Maker, plain):
    def step(s):
        if in_first_run():  # (a program's first run answers some facts provisionally: bind at the next)
            plain(s)
            return
        made, bound = make(s)
        steps[i] = made  # (runs after this one call the bound closure)
        if bound is not None:
            chosen[i] = bound
        made(s)

    return step


def bindable(sp, kinds, several=frozenset()) -> bool:
    """A step spec (``program._Spec``) of one of ``kinds`` that calls its op's kernel as it is (its
    runner, or a ``fused`` group's kernel, which asks ``kernels/fused.py``), and whose op has a binder
    (``kernels.bind``: its runner installed); one output, or several where its kind is one of
    ``several`` (each written into its planned buffer: ``foreach``'s step outputs and final states)."""
    op = sp.node.op
    return sp.kind in kinds and (len(sp.outs) == 1 or sp.kind in several) \
        and sp.fn is op.bind(sp.node.avals[0].device.xp) and binds(op)


def _out(sp, s, out_kinds):
    """What the step's kernel is handed as ``out``: its planned buffer, a tuple of them where the step
    writes several (``kernels.bind`` binds on the same), None where the kernel allocates."""
    if sp.kind not in out_kinds:
        return None
    return s[sp.outs[0]] if len(sp.outs) == 1 else tuple([s[k] for k in sp.outs])


def maker(group: tuple, make: Callable, plain_step, out_kinds) -> Maker:
    """The maker of a step's bound closure: each spec of ``group`` (one, or a dense layer and its
    relu) bound by ``kernels.bind`` on the run's arrays (its planned output buffers where its kind is
    one of ``out_kinds``), then ``make(specs)`` (the closure the program makes of specs; ``lends=False``
    where no ``Bound`` reads scratch, ``Bound.scratch``); where a binder declines, the plain step (its runners)."""
    def bound_step(s):
        specs, bounds = [], []
        for sp in group:
            node = sp.node
            out = _out(sp, s, out_kinds)
            b = bind(node.op, node.avals[0].device.xp, *[s[k] for k in sp.ins], out=out, **node.params)
            if b is None:
                return plain_step, None
            specs.append(type(sp)(node, sp.kind, b.fn, sp.ins, sp.outs, sp.planned, False))
            bounds.append(b)
        lends = any(b.scratch for b in bounds)  # (else the step lends no workspace: none is read)
        return make(tuple(specs)) if lends else make(tuple(specs), lends=False), \
            bounds[0] if len(bounds) == 1 else tuple(bounds)

    return bound_step
