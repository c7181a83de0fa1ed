"""SBP rules: which input/output SBP signatures each op supports (the ``boxing`` op: ``ops/boxing.py``).

A rule is ``rule(sbps, shapes, out_shapes, params) -> [SBP per output] | None``: given one SBP
per input (logical ``shapes`` and the op's logical ``out_shapes``), the output SBPs when the
op, run on each physical piece separately, gives pieces that make up the logical result with
those SBPs; ``None`` when it does not (the inference pass then tries other input signatures,
paying for boxing). Every rule answers ``B`` for all-``B`` inputs.

Some ops need their params rewritten per piece (``Rule.local``): ``expand`` / ``broadcast_to``
/ ``reshape`` name logical sizes, which become the physical sizes of the piece; ``mean`` over a
split axis divides by the *global* count (the local mean is scaled by ``local / global``
element counts, both known from the avals and the piece's shape).

Why a table in one file rather than a field on ``OpDef``: the rules are read by one pass and one
executor, dozens of ops share a handful of generic rules (every elementwise op gets
``elementwise`` by its ``OpDef.elementwise`` flag), and the op family files stay untouched.
``rule_for(op)`` is the one lookup; ops without a rule fall back to ``B`` inputs with a warning
once per op (``warn_fallback``), like the storage fallback.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..caches import NamedCache
from ..sbp import SBP, broadcast, parse, split
from ..tuning_table import current
from ..user_frames import warn
from .registry import OpDef, normalize_axis

B = broadcast()
SBP_FALLBACK_WARNED = NamedCache("SBP fallback warnings given", 4096)  # op names


@dataclass(frozen=True)
class Rule:
    """``infer``: the signature rule; ``local(params, sbps, phys_shapes, shapes, out_shapes)``:
    ``(params for this piece, scale or None)``, where ``scale`` multiplies the piece's output."""

    infer: Callable
    local: Callable | None = None


# -- generic rules -----------------------------------------------------------------------------------------
def _all_b(sbps) -> bool:
    return all(s.is_broadcast for s in sbps)


def _aligned_split(sbps, shapes, out_shape) -> int | None | bool:
    """The output axis every split input is split along after broadcasting alignment; ``None``
    when no input is split; ``False`` when the splits disagree or a split dim is stretched, or a
    broadcast input is not constant along the split axis."""
    nd = len(out_shape)
    axis = None
    for s, shp in zip(sbps, shapes):
        if not s.is_split:
            continue
        k = s.axis + nd - len(shp)
        if s.axis >= len(shp) or shp[s.axis] != out_shape[k] or (axis is not None and axis != k):
            return False
        axis = k
    if axis is None:
        return None
    for s, shp in zip(sbps, shapes):
        if s.is_broadcast:
            j = axis - (nd - len(shp))
            if j >= 0 and shp[j] != 1:
                return False  # each piece would need its slice of this input: box it B -> S first
    return axis


# Elementwise ops linear in all their inputs together (P(sum) in, P(sum) out) and ops linear in
# the first input only, given the others broadcast (P(sum) x B -> P(sum)).
_LINEAR_ALL = {"add", "subtract", "negative", "positive", "copy", "stop_gradient"}
_LINEAR_FIRST = {"multiply", "divide"}


def elementwise(name: str) -> Callable:
    def rule(sbps, shapes, out_shapes, params):
        if _all_b(sbps):
            return [B] * len(out_shapes)
        if any(s.is_partial for s in sbps):
            psum = [s for s in sbps if s.is_partial]
            if any(s.reduce != "sum" for s in psum) or any(s.is_split for s in sbps):
                return None
            if name in _LINEAR_ALL and len(psum) == len(sbps):
                return [sbps[0]] * len(out_shapes)
            if name in _LINEAR_FIRST and sbps[0].is_partial and _all_b(sbps[1:]):
                return [sbps[0]] * len(out_shapes)
            return None
        axis = _aligned_split(sbps, shapes, out_shapes[0])
        if axis is None or axis is False:
            return None
        return [split(axis)] * len(out_shapes)
    return rule


def _axes(params, ndim, op) -> tuple[int, ...]:
    axis = params.get("axis")
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(normalize_axis(a, ndim, op) for a in axis))


def reduction(partial: str | None, linear: bool) -> Callable:
    """``sum``/``mean``: S(reduced) -> P(sum); ``max``/``min``: -> P(max)/P(min); S(kept) -> S(k')."""
    def rule(sbps, shapes, out_shapes, params):
        (s,), (shape,) = sbps, shapes
        if s.is_broadcast:
            return [B]
        if s.is_partial:
            return [s] if linear and s.reduce == "sum" else None
        axes = _axes(params, len(shape), "reduce")
        if s.axis in axes:
            return None if partial is None else [parse(f"P({partial})")]
        k = s.axis if params.get("keepdims") else s.axis - sum(1 for a in axes if a < s.axis)
        return [split(k)]
    return rule


