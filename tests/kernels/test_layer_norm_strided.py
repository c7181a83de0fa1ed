"""layer_norm[strided_rows]: a channels-last view's rows (NCHW seen as NHWC, ConvNeXt's layer norm) bit for
bit ``in_place``'s and the reference's values, float32 and float64, row lengths 1 to 1100, one-value spatial
axes, NaN / inf / -0.0 rows, empty dims, ``out`` given or not; the layouts it takes (``channels_last``) and
declines; its binder; the convnext_mini fixture and a wider block (192, 768 channels) as onnxruntime and as the
impl switched off."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import layer_norm as L
from lazyarray.ops import registry
from lazyarray.tuning_table import current

RNG = np.random.default_rng(35)
REFERENCE = registry.get("layer_norm").kernel
FIXTURES = Path(__file__).resolve().parents[1] / "data" / "onnx_dynamic"
LENGTHS = (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 64, 96, 127, 128, 129, 130, 192, 257, 384, 768, 1024, 1100)
SPATIAL = ((1, 1), (1, 2), (2, 1), (3, 5), (7, 7))


def _nhwc(n, c, h, w, dtype):
    """A channels-last view of a fresh NCHW array (values spread over many binades: order shows), and
    parameters."""
    x = (RNG.standard_normal((n, c, h, w)) * np.exp(RNG.standard_normal((n, c, h, w)) * 4) + 3).astype(dtype)
    return (x.transpose(0, 2, 3, 1), RNG.standard_normal(c).astype(dtype), RNG.standard_normal(c).astype(dtype))


def _same(a, b, msg=""):
    """Bit for bit, NaNs included (their payloads too)."""
    assert a.dtype == b.dtype and a.shape == b.shape, msg
    kind = {4: np.uint32, 8: np.uint64}[a.itemsize]
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(kind), np.ascontiguousarray(b).view(kind),
                                  err_msg=msg)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [1, 8])
def test_transposed_views_bit_for_bit(dtype, batch):
    pytest.importorskip("numba")
    for c in LENGTHS:
        for h, w in SPATIAL:
            v, g, b = _nhwc(batch, c, h, w, dtype)
            msg = f"{batch, c, h, w}"
            want = L._in_place(np, v, g, b, eps=1e-6)
            _same(want, REFERENCE(np, v, g, b, eps=1e-6), msg)
            applies = c >= 2 and h * w > 1
            assert (L.channels_last(v) is not None) == applies, msg
            name = "strided_rows" if applies else "compiled"
            assert kernels.choose("layer_norm", np, v, g, b, eps=1e-6).impl.name == name, msg
            got = L.run_layer_norm(np, v, g, b, eps=1e-6)
            _same(got, want, msg)
            if applies:
                _same(L._strided(np, v, g, b, eps=1e-6), want, msg)
                assert np.shares_memory(v.reshape(*L.channels_last(v), c), v)  # (a view: no copy)
            out = np.empty(v.shape, dtype)
            assert L.run_layer_norm(np, v, g, b, eps=1e-6, out=out) is out
            _same(out, want, msg)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_row_length_to_1100(dtype):
    """Each row length 1 to 1100 (the spatial layouts in turn): past ``BLOCK`` values NumPy's pairwise sum of the
    centered row's squares splits in halves, recursively (``pairwise_sum.py``); the mean's sum stays value by value."""
    pytest.importorskip("numba")
    for c in range(1, 1101):
        h, w = SPATIAL[c % len(SPATIAL)]
        v, g, b = _nhwc(2, c, h, w, dtype)
        want = L._in_place(np, v, g, b, eps=1e-6)
        _same(L.run_layer_norm(np, v, g, b, eps=1e-6), want, f"{c, h, w}")
        if L.channels_last(v) is not None:
            _same(L._strided(np, v, g, b, eps=1e-6), want, f"{c, h, w}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_inf_zero_and_constant_rows(dtype):
    pytest.importorskip("numba")
    for c in (3, 8, 24, 130, 300, 1100):
        v, g, b = _nhwc(2, c, 3, 4, dtype)
        x = v.transpose(0, 3, 1, 2)  # (the NCHW array the view shows)
        x[0, :, 0, 0] = -0.0  # a row of -0.0: sums from +0.0
        x[0, :, 0, 1] = 5.0  # a constant row: variance 0
        x[0, 1, 1, 1] = np.nan
        x[1, 0, 2, 2] = np.inf
        x[1, :2, 2, 3] = (np.inf, -np.inf)
        x[1, 2, 0, 0] = np.finfo(dtype).max
        want = L._in_place(np, v, g, b)
        _same(want, REFERENCE(np, v, g, b))
        _same(L.run_layer_norm(np, v, g, b), want, str(c))
        _same(L._strided(np, v, g, b), want, str(c))


def test_empty_dims_and_out_not_c_ordered():
    pytest.importorskip("numba")
    for shape in ((0, 8, 3, 3), (2, 8, 0, 3), (2, 0, 3, 3)):
        v, g, b = _nhwc(*shape, "float32")
        assert kernels.choose("layer_norm", np, v, g, b).impl.name != "strided_rows"
        _same(L.run_layer_norm(np, v, g, b), REFERENCE(np, v, g, b), str(shape))
    v, g, b = _nhwc(2, 8, 3, 3, "float32")
    out = np.empty((2, 8, 3, 3), "float32").transpose(0, 2, 3, 1)  # (an output not C-ordered: declined)
    assert L._strided(np, v, g, b, out=out) is None
    assert L.run_layer_norm(np, v, g, b, out=out) is out
    _same(out, REFERENCE(np, v, g, b))


def test_the_layouts_it_declines():
    """Only a C-ordered array's view with its last axis moved there (axes of one value aside): a sliced
    last axis (NumPy sums it pairwise), negative strides, the other axes out of C order, a sliced
    spatial axis. Each still the reference's values by the implementation chosen."""
    a = RNG.standard_normal((2, 16, 3, 10)).astype("float32")
    g, b = RNG.standard_normal(8).astype("float32"), RNG.standard_normal(8).astype("float32")
    g16, b16 = g.repeat(2), b.repeat(2)
    cases = [(a.transpose(0, 2, 3, 1)[..., ::2], g, b), (a[:, ::-1].transpose(0, 2, 3, 1), g16, b16),
             (a.transpose(0, 3, 2, 1), g16, b16), (a[..., ::2].transpose(0, 2, 3, 1), g16, b16),
             (a.transpose(2, 0, 3, 1), g16, b16)]
    for i, (v, vg, vb) in enumerate(cases):
        assert L.channels_last(v) is None, i
        assert kernels.choose("layer_norm", np, v, vg, vb).impl.name != "strided_rows", i
        _same(L.run_layer_norm(np, v, vg, vb), REFERENCE(np, v, vg, vb), str(i))
    # the layouts it takes: NCL as NLC, CHW as HWC, a 5-D NCDHW as NDHWC, spatial axes of one value
    for v in (a[0].transpose(1, 2, 0), a.reshape(2, 16, 30).transpose(0, 2, 1),
              a.reshape(2, 16, 3, 2, 5).transpose(0, 2, 3, 4, 1), a.reshape(2, 16, 1, 30, 1).transpose(0, 2, 3, 4, 1)):
        assert L.channels_last(v) is not None, v.shape
        _same(L.run_layer_norm(np, v, g16, b16), REFERENCE(np, v, g16, b16), str(v.shape))


