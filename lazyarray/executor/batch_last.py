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

* made by an op the kernels layer says takes batch-last values (``kernels.takes_batch_last``: an
  implementation declares that layout and its conditions hold: ``conv2d``'s batch-last im2col
  columns must fit its scratch buffer; ``relu``, ``batch_norm``, the 2-D pools and
  ``batch_norm_max_pool2d`` walk any memory order), written into their planned buffer, and read
  only by such ops (``flatten`` among them: one small copy into the dense layer's rows);
* 4-D float arrays on the CPU of at least ``batch_last_min_batch`` images of at most
  ``batch_last_max_pixels`` pixels and fewer than ``winograd_min_channels`` channels (the tuning
  table; deep layers take Winograd, which reads NCHW);
* not handed to the caller (directly or through a view), whose arrays stay C-contiguous.

An in-place pair of values whose orders differ is not planned (``program._plan``).
"""
from __future__ import annotations

from ..kernels import takes_batch_last
from ..tuning_table import current

# (C, H, W, N): the axes of an NCHW value in the order its memory holds them.
BATCH_LAST = (1, 2, 3, 0)
# Measured on the demo CNN (benchmarks/onnx.py, batch 64): runs of N values beat rows of 12
# from 16 images up (the tuning table's ``batch_last_min_batch``); images of 16 x 16 and more have
# rows long enough on their own (``batch_last_max_pixels``). Deep layers (``winograd_min_channels``
# channels and more) take Winograd, which reads NCHW.


def _takes(node) -> bool:
    """The kernels layer's answer for this node: an implementation of its op takes batch last."""
    return takes_batch_last(node.op.name, [i.aval for i in node.inputs], node.avals[0])


def _eligible(node) -> bool:
    a = node.avals[0]
    shape = a.shape
    if len(node.avals) != 1 or shape is None or len(shape) != 4 or None in shape:
        return False
    n, c, h, w = shape
    t = current()
    return (a.dtype is not None and a.dtype.kind == "f" and a.device is not None and a.device.kind == "cpu"
            and n >= t.batch_last_min_batch and h * w <= t.batch_last_max_pixels and c < t.winograd_min_channels
            and _takes(node))


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
                and all(_takes(r) for r in readers.get(sp.outs[0], ())):
            orders[sp.outs[0]] = BATCH_LAST
    return orders