def _mean_local(params, sbps, phys, shapes, out_shapes):
    s = sbps[0]
    axes = _axes(params, len(shapes[0]), "mean")
    if s.is_split and s.axis in axes:
        local = math.prod(phys[0][a] for a in axes)
        total = math.prod(shapes[0][a] for a in axes)
        return params, local / total
    return params, None


def _matmul_like(a_ndim: int, b_ndim: int, sa: SBP, sb: SBP, out_ndim: int, b_weight: bool = False):
    """``a @ b`` (``b_weight``: ``a @ b.T``, dense). Row split x B -> row split; B x column split ->
    column split; contraction split on both -> P(sum); P(sum) x B and B x P(sum) -> P(sum)."""
    if sa.is_broadcast and sb.is_broadcast:
        return B
    if a_ndim < 2 or b_ndim < 2:
        return None
    b_contract = (b_ndim - 1) if b_weight else max(b_ndim - 2, 0)
    b_cols = (b_ndim - 2) if b_weight else b_ndim - 1
    if sa.is_partial or sb.is_partial:
        ok = (sa.is_partial and sa.reduce == "sum" and sb.is_broadcast) or \
             (sb.is_partial and sb.reduce == "sum" and sa.is_broadcast)
        return parse("P(sum)") if ok else None
    if sa.is_split and sb.is_broadcast and sa.axis < a_ndim - 1:
        return split(sa.axis + out_ndim - a_ndim)  # rows (or batch dims) of a
    if sa.is_broadcast and sb.is_split and b_ndim >= 2 and sb.axis == b_cols:
        return split(out_ndim - 1)
    if sa.is_split and sb.is_split and sa.axis == a_ndim - 1 and sb.axis == b_contract and b_ndim >= 2:
        return parse("P(sum)")
    return None


def _dot(sbps, shapes, out_shapes, params):
    if len(shapes[0]) != 2 or len(shapes[1]) != 2:  # N-d dot is not matmul: whole arrays only
        return [B] if _all_b(sbps) else None
    return _matmul(sbps, shapes, out_shapes, params)


def _matmul(sbps, shapes, out_shapes, params):
    if params.get("transpose_a"):  # (dot's, 2-D: a's rows are the contraction, its columns the output's rows)
        if _all_b(sbps) or len(shapes[0]) != 2:
            return [B] if _all_b(sbps) else None
        sa = split(1 - sbps[0].axis) if sbps[0].is_split else sbps[0]
        return _matmul([sa, sbps[1]], [shapes[0][::-1], shapes[1]], out_shapes, {})
    if len(shapes[0]) > 2 and len(shapes[1]) > 2 and shapes[0][:-2] != shapes[1][:-2]:
        return [B] if _all_b(sbps) else None
    out = _matmul_like(len(shapes[0]), len(shapes[1]), sbps[0], sbps[1], len(out_shapes[0]))
    return None if out is None else [out]


def _dense(sbps, shapes, out_shapes, params):
    out = _matmul_like(len(shapes[0]), len(shapes[1]), sbps[0], sbps[1], len(out_shapes[0]), b_weight=True)
    if out is None or len(sbps) < 3:
        return None if out is None else [out]
    sbias = sbps[2]
    if out.is_partial:  # the bias must be added once: it comes as P(sum) too (B -> P keeps it on one piece)
        return [out] if sbias == out else None
    if out.is_split and out.axis == len(out_shapes[0]) - 1:  # columns: the bias is split with them
        return [out] if sbias == split(0) else None
    return [out] if sbias.is_broadcast else None


def _softmax(sbps, shapes, out_shapes, params):
    s = sbps[0]
    if s.is_broadcast:
        return [B]
    if s.is_split and s.axis != normalize_axis(params["axis"], len(shapes[0]), "softmax"):
        return [s]
    return None  # along the split axis (or of a partial value): box to B first


def _softmax_ce(sbps, shapes, out_shapes, params):
    if _all_b(sbps):
        return [B]
    if sbps[0] == split(0) and sbps[1] == split(0):
        return [parse("P(sum)")]  # local means scaled by local / global batch (``_batch_local``)
    return None


def _batch_local(params, sbps, phys, shapes, out_shapes):
    if sbps[0].is_split:
        return params, phys[0][0] / shapes[0][0]
    return params, None


def _unary_shape(sbps, shapes, out_shapes, params, axis_map, linear=True):
    s = sbps[0]
    if s.is_broadcast or (s.is_partial and linear and s.reduce == "sum"):
        return [s]
    if s.is_split:
        k = axis_map(s.axis, shapes[0], out_shapes[0], params)
        return None if k is None else [split(k)]
    return None


