"""``explain()`` names the implementation each compiled step ran, its shapes, buffer and workspace."""
from __future__ import annotations

import numpy as np

import lazyarray as la


def _cnn(channels=64):
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Conv2D(channels, 3, padding=1, in_channels=channels), la.blocks.Activation("relu"),
            la.blocks.Conv2D(channels, 3, padding=1, groups=channels, in_channels=channels),
            la.blocks.Flatten(), la.blocks.Dense(10))
    net.initialize()
    net.hybridize()
    return net


def test_explain_names_the_path_the_tuning_forces():
    net = _cnn()
    x = la.array(np.random.default_rng(0).standard_normal((4, 64, 16, 16)).astype(np.float32))
    want = net(x).asnumpy()
    rows = {}
    for settings, name in (({}, "winograd4"), ({"winograd_max_tile": 2}, "winograd2"), ({"winograd": False}, "im2col")):
        with la.tuning(min_split_macs=1 << 62, **settings):
            exp = net.explain(x)
            np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-3, atol=1e-3)
        first = exp.steps[0]
        # (the relu after it runs in the same step: nn.conv2d_act, graph/passes/conv_activation.py)
        assert first["op[implementation]"].startswith(f"nn.conv2d_act[compiled, {name}"), exp
        assert first["node"] == "conv2d_act0" and first["inputs"] == "[4,64,16,16], [64,64,3,3], [64]"
        rows[name] = exp
    assert "nn.conv2d[depthwise]" in str(rows["im2col"])
    assert str(rows["winograd4"]).startswith("program: ")


def test_explain_shows_buffers_workspace_and_the_plan_totals():
    net = _cnn(8)
    x = la.ones((2, 8, 8, 8))
    exp = net.explain(x)
    text = str(exp)
    assert len(exp.programs) == 1
    prog, rows = exp.programs[0]
    assert len(rows) == len(prog.steps)
    assert f"peak {prog.plan.peak_bytes:,} bytes" in text
    assert rows[-1]["memory"].endswith("(to caller)")
    assert rows[0]["workspace"] != "-"  # im2col's columns
    assert any(r["memory"].startswith("#") for r in rows[:-1])


def test_explain_of_an_imperative_block_lists_its_kernel_calls():
    net = la.blocks.Dense(3, in_units=4)
    net.initialize()
    exp = net.explain(la.ones((2, 4)))
    assert exp.programs == [] and [e.key for e in exp.eager] == ["nn.dense[gemm]"]
    assert "eager: 1 kernel calls" in str(exp) and "hybridize()" in str(exp)


def test_cached_op_explain_shows_its_program():
    x = la.sym.var("x", shape=(2, 3))
    op = la.CachedOp(la.sym.relu(x * 2))
    exp = op.explain(la.ones((2, 3)))
    assert [r["op[implementation]"] for r in exp.steps] == ["multiply[multiply]", "relu[maximum]"]
    assert exp._repr_html_().startswith("<pre>")
