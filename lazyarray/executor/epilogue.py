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

The same for a residual connection: ``add(dense(x, w, b), r)`` of a transformer's output projections,
the add the step after the dense layer's and ``r`` of the value's shape and dtype: one step calling
``kernels.dense.dense_residual`` with the two steps' kernels (the dense layer's bound choice, the add's
ufunc), in the same order into the same buffers, so the values are the two steps' bit for bit whatever
buffers the plan gave them; what goes is a step's dispatch and its slot bookkeeping (``explain()``: ``nn.dense+add[stack, residual]``; tuning
``dense_residual``, read when a program compiles).

And for the exact GELU of a dense layer's value (a transformer's feed-forward block, ConvNeXt's): a ``gelu``
step (approximation ``'none'``) right after a dense step, the only reader of its value, which is not handed
out: one step calling ``kernels.dense_gelu.dense_gelu`` with the two steps' kernels, where the bias is added in
the GELU's compiled loop (the two steps' values bit for bit; ``explain()``: ``nn.dense+nn.gelu[stack]``;
tuning ``dense_gelu``).
"""
from __future__ import annotations

from ..kernels.dense import RESIDUAL, dense_relu, dense_residual
from ..kernels.dense_gelu import step_runner
from ..kernels.impl import Choice
from ..kernels.runner import Bound
from ..tuning_table import current


def epilogue_pairs(specs, plan, out_slots: set[int], out_kind) -> dict[int, int]:
    """``{dense step: the step merged into it}``: ``dense_relu_pairs``, then (tuning ``dense_residual``)
    ``dense_residual_pairs`` among the dense steps left."""
    pairs = dense_relu_pairs(specs, plan, out_slots, out_kind)
    if current().dense_gelu:
        for k, r in dense_gelu_pairs(specs, out_slots, out_kind).items():
            pairs.setdefault(k, r)
    if current().dense_residual:
        for k, r in dense_residual_pairs(specs, out_kind).items():
            pairs.setdefault(k, r)
    return pairs


def dense_residual_pairs(specs, out_kind) -> dict[int, int]:
    """``{dense step: add step}`` for each ``dense`` step (no params, its planned buffer) followed by a
    planned ``add`` of its value and another value of the same shape and dtype (no broadcasting: a
    residual connection). Running the two closures' kernels back to back is what the two steps did, so
    nothing else is asked: the add may write either operand's buffer or a buffer of its own, and the
    dense value may have other readers or go to the caller."""
    pairs = {}
    for k in range(len(specs) - 1):
        d, r = specs[k], specs[k + 1]
        if d.node.op.name != "dense" or r.node.op.name != "add" or d.kind is not out_kind \
                or r.kind is not out_kind or d.node.params or r.node.params or len(r.ins) != 2:
            continue
        o, a = d.outs[0], d.node.avals[0]
        other = [e for e, sl in zip(r.node.inputs, r.ins) if sl != o]
        if o in r.ins and len(other) == 1 and other[0].aval.shape == a.shape and other[0].aval.dtype == a.dtype \
                and r.node.avals[0] == a and a.device.kind == "cpu":
            pairs[k] = k + 1
    return pairs


def dense_gelu_pairs(specs, out_slots: set[int], out_kind) -> dict[int, int]:
    """``{dense step: gelu step}`` for each ``dense`` step (bias, no params, its planned buffer) followed by a
    planned exact ``gelu`` (approximation ``'none'``) of its value, float32 on the CPU, the only reader of that
    value, which is not handed out (``dense_gelu`` then leaves the product without its bias there)."""
    readers: dict[int, int] = {}
    for sp in specs:
        for i in sp.ins:
            readers[i] = readers.get(i, 0) + 1
    pairs = {}
    for k in range(len(specs) - 1):
        d, g = specs[k], specs[k + 1]
        if d.node.op.name != "dense" or g.node.op.name != "gelu" or d.kind is not out_kind \
                or g.kind is not out_kind or len(d.ins) != 3 or d.node.params \
                or g.node.params.get("approximation", "none") != "none" or len(g.outs) != 1:
            continue
        o, a = d.outs[0], d.node.avals[0]
        if g.ins == (o,) and readers.get(o) == 1 and o not in out_slots and a.dtype == "float32" \
                and a.device.kind == "cpu" and g.node.avals[0] == a:
            pairs[k] = k + 1
    return pairs


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


def pair_step(dense_spec, other_spec, frees: tuple, error):
    """The closure of a merged pair (``epilogue_pairs``): ``dense_relu_step`` or ``dense_residual_step``."""
    if other_spec.node.op.name == "relu":
        return dense_relu_step(dense_spec, other_spec, frees, error)
    if other_spec.node.op.name == "gelu":
        return dense_gelu_step(dense_spec, other_spec, frees, error)
    return dense_residual_step(dense_spec, other_spec, frees, error)


def dense_gelu_step(dense_spec, gelu_spec, frees: tuple, error):
    """The closure of a merged dense and gelu pair: ``dense_gelu`` into the two steps' buffers, then the slots
    both steps would have freed. ``error(node, exc)`` names the op that failed."""
    a, b, c = dense_spec.ins
    o, go = dense_spec.outs[0], gelu_spec.outs[0]
    node = dense_spec.node
    dense, gelu = dense_spec.fn, gelu_spec.fn  # (the runners, or the two steps' bound choices: binding.py)
    dense_gelu = step_runner()  # (kernels/dense_gelu.py's, its checks made once per planned buffer)

    def step(s):
        try:
            dense_gelu(dense, gelu, s[a], s[b], s[c], s[o], s[go])
        except Exception as exc:
            raise error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def dense_residual_step(dense_spec, add_spec, frees: tuple, error):
    """The closure of a dense step and its residual add, then the slots both steps would have freed: with
    the runners (the plain steps, which ``la.profile()`` runs), ``dense_residual``, which says what ran;
    with the dense layer's choice bound in, the two calls themselves (as lean as the two steps' closures)."""
    d_ins, a_ins, o, ao = dense_spec.ins, add_spec.ins, dense_spec.outs[0], add_spec.outs[0]
    node = dense_spec.node
    dense, add = dense_spec.fn, add_spec.fn  # (the runner, or the dense layer's bound choice: binding.py)
    p, q = a_ins
    if dense_spec.takes_params or len(d_ins) != 3 or frees:
        def step(s):
            try:
                dense_residual(dense, add, tuple([s[i] for i in d_ins]), s[o], (s[p], s[q]), s[ao])
            except Exception as exc:
                raise error(node, exc) from exc
            for k in frees:
                s[k] = None

        return step
    a, b, c = d_ins

    def bound_step(s):
        try:
            dense(s[a], s[b], s[c], out=s[o])
            add(s[p], s[q], out=s[ao])
        except Exception as exc:
            raise error(node, exc) from exc

    return bound_step


def residual_maker(make):
    """A merged residual step's maker (``binding.maker`` of its dense spec alone: ``add`` has no binder and
    keeps its ufunc) whose ``Bound`` carries the note ``residual``, as ``explain()`` names the step."""
    def bound_step(s):
        step, b = make(s)
        return step, (b if b is None else Bound(Choice(b.choice.impl, b.choice.notes + (RESIDUAL,)), b.fn))

    return bound_step
