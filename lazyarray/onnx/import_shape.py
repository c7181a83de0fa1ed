"""ONNX shape operators -> registry ops: Reshape, Transpose, (Un)Squeeze, Flatten, Concat, Split,
Slice, Gather(Elements), Expand, Tile, Pad, Shape, Size, ConstantOfShape, Range, Trilu,
DepthToSpace and SpaceToDepth. Sizes they read may be ``la.Dim`` expressions (a dynamic batch of the
file, ``OnnxNode.ints``): they become size parameters of the ops, bound per call by the executor.
Values folded while loading stay within ``import_ops.MAX_FOLD_BYTES``; larger ones (a huge
``ConstantOfShape``, ``Range``) are left as ``fill`` / ``iota`` nodes computed when the graph runs.
"""
from __future__ import annotations

import math

import numpy as np

from .. import sym as S
from ..device import current_device
from ..dim import dim_max, is_symbolic
from .import_ops import (
    Converter,
    OnnxNode,
    axis_key,
    check_size,
    constant,
    dtype_of,
    foldable,
)


def reshape(n: OnnxNode) -> list:
    n.arity(2)
    x = n.inputs[0]
    target = n.ints(1, "shape")
    allowzero = bool(n.attr("allowzero", 0))
    if allowzero and 0 in target and -1 in target:
        n.fail(f"shape={target}: allowzero=1 forbids 0 and -1 together")
    if target.count(-1) > 1:
        n.fail(f"shape={target} has more than one -1")
    out: list = []
    for k, d in enumerate(target):
        if d == 0 and not allowzero:  # 0 copies the input's dim
            shape = n.shape(0)
            if shape is None or k >= len(shape):
                n.fail(f"shape={target}: 0 at position {k} copies an input dim, but the input's shape is {shape}")
            out.append(shape[k])
        elif d < -1:
            n.fail(f"shape={target}: negative size {d}")
        else:
            out.append(d)
    if None in out:
        if -1 in out or out.count(None) > 1:
            n.fail(f"shape={target} of an input shaped {n.shape(0)} leaves more than one dim unknown; give the "
                   "model's input shapes")
        out = [-1 if d is None else d for d in out]
    return [S.reshape(x, shape=tuple(out))]


def transpose(n: OnnxNode) -> list:
    n.arity(1)
    perm = n.attr("perm")
    return [S.transpose(n.inputs[0], axes=tuple(perm) if perm else None)]


def _axes_in(n: OnnxNode, since: int = 13) -> list[int] | None:
    if n.opset >= since:
        return n.ints(1, "axes")
    return n.attr("axes")


def squeeze(n: OnnxNode) -> list:
    n.arity(1, 2)
    axes = _axes_in(n)
    return [S.squeeze(n.inputs[0], axis=None if not axes else tuple(axes))]


def unsqueeze(n: OnnxNode) -> list:
    n.arity(1, 2)
    axes = _axes_in(n)
    if not axes:
        n.fail("needs axes")
    if len(set(axes)) != len(axes):
        n.fail(f"axes={axes} repeats an axis")
    return [S.expand_dims(n.inputs[0], axis=tuple(axes))]


