"""The forms of a compiled step's closure (``executor/step_forms.py``): each calls its kernel with the
slots' values, writes its results where the step's kind says, drops the slots it was the last reader
of, and re-raises a kernel's failure naming the node."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.step_forms import FORMS, FREEING, step_error


def _node():
    x = la.sym.var("x", shape=(2, 3))
    return (la.sym.relu(x) * 2).outputs[0].node  # (a node with inputs, for the error's message)


def _slots():
    return [np.arange(6.0).reshape(2, 3), np.ones((2, 3)), np.full((2, 3), 2.0), None, np.empty((2, 3)),
            np.empty((2, 3)), "dropped"]


def _sum_into(*arrays, out=None, scale=1.0):
    np.multiply(sum(arrays), scale, out=out if not isinstance(out, tuple) else out[0])
    if isinstance(out, tuple):
        np.negative(out[0], out=out[1])


def _sum_of(*arrays, scale=1.0):
    return sum(arrays, np.zeros((2, 3))) * scale


@pytest.mark.parametrize("ins", [(), (0,), (0, 1), (0, 1, 2, 0)])
def test_out_any_and_fresh_any_take_inputs_of_any_arity_and_parameters(ins):
    s = _slots()
    want = sum((s[i] for i in ins), np.zeros((2, 3))) * 3
    FORMS["out_any"](_sum_into, ins, (4,), {"scale": 3.0}, _node())(s)
    FORMS["fresh_any"](_sum_of, ins, (3,), {"scale": 3.0}, _node())(s)
    np.testing.assert_array_equal(s[4], want)
    np.testing.assert_array_equal(s[3], want)


def test_outs_writes_each_planned_output_and_multi_keeps_scalars_arrays():
    s = _slots()
    FORMS["outs"](_sum_into, (0, 1), (4, 5), {"scale": 2.0}, _node())(s)
    np.testing.assert_array_equal(s[4], (s[0] + s[1]) * 2)
    np.testing.assert_array_equal(s[5], -(s[0] + s[1]) * 2)
    FORMS["multi"](lambda a, b: (np.float64(a.sum()), b + 1), (0, 1), (3, 6), {}, _node())(s)
    assert isinstance(s[3], np.ndarray) and s[3].shape == () and s[3] == 15.0
    np.testing.assert_array_equal(s[6], np.full((2, 3), 2.0))
    FORMS["fresh_scalar"](lambda a: np.float32(a.max()), (0,), (3,), {}, _node())(s)
    assert isinstance(s[3], np.ndarray) and s[3].dtype == np.float32 and s[3] == 5.0


@pytest.mark.parametrize("form", sorted(FREEING))
def test_the_freeing_forms_drop_the_slots_they_read_last(form):
    s = _slots()
    fn = {"out_any": _sum_into, "outs": _sum_into, "fresh1": _sum_of, "fresh_any": _sum_of,
          "fresh_scalar": lambda a: np.float64(a.sum()), "multi": lambda a: (a + 1, a + 2)}[form]
    ins = (0,)
    outs = (4, 5) if form in ("outs", "multi") else (4,)
    FREEING[form](fn, ins, outs, {}, _node(), (6, 1))(s)
    assert s[6] is None and s[1] is None
    assert s[4] is not None and s[0] is not None


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_failing_kernel_is_re_raised_naming_the_node(form):
    def broken(*arrays, **kw):
        raise ValueError("broken kernel")

    node = _node()
    outs = (4, 5) if form in ("outs", "multi") else (4,)
    ins = (0, 1) if form in ("ufunc2", "out2") else (0, 1, 2) if form == "out3" else (0,)
    with pytest.raises(la.LazyArrayError) as info:
        FORMS[form](broken, ins, outs, {}, node)(_slots())
    assert node.op.name in str(info.value) and "float32[2,3]" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert type(step_error(node, ValueError("x"))) is type(info.value)


def test_a_compiled_program_runs_its_steps_through_the_forms():
    # a multiply by a constant (ufunc2), a sum with parameters (fresh_any / out_any), a reshape (fresh1)
    x = la.sym.var("x", shape=(2, 3, 4))
    y = la.sym.reshape(la.sym.sum(x * 2, axis=(1,), keepdims=True), shape=(2, 4))
    op = la.CachedOp(y, fuse=False)
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for _ in range(3):  # (a program's first run, its binding run, then its bound steps)
        np.testing.assert_array_equal(op(la.array(xv)).asnumpy(), (xv * 2).sum(axis=1))


@pytest.mark.parametrize("ins", [(0,), (0, 1), (0, 1, 2), (0, 1, 2, 0), (0, 1, 2, 0, 1), (0, 1, 2, 0, 1, 2)])
def test_a_bound_step_without_parameters_takes_the_bare_forms(ins):
    # (``kw`` empty: a bound choice; called without ``**kw``, the same values, the same slots dropped)
    s, calls = _slots(), []

    def into(*arrays, out=None, **kw):
        calls.append(kw)
        return _sum_into(*arrays, out=out)

    def fresh(*arrays, **kw):
        calls.append(kw)
        return _sum_of(*arrays)

    want = sum((s[i] for i in ins), np.zeros((2, 3)))
    FORMS["out_any"](into, ins, (4,), {}, _node(), (6,))(s)
    np.testing.assert_array_equal(s[4], want)
    assert s[6] is None
    FORMS["fresh1" if len(ins) == 1 else "fresh_any"](fresh, ins, (3,), {}, _node(), (5,))(s)
    np.testing.assert_array_equal(s[3], want)
    assert s[5] is None and s[0] is not None
    s = _slots()
    FORMS["outs"](into, ins, (4, 5), {}, _node(), (3, 6))(s)
    np.testing.assert_array_equal(s[4], want)
    np.testing.assert_array_equal(s[5], -want)
    assert s[3] is None and s[6] is None and calls == [{}, {}, {}]


@pytest.mark.parametrize("n", [1, 2, 4, 5, 6])
@pytest.mark.parametrize("form", ["out_any", "fresh_any", "outs"])
def test_a_bare_form_re_raises_a_failure_naming_the_node(form, n):
    def broken(*arrays, **kw):
        raise ValueError("broken kernel")

    node = _node()
    outs = (4, 5) if form == "outs" else (4,)
    with pytest.raises(la.LazyArrayError) as info:
        FORMS[form](broken, tuple(range(n)), outs, {}, node)(_slots())
    assert node.op.name in str(info.value) and "float32[2,3]" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
