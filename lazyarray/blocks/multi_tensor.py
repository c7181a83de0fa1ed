"""Multi-tensor optimizer updates: the parameters of one dtype and device updated together.

A ``FlatGroup`` owns one flat buffer for the group's rescaled gradients, one per optimizer
state (SGD's momentum, Adam's two moments) and the optimizer's scratch buffers. Each
parameter's state is a view into the flat state buffers (so ``Trainer.save_states`` and a
per-parameter update see ordinary arrays). A step is then:

1. *gather*: ``grad * rescale`` of each parameter written into its slice of the flat gradient
   (one ufunc call per parameter, no allocation);
2. the optimizer's ``apply`` on the flat arrays: clipping, momentum, Adam's moments, each one
   large ufunc call for the whole group;
3. the weights read (weight decay) and written (``w -= update``) slice by slice through the
   group's ``Target``.

The weights are not moved into a flat buffer: they stay the arrays that blocks, compiled graphs
and autograd records already hold, each with its own version counter (``buffer.py`` keys
versions by the memory's root, so views of one flat buffer would share one counter and a write
to one parameter would look like a write to all).

The ops and scalars are those of ``Optimizer.update`` on one parameter, in the same order, so
the result is bit for bit the same (``tests/blocks/test_multi_tensor.py``).
"""
from __future__ import annotations

from ..storage import RowSparse
from .parameter import Parameter


class NotFlat(Exception):
    """The optimizer's state for these parameters is not arrays of the weights' shape."""


class Target:
    """The weights of a group as one update target: a flat array is applied slice by slice."""

    __slots__ = ("weights", "group", "dtype")

    def __init__(self, weights: list, group: FlatGroup):
        self.weights, self.group, self.dtype = weights, group, group.dtype

    def times(self, c, out):
        mul = self.group.xp.multiply
        for w, o in zip(self.weights, self.group.views(out)):
            mul(w, c, out=o)
        return out

    def isub(self, x) -> None:
        for w, v in zip(self.weights, self.group.views(x)):
            w -= v

    def iadd(self, x) -> None:
        for w, v in zip(self.weights, self.group.views(x)):
            w += v


class FlatGroup:
    """Flat gradient, state and scratch buffers for ``params`` (one dtype, one device).

    ``states`` (the trainer's ``id(param) -> state``) is read for states that exist already (their
    values are copied in) and then holds views into the flat state buffers.
    """

    def __init__(self, params: list[Parameter], optimizer, states: dict):
        first = params[0]._data
        self.params = params
        self.dtype = first._value.dtype
        self.xp = first.device.xp
        self.shapes = [tuple(p._data._value.shape) for p in params]
        self.offsets = [0]
        for shape in self.shapes:
            n = 1
            for d in shape:
                n *= d
            self.offsets.append(self.offsets[-1] + n)
        size = self.offsets[-1]
        per_param = []
        for p in params:
            s = states[id(p)] if id(p) in states else optimizer.create_state(p._data._value)
            parts = () if s is None else s if isinstance(s, tuple) else (s,)
            if any(getattr(a, "shape", None) != p._data._value.shape for a in parts):
                raise NotFlat(p.name)
            per_param.append((s is None, isinstance(s, tuple), parts))
        kinds = {(none, tup, len(parts)) for none, tup, parts in per_param}
        if len(kinds) != 1:
            raise NotFlat("mixed state structures")
        none, tup, n_parts = kinds.pop()
        self._views: dict[int, list] = {}
        self.grad = self._flat(size)
        flats = [self._flat(size) for _ in range(n_parts)]
        for p, (_, _, parts), k in zip(params, per_param, range(len(params))):
            for flat, a in zip(flats, parts):
                self.views(flat)[k][...] = a
            views = tuple(self.views(f)[k] for f in flats)
            states[id(p)] = None if none else views if tup else views[0]
        self.state = None if none else tuple(flats) if tup else flats[0]
        self._scratch: list = []
        self.size = size

    def _flat(self, size: int):
        flat = self.xp.empty(size, self.dtype)
        self._views[id(flat)] = [flat[lo:hi].reshape(shape) for lo, hi, shape in
                                 zip(self.offsets, self.offsets[1:], self.shapes)]
        return flat

    def views(self, flat) -> list:
        """One view per parameter into ``flat`` (a flat buffer of this group)."""
        return self._views[id(flat)]

    def scratch(self, k: int):
        while len(self._scratch) <= k:
            self._scratch.append(self._flat(self.size))
        return self._scratch[k]

    def matches(self, params: list[Parameter]) -> bool:
        """The same parameters with the same shapes and dtype as when the group was made."""
        if len(params) != len(self.params):
            return False
        for p, q, shape in zip(params, self.params, self.shapes):
            v = p._data._value
            if p is not q or v.shape != shape or v.dtype != self.dtype:
                return False
        return True

    def step(self, optimizer, grads: list, weights: list, step: int, rescale: float) -> None:
        """Update every parameter of the group (``grads``, ``weights`` in ``params`` order)."""
        xp = self.xp
        r = self.dtype.type(rescale)
        mul = xp.multiply
        for g, v in zip(grads, self.views(self.grad)):
            mul(g, r, out=v)
        optimizer.apply(Target(weights, self), self.grad, self.state, step, xp, self.scratch)


def flat_ok(group: FlatGroup, grads: list) -> bool:
    """True when every taken gradient is a dense array of its weight's shape and the group's dtype."""
    for g, shape in zip(grads, group.shapes):
        if isinstance(g, RowSparse) or g.dtype != group.dtype or g.shape != shape:
            return False
    return True
