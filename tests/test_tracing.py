"""get_symbol: named inputs, captured constants, unused inputs, the traced MLP."""
import numpy as np
import pytest
from graph.mlp import mlp, mlp_params, traced_mlp  # noqa: F401

import lazyarray as la


def test_traced_mlp_same_values_lazy_and_eager():
    sym, x, p, eager, lazy = traced_mlp()
    assert lazy.is_lazy
    np.testing.assert_allclose(lazy.asnumpy(), eager, rtol=1e-6)


def test_traced_mlp_inputs_constants_and_shape_inference():
    sym, *_ = traced_mlp()
    assert sym.list_inputs() == ["data"]
    consts = sym.constants()
    assert len(consts) == 6  # three weights and three biases captured from outside
    assert sorted(v.shape for v in consts.values()) == sorted([(16, 8), (16,), (12, 16), (12,), (5, 12), (5,)])
    ins, outs = sym.infer_shape(data=(32, 8))
    assert ins == {"data": (32, 8)} and outs == [(32, 5)]
    assert sym.infer_type(data="float64")[1] == [np.dtype("float64")]
    sym.check()


def test_infer_shape_errors_name_the_node():
    sym, *_ = traced_mlp()
    with pytest.raises(la.ShapeError) as info:
        sym.infer_shape(data=(32, 7))
    assert "dense" in str(info.value) and "[32,7]" in str(info.value)
    with pytest.raises(la.GraphError):
        sym.infer_shape(nope=(1, 2))


def test_captured_constant_is_shared_and_keeps_its_value():
    w = la.array([1.0, 2.0])
    x = la.array([3.0, 4.0])
    with la.deferred():
        y = x * w + w
    sym = la.get_symbol(y, inputs={"x": x})
    assert sym.list_inputs() == ["x"]
    assert len(sym.constant_nodes()) == 1  # w used twice is one constant
    np.testing.assert_array_equal(list(sym.constants().values())[0], [1.0, 2.0])


def test_output_not_depending_on_input_is_fine_and_unused_input_warns():
    x, unused = la.ones((2,)), la.ones((3,))
    with la.deferred():
        y = x * 2
        z = la.ones((2,)) + 1  # depends on no input at all
    with pytest.warns(la.UnusedInputWarning, match="'u'"):
        sym = la.get_symbol([y, z], inputs={"x": x, "u": unused})
    assert sym.list_inputs() == ["x", "u"] and len(sym.list_outputs()) == 2  # declared: kept as an input


def test_a_declared_but_unused_input_stays_an_input_of_the_cached_op():
    a, b, c = la.ones((2,)), la.ones((3,)), la.ones((2,))
    with la.deferred():
        y = a * 2 + c
    with pytest.warns(la.UnusedInputWarning, match="'0'.*stays an input"):
        sym = la.get_symbol(y, inputs={"0": b, "a": a, "c": c})
    assert sym.list_inputs() == ["a", "c", "0"]
    assert "%0 = input : float32[3]" in str(sym)
    op = la.CachedOp(sym)
    want = [5.0, 5.0]
    assert op(**{"0": la.zeros((3,)), "a": la.full((2,), 2.0), "c": la.ones((2,))}).asnumpy().tolist() == want
    assert op(la.full((2,), 2.0), la.ones((2,)), la.zeros((3,))).asnumpy().tolist() == want
    with pytest.raises(la.ParamError, match="missing input"):
        op(a=la.ones((2,)), c=la.ones((2,)))
    x = la.full((2,), 2.0)
    x.attach_grad()
    with la.autograd.record():
        out = op(x, la.ones((2,)), la.zeros((3,)))
    out.backward()
    assert x.grad.asnumpy().tolist() == [2.0, 2.0]
    with la.deferred():  # inlined into a recording: the unused input is ignored there too
        inl = op(la.ones((2,)), la.ones((2,)), la.zeros((3,)))
    assert inl.asnumpy().tolist() == [3.0, 3.0]


def test_get_symbol_copies_graph_so_recording_is_untouched():
    x = la.ones((2,))
    with la.deferred():
        y = x + 1
    sym = la.get_symbol(y, inputs={"x": x})
    assert sym.outputs[0].node is not y._entry.node
    np.testing.assert_allclose(y.asnumpy(), [2.0, 2.0])


def test_input_created_inside_deferred_can_be_named():
    with la.deferred():
        x = la.ones((2, 2)) * 1  # a lazy value used as the graph input
        y = la.exp(x)
    sym = la.get_symbol(y, inputs={"x": x})
    assert sym.list_inputs() == ["x"]
    assert [n.op.name for n in sym.topo() if n.op is not None] == ["exp"]


def test_get_symbol_rejects_non_arrays():
    with pytest.raises(TypeError):
        la.get_symbol([1.0])
