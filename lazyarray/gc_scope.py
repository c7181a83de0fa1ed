"""When lazyarray pauses CPython's cyclic GC, and the one collection it runs itself.

CPython collects the whole heap (generation 2) once the objects that outlived younger collections since
the last full one exceed a quarter of those the last one kept. So a pause never avoids a collection that
is due; it moves it. Two places decide when lazyarray's own work pays:

* ``gc_paused``: building a graph, compiling it, reading or writing its JSON make thousands of small
  objects that form no cycle worth collecting meanwhile; the GC waits until the outermost pause ends
  (re-entrant: only the scope that turned it off turns it back on, and only when it was on).
* ``collected_after``: importing numba (lazily, at the first compiled kernel: ``jit._numba``) makes about
  90,000 long-lived objects, half the heap of a process that also loaded onnx and onnxruntime. The
  import runs paused and then collects once, so it pays the full collection it made due (60-80 ms,
  beside numba's second or more of start) instead of leaving it to the next code that allocates: the
  first trace or compile of a model (an imported BERT's first call: 70 of 130 ms CPU). Nothing else is
  changed process-wide: no thresholds, no ``gc.freeze()``; with the GC turned off by the program, no
  collection runs.
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building many small objects (nodes, entries, JSON text):
    compiling a graph, writing or reading its JSON.

    Its generation-2 scans grow with the heap, which made a 10,000-node round trip superlinear and
    took a quarter of a 1,000-op CachedOp's compile; nothing built there forms a reference cycle that
    needs collecting meanwhile (and what dies is freed by reference counts). Only the call that paused
    it turns it back on, and only when it was on.

    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def collected_after() -> Iterator[None]:
    """Run the block with the GC paused, then (when the GC was on) collect the heap once: for a large
    one-time import, which then pays the full collection its objects make due.

    >>> with collected_after():
    ...     import json
    """
    was_enabled = gc.isenabled()
    with gc_paused():
        yield
    if was_enabled:
        gc.collect()
