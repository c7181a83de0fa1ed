"""ONNX sequence and optional values whose structure is known at load time -> tuples of tensors.

Our graphs carry tensors only, so a sequence exists only while converting: a ``Seq`` (its tensors, in
order, each a Symbol) or an ``Opt`` (a Symbol, a ``Seq`` or nothing), built and taken apart by the
converters below, whose positions, lengths and presence must be known when loading. A sequence
graph input of n tensors is n graph inputs named ``name.0`` .. ``name.{n-1}`` (``item_name``); an
optional one is its value's inputs (none when empty); their structure comes from the values the
``onnx.backend`` is given (or ``input_shapes``: a list of shapes for a sequence). A sequence output
is its tensors, one graph output each, in order; ``Conversion.layout`` says how to regroup them
(``regroup``). A node other than these (and Identity, If) that reads a sequence or optional value
is refused by name; a Loop carrying them is unrolled (``import_control._loop_unrolled``). ``SequenceMap`` converts its body once per position, in place (``OnnxNode.inline``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import sym as S
from ..graph.symbol import Symbol
from .import_ops import Converter, OnnxNode, axis_key, constant


@dataclass(frozen=True)
class Seq:
    """A sequence of tensors known in length when loading."""

    items: tuple  # Symbols


@dataclass(frozen=True)
class Opt:
    """An optional value known in presence when loading: a Symbol, a ``Seq`` or None (empty)."""

    value: object


STRUCTURED = (Seq, Opt)


def item_name(name: str, k: int) -> str:
    """The graph input holding tensor ``k`` of the sequence graph input ``name``."""
    return f"{name}.{k}"


def flat_values(name: str, value) -> dict:
    """The tensors of a (possibly sequence or optional) input value, by the graph input holding each."""
    if value is None:
        return {}
    if isinstance(value, (list, tuple)):
        return {item_name(name, k): np.asarray(v) for k, v in enumerate(value)}
    return {name: np.asarray(value)}


def layout_of(value) -> tuple:
    """How a graph output's tensors regroup: ("tensor",), ("seq", n), ("opt",) (empty) or ("opt", inner)."""
    if isinstance(value, Seq):
        return ("seq", len(value.items))
    if isinstance(value, Opt):
        return ("opt",) if value.value is None else ("opt", layout_of(value.value))
    return ("tensor",)


def tensors_of(value) -> list:
    if isinstance(value, Seq):
        return list(value.items)
    if isinstance(value, Opt):
        return [] if value.value is None else tensors_of(value.value)
    return [value]


def regroup(layout: list, arrays: list) -> list:
    """The graph outputs from the flat tensors a converted graph computes (``layout_of`` each output)."""
    out, it = [], iter(arrays)

    def take(lay):
        if lay[0] == "tensor":
            return next(it)
        if lay[0] == "seq":
            return [next(it) for _ in range(lay[1])]
        return None if len(lay) == 1 else take(lay[1])
    for lay in layout:
        out.append(take(lay))
    return out


def _seq(n: OnnxNode, i: int, what: str = "input") -> Seq:
    v = n.input(i)
    if isinstance(v, Opt):
        v = v.value
    if not isinstance(v, Seq):
        n.fail(f"{what} {i} must be a sequence, got {'nothing' if v is None else type(v).__name__}")
    return v


def _position(n: OnnxNode, i: int, length: int, insert: bool = False) -> int | None:
    """Input ``i`` as a position in a sequence of ``length`` (None when omitted); negative counts from the end."""
    if n.input(i) is None:
        return None
    p = int(np.asarray(n.const(i, "position")).reshape(-1)[0])
    hi = length if insert else length - 1
    if not -length <= p <= hi:
        n.fail(f"position {p} is outside [{-length}, {hi}] for a sequence of {length} tensors")
    return p + length if p < 0 else p


def sequence_construct(n: OnnxNode) -> list:
    if not n.inputs or any(not isinstance(x, Symbol) for x in n.inputs):
        n.fail("takes one or more tensors")
    return [Seq(tuple(n.inputs))]


def sequence_empty(n: OnnxNode) -> list:
    n.arity(0)
    return [Seq(())]


def sequence_length(n: OnnxNode) -> list:
    n.arity(1)
    return [constant(np.array(len(_seq(n, 0).items), np.int64))]


def sequence_at(n: OnnxNode) -> list:
    n.arity(2)
    s = _seq(n, 0)
    return [s.items[_position(n, 1, len(s.items))]]


def sequence_insert(n: OnnxNode) -> list:
    n.arity(2, 3)
    s, t = _seq(n, 0), n.inputs[1]
    if not isinstance(t, Symbol):
        n.fail("input 1 must be a tensor")
    p = _position(n, 2, len(s.items), insert=True)
    p = len(s.items) if p is None else p
    return [Seq(s.items[:p] + (t,) + s.items[p:])]


