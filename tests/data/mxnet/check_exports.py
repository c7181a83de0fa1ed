"""Does real MXNet 1.9.1 load what ``la.mxnet.export`` writes, and compute the same outputs?
(Run by hand; NOT part of the test suite, which never needs MXNet.)

Two steps, two environments:

    python tests/data/mxnet/check_exports.py write /tmp/la_exports          # lazyarray's environment
    /tmp/mxenv/bin/python tests/data/mxnet/check_exports.py check /tmp/la_exports   # MXNet's venv

``write`` exports, in MXNet format: every fixture model and operator case after loading it
into lazyarray (the round trip MXNet -> lazyarray -> MXNet), and a model built natively in
lazyarray (Conv2D, BatchNorm, MaxPool2D, Dropout, Dense, scalar ops, softmax); with each, its
inputs and lazyarray's output (.npy). ``check`` loads each with ``gluon.SymbolBlock.imports``,
runs it and compares (float32, rtol 1e-4, atol 1e-5), printing one line per model.
"""
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def write(out: str) -> None:
    import lazyarray as la

    os.makedirs(out, exist_ok=True)
    manifest = {}

    def save(name, exporter, inputs: dict, outputs: np.ndarray):
        files = exporter(os.path.join(out, name))
        for k, v in inputs.items():
            np.save(os.path.join(out, f"{name}.in-{k}.npy"), v)
        np.save(os.path.join(out, f"{name}.out.npy"), outputs)
        manifest[name] = {"symbol": os.path.basename(files[0]), "params": os.path.basename(files[1]),
                          "inputs": list(inputs)}

    for sym_file in sorted(glob.glob(os.path.join(HERE, "models", "*-symbol.json"))):
        name = os.path.basename(sym_file)[:-len("-symbol.json")]
        block = la.blocks.SymbolBlock.imports(sym_file, ["data"], sym_file.replace("-symbol.json", "-0000.params"))
        x = np.load(sym_file.replace("-symbol.json", "-input.npy"))
        save("model-" + name, lambda p, b=block: la.mxnet.export(b, p), {"data": x}, block(la.array(x)).asnumpy())
    for sym_file in sorted(glob.glob(os.path.join(HERE, "ops", "*-symbol.json"))):
        case = os.path.basename(sym_file)[:-len("-symbol.json")]
        ins = {os.path.basename(p)[len(case) + 4:-4]: np.load(p)
               for p in glob.glob(glob.escape(sym_file[:-len("-symbol.json")]) + "-in-*.npy")}
        sym, params = la.mxnet.load(sym_file, sym_file.replace("-symbol.json", "-0000.params"),
                                    input_shapes={k: v.shape for k, v in ins.items()})
        values = {**ins, **{k: v.asnumpy() for k, v in params.items()}}
        y = la.CachedOp(sym)(*[la.array(values[n]) for n in sym.list_inputs()]).asnumpy()
        save("op-" + case, lambda p, s=sym, q=params: la.mxnet.export(s, p, params=q),
             {k: ins[k] for k in sym.list_inputs() if k in ins}, y)

    class Native(la.blocks.HybridBlock):
        def __init__(self):
            super().__init__()
            self.conv = la.blocks.Conv2D(4, 3, padding=1, in_channels=3)
            self.bn = la.blocks.BatchNorm(in_channels=4)
            self.pool = la.blocks.MaxPool2D(2)
            self.drop = la.blocks.Dropout(0.5)
            self.fc = la.blocks.Dense(3, in_units=64)

        def forward(self, x):
            y = self.pool(la.relu(self.bn(self.conv(x))))
            return la.nn.softmax(self.fc(self.drop(y.reshape((y.shape[0], -1)))) * 2.0 + 1.0)

    net = Native()
    net.initialize()
    net.hybridize()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    save("native", lambda p: la.mxnet.export(net, p), {"data": x}, net(la.array(x)).asnumpy())
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(manifest)} models to {out}")


def check(out: str) -> int:
    import mxnet as mx
    from mxnet import gluon

    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    failed = 0
    for name, m in manifest.items():
        try:
            block = gluon.SymbolBlock.imports(os.path.join(out, m["symbol"]), m["inputs"],
                                              os.path.join(out, m["params"]))
            ins = [mx.nd.array(np.load(os.path.join(out, f"{name}.in-{k}.npy"))) for k in m["inputs"]]
            got = block(*ins).asnumpy()
            want = np.load(os.path.join(out, f"{name}.out.npy"))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
            print(f"ok      {name}")
        except Exception as exc:  # report every model, then fail
            failed += 1
            print(f"FAILED  {name}: {type(exc).__name__}: {str(exc)[:300]}")
    print(f"{len(manifest) - failed} of {len(manifest)} exports load in MXNet {mx.__version__} with equal outputs")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    sys.exit(write(sys.argv[2]) if sys.argv[1] == "write" else check(sys.argv[2]))
