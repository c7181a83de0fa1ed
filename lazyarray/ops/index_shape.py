"""The result shape of basic indexing ``x[key]`` (ints, slices, None, ...), for every kind of dim:
concrete shapes through NumPy's own rule (indexing a zero-stride dummy: exact, no allocation), and
shapes with data-dependent (``None``) or symbolic (``la.Dim``) dims by slice arithmetic. A slice of a
symbolic dim is an expression (``b[1:]`` is ``b - 1``, ``b[:10]`` is ``min(10, b)``); a slice of a
data-dependent dim that is not the whole dim is data-dependent too (``x[x > 0][:10]`` has between 0
and 10 rows), never a guess.
"""
from __future__ import annotations

import numpy as np

from ..dim import dim_max, dim_min, floordiv, has_symbols
from ..errors import AxisError, ShapeError, fmt_shape


def getitem_shape(shapes, key):
    src = shapes[0]
    if None in src or has_symbols(src) or has_symbols(key):
        return _getitem_unknown(src, key)
    # Index a zero-stride dummy of the same shape: NumPy computes the result shape (and raises
    # IndexError for out-of-range ints) without allocating.
    try:
        return np.broadcast_to(np.empty((), dtype=np.bool_), src)[key].shape
    except IndexError as exc:
        raise AxisError(f"index {key_text(key)} does not fit shape {fmt_shape(src)}: {exc}") from None
    except ValueError as exc:  # sizes too large for NumPy's size arithmetic
        raise ShapeError(f"cannot index shape {fmt_shape(src)} with {key_text(key)}: {exc}") from None


def _getitem_unknown(src, key):
    """Basic indexing of a shape with data-dependent (``None``) or symbolic dims: a slice of a
    symbolic dim is an expression (``b[1:]`` is ``b - 1``, ``b[:10]`` is ``min(b, 10)``); a slice
    of a data-dependent dim that is not the whole dim is data-dependent too (``x[x > 0][:10]`` has
    between 0 and 10 rows), never a guess."""
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(src) or sum(1 for k in key if k is Ellipsis) > 1:
        raise AxisError(f"index {key_text(key)} does not fit shape {fmt_shape(src)}: too many indices")
    full = []
    for k in key:
        if k is Ellipsis:
            full += [slice(None)] * (len(src) - used)
        else:
            full.append(k)
    full += [slice(None)] * (len(src) - sum(1 for k in full if k is not None))
    out, it = [], iter(src)
    for k in full:
        if k is None:
            out.append(1)
            continue
        d = next(it)
        if isinstance(k, slice):
            out.append(slice_length(d, k))
        elif isinstance(d, int) and not -d <= k < d:
            raise AxisError(f"index {key_text(key)} does not fit shape {fmt_shape(src)}: index {k} is out of "
                            f"bounds for a dim of size {d}")
    return tuple(out)


def slice_length(d, sl: slice):
    """The length of ``range(d)[sl]`` for an int, symbolic or data-dependent (``None``) size ``d``."""
    start, stop, step = sl.start, sl.stop, 1 if sl.step is None else sl.step
    if isinstance(d, int) and all(p is None or isinstance(p, int) for p in (start, stop)):
        return len(range(*sl.indices(d)))
    if d is None:  # data-dependent: only the whole dim keeps its (unknown) size; nothing is probed
        return None
    if not isinstance(step, int) or step < 1:
        return None

    def bound(p, default):
        if p is None:
            return default
        if isinstance(p, int) and p < 0:
            return dim_max(d + p, 0)
        return dim_min(p, d)

    try:
        n = dim_max(bound(stop, d) - bound(start, 0), 0)
        return n if step == 1 else floordiv(n + step - 1, step)
    except ShapeError:
        return None


def key_text(key):
    """``(slice(1, None), None, 2)`` -> ``"[1:, None, 2]"``: an index as the user would write it."""
    def one(k):
        if isinstance(k, slice):
            text = ("" if k.start is None else str(k.start)) + ":" + ("" if k.stop is None else str(k.stop))
            return text + (f":{k.step}" if k.step is not None else "")
        return "..." if k is Ellipsis else ("None" if k is None else str(k))

    return "[" + ", ".join(one(k) for k in key) + "]"