def _expand_axis(k, shape, out, params):
    off = len(out) - len(shape)
    return k + off if shape[k] == out[k + off] else None  # a stretched dim cannot stay split


def _expand_rule(sbps, shapes, out_shapes, params):
    return _unary_shape(sbps, shapes, out_shapes, params, _expand_axis)


def _expand_local(name):
    key = "sizes" if name == "expand" else "shape"

    def local(params, sbps, phys, shapes, out_shapes):
        # The logical sizes name the global array: each piece expands to its own physical size
        # along dims it keeps (OneFlow: (4, 1, 6) split on axis 2 over 2 pieces, expanded to
        # (4, 3, 6), runs as expand to (4, 3, 3) on each (4, 1, 3) piece).
        off = len(out_shapes[0]) - len(shapes[0])
        sizes = list(out_shapes[0])
        for j, d in enumerate(phys[0]):
            if shapes[0][j] == out_shapes[0][j + off]:
                sizes[j + off] = d
        return {**params, key: tuple(sizes)}, None
    return local


def _reshape_axis(shape, out, k) -> int | None:
    """The output axis a split on input axis ``k`` survives as through a C-order reshape: one
    of the same size with the same number of elements before it (then each piece reshapes to
    its own rows alone); None when the reshape merges or cuts the split axis."""
    before = math.prod(shape[:k])
    for j, d in enumerate(out):
        if d == shape[k] and math.prod(out[:j]) == before:
            return j
    return None


def _reshape_rule(sbps, shapes, out_shapes, params):
    return _unary_shape(sbps, shapes, out_shapes, params, lambda k, s, o, p: _reshape_axis(s, o, k))


def _reshape_local(params, sbps, phys, shapes, out_shapes):
    out = list(out_shapes[0])
    if sbps[0].is_split:
        k = sbps[0].axis
        out[_reshape_axis(shapes[0], out_shapes[0], k)] = phys[0][k]
    return {**params, "shape": tuple(out)}, None


def _transpose_rule(sbps, shapes, out_shapes, params):
    def axis_map(k, shape, out, params):
        axes = params.get("axes")
        axes = tuple(reversed(range(len(shape)))) if axes is None else \
            tuple(normalize_axis(a, len(shape), "transpose") for a in axes)
        return axes.index(k)
    return _unary_shape(sbps, shapes, out_shapes, params, axis_map)


def _expand_dims_rule(sbps, shapes, out_shapes, params):
    def axis_map(k, shape, out, params):
        new = _axes(params, len(out), "expand_dims")
        kept = [a for a in range(len(out)) if a not in new]
        return kept[k]
    return _unary_shape(sbps, shapes, out_shapes, params, axis_map)


def _squeeze_rule(sbps, shapes, out_shapes, params):
    def axis_map(k, shape, out, params):
        gone = _axes(params, len(shape), "squeeze") if params.get("axis") is not None else \
            tuple(a for a, d in enumerate(shape) if d == 1)
        return None if k in gone else k - sum(1 for a in gone if a < k)
    return _unary_shape(sbps, shapes, out_shapes, params, axis_map)


def _squeeze_local(params, sbps, phys, shapes, out_shapes):
    # ``axis=None`` drops every size-1 dim: a piece whose split dim has size 1 would lose it too
    if params.get("axis") is None:
        return {**params, "axis": tuple(a for a, d in enumerate(shapes[0]) if d == 1)}, None
    return params, None


def _flatten_rule(sbps, shapes, out_shapes, params):
    return _unary_shape(sbps, shapes, out_shapes, params, lambda k, s, o, p: 0 if k == 0 else None)


def _repeat_rule(sbps, shapes, out_shapes, params):
    def axis_map(k, shape, out, params):
        sizes = params["sizes"]
        off = len(sizes) - len(shape)
        return k + off if sizes[k + off] == 1 else None  # tiling along a split axis interleaves pieces
    return _unary_shape(sbps, shapes, out_shapes, params, axis_map, linear=True)


def _cast_rule(sbps, shapes, out_shapes, params):
    return _unary_shape(sbps, shapes, out_shapes, params, lambda k, s, o, p: k, linear=False)


def _concatenate(sbps, shapes, out_shapes, params):
    if _all_b(sbps):
        return [B]
    axis = normalize_axis(params.get("axis", 1), len(out_shapes[0]), "concatenate")  # (channel_shuffle's: 1)
    first = sbps[0]
    if (first.is_split and first.axis != axis or first.is_partial and first.reduce == "sum") \
            and all(s == first for s in sbps):
        return [first]
    return None