def test_the_switches_and_the_first_run(kernel_path):
    v, g, b = _nhwc(1, 16, 4, 4, "float32")
    want = "strided_rows" if kernel_path == "compiled" else "in_place"
    assert kernels.choose("layer_norm", np, v, g, b).impl.name == want
    with la.tuning(layer_norm_strided_rows=False):
        assert kernels.choose("layer_norm", np, v, g, b).impl.name == "in_place"
    with la.profile() as prof:
        la.nn.layer_norm(la.array(v), la.array(g), la.array(b)).asnumpy()
    assert [e.key for e in prof.events if e.impl != "numba compile"] == [f"nn.layer_norm[{want}]"]
    if kernel_path == "compiled":
        with jit.first_run():  # (tiered: the first run's NumPy path, the same values)
            assert (L._strided(np, v, g, b) is None) != current().jit_first_run
        _same(L._strided(np, v, g, b), L._in_place(np, v, g, b))


def test_the_bound_step():
    pytest.importorskip("numba")
    v, g, b = _nhwc(2, 24, 3, 5, "float64")
    out = np.empty(v.shape, v.dtype)
    bound = kernels.bind("layer_norm", np, v, g, b, out=out, eps=1e-6)
    assert str(bound.choice) == "layer_norm[strided_rows]"
    assert bound.fn(v, g, b, out=out) is out
    _same(out, REFERENCE(np, v, g, b, eps=1e-6))
    other = np.ascontiguousarray(v)  # (a call in another memory order: the runner decides)
    _same(bound.fn(other, g, b), REFERENCE(np, other, g, b, eps=1e-6))
    with la.tuning(jit=False):
        assert str(kernels.bind("layer_norm", np, v, g, b, out=out).choice) == "layer_norm[in_place]"


