"""``ParameterDict``: what ``Block.collect_params()`` returns, name -> ``Parameter``.

A ``dict`` (iteration, ``items()``, ``[]``, ``len``, ``in``, equality with a dict of the same
items, ``isinstance(_, dict)``) with the methods Gluon code calls on it to act on every parameter
at once: ``setattr``, ``zero_grad``, ``reset_device``, ``initialize``, ``save`` / ``load`` (the
parameter file of ``Block.save_parameters`` / ``load_parameters``).
"""
from __future__ import annotations

from ..device import Device
from ..errors import ParamError
from .param_file import assign, load_arrays, save_arrays


class ParameterDict(dict):
    """Parameters by hierarchical name (``"0.weight"``), with methods that act on all of them.

    >>> import lazyarray as la
    >>> net = la.blocks.HybridSequential(); _ = net.add(la.blocks.Dense(2, in_units=3))
    >>> params = net.collect_params()
    >>> params.initialize()
    >>> params.setattr("grad_req", "null")
    >>> [p.grad_req for p in params.values()]
    ['null', 'null']
    >>> params == dict(params.items())
    True
    """

    def setattr(self, name: str, value) -> None:
        """Set attribute ``name`` of every parameter to ``value`` (``setattr("grad_req", "null")``
        freezes them, ``setattr("lr_mult", 0.1)``); a name parameters do not have raises ``ParamError``."""
        for key, p in self.items():
            if not hasattr(p, name):
                raise ParamError(f"ParameterDict.setattr: parameter {key!r} has no attribute {name!r}; "
                                 "set one such as 'grad_req', 'lr_mult' or 'wd_mult'")
        for p in self.values():
            setattr(p, name, value)

    def zero_grad(self) -> None:
        """Zero the gradient of every parameter (for ``grad_req='add'``)."""
        for p in self.values():
            p.zero_grad()

    def reset_device(self, device: Device | list[Device]) -> None:
        """Move every parameter (value and gradient) to ``device`` (``Parameter.reset_device``)."""
        for p in self.values():
            p.reset_device(device)

    def initialize(self, init=None, device: Device | list[Device] | None = None, force_reinit: bool = False) -> None:
        """Initialize every parameter: its own initializer if it has one, else ``init``, else Xavier
        (weights) or zeros (vectors). One already initialized is left as it is, with a warning, unless
        ``force_reinit=True``; parameters with unknown (0) dims are created at the block's first call."""
        for name, p in self.items():
            p.name_as(name)
            p.initialize(default_init=init, device=device, force_reinit=force_reinit)

    def save(self, path: str) -> None:
        """Write every parameter's value to ``path`` (the file of ``Block.save_parameters``), atomically."""
        save_arrays(path, self)

    def load(self, path: str, device: Device | None = None, allow_missing: bool = False,
             ignore_extra: bool = False) -> None:
        """Load the values ``save`` (or ``Block.save_parameters``) wrote into these parameters by name;
        missing, extra or mis-shaped names are errors unless allowed."""
        arrays, _ = load_arrays(path)
        assign(self, arrays, path, device, allow_missing, ignore_extra)

    def __repr__(self) -> str:
        if not self:
            return "ParameterDict()"
        return "ParameterDict(\n" + "".join(f"  {k!r}: {p!r}\n" for k, p in self.items()) + ")"