# -- layers of real models: batch split (data parallel) and, where the op allows, channel split ------------------
def _batch_only(*axes):
    """An op over NCHW-like data whose first input may be split along ``axes`` (batch; channels for
    pools) while every other input (weights, statistics) is whole: the split passes through."""
    def rule(sbps, shapes, out_shapes, params):
        if _all_b(sbps):
            return [B] * len(out_shapes)
        x, rest = sbps[0], sbps[1:]
        if x.is_split and x.axis in axes and all(r.is_broadcast for r in rest):
            return [x] * len(out_shapes)
        return None
    return rule


def _layer_scale_residual(sbps, shapes, out_shapes, params):
    """``r + transpose(gamma * y, axes)``: ``y`` split along the axis ``axes`` moves to ``r``'s split axis (the
    batch where ``axes`` keeps it first), every dim equal, ``gamma`` whole and of size 1 along that axis (not the
    channels it scales): the split passes through."""
    if _all_b(sbps):
        return [B]
    y, g, r = sbps
    axes = tuple(params.get("axes", (0, 3, 1, 2)))
    if not (y.is_split and r.is_split and g.is_broadcast and len(shapes[0]) == len(shapes[2]) == len(axes)
            and axes[r.axis] == y.axis and tuple(shapes[0][a] for a in axes) == tuple(shapes[2])):
        return None
    k = y.axis - (len(shapes[0]) - len(shapes[1]))  # (gamma's dim along the split axis, where it has one)
    return [r] if k < 0 or shapes[1][k] == 1 else None


def _residual_batch(sbps, shapes, out_shapes, params):
    """``conv2d_add_relu``: x and the residual (its third input) both whole or both split along the batch,
    the weight and bias whole: the split (or wholeness) passes through."""
    if _all_b(sbps):
        return [B]
    x, r, rest = sbps[0], sbps[2], sbps[1:2] + sbps[3:]
    if x.is_split and x.axis == 0 and r == x and all(s.is_broadcast for s in rest):
        return [x]
    return None


def _layer_norm(sbps, shapes, out_shapes, params):
    """Split along any axis but the normalized one passes through; gamma and beta stay whole."""
    x, rest = sbps[0], sbps[1:]
    if _all_b(sbps):
        return [B]
    axis = normalize_axis(params.get("axis", -1), len(shapes[0]), "layer_norm")
    if x.is_split and x.axis != axis and all(r.is_broadcast for r in rest):
        return [x]
    return None


def _masked_softmax(sbps, shapes, out_shapes, params):
    """Like softmax (never split along the softmax axis); the mask is split with x where it has that
    dim, whole where it broadcasts along it."""
    x, m = sbps
    if _all_b(sbps):
        return [B]
    nd, md = len(shapes[0]), len(shapes[1])
    axis = normalize_axis(params.get("axis", -1), nd, "masked_softmax")
    if not x.is_split or x.axis == axis:
        return None
    k = x.axis - (nd - md)  # the mask's dim aligned with x's split axis
    if k < 0 or shapes[1][k] == 1:
        return [x] if m.is_broadcast else None
    return [x] if m == split(k) else None


# -- indexing, joining, ops along one axis -------------------------------------------------------------------
def _key_axes(key, ndim) -> dict[int, tuple]:
    """Input axis -> (its key component, its output axis) for the axes a basic index keeps
    (slices); ints drop their axis, None adds an output axis, ``...`` stands for full slices."""
    key = tuple(key)
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (ndim - used)
    out, i, j = {}, 0, 0
    for k in key:
        if k is None:
            j += 1
        elif isinstance(k, slice):
            out[i] = (k, j)
            i, j = i + 1, j + 1
        else:
            i += 1
    return out


def _getitem(sbps, shapes, out_shapes, params):
    """A split passes when the key takes the whole split axis (``:``); it moves to that axis's
    output position. A slice of the split axis would need each piece's global offset: box first."""
    def axis_map(k, shape, out, params):
        comp, j = _key_axes(params["key"], len(shape)).get(k, (None, None))
        return j if isinstance(comp, slice) and comp.indices(shape[k]) == (0, shape[k], 1) else None
    return _unary_shape(sbps, shapes, out_shapes, params, axis_map)


def _stack(sbps, shapes, out_shapes, params):
    """Every input split alike along ``k`` -> ``S(k)``, shifted past the new axis; all ``P(sum)`` pass."""
    if _all_b(sbps):
        return [B]
    first = sbps[0]
    if any(s != first for s in sbps):
        return None
    if first.is_partial:
        return [first] if first.reduce == "sum" else None
    axis = normalize_axis(params.get("axis", 0), len(out_shapes[0]), "stack")
    return [split(first.axis if first.axis < axis else first.axis + 1)]


