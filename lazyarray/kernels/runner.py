"""What every op runner of the kernels layer does after its chooser: run the choice (its fallback
where it declines at run time), and say what ran: to ``la.profile()`` while one records, and to the
``lazyarray.kernels`` log when ``log_kernels`` is on.

And what a compiled program runs instead (``Bound``): the choice made once for a step, with its
implementation's function bound to the step's parameters (``direct``), so a replay calls it directly
(``kernels.bind``; an op's module declares its binder in ``BINDERS``).
"""
from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass

from ..mode import MODE, PROFILING
from ..tuning_table import current
from .impl import Choice, Impl
from .log import log_choice
from .profile import current as current_profile

_FUNCTION = types.FunctionType
_VARARGS, _VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def noted(choice: Choice, *arrays) -> None:
    """Note that ``choice`` ran on these arrays (the profile being recorded, the kernels log)."""
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    if current().log_kernels:
        log_choice(choice, *arrays)


def ran(choice: Choice, y, fallbacks: dict, args: tuple, arrays: tuple):
    """``y``, the result of ``choice.impl.run(*args)``, with what ran noted; where ``y`` is None (the
    implementation declined), ``run_choice`` of its fallback. (A runner's lean tail: its common
    case pays one call here.)"""
    if y is None:
        return run_choice(fallbacks[choice.impl.fallback], fallbacks, args, {}, arrays)
    if MODE.get() & PROFILING or current().log_kernels:
        noted(choice, *arrays)
    return y


def run_choice(choice: Choice, fallbacks: dict, args: tuple, params: dict, arrays: tuple):
    """``choice.impl.run(*args, **params)``; where it returns None (declined at run time), the run of
    its fallback's choice in ``fallbacks`` (impl -> Choice), and so on down the chain. ``arrays``:
    what the log names."""
    y = choice.impl.run(*args, **params)
    while y is None:
        choice = fallbacks[choice.impl.fallback]
        y = choice.impl.run(*args, **params)
    noted(choice, *arrays)
    return y


@dataclass(eq=False)
class Bound:
    """What a compiled step runs for one op's call, chosen once (``kernels.bind``): the ``choice`` the
    chooser made for the step's arrays, and ``fn(*arrays, out=None)`` which runs it directly (its
    parameters, the array module and any fallback bound in), so a replay asks no chooser. ``scratch``:
    ``fn`` may take scratch from the calling thread's arena (``ops/scratch.py``); False where its kernel
    never does (a rare fallback of it takes the thread's own arena: the same values), and the compiled
    step then runs without lending it its planned workspace (``bind_workspace``'s wrapper).

    ``choice`` is the one the step runs now: a ``Bound`` whose function binds again inside by facts a
    call shows (``by_facts``: a tiered kernel's later tier, a weight kept) sets it to the choice each
    call runs, and ``la.profile()`` / ``explain()`` of a compiled program read it after the step
    (``executor/program.py``'s ``_run_timed``)."""

    choice: Choice
    fn: Callable
    scratch: bool = True


def direct(choice: Choice, fallbacks: dict, xp, params: tuple = (), keywords: dict | None = None,
           arity: int = 0) -> Callable:
    """``fn(*arrays, out=None)``: ``choice.impl.run(xp, *arrays, *params, out)`` (``keywords``: its
    parameters by name instead, ``out=`` too), and where the implementation declines at run time
    (returns None: numba missing, a layout it does not take), its fallback's run from ``fallbacks``
    (impl -> Choice), and so on down the chain, as the per-call runners do. ``arity``: the number of
    arrays, where known (a function of that many, lighter to call)."""
    chain, choices = [choice.impl.run], [choice]
    impl = choice.impl
    while impl.fallback is not None:
        choices.append(fallbacks[impl.fallback])
        impl = choices[-1].impl
        chain.append(impl.run)
    run = chain[0]
    if keywords is not None:
        if len(chain) == 1:
            return lambda *arrays, out=None: run(xp, *arrays, out=out, **keywords)

        def by_name(*arrays, out=None):
            for k, r in enumerate(chain):
                y = r(xp, *arrays, out=out, **keywords)
                if y is not None:
                    if k and MODE.get() & PROFILING:  # (a fallback ran: the profile names it)
                        current_profile().chose(choices[k])
                    return y
            return y

        return by_name
    if len(chain) == 1:
        return _called(run, xp, params, arity)

    def first_that_runs(*arrays, out=None):
        y = run(xp, *arrays, *params, out)
        if y is None:  # (declined at run time: the fallbacks in turn; the profile names the one that ran)
            for k, r in enumerate(chain[1:], 1):
                y = r(xp, *arrays, *params, out)
                if y is not None:
                    if MODE.get() & PROFILING:
                        current_profile().chose(choices[k])
                    break
        return y

    return first_that_runs


