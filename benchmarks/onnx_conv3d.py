"""3-D convolution and pooling imported from ONNX: how ``la.onnx.load`` writes them, and what it costs.

Our registry's convolutions are 2-D, so an imported 3-D ``Conv`` is written with other ops
(``onnx/import_conv3d.py``). This script compares, on the same inputs and in one run (medians of
alternating rounds, ``OMP_NUM_THREADS=1`` unless set):

* ``every tap``: what the importer builds: input made channels-last once, then one strided slice
  and one matmul per kernel tap (KD*KH*KW of them);
* ``depth taps``: the alternative, the sum over the kernel's depth taps of 2-D convolutions
  (``conv2d``) of depth slices folded into the batch (KD calls of the 2-D kernel);
* ``onnxruntime``: the same ONNX model in onnxruntime (1 thread).

ConvTranspose and MaxPool rows show the importer's forms only (depth taps of ``conv2d_input_grad``;
a maximum over the window taps).

Ratios are time / onnxruntime's time. The machine is shared and noisy: compare ratios of one run.

    python benchmarks/onnx_conv3d.py
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
# run as a script, this folder is first on the path, where benchmarks/onnx.py would shadow the onnx package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import lazyarray as la  # noqa: E402
from benchmarks._util import table  # noqa: E402
from lazyarray.onnx.import_ops import constant  # noqa: E402 (a named constant in a graph)

S = la.sym


def _model(op, xs, ws, attrs):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inputs = ["x", "w"] if op != "MaxPool" else ["x"]
    inits = [numpy_helper.from_array(rng.standard_normal(ws).astype(np.float32), "w")] if op != "MaxPool" else []
    g = helper.make_graph([helper.make_node(op, inputs, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def _depth_taps(xs, w: np.ndarray, pad: int):
    """The alternative: y = sum over depth taps i of conv2d(depth slices of x as a batch, w[:, :, i])."""
    x = S.var("x", shape=xs)
    xp = S.pad(x, pad_width=((0, 0), (0, 0)) + ((pad, pad),) * 3)
    kd = w.shape[2]
    do, ho, wo = (s + 2 * pad - k + 1 for s, k in zip(xs[2:], w.shape[2:]))
    y = None
    for i in range(kd):
        sl = S.getitem(xp, key=(slice(None), slice(None), slice(i, i + do)))
        sl = S.reshape(S.transpose(sl, axes=(0, 2, 1, 3, 4)), shape=(-1, xs[1], xs[3] + 2 * pad, xs[4] + 2 * pad))
        t = S.conv2d(sl, constant(np.ascontiguousarray(w[:, :, i])))
        y = t if y is None else S.add(y, t)
    return la.CachedOp(S.transpose(S.reshape(y, shape=(-1, do, w.shape[0], ho, wo)), axes=(0, 2, 1, 3, 4)))


def _time(fns: dict, rounds: int = 7) -> dict:
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    import onnx
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    cases = [
        ("Conv 3x3x3", "Conv", (2, 8, 16, 32, 32), (16, 8, 3, 3, 3), {"pads": [1] * 6}),
        ("Conv 3x3x3 C=O=32", "Conv", (2, 32, 8, 16, 16), (32, 32, 3, 3, 3), {"pads": [1] * 6}),
        ("Conv 1x3x3", "Conv", (2, 16, 8, 32, 32), (16, 16, 1, 3, 3), {"pads": [0, 1, 1, 0, 1, 1]}),
        ("ConvTranspose 3x3x3 s2", "ConvTranspose", (2, 8, 8, 16, 16), (8, 8, 3, 3, 3), {"strides": [2, 2, 2]}),
        ("MaxPool 2x2x2 s2", "MaxPool", (2, 16, 16, 32, 32), None, {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
    ]
    rows = []
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        for label, op, xs, ws, attrs in cases:
            m = _model(op, xs, ws, attrs)
            path = os.path.join(tmp, "m.onnx")
            onnx.save(m, path)
            x = rng.standard_normal(xs).astype(np.float32)
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            ours = la.CachedOp(la.onnx.load(path))
            xa = la.array(x)
            fns = {"onnxruntime": lambda sess=sess, x=x: sess.run(None, {"x": x}),
                   "ours": lambda ours=ours, xa=xa: ours(x=xa).asnumpy()}
            want = sess.run(None, {"x": x})[0]
            np.testing.assert_allclose(ours(x=xa).asnumpy(), want, rtol=1e-3, atol=1e-3)
            if op == "Conv" and attrs["pads"][0] == attrs["pads"][3] and len(set(attrs["pads"])) == 1:
                alt = _depth_taps(xs, onnx.numpy_helper.to_array(m.graph.initializer[0]), attrs["pads"][0])
                np.testing.assert_allclose(alt(x=xa).asnumpy(), want, rtol=1e-3, atol=1e-3)
                fns["depth taps"] = lambda alt=alt, xa=xa: alt(x=xa).asnumpy()
            t = _time(fns)
            base = t["onnxruntime"]
            rows.append([label, f"{base * 1e3:.1f}", f"{t['ours'] / base:.2f}x",
                         f"{t['depth taps'] / base:.2f}x" if "depth taps" in t else "-"])
    print(table(["model (N=2)", "onnxruntime ms", "ours (every tap)", "depth taps (conv2d)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
