"""The order a program runs its steps in: creation order, with small reductions moved up.

``topo_order`` lists a graph's ops in the order they were created, which is the order eager code
ran them. The gradient pass creates a node's input gradients together, so a dense layer's bias
gradient (``sum_to`` of the output gradient over the batch) comes after the layer's two large
products, which read other memory in between: on the MLP's training step at batch 1024 the
(1024, 512) gradient it sums had left the cache by then, and the sum took 0.21 ms in place of
0.05. ``reductions_early`` moves such a reader to just after the last step that produces one of
its inputs, while they are still in cache.

A node moves when its result is at most an eighth of its largest input and that input is at
least ``MIN_INPUT_BYTES``: reductions, a loss over a batch, a norm's statistics. Moving a node
earlier keeps the order topological (it still comes after all its inputs) and changes no value.
Its small result is held longer; its inputs' last reads can only come earlier. Random ops and
device copies keep their places (their order is what the user wrote).
"""
from __future__ import annotations

from ..graph.node import Node

MIN_INPUT_BYTES = 1 << 16  # smaller inputs stay in cache anyway
SHRINK = 8  # the result is at most this fraction of the input


def _moves(node: Node) -> bool:
    op = node.op
    if op is None or op.random or op.device is not None or op.view or len(node.avals) != 1:
        return False
    out = _nbytes(node.avals[0])
    if out is None:
        return False
    biggest = 0
    for e in node.inputs:
        n = _nbytes(e.aval)
        if n is not None and n > biggest:
            biggest = n
    return biggest >= MIN_INPUT_BYTES and out * SHRINK <= biggest


def _nbytes(aval):
    """A dense value's bytes, or None (unknown dims or dtype, sparse storage)."""
    if aval.shape is None or aval.dtype is None or aval.stype != "default":
        return None
    return aval.nbytes


def reductions_early(todo: list[Node]) -> list[Node]:
    """``todo`` (a topological order) with each small reader of large inputs moved to just after
    the last step that produces one of its inputs (see the module)."""
    key: dict[int, tuple] = {}
    seq = 0
    for i, node in enumerate(todo):
        if _moves(node):
            anchor = max((key[id(e.node)] for e in node.inputs if id(e.node) in key), default=None)
            if anchor is not None:
                seq += 1
                key[id(node)] = anchor + (seq,)  # right after its anchor (before the next step)
                continue
        key[id(node)] = (i,)
    return sorted(todo, key=lambda n: key[id(n)]) if seq else todo
