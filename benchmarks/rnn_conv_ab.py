"""One new implementation at a time, A/B, on the real models it was made for (``real_models.py``'s
fixtures, lazyarray only, one thread): each row times the hybridized model with every kernel on
against the same model with one implementation switched back to the path it replaces, alternating
rounds in the same process (median of rounds; the machine is shared: read the ratios).

* ``compiled_cell``: foreach's compiled time loop vs ``inline_loop`` (``foreach_jit_after`` never
  reached) on the LSTM / GRU fixtures;
* ``direct``: conv2d's compiled small convolution vs the products (``conv_direct_max_macs`` 0);
* ``fill_copy``: pad's fill and copy vs ``numpy.pad`` (pad's runner off);
* ``scan_projection``: an RNN layer's input projection computed by its foreach body vs before the
  loop (``foreach_projection_max_macs`` 0; graph/passes/scan_projection.py);
* ``view_passes``: ``stack_views`` and ``shape_fills`` (an RNN's stack / transpose / reshape glue as one
  concatenate, an average pool's window counts folded) vs the graph as imported (both passes skipped
  when the off model compiles).

``--cpu``: CPU time per call (``time.process_time``: another process's load does not count) instead
of wall time, rounds alternating the same way.

``--cell-sizes``: ``compiled_cell`` / ``inline_loop`` on a written LSTM cell (10 steps) over batch and
hidden sizes, by multiply-adds per step: where ``foreach_cell_max_macs`` (the tuning table) comes from
(CPU time, median of 7 runs).

    python benchmarks/rnn_conv_ab.py            # every row
    python benchmarks/rnn_conv_ab.py --rounds 9 --budget 0.3
    python benchmarks/rnn_conv_ab.py --cell-sizes
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
if __name__ == "__main__":  # (benchmarks/onnx.py would shadow the onnx package)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))
_spec = importlib.util.spec_from_file_location("_real_models", _HERE / "real_models.py")
rm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rm)

import lazyarray as la  # noqa: E402
from lazyarray import kernels  # noqa: E402
from lazyarray.executor import cached_op  # noqa: E402
from lazyarray.kernels import foreach as kforeach  # noqa: E402
from lazyarray.kernels import rnn_cell  # noqa: E402
from lazyarray.ops import registry  # noqa: E402


@contextlib.contextmanager
def _pad_off():
    registry.get("pad").set_runner(None)
    try:
        yield
    finally:
        kernels.install()


@contextlib.contextmanager
def _view_passes_off():
    """stack_views and shape_fills skipped in CachedOp._specialize (the graph as imported)."""
    saved = cached_op.stack_views, cached_op.shape_fills
    cached_op.stack_views = cached_op.shape_fills = lambda sym: sym
    try:
        yield
    finally:
        cached_op.stack_views, cached_op.shape_fills = saved


RNNS = ("lstm_bidir", "lstm_bidir_dynamo", "gru_time_major")
# (implementation, models, the context that switches it off)
ROWS = [
    ("compiled_cell", ("lstm_bidir", "lstm_bidir_dynamo", "gru_time_major"),
     lambda: la.tuning(foreach_jit_after=1 << 62)),
    ("direct", ("conv1d_net",), lambda: la.tuning(conv_direct_max_macs=0)),
    ("fill_copy", ("conv1d_net",), _pad_off),
    ("scan_projection", RNNS, lambda: la.tuning(foreach_projection_max_macs=0)),
    ("view_passes", RNNS + ("conv1d_net",), _view_passes_off),
]


def _off(net, xs, ctx):
    def run():
        with ctx():
            return [y.asnumpy() for y in rm._listed(net(*xs))]
    return run


def _cpu_compare(fns, rounds: int, budget: float) -> list[float]:
    """Median CPU seconds per call of each of ``fns``, rounds alternating (the order turns each round)."""
    times = [[] for _ in fns]
    for r in range(rounds):
        for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            times[i].append(rm.cpu_timed(fns[i], budget))
    return [sorted(t)[len(t) // 2] for t in times]


def _lstm(xt, states, w, u, b):
    h, c = states
    z = la.matmul(xt, w) + la.matmul(h, u) + b
    n = h.shape[-1]
    i, f, g, o = (z[..., k * n:(k + 1) * n] for k in range(4))
    c2 = la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(g)
    h2 = la.sigmoid(o) * la.tanh(c2)
    return h2, [h2, c2]


def _cpu(fn, n: int = 20) -> float:
    runs = []
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - t0) / n)
    return sorted(runs)[3]


def _one_size(batch: int, hidden: int, rng) -> list:
    shapes = [(10, batch, hidden), (batch, hidden), (batch, hidden), (hidden, 4 * hidden),
              (hidden, 4 * hidden), (4 * hidden,)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    x, h, c, w, u, b = (la.array(a) for a in arrays)
    with la.deferred():
        ys, _ = la.foreach(lambda xt, s: _lstm(xt, s, w, u, b), x, [h, c])
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    params = {**node.params, "save_states": False}
    by_shape = {a.shape: a for a in arrays[3:]}
    values = arrays[:3] + [by_shape[e.aval.shape] for e in node.inputs[3:]]
    with la.tuning(foreach_jit_after=0, foreach_cell_max_macs=1 << 62):
        kforeach.run_compiled_cell(np, *values, **params)
        on = _cpu(lambda: kforeach.run_compiled_cell(np, *values, **params))
        off = _cpu(lambda: kforeach.run_inline_loop(np, *values, **params))
    macs = rnn_cell.entry(params["body"], 1, 2, False).table.macs * batch
    return [batch, hidden, macs, f"{on * 1e6:.0f}", f"{off * 1e6:.0f}", f"{on / off:.2f}x"]


def cell_sizes() -> None:
    rng = np.random.default_rng(0)
    rows = [_one_size(batch, hidden, rng) for batch, hidden in [(1, 16), (8, 16), (8, 32), (16, 32), (16, 64),
                                                                 (32, 64), (64, 128)]]
    print("compiled_cell / inline_loop on a written LSTM cell, 10 steps, one thread (CPU time, median of 7)")
    print(rm.table(["batch", "hidden", "macs/step", "compiled_cell us", "inline_loop us", "ratio"], rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.15)
    ap.add_argument("--cell-sizes", action="store_true", help="compiled_cell / inline_loop by multiply-adds per step")
    ap.add_argument("--only", default="", help="rows whose implementation contains this text (or one of a,b)")
    ap.add_argument("--cpu", action="store_true", help="CPU time per call instead of wall time")
    args = ap.parse_args(argv)
    if args.cell_sizes:
        la.set_num_threads(1)
        cell_sizes()
        return 0
    import onnx  # noqa: F401
    la.set_num_threads(1)
    by_name = {m["name"]: m for m in rm.manifest()}
    rows = []
    for impl, names, ctx in ROWS:
        if args.only and not rm._picked(impl, args.only):
            continue
        for name in names:
            model = rm.Model(by_name[name], (1,))
            for batch, ins, _ in model.feeds:
                xs = [la.array(ins[k]) for k in model.m["inputs"]]
                off = la.blocks.SymbolBlock.imports(model.path, model.m["inputs"])
                off.hybridize()
                on_fn, off_fn = model.la_fn(ins), _off(off, xs, ctx)
                for _ in range(3):  # (past the compiled tiers' first calls)
                    on_fn(), off_fn()
                on_s, off_s = (_cpu_compare if args.cpu else rm.compare)([on_fn, off_fn], args.rounds, args.budget)
                rows.append([impl, name, batch, f"{on_s * 1e6:.0f}", f"{off_s * 1e6:.0f}", f"{on_s / off_s:.2f}x"])
                print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"one implementation on / off (the path it replaces), one thread, {'CPU' if args.cpu else 'wall'} time, "
          "median of alternating rounds")
    print(rm.table(["implementation", "model", "batch", "on us", "off us", "on/off"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
