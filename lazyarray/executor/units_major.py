"""Units-major memory order for the outputs of ``dense`` at small batches: which planned 2-D values
a program stores as (units, rows) memory while the graph keeps (rows, units).

``dense(x, w)`` is ``x @ w.T``. OpenBLAS runs that product faster when the result is stored
transposed, as ``w @ x.T`` into a C-ordered (units, rows) buffer, while the rows are few: measured
on one thread (benchmarks/training_loop.py's MLP), 64 x 784 @ 784 x 512 takes 0.68 ms into a
(64, 512) buffer and 0.55 ms into a (512, 64) one (8 rows: about half the time; 128 rows: 0.9x;
from about 192 rows on the product gains little while its readers lose: the MLP's whole step took
1.04x its row-major time at 256 rows and 1.12x at 1024, so large batches keep row order). Narrow
products (tens of units) run slower transposed and are left alone.

Only the program's memory layout changes, as with ``batch_last.py``: the slot holds a
(rows, units)-shaped view with swapped strides (``program._fill_views``), so the graph, the shapes
and the values are the same. NumPy's ``matmul`` writes such a view with one BLAS call (it
computes the transposed product into the C-ordered memory); ``dense`` (``ops/nn.py``) multiplies
by ``w.T`` itself there (a packed weight copy would only cost a transposed read). A value is
stored units-major when it is

* made by ``dense`` (2-D float32/float64 on the CPU, ``MIN_ROWS``..``MAX_ROWS`` rows, at least
  ``MIN_UNITS`` units and ``MIN_IN_UNITS`` inputs) into its planned buffer, or by ``relu`` from
  such a value (then it keeps working in place);
* read only by ``dense`` as its input rows (``w @ x.T`` then reads C-ordered memory) or ``relu``
  (other readers, a fused group chunked along the rows or a reduction, would walk it across its
  memory order);
* not handed to the caller (directly or through a view): what a run hands out stays C-contiguous
  (in a training step, the activations saved for the backward are handed out, so there the
  ``relu`` reading a units-major product writes a row-major result: still faster overall).

An in-place pair of values whose orders differ is not planned (``program._plan``).
"""
from __future__ import annotations

from .batch_last import handed_slots

UNITS_MAJOR = (1, 0)  # the axes of a (rows, units) value in the order its memory holds them
MIN_ROWS = 8  # 2-4 rows: within noise either way, and some shapes lose
MAX_ROWS = 128
MIN_UNITS = 256  # 32-64 units: the transposed product is slower
MIN_IN_UNITS = 64
_FLOATS = frozenset({"float32", "float64"})


def _dense_eligible(node) -> bool:
    a = node.avals[0]
    x = node.inputs[0].aval.shape
    shape = a.shape
    if len(node.avals) != 1 or shape is None or len(shape) != 2 or None in shape or x is None or len(x) != 2 \
            or x[1] is None:
        return False
    rows, units = shape
    return (a.dtype is not None and a.dtype.name in _FLOATS and a.device is not None and a.device.kind == "cpu"
            and a.stype == "default" and MIN_ROWS <= rows <= MAX_ROWS and units >= MIN_UNITS
            and x[1] >= MIN_IN_UNITS)


def _reads_well(op: str, pos: int) -> bool:
    """``relu`` (any order), or ``dense`` reading the value as its input rows."""
    return op == "relu" or (op == "dense" and pos == 0)


def units_major_slots(g, specs, out_slots: set[int], planned) -> dict[int, tuple]:
    """``slot -> memory order`` for the values a program stores units-major (see the module)."""
    handed = handed_slots(specs, out_slots)
    readers: dict[int, list] = {}
    for sp in specs:
        for pos, i in enumerate(sp.ins):
            readers.setdefault(i, []).append((sp.node.op.name, pos))
    chosen: dict[int, int | None] = {}  # slot -> the slot it follows (a relu's input), None for a dense
    for sp in specs:
        if sp.kind not in planned or len(sp.outs) != 1 or sp.outs[0] in handed:
            continue
        name = sp.node.op.name
        if name == "dense" and _dense_eligible(sp.node):
            chosen[sp.outs[0]] = None
        elif name == "relu" and sp.ins and sp.ins[0] in chosen:
            chosen[sp.outs[0]] = sp.ins[0]
    changed = True
    while changed:  # drop values some reader would walk across their order, then relus of dropped values
        changed = False
        for slot, src in list(chosen.items()):
            if not all(_reads_well(op, pos) for op, pos in readers.get(slot, ())) \
                    or (src is not None and src not in chosen):
                del chosen[slot]
                changed = True
    return {slot: UNITS_MAJOR for slot in chosen}