def _take(sbps, shapes, out_shapes, params):
    """``take(x, indices, axis)``: out shape ``x[:axis] + indices + x[axis+1:]``. Split indices
    with whole ``x`` (data-parallel embedding lookups) -> split along the indices' output axis;
    ``x`` split along another axis (a column-split embedding table) with whole indices -> that
    axis moved; ``P(sum)`` x (linear) with whole indices passes."""
    sx, si = sbps
    if _all_b(sbps):
        return [B]
    axis = normalize_axis(params.get("axis", 0), len(shapes[0]), "take")
    ni = len(shapes[1])
    if sx.is_broadcast and si.is_split:
        return [split(axis + si.axis)]
    if si.is_broadcast and sx.is_split and sx.axis != axis:
        return [split(sx.axis if sx.axis < axis else sx.axis + ni - 1)]
    if si.is_broadcast and sx.is_partial and sx.reduce == "sum":
        return [sx]
    return None


def _take_along_axis(sbps, shapes, out_shapes, params):
    """x and indices split alike along an axis other than ``axis`` (or indices of size 1 there, whole)."""
    sx, si = sbps
    if _all_b(sbps):
        return [B]
    axis = normalize_axis(params.get("axis", -1), len(shapes[0]), "take_along_axis")
    if not sx.is_split or sx.axis == axis:
        return None
    if si == sx and shapes[1][sx.axis] == shapes[0][sx.axis]:
        return [sx]
    return [sx] if si.is_broadcast and shapes[1][sx.axis] == 1 else None


def _along(default, *, linear: bool, none_flattens: bool = True, key: str = "axis") -> Callable:
    """An op working along ``params[key]`` (an int or tuple; ``None``: ``default``, or the flattened
    array when ``none_flattens``): a split on any other axis passes, on that axis it is refused;
    ``linear`` ops also pass ``P(sum)``."""
    def rule(sbps, shapes, out_shapes, params):
        def axis_map(k, shape, out, params):
            axis = params.get(key, default)
            if axis is None:
                if none_flattens and len(shape) > 1:
                    return None
                axes = tuple(range(len(shape)))
            else:
                axes = _axes({"axis": axis}, len(shape), "along")
            return None if k in axes else k
        return _unary_shape(sbps, shapes, out_shapes, params, axis_map, linear=linear)
    return rule


def _like(sbps, shapes, out_shapes, params):
    """``zeros_like``/``ones_like``/``full_like``: a split piece gives the piece of the result; the
    values never depend on x, so every piece of any other x holds the whole result (``B``)."""
    s = sbps[0]
    return [s] if s.is_split else [B]


def _last_two_fixed(sbps, shapes, out_shapes, params):
    """``tril``/``triu``: only the batch dims (all but the last two) may be split."""
    return _unary_shape(sbps, shapes, out_shapes, params,
                        lambda k, s, o, p: k if len(s) > 2 and k < len(s) - 2 else None)


def _one_hot(sbps, shapes, out_shapes, params):
    return _unary_shape(sbps, shapes, out_shapes, params, lambda k, s, o, p: k, linear=False)


def _pad(sbps, shapes, out_shapes, params):
    """A split axis that is not padded passes (any mode: padding works along lines of the padded axis)."""
    def axis_map(k, shape, out, params):
        rows = np.broadcast_to(np.asarray(params["pad_width"]), (len(shape), 2))
        return k if tuple(rows[k]) == (0, 0) else None
    return _unary_shape(sbps, shapes, out_shapes, params, axis_map, linear=False)


# -- gradient kernels and other ops the backward of a split graph runs (data parallel: every piece its own) ----
PSUM = parse("P(sum)")


def _together(sbps, shapes, members, banned=()) -> int | None:
    """The axis every input in ``members`` is split along (equal sizes there, not in ``banned``),
    every other input broadcast; ``None`` otherwise."""
    first = sbps[members[0]]
    if not first.is_split or first.axis in banned:
        return None
    k = first.axis
    for i, (s, shp) in enumerate(zip(sbps, shapes)):
        if (s != first or k >= len(shp) or shp[k] != shapes[members[0]][k]) if i in members else not s.is_broadcast:
            return None
    return k


def _linear_in(i: int) -> Callable:
    """P(sum) in input ``i``, every other input broadcast: P(sum) out (the op is linear in input ``i``)."""
    return lambda sbps: sbps[i] == PSUM and all(s.is_broadcast for j, s in enumerate(sbps) if j != i)


def _passing(members, banned=lambda shapes, params: (), linear=None, outs=None) -> Callable:
    """A rule: all-B -> B; the inputs ``members`` split together along an axis not in ``banned`` (the
    rest whole) -> that split (``outs``: a function of the axis giving the outputs' SBPs); P(sum) in
    the input ``linear`` (the rest whole) -> P(sum)."""
    def rule(sbps, shapes, out_shapes, params):
        if _all_b(sbps):
            return [B] * len(out_shapes)
        if linear is not None and _linear_in(linear)(sbps):
            return [PSUM] * len(out_shapes)
        k = _together(sbps, shapes, members, banned(shapes, params))
        if k is None:
            return None
        return outs(k) if outs is not None else [split(k)] * len(out_shapes)
    return rule


