"""Multi-tensor optimizer updates: the parameters of one dtype and device updated together.

A ``FlatGroup`` owns one flat buffer for the group's rescaled gradients, one per optimizer
state (SGD's momentum, Adam's two moments) and the optimizer's scratch buffers. Each
parameter's state is a view into the flat state buffers (so ``Trainer.save_states`` and a
per-parameter update see ordinary arrays). The flat layout is cut into cache-sized chunks (``Chunk``,
``CHUNK_ELEMENTS``; a large parameter spans several, a chunk holds many small ones), and a step
runs chunk by chunk:

1. *gather*: ``grad * rescale`` of each parameter piece in the chunk written into its slice of
   the flat gradient (no allocation);
2. the optimizer's ``apply`` on the chunk's slices: clipping, momentum, Adam's moments, each one
   ufunc call for the whole chunk however many parameters it holds;
3. the weights read (weight decay) and written (``w -= update``) piece by piece through
   ``Target``.

Whole-group calls (no chunks) were slower than the per-parameter update on a 12 MB group:
each of Adam's ten ops streamed the group from memory, where one parameter at a time stays in
cache. The weights are not moved into a flat buffer: they stay the arrays that blocks, compiled
graphs and autograd records already hold, each with its own version counter (``buffer.py`` keys
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


# Elements per chunk and flat array: an update runs chunk by chunk so the few arrays one step of
# the optimizer touches stay in cache. Measured (2-core EPYC, 1 MB L2 per core, 32 MB L3): 48
# (256, 256) + 96 (256,) float32 parameters, Adam: whole-group calls 10.2 ms, per parameter 8.0 ms
# (every op of a 12 MB group streamed from memory); see benchmarks/training_loop.py for the MLP.
CHUNK_ELEMENTS = 1 << 18


class Target:
    """The weight pieces of one chunk as an update target (flat, in the chunk's order)."""

    __slots__ = ("weights", "chunk", "dtype")

    def __init__(self, weights: list, chunk: Chunk):
        self.weights, self.chunk, self.dtype = weights, chunk, chunk.dtype

    def times(self, c, out):
        mul = self.chunk.xp.multiply
        for w, o in zip(self.weights, self.chunk.views(out)):
            mul(w, c, out=o)
        return out

    def isub(self, x) -> None:
        for w, v in zip(self.weights, self.chunk.views(x)):
            w -= v

    def iadd(self, x) -> None:
        for w, v in zip(self.weights, self.chunk.views(x)):
            w += v


class Chunk:
    """Elements ``[lo, hi)`` of a group's flat layout: slices of its flat buffers, and the pieces of
    parameters they hold (``(k, a, b, whole)``: elements ``a:b`` of parameter ``k``, all of it)."""

    def __init__(self, group: FlatGroup, lo: int, hi: int, pieces: list):
        self.group, self.lo, self.hi, self.pieces = group, lo, hi, pieces
        self.xp, self.dtype = group.xp, group.dtype
        self._views: dict[int, list] = {}
        self._scratch: list = []
        self.grad = self._slice(group.grad)
        st = group.state
        self.state = None if st is None else tuple(self._slice(f) for f in st) if isinstance(st, tuple) \
            else self._slice(st)

    def _slice(self, flat):
        part = flat[self.lo:self.hi]
        views, at = [], 0
        for _, a, b, _ in self.pieces:
            views.append(part[at:at + b - a])
            at += b - a
        self._views[id(part)] = views  # (every part is kept: grad, state, _scratch)
        return part

    def views(self, part) -> list:
        """One view per piece into ``part`` (a slice of one of the group's flat buffers)."""
        return self._views[id(part)]

    def scratch(self, k: int):
        while len(self._scratch) <= k:
            self._scratch.append(self._slice(self.group.scratch(len(self._scratch))))
        return self._scratch[k]


class FlatGroup:
    """Flat gradient, state and scratch buffers for ``params`` (one dtype, one device).

    ``states`` (the trainer's ``id(param) -> state``) is read for states that exist already (their
    values are copied in) and then holds views into the flat state buffers.
    """

    def __init__(self, params: list[Parameter], optimizer, states: dict):
        first = params[0]._data
        self.params = params
        self.dtype = first._value.dtype
        self.xp = xp = first.device.xp
        self.shapes = [tuple(p._data._value.shape) for p in params]
        self.offsets = [0]
        for shape in self.shapes:
            n = 1
            for d in shape:
                n *= d
            self.offsets.append(self.offsets[-1] + n)
        size = self.size = self.offsets[-1]
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
        self.grad = xp.empty(size, self.dtype)
        flats = [xp.empty(size, self.dtype) for _ in range(n_parts)]
        for k, (p, (_, _, parts)) in enumerate(zip(params, per_param)):
            views = tuple(self._param_view(f, k) for f in flats)
            for v, a in zip(views, parts):
                v[...] = a
            states[id(p)] = None if none else views if tup else views[0]
        self.state = None if none else tuple(flats) if tup else flats[0]
        self._scratch: list = []
        self.chunks = self._chunks()

    def _param_view(self, flat, k: int):
        return flat[self.offsets[k]:self.offsets[k + 1]].reshape(self.shapes[k])

    def _chunks(self) -> list[Chunk]:
        """Consecutive chunks of at most ``CHUNK_ELEMENTS`` (a larger parameter is cut in pieces)."""
        chunks, pieces, lo = [], [], 0
        for k in range(len(self.params)):
            a, end = self.offsets[k], self.offsets[k + 1]
            n = end - a
            at = 0
            while at < n:
                room = CHUNK_ELEMENTS - (a + at - lo)
                take = min(room, n - at)
                pieces.append((k, at, at + take, take == n))
                at += take
                if a + at - lo >= CHUNK_ELEMENTS:
                    chunks.append(Chunk(self, lo, a + at, pieces))
                    pieces, lo = [], a + at
        if pieces:
            chunks.append(Chunk(self, lo, self.size, pieces))
        return chunks

    def scratch(self, k: int):
        while len(self._scratch) <= k:
            self._scratch.append(self.xp.empty(self.size, self.dtype))
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
        """Update every parameter of the group (``grads``, ``weights`` in ``params`` order; the
        weights C-contiguous), chunk by chunk: gather ``grad * rescale``, then the optimizer."""
        xp = self.xp
        r = self.dtype.type(rescale)
        mul = xp.multiply
        wf = [w.reshape(-1) for w in weights]
        gf = [g.reshape(-1) for g in grads]
        for chunk in self.chunks:
            ws = []
            for (k, a, b, whole), v in zip(chunk.pieces, chunk.views(chunk.grad)):
                if whole:
                    mul(gf[k], r, out=v)
                    ws.append(wf[k])
                else:
                    mul(gf[k][a:b], r, out=v)
                    ws.append(wf[k][a:b])
            optimizer.apply(Target(ws, chunk), chunk.grad, chunk.state, step, xp, chunk.scratch)


def flat_ok(group: FlatGroup, grads: list, weights: list) -> bool:
    """True when every taken gradient is a dense array of its weight's shape and the group's dtype,
    and every weight is C-contiguous (its flat view is a view, not a copy)."""
    for g, w, shape in zip(grads, weights, group.shapes):
        if isinstance(g, RowSparse) or g.dtype != group.dtype or g.shape != shape or not w.flags.c_contiguous:
            return False
    return True
