"""A batch's concatenation on the channel axis written in place at a batch stride
(``executor/concat_in_place.py``): the planner's placement (``Value.view_stride``, only parts written by
``STRIDED_WRITERS``' steps, the result a root), and compiled fire modules (a 1x1 and a 3x3 convolution
with their ReLUs, concatenated) equal to the copying program bit for bit at batch 1 and 3, float32 and
float64, under the tunings that choose each kernel; a part its step cannot write as a view keeps the
concatenate step; ``explain()`` shows the concatenation written in place."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.executor.concat_in_place import IN_PLACE, Strided, place
from lazyarray.executor.plan import Step, Value, plan_memory


def test_place_puts_a_batchs_parts_at_its_image_stride():
    # x -> a (2 images of 8 bytes), b (2 images of 16 bytes) -> c = concat(a, b) on axis 1 -> out
    vals = [Value(32, external=True), Value(16), Value(32), Value(48), Value(8, escapes=True)]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,)), Step((3,), (4,))]
    new, done = place(vals, steps, {2: (0, 8)}, {1, 2}, Strided({2: 2}, frozenset({1, 2})))
    assert done == {2}
    assert [(v.view_of, v.view_at, v.view_stride) for v in new[1:4]] == [(3, 0, (2, 24)), (3, 8, (2, 24)),
                                                                        (None, 0, ())]
    plan_memory(new, steps).check()
    new, done = place(vals, steps, {2: (0, 8)}, {1, 2}, Strided({2: 2}, frozenset({1})))  # (b: no such writer)
    assert not done and all(v.view_of is None for v in new)


def _fire(n, dtype, relu_after=True):
    x = la.sym.var("x", shape=(n, 4, 7, 7), dtype=dtype)
    ws = [la.sym.var(k, shape=s, dtype=dtype) for k, s in (("w1", (8, 4, 1, 1)), ("b1", (8,)),
                                                           ("w3", (8, 4, 3, 3)), ("b3", (8,)))]
    act = la.sym.relu if relu_after else la.sym.exp
    e1 = act(la.sym.nn.conv2d(x, ws[0], ws[1]))
    e3 = act(la.sym.nn.conv2d(x, ws[2], ws[3], padding=(1, 1)))
    y = la.sym.nn.max_pool2d(la.sym.concatenate([e1, e3], axis=1), kernel=(2, 2))
    return B.SymbolBlock(y, ["x", "w1", "b1", "w3", "b3"])


def _args(n, dtype):
    rng = np.random.default_rng(n)
    return [la.array(rng.standard_normal(s).astype(dtype))
            for s in ((n, 4, 7, 7), (8, 4, 1, 1), (8,), (8, 4, 3, 3), (8,))]


TUNINGS = [{}, {"conv_pointwise_loop": False}, {"conv_blocked": False}, {"jit": False}]


@pytest.mark.parametrize("tuning", range(len(TUNINGS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 3])
def test_a_fire_module_equals_the_copying_program(n, dtype, tuning):
    args = _args(n, dtype)
    with la.tuning(**TUNINGS[tuning]):
        net, ref = _fire(n, dtype), _fire(n, dtype)
        net.hybridize()
        ref.hybridize()
        with la.tuning(concat_in_place=False):
            want = ref(*args).asnumpy()
            assert f"concatenate[{IN_PLACE}]" not in str(ref.explain(*args))
        for _ in range(3):  # (the first run, the binding run, a bound run)
            got = net(*args).asnumpy()
            assert got.tobytes() == want.tobytes()
        assert f"concatenate[{IN_PLACE}]" in str(net.explain(*args))


def test_a_part_its_step_cannot_write_as_a_view_keeps_the_step():
    args = _args(3, "float32")
    net, ref = _fire(3, "float32", relu_after=False), _fire(3, "float32", relu_after=False)
    net.hybridize()
    ref.hybridize()
    with la.tuning(concat_in_place=False):
        want = ref(*args).asnumpy()
    got = net(*args).asnumpy()
    assert got.tobytes() == want.tobytes()
    assert f"concatenate[{IN_PLACE}]" not in str(net.explain(*args))
    assert "concatenate[" in str(net.explain(*args))