def _axis_of(key="axis", default=-1, at=0):
    return lambda shapes, params: (normalize_axis(default if params.get(key) is None else params[key],
                                                  len(shapes[at]), "sbp"),)


def _sum_to_axis(k, shape, target):
    """Where axis ``k`` of ``shape`` lands in ``target`` (right-aligned), or None when it is summed away."""
    j = k - (len(shape) - len(target))
    return j if j >= 0 and target[j] == shape[k] else None


def _sum_to(sbps, shapes, out_shapes, params):
    s = sbps[0]
    if s.is_broadcast or (s.is_partial and s.reduce == "sum"):
        return [s]
    if s.is_split:
        j = _sum_to_axis(s.axis, shapes[0], out_shapes[0])
        return [PSUM] if j is None else [split(j)]
    return None


def _sum_to_local(params, sbps, phys, shapes, out_shapes):
    s = sbps[0]
    if s.is_split:
        j = _sum_to_axis(s.axis, shapes[0], out_shapes[0])
        if j is not None:  # (the logical target size of a kept split axis becomes the piece's)
            return {**params, "shape": tuple(phys[0][s.axis] if i == j else d for i, d in enumerate(out_shapes[0]))}, None
    return params, None


def _sum_like(sbps, shapes, out_shapes, params):
    x, like = sbps
    if _all_b(sbps) or (x.is_partial and x.reduce == "sum" and like.is_broadcast):
        return [x]
    if x.is_split:
        j = _sum_to_axis(x.axis, shapes[0], shapes[1])
        if j is None:
            return [PSUM] if like.is_broadcast else None
        return [split(j)] if like == split(j) else None
    return None


def _broadcast_like(sbps, shapes, out_shapes, params):
    x, like = sbps
    if _all_b(sbps) or (x.is_partial and x.reduce == "sum" and like.is_broadcast):
        return [x]
    off = len(shapes[1]) - len(shapes[0])
    if x.is_split and like == split(x.axis + off) and shapes[0][x.axis] == shapes[1][x.axis + off]:
        return [like]
    if x.is_broadcast and like.is_split:
        j = like.axis - off  # x's dim there: absent or 1 (stretched), each piece stretches it to its own size
        return [like] if j < 0 or shapes[0][j] == 1 else None
    return None


def _take_grad(sbps, shapes, out_shapes, params):
    """The rows of ``g`` that a split of ``indices`` selects scatter into a whole-shaped table: P(sum);
    ``g`` split outside the indexed axes (with ``like``) keeps the split."""
    g, like, ind = sbps
    if _all_b(sbps) or params.get("sparse"):
        return [B] if _all_b(sbps) else None
    if _linear_in(0)(sbps):
        return [PSUM]
    a, n_ind = normalize_axis(params.get("axis", 0), len(shapes[1]), "take_grad"), len(shapes[2])
    if ind.is_split and like.is_broadcast and g == split(a + ind.axis) and shapes[0][a + ind.axis] == shapes[2][ind.axis]:
        return [PSUM]
    if g.is_split and ind.is_broadcast and (g.axis < a or g.axis >= a + n_ind):
        k = g.axis if g.axis < a else g.axis - n_ind + 1
        return [like] if like == split(k) and shapes[1][k] == shapes[0][g.axis] else None
    return None


def _scatter_nd(sbps, shapes, out_shapes, params):
    """``x`` split along an axis past the indexed ones, ``updates`` along the same data axis; or, for
    writes and additions, P(sum) values at whole indices."""
    x, ind, upd = sbps
    if _all_b(sbps):
        return [B]
    if ind.is_broadcast and x.is_partial and upd == x and x.reduce == "sum" and params.get("reduce") in ("none", "add"):
        return [x]
    m = shapes[1][-1]
    k = x.axis if x.is_split else -1
    j = len(shapes[1]) - 1 + k - m
    if k >= m and ind.is_broadcast and upd == split(j) and shapes[2][j] == shapes[0][k]:
        return [x]
    return None


def _batched_matrix(sbps, shapes, out_shapes, params):
    """Linear algebra over stacks of matrices: a split batch axis passes to every output."""
    s = sbps[0]
    if s.is_broadcast:
        return [B] * len(out_shapes)
    if s.is_split and s.axis < len(shapes[0]) - 2 and all(len(o) > s.axis and o[s.axis] == shapes[0][s.axis]
                                                          for o in out_shapes):
        return [s] * len(out_shapes)
    return None


def _shift_axes(shapes, params):  # fftshift's axes (None: every axis)
    return _axes({"axis": params.get("axes")}, len(shapes[0]), "fftshift")


