"""An ``onnx.backend.base.Backend`` over lazyarray, and the ONNX node conformance cases.

``LazyArrayBackend.prepare(model)`` returns a ``LazyArrayRep`` whose ``run(inputs)`` converts the
model with ``la.onnx``'s importer (once per input signature, with the inputs' shapes, so
shape-reading converters see concrete shapes) and runs it through ``la.CachedOp``. This module
imports ``onnx`` at import time: import it only when the ``onnx`` extra is installed.

``node_cases()`` lists ONNX's own node test cases (the 1,884 of ``onnx/backend/test/data/node``:
read from that directory when the installed ``onnx`` ships it, else generated in memory by
``onnx.backend.test.case.node``, which is what writes that directory), each tagged with the
operator it tests; ``run_case`` runs one with ONNX's tolerances. ``benchmarks/onnx_conformance.py``
prints the pass table; ``tests/onnx/test_conformance.py`` guards it.

>>> import numpy as np
>>> onnx = __import__("pytest").importorskip("onnx")
>>> from onnx import helper, TensorProto
>>> from lazyarray.onnx.backend import LazyArrayBackend
>>> g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g",
...     [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "ab"],
...     [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
>>> rep = LazyArrayBackend.prepare(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
>>> rep.run([np.ones(2, np.float32), np.full(2, 2.0, np.float32)])[0]
array([3., 3.], dtype=float32)
"""
from __future__ import annotations

import functools
import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..creation import array
from ..errors import LazyArrayError
from ..executor.cached_op import CachedOp
from .coverage import PARTIAL, partial_reasons
from .import_sequence import flat_values, regroup
from .load import CONVERTERS, Conversion, parse_model
from .narrow import narrow, widen


class LazyArrayRep(BackendRep):
    """A prepared ONNX model: ``run(inputs)`` -> tuple of NumPy outputs (graph output order).

    The model is converted per input signature with the inputs' shapes; inputs that a converter
    must know as values (shapes, axes, pads fed as graph inputs) are built into the graph, and a
    call with other values for them converts again. Sequence inputs are lists of arrays and optional
    ones may be None; sequence outputs come back as lists, empty optionals as None
    (``import_sequence.py``).
    """

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in inits]
        self.output_types = [vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
                             for vi in model.graph.output]
        self._compiled: dict = {}

    def run(self, inputs, **kwargs) -> tuple:
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.input_names]
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != len(self.input_names):
            raise LazyArrayError(f"the model takes {len(self.input_names)} input(s) {self.input_names}, "
                                 f"got {len(inputs)}")
        given = {n: _widened(v) for n, v in zip(self.input_names, inputs)}  # narrow formats: narrow.py
        values = {k: v for n, v in given.items() for k, v in flat_values(n, v).items()}  # sequences: one per tensor
        key = tuple((k, v.shape, v.dtype) for k, v in values.items())
        hit = self._compiled.get(key)
        if hit is None or any(not np.array_equal(values[n], v) for n, v in hit[1].items()):
            shapes = {n: v.shape for n, v in given.items() if isinstance(v, np.ndarray)}
            conv = Conversion(self.model, "ONNX model", shapes, input_values=given)
            hit = self._compiled[key] = (CachedOp(conv.symbol), {n: values[n] for n in conv.read_inputs}, conv.layout)
        op, _, layout = hit
        named = {n: array(values[n]) for n in op.sym.list_inputs()}
        outs = op(**named)
        outs = [o.asnumpy() for o in (outs if isinstance(outs, list) else [outs])]
        return tuple(narrow(o, t) if isinstance(o, np.ndarray) else o
                     for o, t in zip(regroup(layout, outs), self.output_types))


def _widened(v):
    if v is None or isinstance(v, (list, tuple)):
        return None if v is None else [widen(np.asarray(x)) for x in v]
    return widen(np.asarray(v))


