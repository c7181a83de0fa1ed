"""channel_shuffle: reshape -> transpose -> reshape of a channel shuffle (of a concatenation: its inputs)
-> nn.channel_shuffle in inference graphs, the recorded values bit for bit (float32/float64, empty
batches), only where the chain's inner values feed nothing but the next op; ShuffleNet's fixture equal to
the pass switched off and to onnxruntime, its split views made once; graphs that train keep the ops."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.channel_shuffle import channel_shuffle
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(2)
pytestmark = pytest.mark.usefixtures("kernel_path")
S = la.sym


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _shuffle(v, shape, groups, axes=None):
    n, c = shape[:2]
    rest = tuple(shape[2:])
    split = S.reshape(v, shape=(n, groups, c // groups) + rest)
    t = S.transpose(split, axes=axes or (0, 2, 1) + tuple(range(3, len(shape) + 1)))
    return S.reshape(t, shape=tuple(shape))


@pytest.mark.parametrize("shape,groups,parts", [((2, 8, 3, 3), 2, 2), ((1, 12, 2, 2), 3, 1), ((0, 8, 2, 2), 2, 2),
                                                ((2, 6, 5), 3, 3)],
                         ids=["halves", "one-input", "empty-batch", "ncl-three-parts"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(shape, groups, parts, dtype, run_symbol):
    widths = [shape[1] // parts] * parts
    xs = [S.var(f"x{i}", shape=(shape[0], w) + tuple(shape[2:]), dtype=dtype) for i, w in enumerate(widths)]
    v = S.concatenate(xs, axis=1) if parts > 1 else xs[0]
    sym = _shuffle(v, shape, groups)
    out = channel_shuffle(sym).check()
    assert _ops(out) == ["channel_shuffle"]
    node = [n for n in out.topo() if n.op is not None][0]
    assert node.params["groups"] == groups and len(node.inputs) == parts
    values = {f"x{i}": RNG.standard_normal((shape[0], w) + tuple(shape[2:])).astype(dtype)
              for i, w in enumerate(widths)}
    np.testing.assert_array_equal(run_symbol(out, **values)[0], run_symbol(sym, **values)[0])


def test_what_it_leaves_alone():
    shape = (1, 8, 2, 2)
    a, b = S.var("a", shape=(1, 4, 2, 2)), S.var("b", shape=(1, 4, 2, 2))
    v = S.concatenate([a, b], axis=1)
    split = S.reshape(v, shape=(1, 2, 4, 2, 2))
    t = S.transpose(split, axes=(0, 2, 1, 3, 4))
    cases = {
        "other axes": _shuffle(v, shape, 2, axes=(0, 1, 2, 4, 3)),
        "the split read twice": Symbol([S.reshape(t, shape=shape).outputs[0], split.outputs[0]]),
        "the transpose read twice": Symbol([S.reshape(t, shape=shape).outputs[0], t.outputs[0]]),
        "not back to v's shape": S.reshape(t, shape=(1, 8, 4)),
    }
    for what, sym in cases.items():
        assert "channel_shuffle" not in _ops(channel_shuffle(sym)), what
    # the concatenation read elsewhere too: the shuffle of its value, the concatenation kept
    both = Symbol([_shuffle(v, shape, 2).outputs[0], v.outputs[0]])
    assert sorted(_ops(channel_shuffle(both))) == ["channel_shuffle", "concatenate"]


def test_the_tuning_switch_turns_it_off():
    sym = _shuffle(S.var("x", shape=(1, 4, 2, 2)), (1, 4, 2, 2), 2)
    with la.tuning(channel_shuffle=False):
        assert channel_shuffle(sym) is sym
    assert _ops(channel_shuffle(sym)) == ["channel_shuffle"]


def test_shufflenet_equals_the_pass_switched_off_and_onnxruntime(pass_on_off):
    """The fixture (issue #35) at every size: each unit's concatenation and shuffle one node (four before),
    the split after it views made once, the values bit for bit those of the recorded ops, and
    onnxruntime's."""
    run = pass_on_off("shufflenet_mini", "channel_shuffle")
    for case, on, off, refs in run.cases:
        for a, b, r in zip(on, off, refs):
            np.testing.assert_array_equal(a, b, err_msg=case)
            np.testing.assert_allclose(a, r, rtol=1e-3, atol=1e-4, err_msg=case)
    on = run.on_ops
    assert on.count("channel_shuffle") == 4 and "transpose" not in on and "concatenate" not in on, on
    assert len(on) == len(run.off_ops) - 4 * 3, (on, run.off_ops)  # (concatenate, reshape, transpose, reshape -> one, four times)
    text = str(run.program.explain(**{k: la.array(v) for k, v in run.first.items()}))
    assert text.count("getitem[view made once]") == 4, text


def test_graphs_that_train_keep_the_recorded_ops():
    a, b = S.var("a", shape=(2, 4, 2, 2)), S.var("b", shape=(2, 4, 2, 2))
    sym = _shuffle(S.concatenate([a, b], axis=1), (2, 8, 2, 2), 2)
    op = la.CachedOp(sym)
    arrays = {k: la.array(RNG.standard_normal((2, 4, 2, 2)).astype("float32")) for k in ("a", "b")}
    for x in arrays.values():
        x.attach_grad()
    with la.autograd.record():
        y = op(**arrays)
    y.backward()
    assert arrays["a"].grad is not None
    compiled = [c for c in op._cache.values() if c.backward is not None]
    assert compiled and all("channel_shuffle" not in _ops(c.sym) for c in compiled)
