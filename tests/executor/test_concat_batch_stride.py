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


# -- a DenseNet block at a batch stride: nested concatenations, pooled parts, batch norm readers ----
POOLS = {"max_pool2d_relu": lambda x: la.sym.nn.max_pool2d_relu(x, kernel=(2, 2)),
         "avg_pool2d": lambda x: la.sym.nn.avg_pool2d(x, kernel=(2, 2)),
         "max_pool2d windows": lambda x: la.sym.nn.max_pool2d(x, kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
         "exp (no strided writer)": lambda x: la.sym.exp(la.sym.nn.avg_pool2d(x, kernel=(2, 2)))}


def _dense_block(n, dtype, pool, layers=3):
    """A pooled map, then ``layers`` layers each reading the batch norm and relu of the concatenation
    of every earlier map (the first a concatenation of one part), then the last one's."""
    names = ["x"]
    x = la.sym.var("x", shape=(n, 4, 8, 8), dtype=dtype)
    feats = [POOLS[pool](x)]

    def stats(k, c):
        out = []
        for s in ("g", "b", "m", "v"):
            names.append(f"{s}{k}")
            out.append(la.sym.var(names[-1], shape=(c,), dtype=dtype))
        return out

    for k in range(layers + 1):
        c = 4 + 2 * k
        h = la.sym.nn.batch_norm_relu(la.sym.concatenate(feats, axis=1), *stats(k, c))
        if k == layers:
            return B.SymbolBlock(h * 1.0, names), names
        names.append(f"w{k}")
        feats.append(la.sym.nn.conv2d(h, la.sym.var(names[-1], shape=(2, c, 3, 3), dtype=dtype), padding=(1, 1)))


def _dense_args(names, n, dtype):
    rng = np.random.default_rng(n)
    out = []
    for k in names:
        if k == "x":
            out.append(rng.standard_normal((n, 4, 8, 8)))
        elif k[0] == "w":
            c = 4 + 2 * int(k[1:])
            out.append(rng.standard_normal((2, c, 3, 3)))
        else:
            c = 4 + 2 * int(k[1:])
            out.append(rng.random(c) + 0.1 if k[0] == "v" else rng.standard_normal(c))
    return [la.array(a.astype(dtype)) for a in out]


DENSE_TUNINGS = [{}, {"jit": False}, {"max_pool_windows": False, "conv_blocked": False}]


@pytest.mark.parametrize("tuning", range(len(DENSE_TUNINGS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("pool", list(POOLS))
def test_a_dense_block_at_a_batch_stride_equals_the_copying_program(pool, n, dtype, tuning):
    with la.tuning(**DENSE_TUNINGS[tuning]):
        (net, names), (ref, _) = _dense_block(n, dtype, pool), _dense_block(n, dtype, pool)
        args = _dense_args(names, n, dtype)
        net.hybridize()
        ref.hybridize()
        with la.tuning(concat_in_place=False):
            want = ref(*args).asnumpy()
        for _ in range(3):  # (the first run, the binding run, a bound run)
            got = net(*args).asnumpy()
            assert got.tobytes() == want.tobytes()
        text = str(net.explain(*args))
    writes = pool != "exp (no strided writer)" or n == 1  # (one image: its parts are contiguous stretches)
    assert ("4 concatenations written in place" in text) == writes
    assert (f"concatenate[{IN_PLACE}]" in text) == writes


def test_place_nests_a_batchs_concatenations_at_the_outer_image_stride():
    # x -> p (2 images of 8 bytes); c1 = concat(p); q = f(c1) (2 x 4 bytes); c2 = concat(p, q) -> out
    vals = [Value(32, external=True), Value(16), Value(16), Value(8), Value(24), Value(8, escapes=True)]
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((2,), (3,)), Step((1, 3), (4,)), Step((4,), (5,))]
    new, done = place(vals, steps, {1: (0,), 3: (0, 8)}, {1, 3}, Strided({1: 2, 3: 2}, frozenset({1, 3})))
    assert done == {1, 3}
    assert [(v.view_of, v.view_at, v.view_stride) for v in new[1:5]] == [(4, 0, (2, 12)), (4, 0, (2, 12)),
                                                                        (4, 8, (2, 12)), (None, 0, ())]
    plan_memory(new, steps).check()
    # the outer one's new part no strided writer: neither is written in place (the inner's part, p, then
    # read as its own value by a copy would be a strided view of nothing)
    new, done = place(vals, steps, {1: (0,), 3: (0, 8)}, {1, 3}, Strided({1: 2, 3: 2}, frozenset({1})))
    assert done == {1} and new[4].view_of is None and new[1].view_of == 2
    # a part handed in from outside (the input x) is never placed: the outer one keeps its step
    steps2 = [Step((0,), (1,)), Step((1,), (2,)), Step((2,), (3,)), Step((0, 3), (4,)), Step((4,), (5,))]
    vals2 = vals[:1] + [Value(16)] * 3 + [Value(40), Value(8, escapes=True)]
    new, done = place(vals2, steps2, {3: (0, 16)}, {1, 3}, Strided({3: 2}, frozenset({1, 3})))
    assert not done and all(v.view_of is None for v in new)