class LazyArrayBackend(Backend):
    """``onnx.backend`` over lazyarray: ``prepare(model).run(inputs)``, or ``run_model(model, inputs)``."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> LazyArrayRep:
        if not isinstance(model, onnx.ModelProto):
            raise LazyArrayError(f"prepare takes an onnx.ModelProto, got {type(model).__name__}")
        parse_model(model.SerializeToString(), "ONNX model")  # the checks la.onnx.load makes
        return LazyArrayRep(model)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


# -- ONNX's node test cases ------------------------------------------------------------------------
@dataclass
class NodeCase:
    """One ONNX node test: its name, the operator it tests, the model and its data sets."""

    name: str
    op: str
    model: onnx.ModelProto
    data_sets: Sequence  # [(inputs, outputs)], lists of NumPy arrays
    rtol: float = 1e-3
    atol: float = 1e-7


def node_data_dir() -> str:
    """Where the installed onnx keeps ``backend/test/data/node`` (it may not ship it)."""
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


@functools.lru_cache(maxsize=1)  # (read once; ``node_cases.cache_clear()`` reads again)
def node_cases() -> list[NodeCase]:
    """Every ONNX node test case (cached), from the data directory or generated in memory."""
    d = node_data_dir()
    raw = _read_dir(d) if os.path.isdir(d) else _generate()
    by_name = {name: model for name, model, _ in raw}
    cases = []
    for name, model, sets in raw:
        base = name.split("_expanded")[0]
        source = by_name.get(base, model)
        op = source.graph.node[0].op_type if len(source.graph.node) else "?"
        cases.append(NodeCase(name, op, model, sets))
    return sorted(cases, key=lambda c: c.name)


def _read_dir(d: str) -> list:
    out = []
    for case_dir in sorted(glob.glob(os.path.join(d, "test_*"))):
        model = onnx.load_model(os.path.join(case_dir, "model.onnx"))
        sets = []
        for ds in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
            ins = [_read_pb(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=_pb_index)]
            outs = [_read_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=_pb_index)]
            sets.append((ins, outs))
        out.append((os.path.basename(case_dir), model, sets))
    return out


def _pb_index(path: str) -> int:
    return int(os.path.basename(path).split("_")[1].split(".")[0])


def _read_pb(path: str):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def _generate() -> list:
    import warnings

    from onnx.backend.test.case import node as node_cases_module
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node_cases_module.collect_testcases(None)
    def arr(v):
        return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v
    return [(c.name, c.model, [([arr(v) for v in i], [arr(v) for v in o]) for i, o in c.data_sets])
            for c in cases if c.kind == "node"]


def run_case(case: NodeCase) -> str | None:
    """Run one case through ``LazyArrayBackend``; ``None`` when it passes, else why it failed."""
    try:
        rep = LazyArrayBackend.prepare(case.model)
        for inputs, expected in case.data_sets:
            if any(isinstance(v, dict) for v in list(inputs) + list(expected)):
                return "map values are not supported"
            with np.errstate(all="ignore"):
                got = rep.run(list(inputs))
            if len(got) != len(expected):
                return f"{len(got)} outputs, expected {len(expected)}"
            got, expected, why = _flatten_outputs(got, expected)
            if why:
                return why
            for k, (g, e) in enumerate(zip(got, expected)):
                if g.dtype != e.dtype:
                    return f"output {k}: dtype {g.dtype}, expected {e.dtype}"
                if g.shape != e.shape:
                    return f"output {k}: shape {g.shape}, expected {e.shape}"
                if e.dtype.kind in "OUS":
                    if not np.array_equal(g, e):
                        return f"output {k}: values differ"
                elif not np.allclose(g, e, rtol=case.rtol, atol=case.atol, equal_nan=True):
                    g64, e64 = g.astype(np.float64), e.astype(np.float64)
                    err = np.nanmax(np.abs(g64 - e64)) if g.size else 0
                    top = np.nanmax(np.abs(e64[np.isfinite(e64)]), initial=0.0)
                    return (f"output {k}: values differ (max abs error {err:.3g}, "
                            f"{err / top if top else float('inf'):.3g} of the largest expected magnitude)")
    except Exception as exc:  # noqa: BLE001 (a failing case is a result, whatever raised)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return None


def _flatten_outputs(got, expected):
    """Sequence outputs (lists) and empty optionals (None) of both sides, as matching lists of arrays;
    or why they do not match in structure."""
    flat_g, flat_e = [], []
    for k, (g, e) in enumerate(zip(got, expected)):
        if e is None or g is None:
            if (e is None) != (g is None):
                return [], [], f"output {k}: {'an empty optional' if g is None else 'a value'}, expected " \
                               f"{'an empty optional' if e is None else 'a value'}"
            continue
        if isinstance(e, list) != isinstance(g, list):
            return [], [], f"output {k}: {'a sequence' if isinstance(g, list) else 'a tensor'}, expected the other"
        if isinstance(e, list):
            if len(e) != len(g):
                return [], [], f"output {k}: a sequence of {len(g)} tensors, expected {len(e)}"
            flat_g += list(g)
            flat_e += [np.asarray(x) for x in e]
        else:
            flat_g.append(g)
            flat_e.append(np.asarray(e))
    return flat_g, flat_e, None


def claimed_ops() -> list[str]:
    """The ONNX operators the import table converts completely: every node case of theirs passes."""
    # (operators of another domain are keyed ``domain.OpType`` in the table; node cases name the type)
    return sorted({name.rsplit(".", 1)[-1] for name in set(CONVERTERS) - set(PARTIAL)})


def partial_ops() -> dict[str, list[str]]:
    """The operators the import table converts only in part -> why, per uncovered feature
    (``coverage.PARTIAL``: each such case fails with a ``GraphFormatError`` naming the feature)."""
    return partial_reasons()