def sequence_erase(n: OnnxNode) -> list:
    n.arity(1, 2)
    s = _seq(n, 0)
    if not s.items:
        n.fail("cannot erase from an empty sequence")
    p = _position(n, 1, len(s.items))
    p = len(s.items) - 1 if p is None else p
    return [Seq(s.items[:p] + s.items[p + 1:])]


def concat_from_sequence(n: OnnxNode) -> list:
    n.arity(1)
    s = _seq(n, 0)
    if not s.items:
        n.fail("cannot concatenate an empty sequence")
    axis = int(n.attr("axis"))
    if int(n.attr("new_axis", 0)):
        return [S.stack(list(s.items), axis=axis)]
    return [S.concatenate(list(s.items), axis=axis)]


def split_to_sequence(n: OnnxNode) -> list:
    n.arity(1, 2)
    x = n.inputs[0]
    shape = n.known_shape(0, "SplitToSequence")
    axis = int(n.attr("axis", 0))
    axis = axis + len(shape) if axis < 0 else axis
    dim = shape[axis]
    split = None if n.input(1) is None else np.asarray(n.const(1, "split")).astype(np.int64)
    if split is None:  # pieces of 1, the axis dropped unless keepdims
        pieces = [S.getitem(x, key=axis_key(axis, slice(k, k + 1), None)) for k in range(dim)]
        if not int(n.attr("keepdims", 1)):
            pieces = [S.squeeze(p, axis=axis) for p in pieces]
        return [Seq(tuple(pieces))]
    if split.ndim == 0:  # pieces of that size, the last one smaller
        size = int(split)
        if size <= 0:
            n.fail(f"split {size} must be positive")
        sizes = [min(size, dim - k) for k in range(0, dim, size)]
    else:
        sizes = [int(v) for v in split]
        if sum(sizes) != dim or min(sizes, default=0) < 0:
            n.fail(f"split {sizes} must be non-negative and sum to the axis length {dim}")
    pieces, start = [], 0
    for size in sizes:
        pieces.append(S.getitem(x, key=axis_key(axis, slice(start, start + size), None)))
        start += size
    return [Seq(tuple(pieces))]


def sequence_map(n: OnnxNode) -> list:
    if not n.inputs or not isinstance(n.inputs[0], (Seq, Opt)):
        n.fail("input 0 must be a sequence")
    length = len(_seq(n, 0).items)
    extra = n.inputs[1:]
    for k, v in enumerate(extra, start=1):
        if isinstance(v, (Seq, Opt)) and len(_seq(n, k).items) != length:
            n.fail(f"sequence input {k} has {len(_seq(n, k).items)} tensors, input 0 has {length}")
    outs = None
    for pos in range(length):
        args = [_seq(n, 0).items[pos]] + [_seq(n, k).items[pos] if isinstance(v, (Seq, Opt)) else v
                                          for k, v in enumerate(extra, start=1)]
        got = n.inline("body", args)
        outs = [[] for _ in got] if outs is None else outs
        for acc, y in zip(outs, got):
            if not isinstance(y, Symbol):
                n.fail("the body must give tensors")
            acc.append(y)
    if outs is None:
        return [Seq(()) for _ in range(n.n_outputs)]
    return [Seq(tuple(acc)) for acc in outs]


def optional(n: OnnxNode) -> list:
    n.arity(0, 1)
    return [Opt(n.input(0))]


def optional_has_element(n: OnnxNode) -> list:
    n.arity(0, 1)
    v = n.input(0)
    present = v is not None and not (isinstance(v, Opt) and v.value is None)
    return [constant(np.array(present))]


def optional_get_element(n: OnnxNode) -> list:
    n.arity(1)
    v = n.inputs[0]
    if isinstance(v, Opt):
        if v.value is None:
            n.fail("the optional input is empty")
        return [v.value]
    return [v]


# the operators that take sequence or optional values (any other refuses them by name)
SEQUENCE_CONVERTERS: dict[str, Converter] = {
    "SequenceConstruct": sequence_construct, "SequenceEmpty": sequence_empty, "SequenceLength": sequence_length,
    "SequenceAt": sequence_at, "SequenceInsert": sequence_insert, "SequenceErase": sequence_erase,
    "ConcatFromSequence": concat_from_sequence, "SplitToSequence": split_to_sequence,
    "SequenceMap": sequence_map, "Optional": optional, "OptionalHasElement": optional_has_element,
    "OptionalGetElement": optional_get_element}
TAKES_STRUCTURED = set(SEQUENCE_CONVERTERS) | {"Identity", "If", "Loop"}