def _called(run, xp, params: tuple, arity: int) -> Callable:
    """``run(xp, *arrays, *params, out)`` as a function of the arrays (and ``out=``): without parameters
    and of 1-3 arrays, one that builds no argument tuples (a batch-1 layer's call is a microsecond)."""
    if params or not 1 <= arity <= 3:
        return lambda *arrays, out=None: run(xp, *arrays, *params, out)
    if _takes_out_after(run, arity):  # (called in C: no frame of ours between the step and the kernel)
        return functools.partial(run, xp)
    if arity == 1:
        return lambda a, out=None: run(xp, a, out)
    if arity == 2:
        return lambda a, b, out=None: run(xp, a, b, out)
    return lambda a, b, c, out=None: run(xp, a, b, c, out)


def _takes_out_after(run, arity: int) -> bool:
    """Whether ``run`` is a plain function ``run(xp, a1..a_arity, out=None)`` (its last parameter named
    ``out``, nothing after it), so ``partial(run, xp)(*arrays, out=out)`` calls it as ``_called``'s lambda does."""
    code = getattr(run, "__code__", None)
    return code is not None and run.__class__ is _FUNCTION and code.co_argcount == arity + 2 \
        and not code.co_kwonlyargcount and not code.co_flags & (_VARARGS | _VARKEYWORDS) \
        and code.co_varnames[arity + 1] == "out"


def fixed_binder(chooser: Callable, fallbacks: dict, names: tuple = ()) -> Callable:
    """The binder of an op whose chooser's answer is fixed once a compiled step's avals, memory orders,
    tuning table and thread count are (the executor binds again when the last two change): it asks
    ``chooser(xp, *arrays, out=out, **params)`` once and binds its choice, the parameters ``names``
    passed positionally after the arrays in that order."""
    def bind(xp, *arrays, out=None, **params) -> Bound:
        choice = chooser(xp, *arrays, out=out, **params)
        return Bound(choice, direct(choice, fallbacks, xp, tuple(params[k] for k in names), arity=len(arrays)))

    return bind


def keyword_binder(chooser: Callable, fallbacks: dict, op: str, reference: Callable) -> Callable:
    """The binder of an op whose chooser's answer is fixed as ``fixed_binder``'s, whose implementations
    take its parameters by name, and whose runner runs ``reference(xp, *arrays, out=out, **params)``
    (the op's reference kernel) where the chooser answers None: that choice bound too (named
    ``op[reference]``, as ``explain()`` names a step without a choice), so no such step asks again."""
    ref = Choice(Impl(op, "reference", reference, "the op's one kernel"))

    def bind(xp, *arrays, out=None, **params) -> Bound:
        choice = chooser(xp, *arrays, out=out, **params)
        if choice is None:
            return Bound(ref, lambda *a, out=None: reference(xp, *a, out=out, **params))
        return Bound(choice, direct(choice, fallbacks, xp, keywords=params))

    return bind


def by_facts(facts: Callable, bind: Callable, seen: dict, first: Choice) -> Bound:
    """The ``Bound`` of an op whose choice also hangs on facts only a call shows (a weight kept by its
    version, a program input's memory order, a tiered kernel's count): its ``fn(*arrays, out=None)``
    asks ``facts(*arrays, out)`` per call (a hashable) and ``bind(arrays, out)`` (a ``Bound``) the
    first time each answer is seen, and runs that; ``seen``: the answers bound already (the binding
    call's), ``first`` the choice they bound (the ``Bound``'s until a call runs). Each call sets the
    ``Bound``'s ``choice`` to the one it runs (what ``explain()`` names)."""
    memo = dict(seen)
    held = Bound(first, None)

    def fn(*arrays, out=None):
        k = facts(*arrays, out)
        b = memo.get(k)
        if b is None:
            if len(memo) >= 8:
                memo.clear()
            b = memo[k] = bind(arrays, out)
        held.choice = b.choice
        return b.fn(*arrays, out=out)

    held.fn = fn
    return held


def counted_until(state, after: int, tiered: bool, make: Callable, arrays: tuple, out) -> Bound:
    """A compiled step's ``Bound`` for an op whose kernels tier by calls (``jit.tiered``):
    ``make(arrays, out)`` (a ``Bound``: the choice and its run) as it is where ``tiered`` is false;
    else, while ``state.calls`` is below ``after``, a run that counts each call (as the op's runner
    counts) and binds ``make`` again once the count passes (the ``Bound``'s ``choice`` then the later
    tier's, ``by_facts``)."""
    if not tiered:
        return make(arrays, out)

    def bound(arrays, out) -> Bound:
        b = make(arrays, out)
        if state.calls >= after:
            return b
        run = b.fn

        def counted(*arrays, out=None):
            state.calls += 1
            return run(*arrays, out=out)

        return Bound(b.choice, counted)

    first = bound(arrays, out)
    return by_facts(lambda *_: state.calls >= after, bound, {False: first}, first.choice)