def test_convnext_mini_as_onnxruntime_and_as_switched_off():
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("numba")
    path = str(FIXTURES / "convnext_mini.onnx")
    names = next(m for m in json.loads((FIXTURES / "manifest.json").read_text()) if m["name"] == "convnext_mini")
    data = np.load(FIXTURES / "convnext_mini.npz")
    for case in ("b1", "b3"):
        ins = {k: data[f"{case}/in/{k}"] for k in names["inputs"]}
        outs = {}
        for on in (True, False):
            with la.tuning(layer_norm_strided_rows=on):
                net = la.blocks.SymbolBlock.imports(path, names["inputs"])
                net.hybridize()
                xs = [la.array(ins[k]) for k in names["inputs"]]
                outs[on] = [np.asarray(net(*xs).asnumpy()) for _ in range(3)]  # (the first run, then bound)
                text = str(net.explain(*xs))
            assert ("layer_norm[strided_rows]" in text) == on
        theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, ins)[0]
        for got, off in zip(outs[True], outs[False]):
            _same(got, off, case)
            np.testing.assert_allclose(got, theirs, rtol=1e-3, atol=1e-4)


def _wide_block(path, c):
    """A ConvNeXt-like block of ``c`` channels written with onnx.helper (the fixtures' widths stop at 128):
    NCHW seen as NHWC, LayerNormalization over the channels, back to NCHW."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    params = [numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), name) for name in ("g", "b")]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "g", "b"], ["n"], axis=-1, epsilon=1e-6),
             helper.make_node("Transpose", ["n"], ["y"], perm=[0, 3, 1, 2])]
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 7, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c, 7, 7])], params)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.mark.parametrize("c", [192, 768])
def test_a_wide_convnext_like_block_runs_strided_rows_past_128_channels(tmp_path, c):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("numba")
    path = tmp_path / "wide.onnx"
    _wide_block(path, c)
    x = (RNG.standard_normal((2, c, 7, 7)) * 3 + 1).astype(np.float32)
    outs = {}
    for on in (True, False):
        with la.tuning(layer_norm_strided_rows=on):
            net = la.blocks.SymbolBlock.imports(str(path), ["x"])
            net.hybridize()
            outs[on] = [np.asarray(net(la.array(x)).asnumpy()) for _ in range(3)]  # (the first run, then bound)
            assert ("nn.layer_norm[strided_rows]" in str(net.explain(la.array(x)))) == on
    for got, off in zip(outs[True], outs[False]):
        _same(got, off, str(c))
    theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(outs[True][-1], theirs, rtol=1e-4, atol=1e-5)
