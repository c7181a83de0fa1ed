"""MXNet's ``Reshape`` special codes as an op: ``reshape_codes(x, codes, reverse)`` resolves the codes
against the shape ``x`` has when the graph runs (0 copies a dim, -1 infers one, -2 copies the rest,
-3 merges two dims, -4 splits one into the next two codes; ``reverse`` matches from the right), so
an MXNet 1.x model with such codes loads without input shapes and serves every batch size, as MXNet
binds shapes at the first call. ``resolve_reshape`` is the one resolution, used by the shape rule,
the kernel and the MXNet importer alike; it works on ints, unknown (``None``) and symbolic dims.
"""
from __future__ import annotations

import math

from ..errors import ShapeError, fmt_shape
from .params import BOOL, INTS, Param
from .registry import OpDef, register


def _prod(dims):
    return math.prod(dims, start=1) if all(isinstance(d, int) for d in dims) else _sym_prod(dims)


def _sym_prod(dims):
    out = 1
    for d in dims:
        out = out * d
    return out


def resolve_reshape(shape: tuple, codes: tuple, reverse: bool = False) -> tuple:
    """MXNet's ``Reshape`` codes applied to ``shape`` (``None`` = unknown dim, propagated).

    0 copies a dim, -1 infers one, -2 copies the rest, -3 merges two dims, -4 splits one into the
    next two codes (one may be -1); ``reverse`` matches codes from the right.

    >>> resolve_reshape((2, 3, 4), (-4, 1, 2, -2)), resolve_reshape((2, 3, 4), (0, -3))
    ((1, 2, 3, 4), (2, 12))
    """
    if reverse:
        rev = resolve_reshape(tuple(reversed(shape)), tuple(reversed(_reverse_split(codes))))
        return tuple(reversed(rev))
    r = _Resolution(shape, codes)
    while r.j < len(codes):
        c = codes[r.j]
        if c > 0:
            r.out.append(c)
            r.i += 1
        elif c in _CODES:
            _CODES[c](r)
        else:
            raise ValueError(f"unknown code {c}")
        r.j += 1
    out = r.out
    if r.infer_at is not None:
        out[r.infer_at] = _inferred(shape, out, r.infer_at, r.copied_unknown)
    if None not in shape and None not in out and _prod(shape) != _prod(out):
        raise ValueError(f"{_prod(shape)} elements cannot become {tuple(out)}")
    return tuple(out)


class _Resolution:
    """Where ``resolve_reshape`` is: input dim ``i``, code ``j``, the output dims so far."""

    __slots__ = ("shape", "codes", "out", "i", "j", "infer_at", "copied_unknown")

    def __init__(self, shape: tuple, codes: tuple):
        self.shape, self.codes = shape, codes
        self.out: list = []
        self.i = self.j = 0
        self.infer_at = None  # the output position of -1
        self.copied_unknown = 0  # unknown input dims copied unchanged by 0 / -2


def _copy_dim(r: _Resolution) -> None:  # 0
    if r.i >= len(r.shape):
        raise ValueError("code 0 past the input's last dim")
    r.out.append(r.shape[r.i])
    r.copied_unknown += r.shape[r.i] is None
    r.i += 1


def _infer_dim(r: _Resolution) -> None:  # -1
    if r.infer_at is not None:
        raise ValueError("more than one -1")
    r.infer_at = len(r.out)
    r.out.append(-1)
    r.i += 1


def _copy_rest(r: _Resolution) -> None:  # -2
    rest = r.shape[r.i:]
    r.out.extend(rest)
    r.copied_unknown += sum(d is None for d in rest)
    r.i = len(r.shape)


def _merge_two(r: _Resolution) -> None:  # -3
    if r.i + 1 >= len(r.shape):
        raise ValueError("code -3 needs two input dims")
    a, b = r.shape[r.i], r.shape[r.i + 1]
    r.out.append(None if None in (a, b) else a * b)
    r.i += 2


def _split_one(r: _Resolution) -> None:  # -4, then the two codes it splits into (one may be -1)
    j, codes = r.j, r.codes
    if r.i >= len(r.shape) or j + 2 >= len(codes):
        raise ValueError("code -4 needs an input dim and two codes after it")
    d, p, q = r.shape[r.i], codes[j + 1], codes[j + 2]
    if p == -1 and q > 0:
        p = None if d is None else d // q
    elif q == -1 and p > 0:
        q = None if d is None else d // p
    if p is None or q is None or p < 1 or q < 1:
        if d is not None:
            raise ValueError(f"cannot split dim {d} into ({codes[j + 1]}, {codes[j + 2]})")
    elif d is not None and p * q != d:
        raise ValueError(f"cannot split dim {d} into ({p}, {q})")
    r.out.extend([p, q])
    r.i += 1
    r.j += 2


_CODES = {0: _copy_dim, -1: _infer_dim, -2: _copy_rest, -3: _merge_two, -4: _split_one}


def _inferred(shape: tuple, out: list, infer_at: int, copied_unknown: int):
    """The dim -1 stands for in ``out`` (None when unknown)."""
    known = [d for k, d in enumerate(out) if k != infer_at]
    total = None if None in shape else _prod(shape)
    unknown_in = sum(d is None for d in shape)
    if total is None and unknown_in and sum(d is None for d in known) == unknown_in == copied_unknown:
        # the unknown dims (a batch size) are copied as they are: -1 covers the known rest
        rest = _prod([d for d in known if d is not None])
        have = _prod([d for d in shape if d is not None])
        if rest == 0 or have % rest:
            raise ValueError(f"{have} elements per unknown dim do not fill {tuple(out)}")
        return have // rest
    if total is None or None in known:
        return None
    rest = _prod(known)
    if rest == 0 or total % rest:
        raise ValueError(f"{total} elements do not fill {tuple(out)}")
    return total // rest


def _reverse_split(codes: tuple) -> tuple:
    """Codes with each -4 group reordered so reversing the list keeps ``-4, a, b`` groups intact."""
    out, j = [], 0
    while j < len(codes):
        if codes[j] == -4 and j + 2 < len(codes):
            out.extend([codes[j + 2], codes[j + 1], -4])
            j += 3
        else:
            out.append(codes[j])
            j += 1
    return tuple(out)


def _rule(shapes, codes, reverse=False):
    try:
        return resolve_reshape(tuple(shapes[0]), tuple(codes), reverse)
    except ValueError as exc:
        raise ShapeError(f"cannot reshape {fmt_shape(shapes[0])} with MXNet codes {tuple(codes)}: {exc}") from None


def _kernel(xp, x, codes, reverse=False, out=None):
    return xp.reshape(x, resolve_reshape(tuple(x.shape), tuple(codes), reverse))


register(OpDef("reshape_codes", ("x",), _kernel, params=(Param("codes", INTS), Param("reverse", BOOL, False)),
               shape=_rule, view=True,
               grad=lambda F, ins, y, g, codes, reverse=False: [F.reshape_like(g, ins[0])],
               doc="MXNet's Reshape: x reshaped by special codes (0 copy, -1 infer, -2 rest, -3 merge, -4 split) "
                   "resolved against x's shape when the graph runs"))
