"""SBP signatures: how the physical pieces of a global array make up the logical array.

OneFlow's consistent view: a global array is stored as ``n`` pieces, one per worker, and its
SBP says how they combine:

* ``split(axis)`` (``S(k)``): the pieces, concatenated along ``axis``, are the array
  (uneven sizes follow ``numpy.array_split``: the first ``size % n`` pieces are one longer);
* ``broadcast()`` (``B``): every piece is the whole array;
* ``partial_sum()`` (``P(sum)``), ``partial_max()``, ``partial_min()``: every piece has the
  logical shape, and the array is their elementwise sum (max, min).

Where a consumer needs another SBP than its producer gives, a *boxing* node converts
(``graph/passes/sbp.py``); ``boxing_kind`` names the collective and ``boxing_bytes`` is the
cost the greedy choice minimises (docs/distributed.md).

>>> import lazyarray as la
>>> la.sbp.split(0), la.sbp.broadcast(), la.sbp.partial_sum()
(S(0), B, P(sum))
>>> la.sbp.parse("S(1)") == la.sbp.split(1)
True
>>> la.sbp.split_sizes(10, 3)
[4, 3, 3]
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .args import int_arg
from .errors import LazyArrayError, ParamError

__all__ = ["SBP", "split", "broadcast", "partial_sum", "partial_max", "partial_min", "parse",
           "split_sizes", "boxing_kind", "boxing_bytes", "SBPError"]


class SBPError(LazyArrayError, ValueError):
    """An SBP signature that an op or a conversion cannot take."""


@dataclass(frozen=True)
class SBP:
    """One SBP value: ``kind`` is ``"S"``, ``"B"`` or ``"P"``; ``axis`` for S, ``reduce`` for P."""

    kind: str
    axis: int | None = None
    reduce: str | None = None

    @property
    def is_split(self) -> bool:
        return self.kind == "S"

    @property
    def is_broadcast(self) -> bool:
        return self.kind == "B"

    @property
    def is_partial(self) -> bool:
        return self.kind == "P"

    def __repr__(self) -> str:
        if self.kind == "S":
            return f"S({self.axis})"
        if self.kind == "P":
            return f"P({self.reduce})"
        return "B"

    __str__ = __repr__


_B = SBP("B")
_PSUM, _PMAX, _PMIN = SBP("P", reduce="sum"), SBP("P", reduce="max"), SBP("P", reduce="min")


def split(axis: int) -> SBP:
    """``S(axis)``: pieces concatenated along ``axis`` (a non-negative axis of the logical array)."""
    if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
        raise SBPError(f"split(axis): axis must be a non-negative int, got {axis!r}")
    return SBP("S", axis=axis)


def broadcast() -> SBP:
    """``B``: every piece holds the whole array."""
    return _B


def partial_sum() -> SBP:
    """``P(sum)``: pieces of the logical shape that add up to the array."""
    return _PSUM


def partial_max() -> SBP:
    """``P(max)``: the array is the elementwise maximum of the pieces."""
    return _PMAX


def partial_min() -> SBP:
    """``P(min)``: the array is the elementwise minimum of the pieces."""
    return _PMIN


_TEXT = re.compile(r"S\((\d+)\)|B|P\((sum|max|min)\)")


def parse(text) -> SBP:
    """An ``SBP`` from its text (``"S(0)"``, ``"B"``, ``"P(sum)"``); SBP values pass through."""
    if isinstance(text, SBP):
        return text
    m = _TEXT.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise SBPError(f"not an SBP signature: {text!r}; write 'S(<axis>)', 'B' or 'P(sum|max|min)', "
                       "or use la.sbp.split(axis) / broadcast() / partial_sum()")
    if m.group(1) is not None:
        return split(int(m.group(1)))
    if m.group(2) is not None:
        return SBP("P", reduce=m.group(2))
    return _B


def split_sizes(size: int, n: int) -> list[int]:
    """Piece sizes of a dim of ``size`` split in ``n`` (``numpy.array_split``'s rule)."""
    if size.__class__ is not int or n.__class__ is not int or size < 0 or n < 1:
        size = int_arg(size, "la.sbp.split_sizes", "size", lo=0)
        n = int_arg(n, "la.sbp.split_sizes", "n (the number of pieces)", lo=1)
    q, r = divmod(size, n)
    return [q + 1 if i < r else q for i in range(n)]


def sbp_arg(value, where: str, name: str) -> SBP:
    """An ``SBP`` argument: an ``SBP`` value or its text (``"S(0)"``, ``"B"``, ``"P(sum)"``);
    anything else is ``ParamError`` naming ``where`` and ``name``."""
    if isinstance(value, SBP):
        return value
    if not isinstance(value, str):
        raise ParamError(f"{where}: {name} must be an SBP value such as la.sbp.split(0), la.sbp.broadcast() "
                         f"or la.sbp.partial_sum() (or its text 'S(0)', 'B', 'P(sum)'), got "
                         f"{type(value).__name__} {value!r}"[:300])
    return parse(value)


def boxing_kind(src: SBP, dst: SBP) -> str | None:
    """The collective that turns ``src`` pieces into ``dst`` pieces, or None when none is needed
    (equal signatures) or possible (between different partial reductions, go through ``B``)."""
    if src.__class__ is not SBP or dst.__class__ is not SBP:
        src, dst = sbp_arg(src, "la.sbp.boxing_kind", "src"), sbp_arg(dst, "la.sbp.boxing_kind", "dst")
    if src == dst:
        return None
    if src.is_split:
        return {"B": "all_gather", "S": "all_to_all"}.get(dst.kind)  # S -> P is not offered
    if src.is_partial:
        return {"B": "all_reduce", "S": "reduce_scatter"}.get(dst.kind)
    return {"S": "local_slice", "P": "local_partial"}[dst.kind]  # B -> S, B -> P: no data moves


def boxing_bytes(src: SBP, dst: SBP, nbytes: int, n: int) -> float:
    """Bytes moved between workers by boxing an array of ``nbytes`` logical bytes over ``n`` pieces.

    Ring collectives: all-gather and reduce-scatter move ``(n-1) * nbytes`` in all, all-reduce
    twice that, all-to-all ``(n-1)/n * nbytes``; local slices move nothing. ``inf`` when no
    boxing exists between the two.
    """
    src, dst = sbp_arg(src, "la.sbp.boxing_bytes", "src"), sbp_arg(dst, "la.sbp.boxing_bytes", "dst")
    if nbytes.__class__ is not int or n.__class__ is not int or nbytes < 0 or n < 1:
        nbytes = int_arg(nbytes, "la.sbp.boxing_bytes", "nbytes", lo=0)
        n = int_arg(n, "la.sbp.boxing_bytes", "n (the number of pieces)", lo=1)
    kind = boxing_kind(src, dst)
    if src == dst:
        return 0.0
    return {"all_gather": (n - 1) * nbytes, "reduce_scatter": (n - 1) * nbytes,
            "all_reduce": 2 * (n - 1) * nbytes, "all_to_all": (n - 1) / n * nbytes,
            "local_slice": 0.0, "local_partial": 0.0}.get(kind, float("inf"))