def flatten(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    axis = int(n.attr("axis", 1))
    shape = n.shape(0)
    if shape is None:
        n.fail("needs the rank of its input; give the model's input shapes")
    if axis < 0:
        axis += len(shape)
    lead, rest = shape[:axis], shape[axis:]
    if None not in lead:
        return [S.reshape(x, shape=(math.prod(lead), -1))]
    if None not in rest:
        return [S.reshape(x, shape=(-1, math.prod(rest)))]
    return n.fail(f"axis={axis} of an input shaped {shape} leaves both sides unknown")


def concat(n: OnnxNode) -> list:
    if not n.inputs or any(x is None for x in n.inputs):
        n.fail("takes one or more inputs")
    return [S.concatenate(list(n.inputs), axis=int(n.attr("axis")))]


def split(n: OnnxNode) -> list:
    n.arity(1, 2)
    x = n.inputs[0]
    axis = int(n.attr("axis", 0))
    shape = n.shape(0)
    if shape is not None and not -len(shape) <= axis < len(shape):
        n.fail(f"axis={axis} is out of range for an input of rank {len(shape)} (shape {list(shape)}); "
               f"expected an axis in [{-len(shape)}, {len(shape)})")
    sizes = n.ints(1, "split") if n.opset >= 13 else n.attr("split")
    count = n.n_outputs
    if not sizes:
        dim = n.known_shape(0, "Split without sizes")[axis]
        parts = int(n.attr("num_outputs", count))
        if parts != count or parts < 1:
            n.fail(f"num_outputs={parts} but the node declares {count} outputs (at least 1)")
        step = -(-dim // parts)  # opset 18: the last chunk may be smaller
        sizes = [min(step, dim - k * step) for k in range(parts)]
    if len(sizes) != count:
        n.fail(f"split={sizes} gives {len(sizes)} parts for {count} outputs")
    outs, start = [], 0
    for s in sizes:
        outs.append(S.getitem(x, key=axis_key(axis, slice(start, start + s), None)))
        start += s
    return outs


def slice_op(n: OnnxNode) -> list:
    n.arity(3, 5)
    x = n.inputs[0]
    starts, ends = n.ints(1, "starts"), n.ints(2, "ends")
    axes = n.ints(3, "axes") or list(range(len(starts)))
    steps = n.ints(4, "steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        n.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    if 0 in steps:
        n.fail("a step of 0")
    rank = n.rank(0, "Slice")
    axes = [a % rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes) or any(a >= rank for a in axes):
        n.fail(f"axes {axes} repeat an axis or exceed the rank {rank}")
    key = [slice(None)] * rank
    for a, b, e, s in zip(axes, starts, ends, steps):  # Python slices clamp the same way ONNX does
        key[a] = slice(b, e, s)
    return [S.getitem(x, key=tuple(key))]


def _const_index(s) -> int | None:
    """The value of a 0-d integer constant, else None."""
    node = s.outputs[0].node
    v = node.value if node.op is None and node.kind == "const" else None
    if v is None or getattr(v, "shape", None) != () or v.dtype.kind not in "iu":
        return None
    return int(v)


def gather(n: OnnxNode) -> list:
    n.arity(2)
    x, idx = n.inputs
    axis = int(n.attr("axis", 0))
    i, shape = _const_index(idx), n.shape(0)
    if i is not None and shape is not None and -len(shape) <= axis < len(shape):
        d = shape[axis]
        if isinstance(d, (int, np.integer)) and -d <= i < d:
            # one constant index (a transformer's class token, a packed q/k/v's part): a basic index, a
            # view of x instead of a gather (an index out of range keeps the gather, which raises)
            return [S.getitem(x, key=axis_key(axis, i % d, len(shape)))]
    return [S.take(x, S.cast(idx, dtype="int64") if dtype_of(idx) != np.int64 else idx, axis=axis)]


def gather_elements(n: OnnxNode) -> list:
    n.arity(2)
    x, idx = n.inputs
    axis = int(n.attr("axis", 0))
    dim = n.known_shape(0, "GatherElements")[axis]
    idx = S.cast(idx, dtype="int64")
    idx = S.where(S.less(idx, 0), S.add(idx, dim), idx)
    return [S.take_along_axis(x, idx, axis=axis)]


def expand(n: OnnxNode) -> list:
    n.arity(2)
    x = n.inputs[0]
    target = tuple(n.ints(1, "shape"))
    shape = n.shape(0)
    if shape is None:
        n.fail("needs the rank of its input; give the model's input shapes")
    rank = max(len(shape), len(target))
    a = (1,) * (rank - len(shape)) + tuple(shape)
    b = (1,) * (rank - len(target)) + target
    out = []
    for k, (p, q) in enumerate(zip(a, b)):  # bidirectional: each side may stretch a 1
        if p is None:
            if q != 1:
                out.append(q)
            else:
                n.fail(f"dim {k} of the input is unknown and shape={target} keeps it; give the input shapes")
        elif p == q or q == 1:
            out.append(p)
        elif p == 1:
            out.append(q)
        elif is_symbolic(p) or is_symbolic(q):  # equal or one of them 1 at run time: the larger
            out.append(dim_max(p, q))
        else:
            n.fail(f"input shape {tuple(shape)} cannot broadcast with shape={target}")
    return [S.broadcast_to(x, shape=tuple(out))]


def tile(n: OnnxNode) -> list:
    n.arity(2)
    reps = n.ints(1, "repeats")
    if n.rank(0, "Tile") != len(reps):
        n.fail(f"repeats={reps} must have one entry per input dim ({n.rank(0, 'Tile')})")
    return [S.repeat(n.inputs[0], sizes=tuple(reps))]


def pad(n: OnnxNode) -> list:
    n.arity(2, 4)
    x = n.inputs[0]
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        n.fail(f"mode={mode!r}: expected constant, reflect, edge or wrap")
    pads = n.ints(1, "pads")
    value = n.const(2, "constant_value")
    rank = n.rank(0, "Pad")
    axes = n.ints(3, "axes")
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    if len(pads) != 2 * len(axes):
        n.fail(f"pads={pads} needs two entries per padded axis ({len(axes)})")
    begin, end = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        begin[a], end[a] = pads[k], pads[k + len(axes)]
    if any(p < 0 for p in begin + end):  # negative pads crop
        x = S.getitem(x, key=tuple(slice(-min(b, 0), min(e, 0) or None) for b, e in zip(begin, end)))
        begin, end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
    widths = tuple(zip(begin, end))
    if mode == "wrap":  # the registry's pad has no wrap: concatenate the far ends
        shape = n.known_shape(0, "Pad mode='wrap'")
        for a, (b, e) in enumerate(widths):
            if b > shape[a] or e > shape[a]:
                n.fail(f"mode='wrap' pads axis {a} of size {shape[a]} by ({b}, {e}), more than the axis holds")
            parts = ([S.getitem(x, key=axis_key(a, slice(shape[a] - b, None), None))] if b else []) + [x] + (
                [S.getitem(x, key=axis_key(a, slice(0, e), None))] if e else [])
            x = S.concatenate(parts, axis=a) if len(parts) > 1 else x
        return [x]
    if mode != "constant":
        return [S.pad(x, pad_width=widths, mode=mode)]
    fill = 0.0 if value is None or np.asarray(value).size == 0 else np.asarray(value).reshape(-1)[0].item()
    return [S.pad(x, pad_width=widths, constant_values=fill)]


def shape_op(n: OnnxNode) -> list:
    n.arity(1)
    shape = n.known_shape(0, "Shape")
    start, end = int(n.attr("start", 0)), n.attr("end")
    return [constant(np.array(shape[slice(start, None if end is None else int(end))], dtype=np.int64))]


def size_op(n: OnnxNode) -> list:
    n.arity(1)
    return [constant(np.array(math.prod(n.known_shape(0, "Size")), dtype=np.int64))]


def constant_of_shape(n: OnnxNode) -> list:
    n.arity(1)
    shape = n.ints(0, "shape")
    value = n.attr("value")
    value = np.zeros((1,), np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        n.fail(f"value must hold one element, got {value.size}")
    fill = value.reshape(-1)[0]
    if any(is_symbolic(d) for d in shape):  # a size the graph reads from its inputs: filled per call
        return [S.fill(shape=tuple(shape), value=fill.item(), dtype=value.dtype, device=current_device())]
    shape, nbytes = check_size(n, shape, value.dtype)
    if not foldable(nbytes):  # computed when the graph runs, not while loading
        return [S.fill(shape=shape, value=fill.item(), dtype=value.dtype, device=current_device())]
    return [constant(np.full(shape, fill, dtype=value.dtype), owned=True)]


def range_op(n: OnnxNode) -> list:
    n.arity(3)
    start, limit, delta = (np.asarray(n.const(i, what)) for i, what in enumerate(("start", "limit", "delta")))
    if any(v.dtype == object for v in (start, limit, delta)):  # symbolic bounds (Range(0, batch))
        bounds = tuple(v.reshape(-1)[0] for v in (start, limit, delta))
        if any(isinstance(b, (float, np.floating)) for b in bounds):
            n.fail("a Range over float bounds computed from dynamic sizes is not supported")
        bounds = tuple(b if is_symbolic(b) else int(b) for b in bounds)
        if not is_symbolic(bounds[2]) and bounds[2] == 0:
            n.fail("delta is 0: a Range needs a non-zero step")
        return [S.iota(bounds=bounds, dtype="int64", device=current_device())]
    dtype = start.dtype
    if any(v.size != 1 for v in (start, limit, delta)):
        n.fail(f"start, limit and delta must be scalars, got shapes {start.shape}, {limit.shape}, {delta.shape}")
    # one-element tensors are read as their scalar, as ONNX's reference does (AffineGrid's expansion gives such)
    start, limit, delta = (v.reshape(()) for v in (start, limit, delta))
    if dtype.kind in "fc" and not all(np.isfinite(v) for v in (start, limit, delta)):
        n.fail(f"start={start}, limit={limit}, delta={delta}: a Range needs finite bounds and step")
    if delta == 0:
        n.fail(f"delta is 0 (start={start}, limit={limit}): a Range needs a non-zero step")
    if dtype.kind in "iub":  # exact: Python ints
        s0, s1, d = int(start), int(limit), int(delta)
        count = max(-((s0 - s1) // d), 0)
    else:
        count = max(int(np.ceil((limit - start) / delta)), 0)
    _, nbytes = check_size(n, (count,), dtype)
    if foldable(nbytes):
        return [constant((start + np.arange(count) * delta).astype(dtype))]
    # computed when the graph runs, as the fold computes it: start + i * delta
    dev = current_device()
    if dtype.kind in "iu":
        return [S.iota(bounds=(s0, s0 + count * d, d), dtype=dtype, device=dev)]
    i = S.iota(bounds=(0, count, 1), dtype="int64", device=dev)
    work = np.result_type(np.int64, dtype)
    y = S.add(S.multiply(S.cast(i, dtype=work), constant(delta.astype(work))), constant(start.astype(work)))
    return [y if work == dtype else S.cast(y, dtype=dtype)]


def trilu(n: OnnxNode) -> list:
    n.arity(1, 2)
    k = n.ints(1, "k")
    k = 0 if not k else k[0]
    fn = S.triu if n.attr("upper", 1) else S.tril
    return [fn(n.inputs[0], k=k)]


def _blocksize(n: OnnxNode) -> int:
    s = n.attr("blocksize")
    if not isinstance(s, (int, np.integer)) or s < 1:
        n.fail(f"blocksize={s!r}: must be an integer >= 1")
    return int(s)


def depth_to_space(n: OnnxNode) -> list:
    n.arity(1)
    b, c, h, w = _rank4(n, "DepthToSpace")
    s = _blocksize(n)
    if isinstance(c, int) and c % (s * s):
        n.fail(f"the input has {c} channels, not a multiple of blocksize**2 = {s * s}")
    x = n.inputs[0]
    if n.attr("mode", "DCR") == "DCR":
        y = S.transpose(S.reshape(x, shape=(b, s, s, c // s // s, h, w)), axes=(0, 3, 4, 1, 5, 2))
    else:
        y = S.transpose(S.reshape(x, shape=(b, c // s // s, s, s, h, w)), axes=(0, 1, 4, 2, 5, 3))
    return [S.reshape(y, shape=(b, c // s // s, h * s, w * s))]


def space_to_depth(n: OnnxNode) -> list:
    n.arity(1)
    b, c, h, w = _rank4(n, "SpaceToDepth")
    s = _blocksize(n)
    if any(isinstance(d, int) and d % s for d in (h, w)):
        n.fail(f"the input's height and width {h}, {w} must be multiples of blocksize={s}")
    order = (0, 3, 5, 1, 2, 4) if n.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = S.transpose(S.reshape(n.inputs[0], shape=(b, c, h // s, s, w // s, s)), axes=order)
    return [S.reshape(y, shape=(b, c * s * s, h // s, w // s))]


def _rank4(n: OnnxNode, why: str) -> tuple:
    shape = n.known_shape(0, why)
    if len(shape) != 4:
        n.fail(f"takes a 4-D (N, C, H, W) input, got shape {shape}")
    return shape


SHAPE_CONVERTERS: dict[str, Converter] = {
    "Reshape": reshape, "Transpose": transpose, "Squeeze": squeeze, "Unsqueeze": unsqueeze, "Flatten": flatten,
    "Concat": concat, "Split": split, "Slice": slice_op, "Gather": gather, "GatherElements": gather_elements,
    "Expand": expand, "Tile": tile, "Pad": pad, "Shape": shape_op, "Size": size_op,
    "ConstantOfShape": constant_of_shape, "Range": range_op, "Trilu": trilu, "DepthToSpace": depth_to_space,
    "SpaceToDepth": space_to_depth,
}
