"""``Program.run`` binds its inputs by one slice when their slots are 0..n-1 (the graph inputs take the
first slots, in the order given, read or not), else one by one (an input given twice)."""
import numpy as np

import lazyarray as la
from lazyarray.executor.program import compile_program


def test_inputs_in_the_first_slots_are_bound_by_a_slice():
    x, y = la.sym.var("x", shape=(3,)), la.sym.var("y", shape=(3,))
    out = la.sym.relu(x - y)
    prog = compile_program(list(out.outputs), [x.outputs[0].node, y.outputs[0].node])
    assert prog._in_prefix == 2
    a, b = np.array([1.0, -2.0, 3.0], "float32"), np.array([0.5, 0.5, 4.0], "float32")
    np.testing.assert_array_equal(prog.run([a, b])[0], np.maximum(a - b, 0))
    np.testing.assert_array_equal(prog.run([b, a])[0], np.maximum(b - a, 0))


def test_an_unread_input_has_a_slot_of_its_own_in_the_prefix():
    x, y, z = (la.sym.var(n, shape=(3,)) for n in "xyz")
    out = la.sym.tanh(z) * 2
    prog = compile_program(list(out.outputs), [x.outputs[0].node, y.outputs[0].node, z.outputs[0].node])
    assert prog._in_prefix == 3 and prog.in_slots == [0, 1, 2]
    c = np.array([0.1, 0.2, -0.3], "float32")
    np.testing.assert_allclose(prog.run([np.zeros(3, "float32"), np.ones(3, "float32"), c])[0], np.tanh(c) * 2,
                               rtol=1e-6)


def test_inputs_the_walk_meets_late_still_take_the_first_slots():
    # y is read only by the last node: the topological walk meets it after x's chain
    x, y = la.sym.var("x", shape=(3,)), la.sym.var("y", shape=(3,))
    out = la.sym.tanh(la.sym.exp(x) * 2) + y
    prog = compile_program(list(out.outputs), [y.outputs[0].node, x.outputs[0].node])
    assert prog._in_prefix == 2
    a, b = np.array([0.1, 0.2, -0.3], "float32"), np.array([1.0, 2.0, 3.0], "float32")
    np.testing.assert_array_equal(prog.run([b, a])[0], np.tanh(np.exp(a) * 2) + b)


def test_an_input_given_twice_is_bound_one_by_one():
    x = la.sym.var("x", shape=(3,))
    out = la.sym.tanh(x) * 2
    node = x.outputs[0].node
    prog = compile_program(list(out.outputs), [node, node])
    assert prog._in_prefix == -1
    c = np.array([0.1, 0.2, -0.3], "float32")
    np.testing.assert_allclose(prog.run([c, c])[0], np.tanh(c) * 2, rtol=1e-6)


def test_outputs_handed_out_are_never_overwritten_by_the_next_run():
    x = la.sym.var("x", shape=(4,))
    out = la.sym.relu(x * 2)
    prog = compile_program(list(out.outputs), [x.outputs[0].node])
    first = prog.run([np.arange(4, dtype="float32")])[0]
    second = prog.run([-np.arange(4, dtype="float32")])[0]
    np.testing.assert_array_equal(first, [0, 2, 4, 6])
    np.testing.assert_array_equal(second, [0, 0, 0, 0])
    del first, second
    third = prog.run([np.ones(4, "float32")])[0]  # the memory nobody holds is reused
    np.testing.assert_array_equal(third, [2, 2, 2, 2])
