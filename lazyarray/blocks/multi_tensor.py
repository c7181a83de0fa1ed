"""Multi-tensor optimizer updates: the parameters of one dtype and device updated together.

A ``FlatGroup`` owns one flat buffer per optimizer state (SGD's momentum, Adam's two moments)
and chunk-sized work buffers for the rescaled gradient and the optimizer's scratch. Each
parameter's state is a view into the flat state buffers (so ``Trainer.save_states`` and a
per-parameter update see ordinary arrays). The flat layout is cut into cache-sized chunks (``Chunk``,
``CHUNK_ELEMENTS``; a large parameter spans several, a chunk holds many small ones), and a step
runs chunk by chunk:

1. *gather*: ``grad * rescale`` of each parameter piece in the chunk written into the chunk's
   gradient buffer (no allocation; the work buffers are the same for every chunk, so they stay
   in cache);
2. the optimizer's ``apply`` on the chunk's slices (with the rate and weight decay times the
   group's ``lr_mult`` / ``wd_mult``): clipping, momentum, Adam's moments, each one
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


# Elements per chunk: an update runs chunk by chunk so the arrays one step of the optimizer touches
# stay in cache. Measured (benchmarks/training_loop.py, Trainer.step alone, 2-core EPYC with 1 MB of
# L2 per core): whole-group calls ran Adam over 48 (256, 256) + 96 (256,) float32 parameters in
# 10.2 ms against 8.0 ms per parameter (each op streamed 12 MB from memory); chunks of 2**18 with
# shared work buffers: 7.0 ms, and the MLP's few large parameters as fast as per parameter
# (2**15 .. 2**17: the MLP 3-28% slower, per-chunk calls outweigh the cache).
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

    def imul(self, c) -> None:
        for w in self.weights:
            w *= c

    def assign(self, x) -> None:
        for w, v in zip(self.weights, self.chunk.views(x)):
            w[...] = v


class Chunk:
    """Elements ``[lo, hi)`` of a group's flat layout: slices of its flat buffers, and the pieces of
    parameters they hold (``(k, a, b, whole)``: elements ``a:b`` of parameter ``k``, all of it)."""

    def __init__(self, group: FlatGroup, lo: int, hi: int, pieces: list):
        self.group, self.lo, self.hi, self.pieces = group, lo, hi, pieces
        self.xp, self.dtype = group.xp, group.dtype
        self._views: dict[int, list] = {}
        self._scratch: list = []
        n = hi - lo
        self.grad = self._slice(group.work(0), 0, n)
        st = group.state
        self.state = None if st is None else tuple(self._slice(f, lo, hi) for f in st) \
            if isinstance(st, tuple) else self._slice(st, lo, hi)

    def _slice(self, flat, lo: int, hi: int):
        part = flat[lo:hi]
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
            self._scratch.append(self._slice(self.group.work(len(self._scratch) + 1), 0, self.hi - self.lo))
        return self._scratch[k]


class FlatGroup:
    """Flat state buffers and chunk-sized work buffers for ``params`` (one dtype, one device, one
    ``lr_mult`` and ``wd_mult``).

    ``states`` (the trainer's ``id(param) -> state``) is read for states that exist already (their
    values are copied in) and then holds views into the flat state buffers.
    """

    def __init__(self, params: list[Parameter], optimizer, states: dict):
        first = params[0]._data
        self.params = params
        self.lr_mult, self.wd_mult = params[0].lr_mult, params[0].wd_mult
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
        self._work: list = []  # chunk-sized buffers every chunk reuses: the gradient (0), scratch (1...)
        flats = [xp.empty(size, self.dtype) for _ in range(n_parts)]
        for k, (p, (_, _, parts)) in enumerate(zip(params, per_param)):
            views = tuple(self._param_view(f, k) for f in flats)
            for v, a in zip(views, parts):
                v[...] = a
            states[id(p)] = None if none else views if tup else views[0]
        self.state = None if none else tuple(flats) if tup else flats[0]
        self.chunks = self._chunks()
        self._prepared: tuple | None = None  # (weights, prepare(weights)) of the last step

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

    def work(self, k: int):
        """Chunk-sized buffer ``k``, shared by the chunks (one runs at a time, and stays in cache)."""
        while len(self._work) <= k:
            self._work.append(self.xp.empty(min(self.size, CHUNK_ELEMENTS), self.dtype))
        return self._work[k]

    def matches(self, params: list[Parameter]) -> bool:
        """The same parameters with the same shapes and dtype as when the group was made."""
        if len(params) != len(self.params):
            return False
        for p, q, shape in zip(params, self.params, self.shapes):
            v = p._data._value
            if p is not q or v.shape != shape or v.dtype != self.dtype or p.lr_mult != self.lr_mult \
                    or p.wd_mult != self.wd_mult:
                return False
        return True

    def step(self, optimizer, grads: list, weights: list, step: int, rescale: float) -> None:
        """Update every parameter of the group (``grads``, ``weights`` in ``params`` order; the
        weights C-contiguous), chunk by chunk: gather ``grad * rescale``, then the optimizer. The
        weights cut by ``prepare`` are kept while the same arrays of the same shapes come again."""
        last = self._prepared
        if last is None or len(last[0]) != len(weights) or any(
                a is not b or a.shape != shape for a, b, shape in zip(last[0], weights, self.shapes)):
            last = self._prepared = (list(weights), self.prepare(weights))
        self.step_prepared(optimizer, last[1], grads, step, rescale)

    def prepare(self, weights: list) -> list:
        """Per chunk ``(target, gets, chunk)`` for these weight arrays (C-contiguous, in ``params``
        order): ``target`` the chunk's weight pieces, ``gets`` per piece ``(k, a, b, view)`` (elements
        ``a:b`` of gradient ``k`` flattened go to ``view`` of the chunk's gradient buffer; ``a`` None:
        all of it, and ``view`` is then shaped like the parameter, so the gradient is read as it is). It holds only views of the weights, so a trainer keeps it while the weights stay
        the same arrays (``Trainer``'s step plan) instead of cutting them anew every step."""
        wf = [w.reshape(-1) for w in weights]
        plan = []
        for chunk in self.chunks:
            ws, gets = [], []
            for (k, a, b, whole), v in zip(chunk.pieces, chunk.views(chunk.grad)):
                ws.append(wf[k] if whole else wf[k][a:b])
                gets.append((k, None, None, v.reshape(self.shapes[k])) if whole else (k, a, b, v))
            plan.append((Target(ws, chunk), gets, chunk))
        return plan

    def step_prepared(self, optimizer, plan: list, grads: list, step: int, rescale: float) -> None:
        """``step`` with the weights cut by ``prepare`` (the same calls in the same order)."""
        xp = self.xp
        lr, wd = optimizer.learning_rate * self.lr_mult, optimizer.wd * self.wd_mult
        r, folded = optimizer.scale(rescale, self.dtype, lr)
        mul = xp.multiply
        for target, gets, chunk in plan:
            for k, a, b, v in gets:
                mul(grads[k], r, out=v) if a is None else mul(grads[k].reshape(-1)[a:b], r, out=v)
            if folded:
                optimizer.apply(target, chunk.grad, chunk.state, step, xp, chunk.scratch, lr, wd, folded=True)
            else:
                optimizer.apply(target, chunk.grad, chunk.state, step, xp, chunk.scratch, lr, wd)


def flat_ok(group: FlatGroup, grads: list, weights: list) -> bool:
    """True when every taken gradient is a dense array of its weight's shape and the group's dtype,
    and every weight is C-contiguous (its flat view is a view, not a copy)."""
    for g, w, shape in zip(grads, weights, group.shapes):
        if isinstance(g, RowSparse) or g.dtype != group.dtype or g.shape != shape or not w.flags.c_contiguous:
            return False
    return True
