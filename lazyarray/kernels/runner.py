"""What every op runner of the kernels layer does after its chooser: run the choice (its fallback
where it declines at run time), and say what ran: to ``la.profile()`` while one records, and to the
``lazyarray.kernels`` log when ``log_kernels`` is on.
"""
from __future__ import annotations

from ..mode import MODE, PROFILING
from ..tuning_table import current
from .impl import Choice
from .log import log_choice
from .profile import current as current_profile


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
