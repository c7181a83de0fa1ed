"""Symbolic shapes: what the signature check costs per call, what binding a new signature costs, and
how fast the torch.onnx fixtures load and run with no shapes given (issue #32).

* **Signature check**: a call of a CachedOp over a 4-input graph against running the same compiled
  program directly (``program_for`` once, then ``run_program``): the difference is everything a
  call does before the program runs (the signature key, the cache lookup), per input. The graph's
  declared sizes are checked only when a signature is new, so a symbolic graph and a static one pay
  the same.
* **New signature**: compiling a symbolic graph for a new batch size against compiling the static
  graph (``bind_dims`` is the difference).
* **Fixtures**: ``la.onnx.load`` of each model in tests/data/onnx_dynamic with no shapes, and one
  call, against building an onnxruntime session and one run.

    python benchmarks/symbolic_shapes.py
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# benchmarks/onnx.py must not answer lazyarray's `import onnx`: onnx goes in before the script's folder
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import onnx  # noqa: E402, F401
import onnxruntime as ort  # noqa: E402

sys.path.append(str(_HERE))
from _util import best_of, table  # noqa: E402

import lazyarray as la  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "onnx_dynamic")


def _graph(batch):
    xs = [la.sym.var(f"x{i}", shape=(batch, 8)) for i in range(4)]
    h = la.sym.add(la.sym.multiply(xs[0], xs[1]), la.sym.subtract(xs[2], xs[3]))
    return la.sym.reshape(h, shape=(batch, 2, 4))


def signature_check() -> list:
    """A call against its program run directly: the difference is the whole per-call path (the
    signature key and cache lookup, the output array); ``program_for`` alone is the check itself
    (build the key of every input, look it up)."""
    rows = []
    arrays = [la.array(np.ones((4, 8), np.float32)) for _ in range(4)]
    for label, sym in (("static (4, 8)", _graph(4)), ("symbolic (batch, 8)", _graph(la.Dim("batch")))):
        op = la.CachedOp(sym)
        op(*arrays)
        prog = op.program_for(arrays)
        vals = [a._value for a in arrays]
        call = min(best_of(lambda op=op: op(*arrays), repeat=25, number=200) for _ in range(3))
        direct = min(best_of(lambda op=op, prog=prog, vals=vals: op.run_program(prog, vals), repeat=25, number=200)
                     for _ in range(3))
        check = min(best_of(lambda op=op: op.program_for(arrays), repeat=25, number=200) for _ in range(3))
        rows.append([label, call * 1e6, direct * 1e6, (call - direct) * 1e6, check * 1e6 / 4])
    return rows


def new_signature() -> list:
    rows = []
    for label, make in (("static", lambda n: _graph(n)), ("symbolic", lambda n: _graph(la.Dim("batch")))):
        times = []
        for n in range(2, 42):
            op = la.CachedOp(make(n))
            x = [la.array(np.ones((n, 8), np.float32)) for _ in range(4)]
            t0 = time.perf_counter()
            op(*x)
            times.append(time.perf_counter() - t0)
        rows.append([label, statistics.median(times) * 1e3])
    return rows


def fixtures(warm: bool = False) -> list:
    """Per model: load + compile + one call, and onnxruntime's session + one run (a first pass warms
    the process: imports, numba's compiled kernels)."""
    if not warm:
        fixtures(warm=True)
    rows = []
    for m in json.load(open(os.path.join(HERE, "manifest.json"))):
        path = os.path.join(HERE, m["name"] + ".onnx")
        data = np.load(os.path.join(HERE, m["name"] + ".npz"))
        case = m["cases"][-1]
        feeds = {k: data[f"{case}/in/{k}"] for k in m["inputs"]}
        t0 = time.perf_counter()
        sym = la.onnx.load(path)
        op = la.CachedOp(sym)
        op(**{k: la.array(v) for k, v in feeds.items() if k in sym.list_inputs()})
        t_la = time.perf_counter() - t0
        t0 = time.perf_counter()
        opts = ort.SessionOptions()
        opts.log_severity_level = 3  # (a file declaring a static output dim it does not keep warns)
        sess = ort.InferenceSession(path, opts)
        sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})
        t_ort = time.perf_counter() - t0
        rows.append([m["name"], t_la * 1e3, t_ort * 1e3, t_la / t_ort])
    return rows


def main() -> None:
    print("signature check (us): a call vs running its compiled program directly, 4 inputs")
    print(table(["graph", "call", "program only", "call overhead", "signature check per input"],
                signature_check()))
    print()
    print("compiling a new signature (ms, median of 40 batch sizes)")
    rows = new_signature()
    print(table(["graph", "first call"], rows + [["symbolic / static", rows[1][1] / rows[0][1]]]))
    print()
    print("torch.onnx fixtures, no shapes given: load + compile + one call vs onnxruntime session + one run "
          "(ms, warm process)")
    rows = fixtures()
    gm = float(np.exp(np.mean([np.log(r[3]) for r in rows])))
    print(table(["model", "lazyarray", "onnxruntime", "ratio"], rows + [["geometric mean", "", "", gm]]))


if __name__ == "__main__":
    main()
