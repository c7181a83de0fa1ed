"""A forward hook's handle: what ``Block.register_forward_hook`` / ``register_forward_pre_hook`` return
(``detach()``, or leave a ``with handle:`` block); the hooks themselves run in ``Block._call_with_hooks``."""
from __future__ import annotations

from collections import OrderedDict

from ..errors import ParamError


class HookHandle:
    """What ``register_forward_hook`` / ``register_forward_pre_hook`` return: ``detach()`` removes the
    hook (also on leaving a ``with handle:`` block)."""

    _next = [0]

    def __init__(self, hooks: OrderedDict, hook):
        if not callable(hook):
            raise ParamError(f"a forward hook must be callable, got {type(hook).__name__}")
        self._hooks = hooks
        self._key = HookHandle._next[0]
        HookHandle._next[0] += 1
        hooks[self._key] = hook

    def detach(self) -> None:
        """Remove the hook (a second call does nothing)."""
        self._hooks.pop(self._key, None)

    def __enter__(self) -> HookHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.detach()
