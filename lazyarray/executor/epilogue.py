"""Epilogues: a dense layer and the relu that works in place on its output run as one step.

``relu(dense(x, w, b))`` is three passes over the layer's values in a compiled program: the product
writes them, ``dense`` adds the bias (``y += b``), and ``relu`` reads and writes them again. Where
the memory plan puts the relu in place on the dense value's buffer, and nothing else reads that value,
the two steps run as one closure calling ``kernels.dense.dense_relu`` with the two ops' registered kernels:
``dense`` writes the product without its bias, then one compiled pass adds the bias and applies relu
(numba; without it, the two kernels as before). The graph, the
memory plan and the values are unchanged: the relu's step is the next step, and it writes the memory
it would have written. Measured on the MLP 784-512-512-10 at batch 64 (one thread, steps timed in
context): its two relus' 26-32 us a call went, and the dense steps took as long as before.
"""
from __future__ import annotations

from ..kernels.dense import dense_relu


def dense_relu_pairs(specs, plan, out_slots: set[int], out_kind) -> dict[int, int]:
    """``{dense step: relu step}`` for each ``dense`` step (bias, no params, its planned buffer)
    followed by a ``relu`` that is the only reader of its value and that the plan puts in place
    on it (same buffer, same offset), the value not handed out."""
    readers: dict[int, int] = {}
    for sp in specs:
        for i in sp.ins:
            readers[i] = readers.get(i, 0) + 1
    in_place = {(k, i, o) for k, i, o in plan.inplace}
    pairs = {}
    for k in range(len(specs) - 1):
        d, r = specs[k], specs[k + 1]
        if d.node.op.name != "dense" or r.node.op.name != "relu" or d.kind is not out_kind \
                or r.kind is not out_kind or len(d.ins) != 3 or d.node.params or r.node.params:
            continue
        o = d.outs[0]
        if r.ins != (o,) or readers.get(o) != 1 or o in out_slots or (k + 1, o, r.outs[0]) not in in_place \
                or d.node.avals[0].device.kind != "cpu":
            continue
        pairs[k] = k + 1
    return pairs


def dense_relu_step(dense_spec, relu_spec, frees: tuple, error):
    """The closure of a merged pair: ``dense_relu`` into the dense value's buffer (which the relu
    shares), then the slots both steps would have freed. ``error(node, exc)`` names the op that failed."""
    a, b, c = dense_spec.ins
    o = dense_spec.outs[0]
    node = dense_spec.node
    dense, relu = dense_spec.fn, relu_spec.fn  # (the registry's kernels, bound to NumPy)

    def step(s):
        try:
            dense_relu(dense, relu, s[a], s[b], s[c], s[o])
        except Exception as exc:
            raise error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step
