"""Issue #38 item 6: an error inside a model says which block failed, once, and points at the user's
line; TraceError names the user's line once; writing a weight before backward names the parameter."""
from __future__ import annotations

import linecache
import traceback

import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.user_frames import in_package


class _Branches(B.HybridBlock):
    def forward(self, x):
        if x.sum() > 0:  # a value read while traced
            return x
        return -x


def test_trace_error_names_the_users_line_once():
    net = _Branches()
    net.hybridize()
    with pytest.raises(la.TraceError) as info:
        net(la.ones((2, 2)))
    line = "if x.sum() > 0:"
    assert str(info.value).count(line) == 1
    assert "test_error_context.py:" in str(info.value)


class _Body(B.HybridBlock):
    def __init__(self, inner):
        super().__init__()
        self.body = B.HybridSequential()
        self.body.add(inner)

    def forward(self, x):
        return self.body(x)  # the user's line the traceback ends at


def _three_layers(inner):
    net = B.HybridSequential()
    net.add(B.Activation("relu"), _Body(inner), B.Activation("relu"))
    net.initialize()
    return net


def _formatted(exc) -> str:
    return "".join(traceback.format_exception(exc))


@pytest.mark.parametrize("mode", ["eager", "deferred", "hybridized"])
def test_a_conv_shape_error_names_its_block_once_and_ends_at_the_users_line(mode):
    net = _three_layers(B.Conv2D(8, 3, in_channels=5))
    x = la.ones((1, 3, 8, 8))
    if mode == "hybridized":
        net.hybridize()
    with pytest.raises(la.ShapeError) as info:
        if mode == "deferred":
            with la.deferred():
                net(x)
        else:
            net(x)
    text = _formatted(info.value)
    assert text.count("in block 1.body.0 (Conv2D)") == 1
    assert text.count("in block") == 1
    frames = traceback.extract_tb(info.value.__traceback__)
    inside = [f for f in frames if in_package(f.filename)]
    assert len(inside) <= 1  # the outermost block call that raises it again (31 before, hybridized)
    assert frames[-1].filename == __file__ and "the user's line" in linecache.getline(__file__, frames[-1].lineno)
    assert "left" in text and "of its own frames out" in text


def test_a_compiled_graph_error_names_the_block_that_recorded_the_node():
    net = _three_layers(B.Embedding(5, 3))
    net.hybridize()
    net(la.array([1, 2]))
    with pytest.raises(la.OpIndexError) as info:
        net(la.array([1, 7]))
    text = _formatted(info.value)
    assert text.count("in block 1.body.0 (Embedding)") == 1 and text.count("in block") == 1
    assert isinstance(info.value.__cause__, IndexError)  # the kernel's own error stays chained


def test_an_error_in_the_top_blocks_own_forward_names_it():
    net = _Branches()
    with pytest.raises(la.ShapeError) as info:
        net(la.ones((2, 3)).reshape((4, 4)))
    assert "in block" not in _formatted(info.value)  # (raised outside the block: no block to name)
    net = B.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(la.LazyArrayError) as info:
        net(la.ones((2, 4)))
    assert _formatted(info.value).count("in block (top) (Dense)") == 1


def test_full_tracebacks_keep_the_frames():
    net = _three_layers(B.Conv2D(8, 3, in_channels=5))
    with la.tuning(full_tracebacks=True), pytest.raises(la.ShapeError) as info:
        net(la.ones((1, 3, 8, 8)))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert sum(in_package(f.filename) for f in frames) > 5
    assert _formatted(info.value).count("in block 1.body.0 (Conv2D)") == 1


@pytest.mark.parametrize("hybridize", [False, True])
def test_writing_a_weight_before_backward_names_the_parameter_and_the_fix(hybridize):
    net = B.HybridSequential()
    net.add(B.Dense(2, in_units=3), B.Dense(1, in_units=2))
    net.initialize()
    if hybridize:
        net.hybridize()
    with la.autograd.record():
        y = net(la.ones((4, 3))).sum()
    w = net[1].weight.data()
    w[:] = 0
    with pytest.raises(la.AutogradError) as info:
        y.backward()
    msg = str(info.value)
    assert "'1.weight'" in msg and "call backward()" in msg
    assert "x = x + 1" not in msg
