"""Batch-last memory order for the small images of a batch: which planned values a program stores
as (C, H, W, N) while the graph keeps NCHW.

NumPy pays per innermost run of a loop, not only per value: on a 12 x 12 image every
elementwise op, pooling tap and im2col copy of an NCHW value runs over rows of 12 (6 x 6: 6)
values, and the demo CNN at batch 64 spent most of its time there (benchmarks/onnx.py). Stored
batch last, the same value is an NCHW-shaped view with permuted strides, so the kernels see
the arrays they always saw (same shapes, same values) while NumPy walks them in memory order:
runs of N (a pooling tap), H * W * N (relu, a per-channel batch norm) or Wo * N (``conv2d``'s
im2col, whose matmul then writes the (O, Ho*Wo*N) product straight into the planned buffer).

Only the program's memory layout changes: a value's buffer, never its shape or its semantics.
Kernels handle any strides (they are NumPy code); the ones that care choose their path by the
strides they are given (``conv2d`` takes its batch-last kernel, a pooling that tiles the image
its tap views). Chosen per compiled signature for values that are

* made by ``conv2d``, ``relu``, ``batch_norm``, the 2-D pools or ``batch_norm_max_pool2d`` (the ops whose kernels gain),
  written into their planned buffer, and read only by those ops or ``flatten``; a ``conv2d``
  among them must have im2col columns that fit its scratch buffer (``scratch.SCRATCH_MAX_BYTES``);
* 4-D float arrays on the CPU of at least ``batch_last_min_batch`` images of at most
  ``batch_last_max_pixels`` pixels and fewer than ``winograd_min_channels`` channels (the tuning
  table; deep layers take Winograd, which reads NCHW);
* not handed to the caller (directly or through a view), whose arrays stay C-contiguous.

An in-place pair of values whose orders differ is not planned (``program._plan``).
"""
from __future__ import annotations

from ..ops.scratch import SCRATCH_MAX_BYTES
from ..tuning_table import current

# (C, H, W, N): the axes of an NCHW value in the order its memory holds them.
BATCH_LAST = (1, 2, 3, 0)
OPS = frozenset({"conv2d", "relu", "batch_norm", "max_pool2d", "avg_pool2d", "batch_norm_max_pool2d"})
# Measured on the demo CNN (benchmarks/onnx.py, batch 64): runs of N values beat rows of 12
# from 16 images up (the tuning table's ``batch_last_min_batch``); images of 16 x 16 and more have
# rows long enough on their own (``batch_last_max_pixels``). Deep layers (``winograd_min_channels``
# channels and more) take Winograd, which reads NCHW.


def _conv_fits(node) -> bool:
    """A ``conv2d`` whose batch-last im2col columns fit the kernel's scratch buffer (larger ones
    page-fault fresh memory every call: ResNet's 8 x 8, 32-channel layers at batch 64 ran 3x
    slower batch last than one image at a time)."""
    x, w = node.inputs[0].aval.shape, node.inputs[1].aval.shape
    out = node.avals[0].shape
    if x is None or w is None or out is None or None in x or None in w or None in out or len(w) != 4:
        return False
    return w[1] * w[2] * w[3] * out[0] * out[2] * out[3] * node.avals[0].dtype.itemsize <= SCRATCH_MAX_BYTES


def _eligible(node) -> bool:
    a = node.avals[0]
    shape = a.shape
    if node.op.name not in OPS or len(node.avals) != 1 or shape is None or len(shape) != 4 or None in shape:
        return False
    n, c, h, w = shape
    t = current()
    return (a.dtype is not None and a.dtype.kind == "f" and a.device is not None and a.device.kind == "cpu"
            and n >= t.batch_last_min_batch and h * w <= t.batch_last_max_pixels and c < t.winograd_min_channels
            and (node.op.name != "conv2d" or _conv_fits(node)))


def _reads_well(node) -> bool:
    """A consumer that gains from (or does not mind) a batch-last input: the ops above, and
    ``flatten`` (one small copy into the dense layer's rows). Others (a residual ``add``, a fused
    group chunked along the batch axis) would walk the value across its memory order."""
    if node.op.name == "flatten":
        return True
    return node.op.name in OPS and (node.op.name != "conv2d" or _conv_fits(node))


def handed_slots(specs, out_slots: set[int]) -> set[int]:
    """The slots whose values the caller receives, and the values those are views of: a layout
    choice must leave them C-contiguous."""
    handed = set(out_slots)
    for sp in reversed(specs):
        if sp.node.op.view and sp.ins and any(o in handed for o in sp.outs):
            handed.add(sp.ins[0])
    return handed


def batch_last_slots(g, specs, out_slots: set[int], planned) -> dict[int, tuple]:
    """``slot -> memory order`` for the values a program stores batch last (see the module)."""
    handed = handed_slots(specs, out_slots)
    readers: dict[int, list] = {}
    for sp in specs:
        for i in sp.ins:
            readers.setdefault(i, []).append(sp.node)
    orders = {}
    for sp in specs:
        if sp.kind in planned and len(sp.outs) == 1 and sp.outs[0] not in handed and _eligible(sp.node) \
                and all(_reads_well(r) for r in readers.get(sp.outs[0], ())):
            orders[sp.outs[0]] = BATCH_LAST
    return orders
