"""One new implementation at a time, A/B, on the real models it was made for (``real_models.py``'s
fixtures, lazyarray only, one thread): each row times the hybridized model with every kernel on
against the same model with one implementation switched back to the path it replaces, alternating
rounds in the same process (median of rounds; the machine is shared: read the ratios).

* ``compiled_cell``: foreach's compiled time loop vs ``inline_loop`` (``foreach_jit_after`` never
  reached) on the LSTM / GRU fixtures;
* ``direct``: conv2d's compiled small convolution vs the products (``conv_direct_max_macs`` 0);
* ``fill_copy``: pad's fill and copy vs ``numpy.pad`` (pad's runner off).

    python benchmarks/rnn_conv_ab.py            # every row
    python benchmarks/rnn_conv_ab.py --rounds 9 --budget 0.3
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if __name__ == "__main__":  # (benchmarks/onnx.py would shadow the onnx package)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))
_spec = importlib.util.spec_from_file_location("_real_models", _HERE / "real_models.py")
rm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rm)

import lazyarray as la  # noqa: E402
from lazyarray import kernels  # noqa: E402
from lazyarray.ops import registry  # noqa: E402


@contextlib.contextmanager
def _pad_off():
    registry.get("pad").set_runner(None)
    try:
        yield
    finally:
        kernels.install()


# (implementation, models, the context that switches it off)
ROWS = [
    ("compiled_cell", ("lstm_bidir", "lstm_bidir_dynamo", "gru_time_major"),
     lambda: la.tuning(foreach_jit_after=1 << 62)),
    ("direct", ("conv1d_net",), lambda: la.tuning(conv_direct_max_macs=0)),
    ("fill_copy", ("conv1d_net",), _pad_off),
]


def _off(net, xs, ctx):
    def run():
        with ctx():
            return [y.asnumpy() for y in rm._listed(net(*xs))]
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.15)
    args = ap.parse_args(argv)
    import onnx  # noqa: F401
    la.set_num_threads(1)
    by_name = {m["name"]: m for m in rm.manifest()}
    rows = []
    for impl, names, ctx in ROWS:
        for name in names:
            model = rm.Model(by_name[name], (1,))
            for batch, ins, _ in model.feeds:
                xs = [la.array(ins[k]) for k in model.m["inputs"]]
                off = la.blocks.SymbolBlock.imports(model.path, model.m["inputs"])
                off.hybridize()
                on_fn, off_fn = model.la_fn(ins), _off(off, xs, ctx)
                for _ in range(3):  # (past the compiled tiers' first calls)
                    on_fn(), off_fn()
                on_s, off_s = rm.compare([on_fn, off_fn], args.rounds, args.budget)
                rows.append([impl, name, batch, f"{on_s * 1e6:.0f}", f"{off_s * 1e6:.0f}", f"{on_s / off_s:.2f}x"])
                print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print("one implementation on / off (the path it replaces), one thread, median of alternating rounds")
    print(rm.table(["implementation", "model", "batch", "on us", "off us", "on/off"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
