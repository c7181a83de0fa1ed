"""``graph.build.shapes_memoized``: avals with symbolic sizes inferred once per question within a scope,
and an ONNX import (which runs in one) giving the graph it gives without the memo."""
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph import build
from lazyarray.graph.same_graph import graph_key

onnx = pytest.importorskip("onnx")
load = pytest.importorskip("lazyarray.onnx.load")

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "onnx_dynamic"


def _counting(monkeypatch):
    calls = []
    infer = build.registry.infer

    def counted(op, in_avals, params):
        calls.append(op.name)
        return infer(op, in_avals, params)
    monkeypatch.setattr(build.registry, "infer", counted)
    return calls


def test_symbolic_questions_are_answered_once_within_the_scope(monkeypatch):
    b = la.Dim("b")
    x = la.sym.var("x", shape=(b, 3))
    calls = _counting(monkeypatch)
    with build.shapes_memoized():
        first, second = la.sym.exp(x), la.sym.exp(x)
    assert calls.count("exp") == 1
    assert first.outputs[0].aval == second.outputs[0].aval
    assert first.outputs[0].aval.shape == (b, 3)
    la.sym.exp(x)  # (outside: the registry's rule again, its memo leaving symbolic sizes out)
    assert calls.count("exp") == 2


def test_a_scope_turned_off_inside_one_keeps_nothing(monkeypatch):
    x = la.sym.var("x", shape=(la.Dim("n"), 2))
    calls = _counting(monkeypatch)
    with build.shapes_memoized():
        with build.shapes_memoized(on=False):
            la.sym.tanh(x)
            la.sym.tanh(x)
        assert build.SHAPE_MEMO.get() == {}
    assert calls.count("tanh") == 2 and build.SHAPE_MEMO.get() is None


def test_errors_are_raised_each_time_and_not_kept():
    x = la.sym.var("x", shape=(la.Dim("n"), 2))
    y = la.sym.var("y", shape=(3, 4))
    with build.shapes_memoized():
        for _ in range(2):
            with pytest.raises(la.LazyArrayError):
                la.sym.matmul(x, y)
        assert build.SHAPE_MEMO.get() == {}


def test_only_imports_without_symbolic_input_shapes_memoize():
    assert load._plain_shapes({}) and load._plain_shapes({"x": (2, 3), "y": [np.int64(4)]})
    assert not load._plain_shapes({"x": (la.Dim("batch", max=8), 3)})
    assert not load._plain_shapes({"x": None})


@contextmanager
def _never(on=True):
    with build.shapes_memoized(on=False):
        yield


@pytest.mark.parametrize("name", ["hf_bert", "hf_vit", "lstm_bidir", "resnet_mini", "causal_decoder"])
def test_an_import_gives_the_graph_it_gives_without_the_memo(monkeypatch, name):
    path = str(FIXTURES / f"{name}.onnx")
    loaded = []
    for memo in (load.shapes_memoized, _never):
        monkeypatch.setattr(load, "shapes_memoized", memo)
        loaded.append(load.load_arrays(path))  # (one line: the nodes' source lines are alike)
    (with_memo, params), (without, params_without) = loaded
    assert graph_key(with_memo) == graph_key(without)
    assert [e.aval for e in with_memo.outputs] == [e.aval for e in without.outputs]
    assert sorted(params) == sorted(params_without)
