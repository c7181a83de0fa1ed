"""The dispatcher's recording hot path builds the same nodes as the general path."""
from __future__ import annotations

import sys

import numpy as np

import lazyarray as la
from lazyarray.graph.node import Node, op_node


def _slots(node: Node) -> dict:
    return {k: getattr(node, k) for k in Node.__slots__ if k not in ("__weakref__", "serial", "shown", "chain")}


def test_the_hot_path_sets_every_slot_of_the_node_as_op_node_does():
    x = la.array(np.arange(3, dtype="float32"))
    with la.deferred():
        y = la.tanh(x * 2.0)
        line = sys._getframe().f_lineno - 1
        z = y + y
    for out in (y, z):
        node = out._entry.node
        ref = op_node(node.op, node.inputs, {}, node.avals, node.source, node.block)
        assert _slots(node) == _slots(ref)
        assert node.serial > node.inputs[0].node.serial  # (creation order)
        assert node.shown() is out  # the one array showing it, weakly
    assert y._entry.node.source == (__file__, line)  # the user's line, through la.tanh's wrapper
    assert z._entry.node.params == {} and z._entry.node.params is not y._entry.node.params
    np.testing.assert_allclose(z.asnumpy(), 2 * np.tanh(np.arange(3, dtype="float32") * 2), rtol=1e-6)


def test_a_scalar_beside_an_array_is_one_shared_constant_of_the_arrays_dtype():
    for dtype in ("float32", "float64", "int32"):
        x = la.array(np.arange(3, dtype=dtype))
        with la.deferred():
            a, b = x * 3, x * 3
        ca, cb = a._entry.node.inputs[1].node, b._entry.node.inputs[1].node
        assert ca is cb and ca.kind == "const" and ca.avals[0].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a.asnumpy(), np.arange(3, dtype=dtype) * 3)
        assert a.dtype == np.dtype(dtype)


def test_each_call_site_records_its_own_line_on_every_pass():
    x = la.array(np.ones(3, dtype="float32"))
    here = sys._getframe().f_lineno
    with la.deferred():
        for _ in range(3):  # (later passes read the memoized call sites)
            a = la.tanh(x)
            b = a * 2.0
            c = la.multiply(b, a)
            for out, line in ((a, here + 3), (b, here + 4), (c, here + 5)):
                assert out._entry.node.source == (__file__, line)


def test_code_objects_that_come_and_go_never_lend_their_call_sites():
    import gc

    x = la.array(np.ones(3, dtype="float32"))
    text = "with la.deferred():\n    y = la.tanh(x) * 2.0\n"
    for k in range(40):  # fresh code objects, freed each pass (their ids get reused)
        name = f"<chain-{k % 3}>"
        ns = {"la": la, "x": x}
        exec(compile(text, name, "exec"), ns)
        y = ns["y"]
        assert y._entry.node.source == (name, 2)
        assert y._entry.node.inputs[0].node.source == (name, 2)
        del ns, y
        gc.collect()


def test_output_avals_follow_the_op_and_the_input_avals_on_every_pass():
    for _ in range(2):  # (the second pass reads the hot path's memo)
        for dtype in ("float32", "float64", "int32"):
            x = la.array(np.arange(1, 4, dtype=dtype))
            with la.deferred():
                outs = {"add": x + x, "equal": x == x, "sqrt": la.sqrt(x), "true_divide": x / x,
                        "broadcast": x + la.array(np.ones((2, 1), dtype=dtype))}
            xn = np.arange(1, 4, dtype=dtype)
            ref = {"add": xn + xn, "equal": xn == xn, "sqrt": np.sqrt(xn), "true_divide": xn / xn,
                   "broadcast": xn + np.ones((2, 1), dtype=dtype)}
            for k, out in outs.items():
                assert (out.dtype, out.shape) == (ref[k].dtype, ref[k].shape), (k, dtype)
                np.testing.assert_allclose(out.asnumpy(), ref[k], rtol=1e-6)


def test_scalars_beside_arrays_keep_dtype_sign_and_nan_on_every_pass():
    for _ in range(2):  # (the second pass reads the hot path's memo)
        for dtype in ("float32", "float64", "int8", "int32"):
            xn = np.arange(1, 4, dtype=dtype)
            x = la.array(xn)
            scalars = (2, 2.0, 0.0, -0.0, True) if dtype.startswith("int") else (2, 2.0, 0.0, -0.0, float("nan"), True)
            with la.deferred():
                outs = [(v, x * v, v * x) for v in scalars]
            for v, a, b in outs:
                for out in (a, b):
                    ref = xn * v
                    assert out.dtype == ref.dtype, (dtype, v)
                    got = out.asnumpy()
                    np.testing.assert_array_equal(got, ref)
                    np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
