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
* or, in a backward, made by ``matmul`` (the ``g @ w`` of the layer above) or ``relu_grad`` where
  the relu gradient's saved activation is units-major (below);
* read only by readers that take it at full speed (``_reads_well``: ``dense`` and ``matmul`` as
  their rows, ``relu``, ``relu_grad`` with both operands and its result units-major, ``sum_to``,
  ``transpose``); other readers, a fused group chunked along the rows or a general reduction,
  would walk it across its memory order;
* not handed to the caller (directly or through a view): what a run hands out stays C-contiguous,
  except the **free outputs** only lazyarray reads.

A training forward's activations saved for its backward are such free outputs
(``compile_program(free_outputs=...)``, from ``CachedOp``'s ``_split_backward``): they stay
units-major, and ``Program.out_orders`` says so. The backward is compiled with that as a hint
(``input_orders``: by ``_split_backward`` for the block's own backward, by ``backward_cache``
from the forward program of each ``call`` record for a Gluon-style step), and plans the
``g @ w`` products that meet a saved activation in ``relu_grad`` units-major too, so the relu
gradient, its bias sum and the weight gradient's ``g.T`` read one order. Before, the forward's
relu wrote a row-major copy of each units-major product, a transposing pass that took about 5%
of the MLP's training step at batch 64 (2 x 76 us of 2.9 ms). A hint that does not hold (a saved
value computed otherwise) changes only speed: every kernel takes any strides.
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


def _value_eligible(node) -> bool:
    """A node's one output that may be stored units-major: a 2-D float32/float64 CPU value of
    ``MIN_ROWS``..``MAX_ROWS`` rows and at least ``MIN_UNITS`` units."""
    if len(node.avals) != 1:
        return False
    a = node.avals[0]
    shape = a.shape
    if shape is None or len(shape) != 2 or None in shape:
        return False
    rows, units = shape
    return (a.dtype is not None and a.dtype.name in _FLOATS and a.device is not None and a.device.kind == "cpu"
            and a.stype == "default" and MIN_ROWS <= rows <= MAX_ROWS and units >= MIN_UNITS)


def _dense_eligible(node) -> bool:
    x = node.inputs[0].aval.shape
    return _value_eligible(node) and x is not None and len(x) == 2 and x[1] is not None and x[1] >= MIN_IN_UNITS


def _reads_well(op: str, pos: int) -> bool:
    """Readers that take a units-major value at full speed: ``relu`` and ``relu_grad`` (both their
    operands stored alike: one flat loop), ``dense`` or ``matmul`` reading it as their rows (BLAS
    reads the (units, rows) memory as a transposed operand), ``sum_to`` (a bias gradient: BLAS
    sums it), and ``transpose`` (a view: its result is C-ordered)."""
    return op in ("relu", "relu_grad", "sum_to", "transpose") or (op in ("dense", "matmul") and pos == 0)


def _product_eligible(node) -> bool:
    """A 2-D ``matmul`` result a ``relu_grad`` reads beside a units-major value (the backward's
    ``g @ w``): NumPy writes it into (units, rows) memory with one BLAS call, as fast."""
    return _value_eligible(node) and all(e.aval.shape is not None and len(e.aval.shape) == 2 for e in node.inputs)


def units_major_slots(g, specs, out_slots: set[int], planned, free=frozenset(), input_orders=None) -> dict:
    """``slot -> memory order`` for the values a program stores units-major (see the module).

    ``free``: output slots only lazyarray reads (a training forward's saved values), which may be
    stored units-major; ``input_orders``: ``slot -> order`` of inputs that arrive so stored."""
    handed = handed_slots(specs, out_slots - set(free))
    given = {slot for slot, order in (input_orders or {}).items() if order == UNITS_MAJOR}
    readers: dict[int, list] = {}
    made_by: dict[int, object] = {}
    for sp in specs:
        for pos, i in enumerate(sp.ins):
            readers.setdefault(i, []).append((sp.node.op.name, pos, sp.outs[0] if sp.outs else None))
        if sp.kind in planned and len(sp.outs) == 1:
            made_by[sp.outs[0]] = sp
    # slot -> the slots it must agree with (a relu's input, a relu_grad's two operands); () for a product
    chosen: dict[int, tuple] = {}
    for sp in specs:
        if sp.kind not in planned or len(sp.outs) != 1 or sp.outs[0] in handed:
            continue
        name = sp.node.op.name
        if name == "dense" and _dense_eligible(sp.node):
            chosen[sp.outs[0]] = ()
        elif name == "relu" and sp.ins and sp.ins[0] in chosen:
            chosen[sp.outs[0]] = (sp.ins[0],)
        elif name == "relu_grad" and len(sp.ins) == 2 and (sp.ins[0] in chosen or sp.ins[0] in given):
            y, gs = sp.ins
            prod = made_by.get(gs)
            if gs not in chosen and gs not in given and prod is not None and gs not in handed \
                    and prod.node.op.name == "matmul" and _product_eligible(prod.node):
                chosen[gs] = ()  # (the backward's ``g @ w``: written units-major to match y)
            if gs in chosen or gs in given:
                chosen[sp.outs[0]] = (y, gs)
    changed = True
    while changed:  # drop values some reader would walk across their order, then values that followed them
        changed = False
        for slot, deps in list(chosen.items()):
            # (a relu_grad reads both operands alike only while its result is units-major too)
            if not all(_reads_well(op, pos) and (op != "relu_grad" or out in chosen)
                       for op, pos, out in readers.get(slot, ())) \
                    or any(d not in chosen and d not in given for d in deps):
                del chosen[slot]
                changed = True
    return {slot: UNITS_MAJOR for slot in chosen}
