"""scan_projection: a foreach's input projection (``[add](matmul(x, W), b)``, flipped in time before or
after the add or not) computed by its body step by step, in inference graphs where a compiled cell runs
it; values equal the graph as written (within rounding: another summation order) and torch's on the
imported LSTM / GRU fixtures; a projection read elsewhere, a loop that saves its states, products past
foreach_cell_max_macs, numba off or a projection past foreach_projection_max_macs (per step) or
foreach_projection_max_call_macs (over every step: the length counts) leave the graph as it is."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.build import record_node
from lazyarray.graph.passes.scan_projection import scan_projection
from lazyarray.graph.symbol import Symbol
from lazyarray.ops import registry

RNG = np.random.default_rng(0)
S = la.sym
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "data", "onnx_dynamic")
FLIP = (slice(None, None, -1),)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _body(hidden=4):
    """A tanh cell's body (data [2, 4], one state [2, hidden], a free recurrent matrix), as a SubGraph."""
    xt0, h0, u0 = (la.array(RNG.standard_normal(s).astype("float32")) for s in ((5, 2, 4), (2, hidden), (hidden, 4)))
    with la.deferred():
        ys, _ = la.foreach(lambda xt, s: (lambda h: (h, [h]))(la.tanh(xt + la.matmul(s[0], u0))), xt0, [h0])
    node = next(n for n in la.get_symbol(ys, inputs={}).topo() if n.op is not None and n.op.name == "foreach")
    return node.params["body"]


def _graph(shape, *, bias="after", flip=None, save_states=False, extra_use=False):
    """``foreach`` over a projection of x ([5, 2, 3]) by w ([3, 4]) (+ b), recorded as an import makes it."""
    x, w, b = S.var("x", shape=shape), S.var("w", shape=(3, 4)), S.var("b", shape=(4,))
    h, u = S.var("h", shape=(2, 4)), S.var("u", shape=(4, 4))
    e = lambda s: s.outputs[0]  # noqa: E731
    p = record_node(registry.get("matmul"), [e(x), e(w)], {})
    mm = p
    if flip == "before":
        p = record_node(registry.get("getitem"), [p], {"key": FLIP})
    if bias == "after":
        p = record_node(registry.get("add"), [p, e(b)], {})
    elif bias == "first":
        p = record_node(registry.get("add"), [e(b), p], {})
    if flip == "after":
        p = record_node(registry.get("getitem"), [p], {"key": FLIP})
    params = {"body": _body(), "n_data": 1, "n_states": 1, "save_states": save_states}
    outs = record_node(registry.get("foreach"), [p, e(h), e(u)], params)
    outs = [outs[0]] if not extra_use else [outs[0], mm]
    return Symbol(outs)


def _values():
    return {"x": RNG.standard_normal((5, 2, 3)).astype("float32"), "w": RNG.standard_normal((3, 4)).astype("float32"),
            "b": RNG.standard_normal(4).astype("float32"), "h": RNG.standard_normal((2, 4)).astype("float32"),
            "u": RNG.standard_normal((4, 4)).astype("float32")}


@pytest.mark.parametrize("bias", ["after", "first", None])
@pytest.mark.parametrize("flip", [None, "before", "after"])
def test_the_projection_moves_into_the_body_with_equal_values(bias, flip, run_symbol):
    sym = _graph((5, 2, 3), bias=bias, flip=flip)
    out = scan_projection(sym).check()
    ops = _ops(out)
    assert "matmul" not in ops and "add" not in ops and ops.count("foreach") == 1
    assert ops.count("getitem") == (1 if flip else 0)  # (the flip of x: a view)
    v = _values()
    np.testing.assert_allclose(run_symbol(out, **v)[0], run_symbol(sym, **v)[0], rtol=1e-5, atol=1e-6)


def test_what_leaves_the_graph_as_it_is():
    for sym in (_graph((5, 2, 3), save_states=True), _graph((5, 2, 3), extra_use=True)):
        assert scan_projection(sym) is sym
    sym = _graph((5, 2, 3))
    with la.tuning(foreach_projection_max_macs=0):
        assert scan_projection(sym) is sym
    with la.tuning(jit=False):
        assert scan_projection(sym) is sym
    with la.tuning(foreach_cell_max_macs=10):
        assert scan_projection(sym) is sym
    with la.tuning(foreach_projection_max_macs=2 * 3 * 4 - 1):  # (the projection: 2 rows x 3 x 4 per step)
        assert scan_projection(sym) is sym
    with la.tuning(foreach_projection_max_macs=2 * 3 * 4):
        assert scan_projection(sym) is not sym



def test_the_bound_over_every_step_reads_the_length():
    """``foreach_projection_max_call_macs`` bounds length x rows x features x units: the same layer's
    projection moves into the body at a short length, stays one product before the loop at a long one."""
    with la.tuning(foreach_projection_max_call_macs=5 * 2 * 3 * 4):  # (5 steps of 2 rows x 3 x 4)
        assert "matmul" not in _ops(scan_projection(_graph((5, 2, 3))).check())
        long = _graph((6, 2, 3))
        assert scan_projection(long) is long
    with la.tuning(foreach_projection_max_call_macs=5 * 2 * 3 * 4 - 1):
        sym = _graph((5, 2, 3))
        assert scan_projection(sym) is sym

def test_one_body_per_layer_for_every_signature():
    sym = _graph((5, 2, 3))
    old = next(n for n in sym.topo() if n.op is not None and n.op.name == "foreach").params["body"]
    bodies = [next(n for n in scan_projection(sym).topo() if n.op is not None and n.op.name == "foreach").params["body"]
              for _ in range(2)]
    assert bodies[0] is bodies[1]  # (the compiled cell counts a layer's calls over every signature)
    names = bodies[0].names  # the step's input, the body's states and free inputs, then W and b
    assert names[1:len(old.names)] == old.names[1:] and len(names) == len(old.names) + 2
    assert names[0] not in old.names


@pytest.mark.parametrize("name", ["gru_time_major", "lstm_bidir", "lstm_bidir_dynamo"])
def test_imported_rnns_equal_torch_and_the_graph_as_written(name):
    pytest.importorskip("onnx")
    pytest.importorskip("numba")
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    sym = la.onnx.load(os.path.join(FIXTURES, name + ".onnx"))
    with la.tuning(foreach_projection_max_macs=0):
        plain = la.CachedOp(sym)
        plain_ops = _ops(plain.compiled(x=data["b1_s7/in/x"].shape))
    op = la.CachedOp(sym)
    for case in ("b1_s7", "b3_s5", "b2_s7"):
        x, want = data[f"{case}/in/x"], data[f"{case}/out/0"]
        for _ in range(3):  # (past the compiled cell's first calls)
            got = op(x=la.array(x))
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-3, atol=1e-4)
        with la.tuning(foreach_projection_max_macs=0):
            ref = plain(x=la.array(x))
        ref = ref[0] if isinstance(ref, (list, tuple)) else ref
        np.testing.assert_allclose(got.asnumpy(), ref.asnumpy(), rtol=1e-5, atol=1e-6)
    ops = _ops(op.compiled(x=data["b1_s7/in/x"].shape))
    # (the classifier's product is left: a matmul, or a dense with its bias, graph/passes/matmul_bias.py)
    assert ops.count("matmul") + ops.count("dense") == 1 < plain_ops.count("matmul") + plain_ops.count("dense")