def _last_axes(n: int):
    return lambda shapes, params: tuple(range(len(shapes[0]) - n, len(shapes[0])))


def _pad_grad(sbps, shapes, out_shapes, params):
    """As ``pad`` (a split axis not padded passes), and linear."""
    return [PSUM] if sbps[0] == PSUM else _pad(sbps, shapes, out_shapes, params)


def _same_or_none(sbps, shapes, out_shapes, params):  # each element's value (or draw: per-piece streams) its own
    return [sbps[0]] * len(out_shapes) if not sbps[0].is_partial else None


_NOT_AXIS = _axis_of()
_BATCH_GRAD = _passing((0, 1), lambda shapes, params: (2, 3), linear=0)  # pools: batch and channels
_LN_GRAD = dict(banned=lambda s, p: _axis_of(at=1)(s, p), outs=lambda k: [split(k), PSUM, PSUM])


RULES: dict[str, Rule] = {
    "sum": Rule(reduction("sum", linear=True)),
    "mean": Rule(reduction("sum", linear=True), _mean_local),
    "max": Rule(reduction("max", linear=False)),
    "min": Rule(reduction("min", linear=False)),
    "prod": Rule(reduction(None, linear=False)),
    "argmax": Rule(reduction(None, linear=False)),
    "argmin": Rule(reduction(None, linear=False)),
    "dense": Rule(_dense),
    "matmul": Rule(_matmul),
    "dot": Rule(_dot),
    "softmax": Rule(_softmax),
    "log_softmax": Rule(_softmax),
    "softmax_cross_entropy": Rule(_softmax_ce, _batch_local),
    "expand": Rule(_expand_rule, _expand_local("expand")),
    "broadcast_to": Rule(_expand_rule, _expand_local("broadcast_to")),
    "reshape": Rule(_reshape_rule, _reshape_local),
    "transpose": Rule(_transpose_rule),
    "expand_dims": Rule(_expand_dims_rule),
    "squeeze": Rule(_squeeze_rule, _squeeze_local),
    "flatten": Rule(_flatten_rule),
    "repeat": Rule(_repeat_rule),
    "cast": Rule(_cast_rule),
    "copy": Rule(elementwise("copy")),
    "stop_gradient": Rule(elementwise("stop_gradient")),
    "concatenate": Rule(_concatenate),
    "conv2d": Rule(_batch_only(0)),
    "conv2d_act": Rule(_batch_only(0)),  # (an activation per value: the batch split as conv2d)
    "conv2d_add_relu": Rule(_residual_batch),  # (x and the residual split alike along the batch)
    "conv2d_transpose": Rule(_batch_only(0)),
    "batch_norm": Rule(_batch_only(0)),
    "batch_norm_relu": Rule(_batch_only(0)),  # (a relu per value: the batch split as batch_norm)
    "squeeze_excite": Rule(_batch_only(0)), "channel_shuffle": Rule(_concatenate),  # (its concatenation's rule)
    "max_pool2d": Rule(_batch_only(0, 1)), "max_pool2d_relu": Rule(_batch_only(0, 1)),  # (the pool's; relu per value)
    "avg_pool2d": Rule(_batch_only(0, 1)),
    "layer_norm": Rule(_layer_norm),
    "layer_scale_residual": Rule(_layer_scale_residual),
    "masked_softmax": Rule(_masked_softmax),
    "getitem": Rule(_getitem),
    "stack": Rule(_stack),
    "take": Rule(_take),
    "take_along_axis": Rule(_take_along_axis),
    "clip": Rule(elementwise("clip")),
    "zeros_like": Rule(_like),
    "ones_like": Rule(_like),
    "full_like": Rule(_like),
    "tril": Rule(_last_two_fixed),
    "triu": Rule(_last_two_fixed),
    "one_hot": Rule(_one_hot),
    "pad": Rule(_pad),
    "cumulative_sum": Rule(_along(None, linear=True)),
    "cumulative_prod": Rule(_along(None, linear=False)),
    "sort": Rule(_along(-1, linear=False)),
    "argsort": Rule(_along(-1, linear=False)),
    "flip": Rule(_along(None, linear=True, none_flattens=False)),
    "roll": Rule(_along(None, linear=True)),
    "repeat_elements": Rule(_along(None, linear=True)),
    "split_section": Rule(_along(0, linear=True)),
    "std": Rule(reduction(None, linear=False)),
    "var": Rule(reduction(None, linear=False)),
    "all": Rule(reduction(None, linear=False)),
    "any": Rule(reduction(None, linear=False)),
    "vector_norm": Rule(reduction(None, linear=False)),
    "count_nonzero": Rule(reduction("sum", linear=False)),
    # each piece draws the mask of its own elements: the pieces make up one mask of the whole
    # (independent draws either way); a broadcast mask is refused by la.distributed.run (each
    # worker would draw a different "whole" mask)
    "dropout_mask": Rule(lambda sbps, shapes, out_shapes, params: [sbps[0]] if not sbps[0].is_partial else None),
    "dropout": Rule(_same_or_none),  # (its mask: dropout_mask's per-piece draws)
    # gradient kernels: a batch split of the forward gives split or P(sum) gradients, no boxing
    "sum_to": Rule(_sum_to, _sum_to_local),
    "sum_like": Rule(_sum_like),
    "broadcast_like": Rule(_broadcast_like),
    "conv2d_weight_grad": Rule(_passing((0, 1), lambda s, p: (1, 2, 3), linear=0, outs=lambda k: [PSUM])),
    "conv2d_input_grad": Rule(_passing((0, 2), lambda s, p: (1, 2, 3), linear=0)),
    "max_pool2d_grad": Rule(_BATCH_GRAD),
    "avg_pool2d_grad": Rule(_BATCH_GRAD),
    "take_grad": Rule(_take_grad),
    "take_along_axis_grad": Rule(_passing((0, 1, 2), _NOT_AXIS, linear=0)),
    "scatter_along_axis": Rule(_passing((0, 1, 2), lambda s, p: _axis_of(default=0)(s, p))),
    "scatter_nd": Rule(_scatter_nd),
    "pad_grad": Rule(_pad_grad),
    "repeat_elements_grad": Rule(_passing((0, 1), lambda s, p: tuple(range(len(s[0]))) if p.get("axis") is None
                                          else _axis_of()(s, p), linear=0)),
    "split_section_grad": Rule(_passing((0, 1), lambda s, p: _axis_of(default=0)(s, p), linear=0)),
    "layer_norm_grad": Rule(_passing((0, 1), **_LN_GRAD)),
    "layer_norm_grad_saved": Rule(_passing((0, 1, 2), **_LN_GRAD)),
    "layer_norm_with_stats": Rule(_passing((0,), _NOT_AXIS)),
    # per-row losses and their gradients: rows split along any axis but the last (classes)
    "softmax_cross_entropy_rows": Rule(_passing((0, 1), _last_axes(1))),
    "softmax_cross_entropy_rows_with_probs": Rule(_passing((0, 1), _last_axes(1))),
    "softmax_cross_entropy_rows_grad": Rule(_passing((0, 1, 2), _last_axes(1), linear=2)),
    "softmax_cross_entropy_rows_grad_saved": Rule(_passing((0, 1, 2), _last_axes(1), linear=2)),
    "gelu_with_grad": Rule(_same_or_none),
    "round_to_format": Rule(_same_or_none),
    "copy_to": Rule(elementwise("copy")),
    # stacks of matrices: the batch axes split
    **{k: Rule(_batched_matrix) for k in ("cholesky", "inv", "matrix_power", "det", "slogdet", "eigh", "eigvalsh",
                                          "svd", "svdvals", "pinv", "qr", "matrix_rank", "matrix_norm")},
    "cross": Rule(_passing((0, 1), _NOT_AXIS)),
    "isin": Rule(lambda sbps, *_: [sbps[0]] if sbps[1].is_broadcast and not sbps[0].is_partial else None),
    "searchsorted": Rule(lambda sbps, *_: [sbps[1]] if sbps[0].is_broadcast and not sbps[1].is_partial else None),
    # transforms along some axes: the others split; linear
    **{k: Rule(_passing((0,), _NOT_AXIS, linear=0)) for k in ("fft", "ifft", "rfft", "ihfft")},
    **{k: Rule(_passing((0,), _shift_axes, linear=0)) for k in ("fftshift", "ifftshift")},
}


def rule_for(op: OpDef) -> Rule | None:
    """The SBP rule of ``op``: its table entry, the generic one of elementwise ops, else None."""
    r = RULES.get(op.name)
    return Rule(elementwise(op.name)) if r is None and op.elementwise else r


class SBPFallbackWarning(UserWarning):
    """An op without an SBP rule ran on broadcast (whole) inputs."""


def warn_fallback(op: OpDef) -> None:
    """Warn once per op that it has no SBP rule (the tuning table's ``sbp_fallback_warn``:
    ``LAZYARRAY_SBP_FALLBACK_WARN=0`` at import, ``la.tuning(sbp_fallback_warn=False)``, silences it)."""
    if not current().sbp_fallback_warn or not SBP_FALLBACK_WARNED.once(op.name):
        return
    warn(f"{op.name}: no SBP rule; its inputs are gathered to broadcast (whole) arrays on every "
         "piece, which moves data and repeats the work. Add a rule in lazyarray/ops/sbp_rules.py "
         "or set LAZYARRAY_SBP_FALLBACK_WARN=0.", SBPFallbackWarning)
