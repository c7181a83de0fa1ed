"""Shape ops: reshape, transpose, broadcasting (``broadcast_to``, PyTorch ``expand``),
``repeat``, ``concatenate``/``stack``, ``squeeze``/``expand_dims`` and indexing
(basic ``getitem``, ``slice_like``, boolean masks, ``take``, data-dependent ``nonzero``).

Gradient rules use static sizes only where they are known; a data-dependent dim (``None``)
is read from an array when the graph runs (``reshape_like``, ``slice_like``), never assumed.

View ops (``view=True``) may return an alias of their input, as NumPy does; the memory
planner keeps the input's buffer alive while the view lives.
"""
from __future__ import annotations

import numpy as np

from ..aval import check_alloc, check_shape
from ..dim import dim_max, dim_min
from ..errors import AxisError, DTypeError, ParamError, ParamValueError, ShapeError, fmt_shape
from . import sparse_kernels
from .index_shape import getitem_shape
from .params import AXIS, BOOL, FLOAT, INT, INTS, KEY, OPT_INTS, PAD_WIDTH, Param, choice
from .reduce import reduce_axes
from .registry import OpDef, broadcast_shapes, normalize_axis, register


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


# -- reshape -----------------------------------------------------------------------------
def _reshape_rule(shapes, shape):
    src = shapes[0]
    if sum(1 for d in shape if d == -1) > 1:
        raise ShapeError(f"reshape to {shape}: only one dim can be -1")
    if any(d < -1 for d in shape):
        raise ShapeError(f"reshape to {shape}: dims must be >= 0 or -1")
    if None in src:
        return tuple(None if d == -1 else d for d in shape)
    total = _prod(src)
    known = _prod(d for d in shape if d != -1)
    if -1 in shape:
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {fmt_shape(src)} ({total} elements) to {shape}; "
                             "the -1 dim must divide evenly")
        return tuple(total // known if d == -1 else d for d in shape)
    if known != total:
        raise ShapeError(f"cannot reshape {fmt_shape(src)} ({total} elements) to {fmt_shape(shape)} "
                         f"({known} elements); the sizes must match (use -1 for one inferred dim)")
    return tuple(shape)


def _reshape_back(F, g, x):
    return F.reshape(g, shape=x.aval.shape) if x.aval.known else F.reshape_like(g, x)


register(OpDef("reshape", ("x",), lambda xp, x, shape, out=None: xp.reshape(x, shape),
               params=(Param("shape", INTS),), shape=_reshape_rule, view=True,
               grad=lambda F, ins, y, g, shape: [_reshape_back(F, g, ins[0])],
               doc="x with a new shape of the same size (-1 = inferred)"))
register(OpDef("reshape_like", ("x", "like"), lambda xp, x, like, out=None: xp.reshape(x, like.shape),
               shape=lambda shapes: shapes[1], dtype=lambda dtypes: dtypes[0], view=True,
               grad=lambda F, ins, y, g: [_reshape_back(F, g, ins[0]), None],
               doc="x reshaped to like's shape (only like's shape is read)"))


# -- transpose ---------------------------------------------------------------------------
def _perm(axes, ndim, op="transpose"):
    if axes is None:
        return tuple(reversed(range(ndim)))
    if len(axes) != ndim:
        raise AxisError(f"{op}: axes {axes} must list each of the {ndim} axes once")
    norm = tuple(normalize_axis(a, ndim, op) for a in axes)
    if sorted(norm) != list(range(ndim)):
        raise AxisError(f"{op}: axes {axes} is not a permutation of 0..{ndim - 1}")
    return norm


def _transpose_grad(F, ins, y, g, axes=None):
    perm = _perm(axes, ins[0].aval.ndim)
    return [F.transpose(g, axes=tuple(int(i) for i in np.argsort(perm)))]


def _transpose_csr(xp, x, axes=None, out=None):
    return x if _perm(axes, 2) == (0, 1) else sparse_kernels.csr_transpose(xp, x)


def _transpose(xp, x, axes=None, out=None):
    # (a NumPy array's own method: np.transpose's wrapper costs as much as the view, 3 per dense backward)
    return x.transpose(axes) if x.__class__ is np.ndarray else xp.transpose(x, axes)


register(OpDef("transpose", ("x",), _transpose,
               params=(Param("axes", OPT_INTS, None),), view=True,
               storage=lambda stypes, shapes, axes=None: ["csr"] if stypes[0] == "csr" else None,
               sparse_kernel=_transpose_csr,
               shape=lambda shapes, axes=None: tuple(shapes[0][i] for i in _perm(axes, len(shapes[0]))),
               grad=_transpose_grad, doc="x with its axes permuted (reversed when axes is None)"))


# -- broadcasting ------------------------------------------------------------------------
def _broadcast_to_rule(shapes, shape):
    src = shapes[0]
    if len(shape) < len(src):
        raise ShapeError(f"cannot broadcast {fmt_shape(src)} to the smaller rank {fmt_shape(shape)}")
    out = broadcast_shapes(src, shape)
    if out != tuple(shape):
        raise ShapeError(f"cannot broadcast {fmt_shape(src)} to {fmt_shape(shape)}; each dim must be "
                         "equal or 1 in the source")
    return tuple(shape)


register(OpDef("broadcast_to", ("x",), lambda xp, x, shape, out=None: xp.broadcast_to(x, shape),
               params=(Param("shape", INTS),), shape=_broadcast_to_rule, view=True,
               grad=lambda F, ins, y, g, shape: [g], doc="x broadcast to shape (a read-only view)"))


def _broadcast_like(xp, x, like, out=None):
    return xp.broadcast_to(x, like.shape)


register(OpDef("broadcast_like", ("x", "like"), _broadcast_like, view=True,
               shape=lambda shapes: _broadcast_to_rule([shapes[0]], shapes[1]) if None not in shapes[1]
               else tuple(shapes[1]),
               dtype=lambda dtypes: dtypes[0],
               grad=lambda F, ins, y, g: [g, None],
               doc="x broadcast to like's shape (only like's shape is read)"))


def expand_shape(src, sizes, op="expand"):
    """PyTorch ``expand``: -1 keeps a dim; size-1 dims stretch; new dims go in front only.

    No sizes at all keep the shape (``x.expand()``, as NumPy's ``broadcast_to(x, x.shape)``)."""
    if not sizes:
        return tuple(src)
    if len(sizes) < len(src):
        raise ShapeError(f"{op}: got {len(sizes)} sizes {tuple(sizes)} for an array of {len(src)} dims "
                         f"{fmt_shape(src)}; give at least one size per dim")
    lead = len(sizes) - len(src)
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ShapeError(f"{op}: size {s} for new leading dim {i} of {tuple(sizes)}: new dims "
                                 "need an explicit size >= 0 (-1 only keeps an existing dim)")
            out.append(s)
            continue
        d = src[i - lead]
        if s == -1:
            out.append(d)
        elif s < -1:
            raise ShapeError(f"{op}: size {s} in {tuple(sizes)} is negative; use -1 to keep a dim")
        elif d is None or d == s:
            out.append(s)
        elif d == 1:
            out.append(s)
        else:
            raise ShapeError(f"{op}: cannot expand dim {i - lead} of size {d} to {s} (shape "
                             f"{fmt_shape(src)} to {tuple(sizes)}); only size-1 dims can grow, -1 keeps")
    return tuple(out)


register(OpDef("expand", ("x",), lambda xp, x, sizes=(), out=None: xp.broadcast_to(x, expand_shape(x.shape, sizes)),
               params=(Param("sizes", INTS, ()),), view=True,
               shape=lambda shapes, sizes=(): expand_shape(shapes[0], sizes),
               grad=lambda F, ins, y, g, sizes=(): [g],
               doc="PyTorch Tensor.expand: a zero-stride view; -1 keeps a dim, new dims in front; no sizes "
                   "keep the shape"))


def _full_sizes(ndim, sizes):
    """Fewer repeats than dims repeat the trailing dims (np.tile): pad with leading 1s."""
    return (1,) * (ndim - len(sizes)) + tuple(sizes) if len(sizes) < ndim else sizes


def _repeat_check(src, sizes, op="repeat"):
    if any(s < 0 for s in sizes):
        raise ShapeError(f"{op}: repeats {tuple(sizes)} must be >= 0")


def _repeat(xp, x, sizes, out=None):
    sizes = _full_sizes(x.ndim, sizes)
    _repeat_check(x.shape, sizes)
    # The rule has checked this already; checked again here because np.tile crashes the process
    # (signal 11) on sizes whose product overflows, whatever path reached the kernel.
    check_shape("repeat", _repeat_shape([x.shape], sizes), x.dtype)
    x = xp.reshape(x, (1,) * (len(sizes) - x.ndim) + x.shape)
    return xp.tile(x, sizes)


def _repeat_shape(shapes, sizes):
    src = shapes[0]
    sizes = _full_sizes(len(src), sizes)
    _repeat_check(src, sizes)
    full = (1,) * (len(sizes) - len(src)) + tuple(src)
    return tuple(None if d is None else d * s for d, s in zip(full, sizes))


def _repeat_grad(F, ins, y, g, sizes):
    x = ins[0]
    sizes = _full_sizes(x.aval.ndim, sizes)
    full = (1,) * (len(sizes) - x.aval.ndim) + tuple(x.aval.shape)
    if None in full:
        return [_repeat_grad_dynamic(F, x, g, sizes, full)]
    inter = []
    for s, d in zip(sizes, full):
        inter += [s, d]
    summed = F.sum(F.reshape(g, shape=tuple(inter)), axis=tuple(range(0, 2 * len(sizes), 2)))
    return [F.reshape(summed, shape=x.aval.shape)]


def _repeat_grad_dynamic(F, x, g, sizes, full):
    """repeat's gradient when some of x's dims are data-dependent: along each repeated dim,
    add up the ``s`` blocks of g, each as long as x's dim (static, or read at run time)."""
    if 0 in sizes:
        return F.zeros_like(x)
    lead = len(sizes) - x.aval.ndim
    xfull = x if lead == 0 else F.expand_dims(x, axis=tuple(range(lead)))  # x at g's rank
    for i, (s, d) in enumerate(zip(sizes, full)):
        if s == 1:
            continue
        blocks, rest = [], g
        for k in range(s):
            if d is not None:
                blocks.append(F.getitem(g, key=(slice(None),) * i + (slice(k * d, (k + 1) * d),)))
                continue
            blocks.append(rest if k == s - 1 else F.slice_like(rest, xfull, axis=i))
            if k < s - 1:
                rest = F.slice_like(rest, xfull, axis=i, drop=True)
        g = blocks[0]
        for b in blocks[1:]:
            g = F.add(g, b)
    return F.reshape_like(g, x)


register(OpDef("repeat", ("x",), _repeat, params=(Param("sizes", INTS),), shape=_repeat_shape,
               grad=_repeat_grad, doc="np.tile / PyTorch Tensor.repeat: x repeated sizes[i] times along dim i (more sizes than dims "
                   "add leading dims; fewer repeat the trailing dims)"))


# -- joining -----------------------------------------------------------------------------
def _concat_rule(shapes, axis=0):
    if not shapes:
        raise ShapeError("concatenate needs at least one array")
    nd = len(shapes[0])
    if nd == 0:
        raise ShapeError("cannot concatenate 0-d arrays; use stack")
    if any(len(s) != nd for s in shapes):
        raise ShapeError("all inputs need the same number of dims, got "
                         + ", ".join(fmt_shape(s) for s in shapes))
    ax = normalize_axis(axis, nd, "concatenate")
    out = list(shapes[0])
    for s in shapes[1:]:
        for i in range(nd):
            if i == ax:
                continue
            if out[i] is not None and s[i] is not None and out[i] != s[i]:
                raise ShapeError(f"dim {i} differs: " + ", ".join(fmt_shape(t) for t in shapes)
                                 + f"; all dims except axis {axis} must match")
            out[i] = out[i] if out[i] is not None else s[i]
    sizes = [s[ax] for s in shapes]
    out[ax] = None if None in sizes else sum(sizes)
    return tuple(out)


def _concat_grad(F, ins, y, g, axis=0):
    nd = ins[0].aval.ndim
    ax = axis % nd
    sizes = [e.aval.shape[ax] for e in ins]
    if None in sizes:
        return _concat_grad_dynamic(F, ins, g, ax, sizes)
    grads, start = [], 0
    for n in sizes:
        grads.append(F.getitem(g, key=(slice(None),) * ax + (slice(start, start + n),)))
        start += n
    return grads


def _concat_grad_dynamic(F, ins, g, ax, sizes):
    """concatenate's gradient when some inputs' lengths along axis are data-dependent: peel
    the inputs off the front of g in order, each as long as it is when the graph runs."""
    lead = (slice(None),) * ax
    grads, rest = [], g
    for i, (e, n) in enumerate(zip(ins, sizes)):
        if i == len(ins) - 1:
            grads.append(rest)
        elif n is not None:
            grads.append(F.getitem(rest, key=lead + (slice(0, n),)))
            rest = F.getitem(rest, key=lead + (slice(n, None),))
        else:
            grads.append(F.slice_like(rest, e, axis=ax))
            rest = F.slice_like(rest, e, axis=ax, drop=True)
    return grads


register(OpDef("concatenate", ("*seq",), lambda xp, *xs, axis=0, out=None: xp.concatenate(xs, axis=axis),
               params=(Param("axis", INT, 0),), shape=_concat_rule,
               dtype=lambda dtypes, axis=0: np.result_type(*dtypes), grad=_concat_grad,
               doc="join arrays along an existing axis"))


def _stack_rule(shapes, axis=0):
    if not shapes:
        raise ShapeError("stack needs at least one array")
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(a is not None and b is not None and a != b for a, b in zip(s, first)):
            raise ShapeError("all inputs must have the same shape, got " + ", ".join(fmt_shape(t) for t in shapes))
    ax = normalize_axis(axis, len(first) + 1, "stack")
    return tuple(first[:ax]) + (len(shapes),) + tuple(first[ax:])


def _stack_grad(F, ins, y, g, axis=0):
    ax = axis % (ins[0].aval.ndim + 1)
    return [F.getitem(g, key=(slice(None),) * ax + (i,)) for i in range(len(ins))]


register(OpDef("stack", ("*seq",), lambda xp, *xs, axis=0, out=None: xp.stack(xs, axis=axis),
               params=(Param("axis", INT, 0),), shape=_stack_rule,
               dtype=lambda dtypes, axis=0: np.result_type(*dtypes), grad=_stack_grad,
               doc="join same-shaped arrays along a new axis"))


# -- squeeze / expand_dims ----------------------------------------------------------------
def _squeeze_axes(shape, axis):
    if axis is None:
        if None in shape:
            raise ShapeError("squeeze(axis=None) on a shape with unknown dims; name the axes to drop")
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = reduce_axes(axis, len(shape), "squeeze")
    for a in axes:
        if shape[a] not in (1, None):
            raise ShapeError(f"cannot squeeze axis {a} of size {shape[a]} (shape {fmt_shape(shape)}); "
                             "only size-1 axes can be removed")
    return axes


def _squeeze(xp, x, axis=None, out=None):
    return xp.squeeze(x, axis=_squeeze_axes(x.shape, axis))


register(OpDef("squeeze", ("x",), _squeeze, params=(Param("axis", AXIS, None),), view=True,
               shape=lambda shapes, axis=None: tuple(d for i, d in enumerate(shapes[0])
                                                     if i not in _squeeze_axes(shapes[0], axis)),
               grad=lambda F, ins, y, g, axis=None: [_reshape_back(F, g, ins[0])],
               doc="x without size-1 axes (all of them, or those named)"))


def _expand_dims_rule(shapes, axis):
    src = shapes[0]
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = len(src) + len(axes)
    norm = sorted(normalize_axis(a, nd, "expand_dims") for a in axes)
    if len(set(norm)) != len(norm):
        raise AxisError(f"expand_dims: repeated axis in {axis}")
    out, it = [], iter(src)
    for i in range(nd):
        out.append(1 if i in norm else next(it))
    return tuple(out)


register(OpDef("expand_dims", ("x",), lambda xp, x, axis, out=None: xp.expand_dims(x, axis),
               params=(Param("axis", AXIS),), shape=_expand_dims_rule, view=True,
               grad=lambda F, ins, y, g, axis: [_reshape_back(F, g, ins[0])],
               doc="x with new size-1 axes inserted at axis (an int or a tuple)"))


# -- indexing ------------------------------------------------------------------------------
register(OpDef("getitem", ("x",), lambda xp, x, key, out=None: x[key],
               params=(Param("key", KEY),), shape=getitem_shape, view=True,
               # a step-1 range of rows of a csr (all columns) is a csr sharing the stored values
               storage=lambda stypes, shapes, key: ["csr"] if stypes[0] == "csr"
               and sparse_kernels.row_slice_of(key) is not None else None,
               sparse_kernel=sparse_kernels.csr_row_slice,
               grad=lambda F, ins, y, g, key: [F.index_grad(g, ins[0], key=key)],
               doc="basic indexing x[key]: ints, slices, None and ..."))


def _index_grad(xp, g, like, key, out=None):
    res = xp.zeros(like.shape, dtype=g.dtype)
    res[key] = g
    return res


register(OpDef("index_grad", ("g", "like"), _index_grad, params=(Param("key", KEY),),
               shape=lambda shapes, key: shapes[1], dtype=lambda dtypes, key: dtypes[0],
               grad=lambda F, ins, y, g, key: [F.getitem(g, key=key), None],
               doc="zeros shaped like `like` with g written at [key] (getitem's gradient)"))


def _slice_like(xp, x, like, axis=0, drop=False, out=None):
    ax = normalize_axis(axis, x.ndim, "slice_like")
    n = like.shape[ax]
    if n > x.shape[ax]:
        raise ShapeError(f"slice_like: like {fmt_shape(like.shape)} is longer than x {fmt_shape(x.shape)} "
                         f"along axis {axis}")
    return x[(slice(None),) * ax + (slice(n, None) if drop else slice(0, n),)]


def _slice_like_shape(shapes, axis=0, drop=False):
    x, like = shapes
    if len(like) != len(x):
        raise ShapeError(f"like {fmt_shape(like)} must have as many dims as x {fmt_shape(x)}")
    ax = normalize_axis(axis, len(x), "slice_like")
    n, total = like[ax], x[ax]
    if n is not None and total is not None and n > total:
        raise ShapeError(f"like {fmt_shape(like)} is longer than x {fmt_shape(x)} along axis {axis}")
    if drop:
        n = None if n is None or total is None else total - n
    return tuple(x[:ax]) + (n,) + tuple(x[ax + 1:])


def _slice_like_grad(F, ins, y, g, axis=0, drop=False):
    # g back in place, zeros for the part of x this slice left out.
    x, like = ins
    other = F.zeros_like(F.slice_like(x, like, axis=axis, drop=not drop))
    return [F.concatenate([other, g] if drop else [g, other], axis=axis), None]


register(OpDef("slice_like", ("x", "like"), _slice_like,
               params=(Param("axis", INT, 0), Param("drop", BOOL, False)),
               shape=_slice_like_shape, dtype=lambda dtypes, axis=0, drop=False: dtypes[0], view=True,
               grad=_slice_like_grad,
               doc="the first n entries of x along axis (drop=True: all but them), n = like's size "
                   "along axis read when it runs (concatenate's gradient over data-dependent sizes)"))


def _mask_rule(shapes):
    x, m = shapes
    # a mask dim of 0 selects nothing along any dim (NumPy and the Array API agree)
    if len(m) > len(x) or any(a is not None and b is not None and a != b and b != 0 for a, b in zip(x, m)):
        raise AxisError(f"boolean mask {fmt_shape(m)} does not match the leading dims of {fmt_shape(x)}")
    return (None,) + tuple(x[len(m):])


def _mask_dtype(dtypes):
    if dtypes[1] != np.bool_:
        raise DTypeError(f"mask must be bool, got {dtypes[1]}; compare first, e.g. x[x > 0]")
    return dtypes[0]


register(OpDef("boolean_mask", ("x", "mask"), lambda xp, x, mask, out=None: x[mask],
               shape=_mask_rule, dtype=_mask_dtype,
               grad=lambda F, ins, y, g: [F.boolean_mask_grad(g, ins[0], ins[1]), None],
               doc="x[mask]: the elements where mask is true (size known only after computing)"))


def _mask_grad(xp, g, like, mask, out=None):
    res = xp.zeros(like.shape, dtype=g.dtype)
    res[mask] = g
    return res


register(OpDef("boolean_mask_grad", ("g", "like", "mask"), _mask_grad,
               shape=lambda shapes: shapes[1], dtype=lambda dtypes: dtypes[0],
               doc="zeros shaped like `like` with g scattered where mask is true"))


def _take_rule(shapes, axis=0):
    x, idx = shapes
    ax = normalize_axis(axis, len(x), "take")
    return tuple(x[:ax]) + tuple(idx) + tuple(x[ax + 1:])


def _take_dtype(dtypes, axis=0):
    if dtypes[1].kind not in "iu":
        raise DTypeError(f"indices must be integers, got {dtypes[1]}; cast with .astype('int64')")
    return dtypes[0]


def _take(xp, x, indices, axis=0, out=None):
    n = x.shape[axis]
    if indices.size and (indices.max() >= n or indices.min() < -n):
        raise IndexError(f"take: index out of range for axis {axis} of size {n}")
    return xp.take(x, indices, axis=axis)


register(OpDef("take", ("x", "indices"), lambda xp, x, indices, axis=0, sparse_grad=False, out=None:
               _take(xp, x, indices, axis),
               params=(Param("axis", INT, 0), Param("sparse_grad", BOOL, False)),
               shape=lambda shapes, axis=0, sparse_grad=False: _sparse_rows_only(shapes, axis, sparse_grad)
               or _take_rule(shapes, axis),
               dtype=lambda dtypes, axis=0, sparse_grad=False: _take_dtype(dtypes, axis),
               grad=lambda F, ins, y, g, axis=0, sparse_grad=False:
               [F.take_grad(g, ins[0], ins[1], axis=axis, sparse=sparse_grad), None],
               doc="elements of x at integer indices along axis (x[idx] for axis 0); sparse_grad=True "
                   "(axis 0) gives x a row_sparse gradient holding only the rows taken (embeddings)"))


def _take_grad(xp, g, like, indices, axis=0, sparse=False, out=None):
    axis %= like.ndim
    res = xp.zeros(like.shape, dtype=g.dtype)
    moved = xp.moveaxis(res, axis, 0)
    gm = xp.moveaxis(g.reshape(like.shape[:axis] + (indices.size,) + like.shape[axis + 1:]), axis, 0)
    flat = indices.reshape(-1)
    n = like.shape[axis]
    if xp is np and g.dtype.kind == "f" and flat.size >= _ROWS_SUM_MIN and gm.ndim > 1 \
            and -n <= flat.min() and flat.max() < n:
        # an embedding's gradient: the rows summed per distinct index by one sparse product (several
        # times faster than add.at over whole rows), then written to those rows
        rs = sparse_kernels.rows_sum(np, gm, flat, moved.shape)
        moved[rs.indices] = rs.data
    else:  # (CuPy's add.at is a scatter_add; out-of-range indices raise here)
        xp.add.at(moved, flat, gm)
    return res


_ROWS_SUM_MIN = 64  # indices from which take_grad sums rows with a sparse product instead of add.at


def _take_grad_sparse(xp, g, like, indices, axis=0, sparse=False, out=None):
    return sparse_kernels.rows_sum(xp, g, indices, like.shape)


def _sparse_rows_only(shapes, axis, sparse):
    if sparse and normalize_axis(axis, len(shapes[0]), "take") != 0:
        raise ParamValueError(f"sparse_grad=True needs axis=0 (a row_sparse gradient stores whole rows), "
                              f"got axis={axis}")


register(OpDef("take_grad", ("g", "like", "indices"), _take_grad,
               params=(Param("axis", INT, 0), Param("sparse", BOOL, False)),
               shape=lambda shapes, axis=0, sparse=False: _sparse_rows_only(shapes[1:], axis, sparse) or shapes[1],
               dtype=lambda dtypes, axis=0, sparse=False: dtypes[0],
               storage=lambda stypes, shapes, axis=0, sparse=False: ["row_sparse"] if sparse else None,
               sparse_from_dense=True,
               sparse_kernel=_take_grad_sparse,
               doc="zeros shaped like `like` with g added at the taken indices (take's gradient); "
                   "sparse=True: a row_sparse result holding only those rows"))


def _nonzero(xp, x, out=None):
    return xp.argwhere(x).astype(np.int64)


register(OpDef("nonzero", ("x",), _nonzero,
               shape=lambda shapes: (None, len(shapes[0])), dtype=lambda dtypes: np.dtype("int64"),
               doc="indices of the non-zero elements, one row per element: shape (N, ndim), N data-dependent"))


# -- triangles -------------------------------------------------------------------------------
def _tri_rule(op):
    def rule(shapes, k=0):
        src = shapes[0]
        if not src:
            raise ShapeError(f"{op} needs an array of at least 1 dim, got a 0-d array; a 1-D array "
                             "becomes a square matrix (as numpy.{op})")
        return (src[0], src[0]) if len(src) == 1 else tuple(src)

    return rule


def _tri_grad(op):
    def grad(F, ins, y, g, k=0):
        part = getattr(F, op)(g, k=k)
        # 1-D x is broadcast to the rows of a square matrix: sum the rows back
        return [F.sum(part, axis=0) if ins[0].aval.ndim == 1 else part]

    return grad


for _name, _where in (("tril", "on and below"), ("triu", "on and above")):
    register(OpDef(_name, ("x",), (lambda f: lambda xp, x, k=0, out=None: getattr(xp, f)(x, k))(_name),
                   params=(Param("k", INT, 0),), shape=_tri_rule(_name), grad=_tri_grad(_name),
                   doc=f"numpy.{_name}: x with the elements {_where} the k-th diagonal of its last two dims "
                       "kept, the rest zero (1-D x: a square matrix of copies of x)"))


# -- pad ---------------------------------------------------------------------------------------
def pad_pairs(pad_width, ndim: int, op: str = "pad") -> tuple:
    """``pad_width`` (rows of ints, see ``params.PAD_WIDTH``) as one ``(before, after)`` pair per
    axis, broadcast to ``(ndim, 2)`` as ``numpy.pad`` does; ``ShapeError`` when it does not fit."""
    rows, cols = len(pad_width), len(pad_width[0])
    if rows not in (1, ndim) or cols not in (1, 2):
        given = pad_width[0] if rows == 1 else pad_width
        raise ShapeError(f"{op}: pad_width {given} does not fit an array of {ndim} dims; pass an int, a "
                         f"(before, after) pair, or {ndim} such pairs (one per axis)")
    return tuple((r[0], r[-1]) for r in (pad_width * ndim if rows == 1 else pad_width))


def _check_pad_width(pad_width, op):
    if any(v < 0 for r in pad_width for v in r):
        raise ParamValueError(f"{op}: pad_width must be >= 0, got {pad_width}")


def _pad_rule(shapes, pad_width, mode="constant", constant_values=0.0):
    src = shapes[0]
    out = []
    for i, (d, (b, a)) in enumerate(zip(src, pad_pairs(pad_width, len(src)))):
        if d == 0 and (b or a) and mode != "constant":
            raise ShapeError(f"cannot pad axis {i} of size 0 in mode {mode!r} (there is nothing to repeat); "
                             "use mode='constant'")
        out.append(None if d is None else d + b + a)
    return tuple(out)


def _pad(xp, x, pad_width, mode="constant", constant_values=0.0, out=None):
    pairs = pad_pairs(pad_width, x.ndim) or 0  # (a 0-d x: nothing to pad, numpy.pad returns a copy)
    if mode == "constant":
        return xp.pad(x, pairs, mode="constant", constant_values=constant_values)
    return xp.pad(x, pairs, mode=mode)


def _pad_grad_rule(shapes, pad_width, mode="constant"):
    src = shapes[0]
    out = []
    for i, (d, (b, a)) in enumerate(zip(src, pad_pairs(pad_width, len(src), "pad_grad"))):
        n = None if d is None else d - b - a
        if n is not None and (n < 0 or (n == 0 and (b or a) and mode != "constant")):
            raise ShapeError(f"axis {i} of size {d} is shorter than its padding ({b}, {a}) in mode {mode!r}")
        out.append(n)
    return tuple(out)


def _pad_grad(xp, g, pad_width, mode="constant", out=None):
    """The adjoint of ``pad``: the interior of g, plus (edge / reflect) every padded element added
    to the element it copies. Axis by axis: pad is separable."""
    res, own = g, False
    for ax, (b, a) in enumerate(pad_pairs(pad_width, g.ndim, "pad_grad")):
        if not (b or a):
            continue
        n = res.shape[ax] - b - a
        inner = res[(slice(None),) * ax + (slice(b, b + n),)]
        if mode == "constant":
            res, own = inner, False
            continue
        # the source index of every padded position: numpy.pad applied to the indices themselves
        src = np.pad(np.arange(n), (b, a), mode=mode)
        where = np.concatenate([np.arange(b), np.arange(b + n, b + n + a)])
        acc = xp.moveaxis(inner.copy(), ax, 0)
        xp.add.at(acc, xp.asarray(src[where]), xp.moveaxis(res, ax, 0)[xp.asarray(where)])
        res, own = xp.moveaxis(acc, 0, ax), True
    # a buffer of its own: pad_grad is no view op, so its result must not alias g
    return xp.ascontiguousarray(res) if own else res.copy()


def _pad_grad_of_pad(F, ins, y, g, pad_width, mode="constant", constant_values=0.0):
    if mode == "constant":  # the interior: a view of g
        pairs = pad_pairs(pad_width, ins[0].aval.ndim)
        return [F.getitem(g, key=tuple(slice(b, -a if a else None) for b, a in pairs))]
    return [F.pad_grad(g, pad_width=pad_width, mode=mode)]


_PAD_MODES = choice("constant", "edge", "reflect")
register(OpDef("pad", ("x",), _pad,
               params=(Param("pad_width", PAD_WIDTH, check=_check_pad_width), Param("mode", _PAD_MODES, "constant"),
                       Param("constant_values", FLOAT, 0.0)),
               shape=_pad_rule, grad=_pad_grad_of_pad,
               doc="numpy.pad: x padded by pad_width (an int, (before, after), or one pair per axis) with "
                   "constant_values (mode='constant'), its edge values ('edge') or its mirror image without "
                   "the edge ('reflect')"))
register(OpDef("pad_grad", ("g",), _pad_grad,
               params=(Param("pad_width", PAD_WIDTH, check=_check_pad_width), Param("mode", _PAD_MODES, "constant")),
               shape=_pad_grad_rule,
               grad=lambda F, ins, y, g, pad_width, mode="constant": [F.pad(g, pad_width=pad_width, mode=mode)],
               doc="pad's gradient: the interior of g plus, for edge / reflect, each padded element added to "
                   "the element it copies"))


# -- split -------------------------------------------------------------------------------------
def section_bounds(n: int, sections: int, index: int) -> tuple[int, int]:
    """``[start, stop)`` of part ``index`` of ``n`` items in ``sections`` parts (numpy.array_split:
    the first ``n % sections`` parts are one longer)."""
    each, extra = divmod(n, sections)
    if isinstance(n, int):
        start = index * each + min(index, extra)
        return start, start + each + (1 if index < extra else 0)
    # a symbolic n: the same counts as size expressions (part index is one longer while index < extra)
    start = index * each + dim_min(index, extra)
    return start, start + each + dim_min(dim_max(extra - index, 0), 1)


def _uneven(n, sections, axis):
    return ShapeError(f"split: axis {axis} of size {n} does not split into {sections} equal sections; "
                      "use array_split for unequal sections, or pass split indices")


def _check_section(sections, index, op):
    if sections < 1:
        raise ParamValueError(f"{op}: the number of sections must be >= 1, got {sections}")
    if not 0 <= index < sections:
        raise ParamValueError(f"{op}: index {index} is not a section of {sections} (0..{sections - 1})")


def _section_rule(shapes, sections, index, axis=0, even=False):
    src = shapes[0]
    _check_section(sections, index, "split_section")
    ax = normalize_axis(axis, len(src), "split_section")
    n = src[ax]
    if n is None:
        return tuple(src)
    if even and n % sections:
        raise _uneven(n, sections, axis)
    start, stop = section_bounds(n, sections, index)
    return tuple(src[:ax]) + (stop - start,) + tuple(src[ax + 1:])


def _section_key(shape, sections, index, axis, even):
    ax = normalize_axis(axis, len(shape), "split_section")
    if even and shape[ax] % sections:
        raise _uneven(shape[ax], sections, axis)
    return (slice(None),) * ax + (slice(*section_bounds(shape[ax], sections, index)),)


def _split_section(xp, x, sections, index, axis=0, even=False, out=None):
    return x[_section_key(x.shape, sections, index, axis, even)]


def _split_section_grad(xp, g, like, sections, index, axis=0, even=False, out=None):
    res = xp.zeros(like.shape, dtype=g.dtype)
    res[_section_key(like.shape, sections, index, axis, even)] = g
    return res


_SECTION_PARAMS = (Param("sections", INT), Param("index", INT), Param("axis", INT, 0), Param("even", BOOL, False))
register(OpDef("split_section", ("x",), _split_section, params=_SECTION_PARAMS, shape=_section_rule, view=True,
               grad=lambda F, ins, y, g, **p: [F.split_section_grad(g, ins[0], **p)],
               doc="part `index` of x split into `sections` parts along axis (numpy.array_split's sizes: the "
                   "first n % sections parts are one longer; even=True: the sizes must be equal); the bounds "
                   "follow x's size when the graph runs"))
register(OpDef("split_section_grad", ("g", "like"), _split_section_grad, params=_SECTION_PARAMS,
               shape=lambda shapes, sections, index, axis=0, even=False: tuple(shapes[1]),
               dtype=lambda dtypes, **p: dtypes[0],
               grad=lambda F, ins, y, g, **p: [F.split_section(g, **p), None],
               doc="zeros shaped like `like` with g written at split_section's part (its gradient)"))


def _split_compose(op, even):
    def compose(F, x, indices_or_sections, axis=0):
        shape = x.aval.shape if hasattr(x, "aval") else np.shape(x)
        ax = axis if shape is None else normalize_axis(axis, len(shape), op)  # (None: a la.sym.var's rank)
        if indices_or_sections is None:
            raise ParamError(f"{op}: indices_or_sections must be a number of sections or a list of split "
                             "indices, got None")
        if isinstance(indices_or_sections, int):
            sections = indices_or_sections
            if sections < 1:
                raise ParamValueError(f"{op}: the number of sections must be >= 1, got {sections}")
            # one output array (one node) per part: a count no memory can hold is refused up front
            check_alloc(op, (sections,), np.dtype(object), "list of parts")
            n = None if shape is None else shape[ax]
            if even and n is not None and n % sections:
                raise _uneven(n, sections, axis)
            # one node per part, its bounds derived from x's size when it runs: a trace stays right
            # for other sizes (no size is baked into the graph)
            return tuple(F.split_section(x, sections=sections, index=i, axis=ax, even=even)
                         for i in range(sections))
        # split indices: numpy's parts x[0:i0], x[i0:i1], ..., x[ik:] (Python slice semantics)
        points = (None,) + tuple(indices_or_sections) + (None,)
        lead, tail = ((slice(None),) * ax, ()) if ax >= 0 else ((Ellipsis,), (slice(None),) * (-ax - 1))
        return tuple(F.getitem(x, key=lead + (slice(points[i], points[i + 1]),) + tail)
                     for i in range(len(points) - 1))

    return compose


_SPLIT_PARAMS = (Param("indices_or_sections", AXIS), Param("axis", INT, 0))
register(OpDef("split", ("x",), None, params=_SPLIT_PARAMS, compose=_split_compose("split", True),
               doc="numpy.split: a tuple of parts of x along axis: indices_or_sections equal parts (an int; "
                   "ShapeError unless they divide the size), or the parts between split indices (a list)"))
register(OpDef("array_split", ("x",), None, params=_SPLIT_PARAMS, compose=_split_compose("array_split", False),
               doc="numpy.array_split: like split, but an int number of sections need not divide the size "
                   "(the first size % n parts are one longer)"))
