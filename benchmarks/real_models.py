"""Real models: the torch-exported fixture set (tests/data/onnx_dynamic) in lazyarray against
onnxruntime on the same ONNX files.

Per model, as a new user would run it (README): ``la.blocks.SymbolBlock.imports(path, inputs)``,
``net.hybridize()``, ``net(*arrays)``; against an onnxruntime ``InferenceSession`` over the same
file (``intra_op_num_threads=t``, ``inter_op_num_threads=1``, sequential), lazyarray under
``la.set_num_threads(t)``, for t = 1 and 2. Two sizes per model: batch 1 (the fixture's
``b1`` case, its longer sequence where it has one) and batch 8 (the fixture's largest case
repeated along its batch axis). Outputs are checked equal first (to torch's outputs stored in
the .npz at batch 1, and to onnxruntime's at both sizes; rtol 1e-3, atol 1e-4). Rounds
alternate the two runtimes (and which goes first); each keeps the median of its rounds; the
ratio ``la / ort`` is taken in the same run (the machine is shared: compare ratios, not
absolute times).

Columns: model, batch, la/ort on 1 and 2 threads, and the first-call time (loading the file,
tracing, compiling and running once, on one thread) against the creation of onnxruntime's
``InferenceSession`` (one model is loaded both ways before any is measured, so that no row pays
the process's first uses). The geometric mean of each ratio column and the worst row come last.

``--busy`` times every row beside a process that keeps one core busy (``_util.Burner``: a spin
loop resumed and paused by signals) and prints, per runtime, busy / quiet one-thread time and busy
two-thread / quiet one-thread time: each round times everything quiet and busy (which first alternating),
each ratio is taken inside its round and the row keeps its median, so a machine that slows down for a
whole round moves no ratio; a fixed one-thread NumPy probe in the same rounds gives the machine's own
slowdown of one thread beside the burner (on a virtual CPU it need not be 1.0). ``--ab`` times lazyarray
against itself with the kernels added for the real models switched back to the paths they
replaced (conv2d's ``depthwise_taps`` and products, foreach's ``steps``, matmul's ``blas``,
``numpy.pad``), in the same run.

Where the time went (profiles with ``--profile NAME``; 2-core machine shared with other work, so
read ratios only): MobileNetV3 and ConvNeXt spent their depthwise convolutions in a multiply-add
per tap (now ``depthwise``, a compiled pass: 0.63-0.83x their call time in ``--ab``), then mostly
in fused elementwise groups (hard-swish, GELU, layer norm: 40-65% of the call) and 1x1
convolutions; LSTM and GRU ran the body's program once per time step (now ``inline_loop``: one
written-out function, 0.69-0.82x); a Swin block's 2 MFLOP products collapsed on two BLAS threads
(35 ms each; now ``one_blas_thread``: 0.08x at batch 8 on 2 threads). The small transformers pay
per step, not per call: a one-step hybridized block costs about 5 us a call, BERT's 117 steps
about 16-24 us each (both measured under load). conv1d_net's max pools take the NumPy path because their planned output
shares a buffer with their input (``pool_jit.max_pool`` declines any ``np.may_share_memory``). Issue #35 item 2 (one thread, shared machine):
an LSTM direction under ``inline_loop`` cost 25-35 us per time step at hidden 16, batch 1 (one
(1, 16) x (16, 64) product of 1-2 us; the rest some fifteen NumPy calls on 16-64 values and the
loop's Python; the arithmetic itself well under 1 us), now ``compiled_cell``: under 1 us a step
plus 15-20 us per call (packing the loop-invariant values, the output buffers): 0.16-0.26x of the
LSTM / GRU rows' call in ``--ab``; what is left of them is the parent program's ~60 steps of weight
slices, transposes, stacks and reshapes (1.5-5 us each). conv1d_net (28 steps for 4 layers) spent
its batch-1 call in ``numpy.pad`` (two avg-pool pads, 10-35 us each; now ``pad[fill_copy]``), the
im2col path's fixed cost on 4-8K multiply-adds (now ``conv2d[direct]``), then expand_dims / squeeze
around every 1-D layer and the fused avg-pool group: 0.57-0.70x in ``--ab``.
Issue #35's CNN rows (one thread, CPU time la / ort, alternating, medians of 7): MobileNetV3 spent a
step per hard-swish (a fused group of five ops, 15-17 us each at batch 1) and per relu after a
convolution, and its 1x1 layers in ``direct``'s loop; now ``conv2d_act`` (the activation in the
convolution's step) and ``conv2d[pointwise]`` (one product): batch 1 14.8x -> 8.9x, batch 8 7.7x -> 5.2x
(``--ab-cnn``: 39 -> 27 steps; the six CNN rows' geometric mean 6.5x -> 5.8x). ConvNeXt's remaining cost is its written-out layer norms and GELU.

Later (issue #35, RNN and 1-D conv rows): the RNN rows' parent programs lost their glue (an RNN
layer's input projection now computed inside its compiled cell, `graph/passes/scan_projection.py`;
the directions' stack / transpose / reshape one concatenate, `stack_views.py`; lstm_bidir 29 -> 15
steps), foreach's per-call Python halved and its compiled loop vectorized, conv1d_net's average-pool
counts folded (`shape_fills.py`): 0.47-0.79x the CPU time per call of these rows
(`benchmarks/rnn_conv_ab.py --cpu` times the passes one by one).
First calls include numba compiling the kernels a model is the first to use (seconds).
The small transformers (issue #35, one thread, shared machine): each attention ran five to nine
steps (product, scale, mask, softmax, casts, product, the heads' reshape copy) and each layer norm
six to nine (T5's RMS norm five plus a cast); now one ``nn.fused_attention``, ``nn.layer_norm`` or
``nn.rms_norm`` step each (``--fuse-ab``: 68-93 steps -> 37-58, 0.55-0.83x of the call on one
thread, outputs equal bit for bit). What is left of hf_bert's batch-1 call: the two GELU groups
(``fused[chunked]``, the importer's 25-op erf), thirteen ``matmul`` steps (about 2 us of Python
around each 1 us product), the bias and residual ``add`` steps, the embedding ``take`` steps.
causal_decoder and hf_gpt2 spend most of their batch-8 call in ``x ** 3`` of their GELU-tanh
groups: the exponent is an initializer (a parameter, which ``algebra.simplify`` cannot read), and
NumPy's float32 ``power`` of negative values takes about 50 ns a value (350 us for (8, 7, 128),
against 7 us for positive ones).

    python benchmarks/real_models.py                 # the table (several minutes)
    python benchmarks/real_models.py --quick         # three models, few rounds: a smoke run
    python benchmarks/real_models.py --only bert     # models whose name contains "bert"
    python benchmarks/real_models.py --busy          # busy / quiet ratios
    python benchmarks/real_models.py --ab --only lstm  # new kernels / the paths they replaced
    python benchmarks/real_models.py --fuse-ab --only bert  # attention and layer norm fused / written out
    python benchmarks/real_models.py --ab-cnn --only mobilenet,squeeze,shuffle,dense,resnet,convnext
        # conv2d[pointwise] and conv2d_act (issue #35) / both switched off
    python benchmarks/real_models.py --hoist-ab --only lstm_bidir,gru_time_major,hf_bert,convnext_mini
        # parameter-only steps computed once / every call (CPU time, one thread): lstm_bidir 0.92-0.94x,
        # lstm_bidir_dynamo 0.91x, gru_time_major 0.99-1.00x, hf_bert 1.00-1.01x, convnext_mini 0.99x
    python benchmarks/real_models.py --profile mobilenetv3_mini   # la.profile() table of one model
    python benchmarks/real_models.py --first-call --only resnet,bert,zoo   # first calls, cold / warm kernel cache
    python benchmarks/real_models.py --first-call --rounds 3 --cold-rounds 1 --against /path/to/other/checkout
        # ... before/after, alternating; with the warm first call by phase (CPU ms)
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
# benchmarks/ holds onnx.py, which would shadow the onnx package when this runs as a script.
if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    # this checkout's lazyarray, or the one under --tree DIR (--first-call --against's other children)
    sys.path.insert(0, sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv else str(_HERE.parent))
_spec = importlib.util.spec_from_file_location("_bench_util", _HERE / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)
table = _util.table

import lazyarray as la  # noqa: E402
from lazyarray import jit, kernels  # noqa: E402
from lazyarray.kernels import depthwise  # noqa: E402
from lazyarray.ops import registry  # noqa: E402
from lazyarray.threads import num_threads  # noqa: E402

FIXTURES = _HERE.parent / "tests" / "data" / "onnx_dynamic"
TOL = {"rtol": 1e-3, "atol": 1e-4}
BIG_BATCH = 8
QUICK = ("resnet_mini", "hf_bert", "gru_time_major")
WARM_UP = "arange_gather"  # loaded before any row is timed (no conv, no loop: compiles no kernel another model needs)
SETTLE = 0.1  # seconds of rest before each timed round: the other runtime's spinning threads go idle


def manifest() -> list[dict]:
    return json.loads((FIXTURES / "manifest.json").read_text())


def _batch_axis(m: dict, name: str) -> int | None:
    for axis, dim in m["dynamic_axes"].get(name, {}).items():
        if dim == "batch":
            return int(axis)
    return None


def _listed(y) -> list:
    return list(y) if isinstance(y, (list, tuple)) else [y]


def feeds(m: dict) -> list[tuple[int, dict, list | None]]:
    """(batch, inputs by name, torch's outputs or None) for batch 1 and BIG_BATCH."""
    data = np.load(FIXTURES / (m["name"] + ".npz"))
    b1 = [c for c in m["cases"] if c.split("_")[0] == "b1"][-1]
    last = m["cases"][-1]
    small = {k: data[f"{b1}/in/{k}"] for k in m["inputs"]}
    want = [data[f"{b1}/out/{k}"] for k in range(len(m["outputs"]))]
    big = {}
    for k in m["inputs"]:
        v, axis = data[f"{last}/in/{k}"], _batch_axis(m, k)
        big[k] = v if axis is None else np.take(v, np.arange(BIG_BATCH) % v.shape[axis], axis=axis)
    return [(1, small, want), (BIG_BATCH, big, None)]


def ort_session(path: str, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3  # (no warning per call: lstm_bidir's file declares a fixed length for y)
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def timed(fn, budget: float) -> float:
    """Seconds per call of ``fn`` over about ``budget`` seconds, after ``SETTLE`` seconds of rest."""
    return _util.timed(fn, budget, SETTLE)


def compare(fns: list, rounds: int, budget: float) -> list[float]:
    """Median seconds per call of each of ``fns``, rounds alternating among them (the order turns each round)."""
    times = [[] for _ in fns]
    for r in range(rounds):
        order = list(range(len(fns)))
        order = order[r % len(fns):] + order[:r % len(fns)]
        for i in order:
            times[i].append(timed(fns[i], budget))
    return [statistics.median(t) for t in times]


class Model:
    """One fixture model loaded both ways: the hybridized block and an onnxruntime session per thread count."""

    def __init__(self, m: dict, threads: tuple[int, ...]):
        self.m, self.name = m, m["name"]
        self.path = str(FIXTURES / (self.name + ".onnx"))
        la.set_num_threads(1)
        self.feeds = feeds(m)  # (read before the clock starts: the first call is lazyarray's work only)
        t0 = time.perf_counter()
        self.net = la.blocks.SymbolBlock.imports(self.path, m["inputs"])
        self.import_s = time.perf_counter() - t0
        self.net.hybridize()
        self.la_run(self.feeds[0][1])
        self.first_call = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.sessions = {1: ort_session(self.path, 1)}
        self.session_s = time.perf_counter() - t0
        self.sessions.update({t: ort_session(self.path, t) for t in threads if t != 1})
        self.ort_names = [i.name for i in self.sessions[1].get_inputs()]

    def la_run(self, ins: dict) -> list[np.ndarray]:
        return [y.asnumpy() for y in _listed(self.net(*[la.array(ins[k]) for k in self.m["inputs"]]))]

    def la_fn(self, ins: dict):
        xs = [la.array(ins[k]) for k in self.m["inputs"]]
        return lambda: [y.asnumpy() for y in _listed(self.net(*xs))]

    def ort_fn(self, t: int, ins: dict):
        sess, feed = self.sessions[t], {k: ins[k] for k in self.ort_names}
        return lambda: sess.run(None, feed)

    def check(self) -> None:
        """lazyarray's outputs equal torch's (batch 1) and onnxruntime's (every size, every thread count)."""
        for batch, ins, want in self.feeds:
            ours = self.la_run(ins)
            refs = [("torch", want)] if want is not None else []
            refs += [(f"onnxruntime {t}t", self.ort_fn(t, ins)()) for t in self.sessions]
            for who, theirs in refs:
                assert len(ours) == len(theirs), (self.name, who)
                for k, (a, b) in enumerate(zip(ours, theirs)):
                    np.testing.assert_allclose(a, b, **TOL, err_msg=f"{self.name} batch {batch} output {k}: "
                                                                    f"lazyarray and {who} differ")




def _on_threads(t: int, fn):
    def run():
        if num_threads() != t:
            la.set_num_threads(t)
        return fn()
    return run


def row_quiet(model: Model, batch: int, ins: dict, threads, rounds: int, budget: float) -> list:
    row = [model.name, batch]
    for t in threads:
        la_s, ort_s = compare([_on_threads(t, model.la_fn(ins)), model.ort_fn(t, ins)], rounds, budget)
        row.append(la_s / ort_s)
    return row


def probe_fn():
    """A fixed one-thread workload that no library's threads touch (NumPy elementwise on 256 KB): its busy /
    quiet time is the machine's own slowdown of one thread beside the burner (a virtual CPU whose host
    shares it, the burner's cache traffic), the floor under every one-thread ratio of ``--busy``."""
    x = np.linspace(-2.0, 2.0, 1 << 16, dtype=np.float32)
    return lambda: np.tanh(x * np.float32(1.5) + np.float32(0.5))


BUSY_KEYS = (("la", 1), ("la", 2), ("ort", 1), ("ort", 2), ("probe", 1))


def row_busy(model: Model, batch: int, ins: dict, burner: _util.Burner, rounds: int, budget: float) -> list:
    """busy 1t / quiet 1t and busy 2t / quiet 1t for lazyarray, onnxruntime and the machine's probe: each
    round times everything quiet and busy (which first alternating), each ratio is taken inside its round
    (busy against the same round's quiet one-thread time) and the row keeps each ratio's median."""
    fns = {(who, t): _on_threads(t, model.la_fn(ins)) if who == "la" else model.ort_fn(t, ins)
           for who, t in BUSY_KEYS if who != "probe"}
    fns["probe", 1] = _on_threads(1, probe_fn())
    ratios = {k: [] for k in BUSY_KEYS}
    for r in range(rounds):
        got = {}
        for on in ((False, True) if r % 2 else (True, False)):
            burner.busy(on)
            for k, fn in fns.items():
                got[k, on] = timed(fn, budget)
        for who, t in BUSY_KEYS:
            ratios[who, t].append(got[(who, t), True] / got[(who, 1), False])
    burner.busy(False)
    return [model.name, batch] + [statistics.median(ratios[k]) for k in BUSY_KEYS]


@contextlib.contextmanager
def reference_paths():
    """The kernels added for the real models switched back to the paths they replace: conv2d's
    ``depthwise_taps`` for ``depthwise`` and its products for ``direct`` (``conv_direct_max_macs``
    0), foreach's ``steps`` for ``compiled_cell`` and ``inline_loop``, matmul's ``blas`` for
    ``one_blas_thread``, ``numpy.pad`` for pad's ``fill_copy`` (a program compiled inside binds the
    reference kernels of foreach, matmul and pad)."""
    choose = depthwise.choose_impl
    depthwise.choose_impl = lambda *args: depthwise.TAPS
    for name in ("foreach", "matmul", "pad"):
        registry.get(name).set_runner(None)
    try:
        with la.tuning(conv_direct_max_macs=0):
            yield
    finally:
        depthwise.choose_impl = choose
        kernels.install()


def row_ab(model: Model, batch: int, ins: dict, threads, rounds: int, budget: float) -> list:
    """la with the new implementations / la with the paths they replace, per thread count, same run."""
    with reference_paths():
        ref_net = la.blocks.SymbolBlock.imports(model.path, model.m["inputs"])
        ref_net.hybridize()
        xs = [la.array(ins[k]) for k in model.m["inputs"]]
        want = [y.asnumpy() for y in _listed(ref_net(*xs))]
    for a, b in zip(model.la_run(ins), want):
        np.testing.assert_allclose(a, b, **TOL, err_msg=f"{model.name}: new and replaced paths differ")

    def ref():
        with reference_paths():
            return [y.asnumpy() for y in _listed(ref_net(*xs))]

    row = [model.name, batch]
    for t in threads:
        new_s, ref_s = compare([_on_threads(t, model.la_fn(ins)), _on_threads(t, ref)], rounds, budget)
        row.append(new_s / ref_s)
    return row


FUSE_OFF = {"fuse_attention": False, "fuse_layer_norm": False}  # (decided when a signature compiles)


def row_fuse(model: Model, batch: int, ins: dict, threads, rounds: int, budget: float) -> list:
    """la with each attention one ``nn.fused_attention`` step and each layer norm one ``nn.layer_norm``
    (graph/passes/attention.py, layer_norm.py) / la compiled without those rewrites (``FUSE_OFF``),
    per thread count, rounds alternating, medians; outputs checked equal bit for bit first (without
    ``fused_attention[head_loop]``, within a bound); and how
    many steps each program has."""
    xs = [la.array(ins[k]) for k in model.m["inputs"]]
    with la.tuning(**FUSE_OFF):
        ref_net = la.blocks.SymbolBlock.imports(model.path, model.m["inputs"])
        ref_net.hybridize()
        ref_net(*xs)  # (a second call, as ``got``'s: its weights packed, ops/weight_pack.py, whose product some
        want = [y.asnumpy() for y in _listed(ref_net(*xs))]  # BLAS builds round otherwise than the view's)
    with la.tuning(attention_head_loop_max_macs=0):  # (the rewrites' values; head_loop's are within a bound)
        got = model.la_run(ins)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b, err_msg=f"{model.name}: fused and unfused graphs differ")
    ref = lambda: [y.asnumpy() for y in _listed(ref_net(*xs))]  # noqa: E731
    row = [model.name, batch]
    for t in threads:
        new_s, ref_s = compare([_on_threads(t, model.la_fn(ins)), _on_threads(t, ref)], rounds, budget)
        row.append(new_s / ref_s)
    steps = [sum(len(p.step_specs) for p, _ in net.explain(*xs).programs) for net in (ref_net, model.net)]
    return row + [f"{steps[0]} -> {steps[1]}"]


CNN_OFF = {"conv_pointwise": False, "conv_activation": False}  # (--ab-cnn: issue #35's CNN switches off)


def row_ab_cnn(model: Model, batch: int, ins: dict, threads, rounds: int, budget: float) -> list:
    """la / la with ``conv2d[pointwise]`` and the ``conv2d_act`` pass switched off (``CNN_OFF``; the pass
    decides at compile time, so the reference is a block compiled under the switches), per thread
    count, same run; and the steps per call of both."""
    xs = [la.array(ins[k]) for k in model.m["inputs"]]
    with la.tuning(**CNN_OFF):
        ref_net = la.blocks.SymbolBlock.imports(model.path, model.m["inputs"])
        ref_net.hybridize()
        want = [y.asnumpy() for y in _listed(ref_net(*xs))]
    for a, b in zip(model.la_run(ins), want):
        np.testing.assert_allclose(a, b, **TOL, err_msg=f"{model.name}: new and switched-off paths differ")

    def ref():
        with la.tuning(**CNN_OFF):
            return [y.asnumpy() for y in _listed(ref_net(*xs))]

    run = model.la_fn(ins)

    def new():  # (entering la.tuning costs both sides the same, about 25 us on the development machine)
        with la.tuning():
            return run()

    row = [model.name, batch]
    for t in threads:
        new_s, ref_s = compare([_on_threads(t, new), _on_threads(t, ref)], rounds, budget)
        row.append(new_s / ref_s)
    with la.tuning(**CNN_OFF):
        off = sum(len(p.step_specs) for p, _ in ref_net.explain(*xs).programs)
    on = sum(len(p.step_specs) for p, _ in model.net.explain(*xs).programs)
    return row + [f"{on} / {off}"]


def cpu_timed(fn, budget: float) -> float:
    """CPU seconds per call of ``fn`` (``time.process_time``: another process's load on the shared machine
    does not count) over about ``budget`` seconds, after ``SETTLE`` seconds of rest."""
    time.sleep(SETTLE)
    fn()
    t0 = time.perf_counter()
    fn()
    number = max(1, int(budget / max(time.perf_counter() - t0, 1e-6)))
    c0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - c0) / number


def row_hoist(model: Model, batch: int, ins: dict, rounds: int, budget: float) -> list:
    """One thread: la with parameter-only steps computed once (executor/param_cache.py) against la
    compiled with ``param_cache_max_bytes=0`` (every step every call), CPU time, rounds alternating
    (the order turns each round), medians; and how many steps are kept."""
    xs = [la.array(ins[k]) for k in model.m["inputs"]]
    with la.tuning(param_cache_max_bytes=0):  # (decided when a signature compiles)
        ref_net = la.blocks.SymbolBlock.imports(model.path, model.m["inputs"])
        ref_net.hybridize()
        want = [y.asnumpy() for y in _listed(ref_net(*xs))]
    for a, b in zip(model.la_run(ins), want):
        np.testing.assert_allclose(a, b, **TOL, err_msg=f"{model.name}: kept and per-call parameter steps differ")
    fns = [_on_threads(1, model.la_fn(ins)), _on_threads(1, lambda: [y.asnumpy() for y in _listed(ref_net(*xs))])]
    times = [[], []]
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[i].append(cpu_timed(fns[i], budget))
    new_s, ref_s = (statistics.median(t) for t in times)
    programs = [p for p, _ in model.net.explain(*xs).programs]
    kept = sum(len(p.kept) for p in programs)
    steps = sum(len(p.step_specs) for p in programs)
    return [model.name, batch, f"{ref_s * 1e6:.0f}", f"{new_s * 1e6:.0f}", new_s / ref_s, f"{steps}+{kept}"]


def geomean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _fmt(row, ratio_cols) -> list:
    return [f"{c:.2f}x" if i in ratio_cols else c for i, c in enumerate(row)]


def print_quiet(rows, firsts, threads) -> None:
    print("inference: la / ort, median of alternating rounds (outputs checked equal first)")
    heads = ["model", "batch"] + [f"la/ort {t}t" for t in threads] + ["first call ms", "ort session ms", "first/session"]
    out = []
    for r in rows:
        f = firsts[r[0]] if r[1] == 1 else ("", "", "")
        out.append(_fmt(r, set(range(2, 2 + len(threads)))) + ([f"{f[0] * 1e3:.0f}", f"{f[1] * 1e3:.0f}",
                                                                  f"{f[0] / f[1]:.1f}x"] if f[0] != "" else ["", "", ""]))
    print(table(heads, out))
    means = [geomean([r[2 + i] for r in rows]) for i in range(len(threads))]
    first = geomean([a / b for a, b in firsts.values()])
    print("geometric mean: " + ", ".join(f"{t}t {g:.2f}x" for t, g in zip(threads, means))
          + f", first call / session {first:.1f}x")
    worst = max(rows, key=lambda r: r[2])
    print(f"worst row (1t): {worst[0]} batch {worst[1]}: " + ", ".join(
        f"{t}t {worst[2 + i]:.2f}x" for i, t in enumerate(threads)))


def print_busy(rows) -> None:
    print("beside a process burning one core: busy time / quiet one-thread time, the median of per-round ratios "
          "(each round quiet and busy, alternating); probe: a fixed one-thread NumPy loop, the machine's own slowdown")
    heads = ["model", "batch", "la 1t", "la 2t", "ort 1t", "ort 2t", "probe 1t"]
    print(table(heads, [_fmt(r, {2, 3, 4, 5, 6}) for r in rows]))
    for i, h in enumerate(heads[2:]):
        worst = max(rows, key=lambda r: r[2 + i])
        over = sum(r[2 + i] > 1.3 for r in rows)
        print(f"{h}: geometric mean {geomean([r[2 + i] for r in rows]):.2f}x, "
              f"worst {worst[0]} batch {worst[1]} {worst[2 + i]:.2f}x, {over} of {len(rows)} rows over 1.3x")


def profile(name: str, batch: int, calls: int = 20) -> None:
    """``la.profile()`` table of one model's calls (one thread) and its compiled program."""
    model = Model(next(m for m in manifest() if m["name"] == name), (1,))
    ins = {b: i for b, i, _ in model.feeds}[batch]
    run = model.la_fn(ins)
    run()
    with la.profile() as prof:
        for _ in range(calls):
            run()
    print(prof.table())
    print(model.net.explain(*[la.array(ins[k]) for k in model.m["inputs"]]))


ZOO = "zoo_resnet18_train"  # --first-call's extra row: the zoo's ResNet-18, first hybridized training step,
# against the InferenceSession creation of the same network exported to ONNX (``la.onnx.export``, after the clock)


def _zoo_first_step(spent: dict) -> dict:
    """The zoo's ResNet-18 (CIFAR, batch 32) first hybridized training step (benchmarks/models.py's): its wall
    and CPU seconds (``first``, ``first_cpu``; the network's construction and its imperative first call are
    left out), what ``spent`` (``phase_timers``) gained meanwhile (``phases``), its wall span in ns
    (``window``), the second step's wall and CPU seconds, and the network."""
    spec = importlib.util.spec_from_file_location("_bench_models", _HERE / "models.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    run = models.Run("resnet18", True, 32, False)
    base = dict(spent)
    t0, c0, w0 = time.perf_counter(), time.process_time(), time.perf_counter_ns()
    run.step()
    t1, c1, w1 = time.perf_counter(), time.process_time(), time.perf_counter_ns()
    phases = {k: spent[k] - base[k] for k in spent}
    run.step()
    return {"first": t1 - t0, "first_cpu": c1 - c0, "phases": phases, "window": (w0, w1),
            "second": time.perf_counter() - t1, "second_cpu": time.process_time() - c1, "net": run.net}


PHASES = ("parse", "import", "trace", "compile", "gc")


def phase_timers() -> dict:
    """Wrap, for good (call it in a child process), what a first call goes through, each timed in CPU
    seconds without the phases inside it: the ONNX file's parse and check (``onnx.load.read_model``),
    the rest of ``SymbolBlock.imports`` (the conversion to a graph: converters, shape rules, symbolic
    sizes), ``hybrid.trace``, the compiles (``CachedOp._compile``, ``backward_cache.build``: passes,
    specialization and guards, planning, choosing kernels) and the cyclic GC's collections (a
    ``gc.callbacks`` hook). Returns the dict (phase -> seconds) they add to."""
    import gc

    from lazyarray import backward_cache
    from lazyarray.blocks import hybrid
    from lazyarray.executor.cached_op import CachedOp
    onnx_load = importlib.import_module("lazyarray.onnx.load")  # (la.onnx.load is the function)
    spent = dict.fromkeys(PHASES, 0.0)
    inner = []  # per open phase: the CPU seconds of the phases (and collections) inside it

    def timed_as(what, f):
        def wrapped(*a, **k):
            inner.append(0.0)
            t0 = time.process_time()
            try:
                return f(*a, **k)
            finally:
                took = time.process_time() - t0
                spent[what] += took - inner.pop()
                if inner:
                    inner[-1] += took
        return wrapped

    onnx_load.read_model = timed_as("parse", onnx_load.read_model)
    la.blocks.SymbolBlock.imports = staticmethod(timed_as("import", la.blocks.SymbolBlock.imports))
    hybrid.trace = timed_as("trace", hybrid.trace)
    CachedOp._compile = timed_as("compile", CachedOp._compile)
    backward_cache.build = timed_as("compile", backward_cache.build)
    started = [0.0]

    def collected(phase, info):
        if phase == "start":
            started[0] = time.process_time()
            return
        took = time.process_time() - started[0]
        spent["gc"] += took
        if inner:
            inner[-1] += took
    gc.callbacks.append(collected)
    return spent


def first_call_child(name: str) -> dict:
    """In this (fresh) process: the process's first uses paid first (imports, numba, a model without
    kernels both ways), then ``name``'s first call (import, trace, compile, run; one thread) and the
    creation of onnxruntime's session for the same file. Kernels compile or load from the disk cache
    (``LAZYARRAY_JIT_CACHE_DIR`` says which: the parent gives an empty or a filled one)."""
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
    t0 = time.perf_counter()
    jit.warm_up()  # numba's one-time start, timed apart: every process pays it once, whatever its model
    start = time.perf_counter() - t0
    Model(next(m for m in manifest() if m["name"] == WARM_UP), (1,)).check()
    before = jit.cache_stats()
    spent = phase_timers()
    c0, w0 = time.process_time(), time.perf_counter_ns()
    if name == ZOO:  # (the step alone: not the network's construction, nor the second step)
        z, load = _zoo_first_step(spent), 0.0
        first, first_cpu, second, second_cpu, net, spent = (z[k] for k in ("first", "first_cpu", "second",
                                                                          "second_cpu", "net", "phases"))
        w0, w1 = z["window"]
    else:
        model = Model(next(m for m in manifest() if m["name"] == name), (1,))
        first, load = model.first_call, model.import_s
        first_cpu, w1 = time.process_time() - c0, time.perf_counter_ns()
    numba = jit.compile_ns_within(w0, w1) / 1e9
    if name != ZOO:
        t0, c0 = time.perf_counter(), time.process_time()
        model.la_run(model.feeds[0][1])
        second, second_cpu = time.perf_counter() - t0, time.process_time() - c0
    compiled, loaded = (a - b for a, b in zip(jit.cache_stats(), before))
    phases = {k: spent[k] for k in PHASES}  # (CPU; numba: wall, its compiles and cache loads in the first call)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(FIXTURES / (name + ".onnx"))
        if name == ZOO:  # the same network as an ONNX file, written before the session's clock starts
            path = la.onnx.export(net, str(Path(tmp) / "zoo_resnet18.onnx"), input_shapes=(32, 3, 32, 32))
        t0, c0 = time.perf_counter(), time.process_time()
        ort_session(path, 1)
        session, session_cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"first": first, "import": load, "session": session, "compiled": compiled, "loaded": loaded,
            "numba_start": start, "second": second, "first_cpu": first_cpu, "second_cpu": second_cpu,
            "session_cpu": session_cpu, **phases, "numba": numba,
            "run": first_cpu - sum(phases.values()) - numba, "file": la.__file__}


def _child(name: str, cache: str, tree: Path) -> dict:
    import os
    import subprocess
    env = {**os.environ, "LAZYARRAY_JIT_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--first-call-child", name, "--tree", str(tree)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f"{name}: the first-call process failed:\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not got["file"].startswith(str(tree)):
        raise RuntimeError(f"{name}: the child imported {got['file']}, not the lazyarray under {tree}")
    return got


def first_call_rows(names, rounds: int, against: Path | None = None, cold_rounds: int | None = None) -> list:
    """Per model (and tree: this checkout, and ``against``'s lazyarray, alternating which goes first):
    medians over ``rounds`` of fresh processes with an empty disk cache (cold) and then with the one it
    filled (warm), as ratios to onnxruntime's session creation in the same process (``cold_rounds``,
    fewer: the rounds after them reuse the last filled cache, warm only). Each row ends with the warm
    processes' medians (a dict: CPU seconds by phase and the rest) and the warm ratio."""
    trees = {"": _HERE.parent} if against is None else {"after": _HERE.parent, "before": against.resolve()}
    got = {(n, t): {"cold": [], "warm": []} for n in names for t in trees}
    cold_rounds = rounds if cold_rounds is None else max(1, min(cold_rounds, rounds))
    with tempfile.TemporaryDirectory() as caches:
        for r in range(rounds):
            for name in names:
                for t in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                    cache = str(Path(caches) / f"{name}-{t or 'this'}-{min(r, cold_rounds - 1)}")
                    if r < cold_rounds:
                        got[(name, t)]["cold"].append(_child(name, cache, trees[t]))
                    got[(name, t)]["warm"].append(_child(name, cache, trees[t]))
                print(".", end="", file=sys.stderr, flush=True)
    rows = []
    for (name, t), runs in got.items():
        med = {k: {f: statistics.median(r[f] for r in v) for f in v[0] if f != "file"} for k, v in runs.items()}
        ratio = {k: statistics.median(r["first"] / r["session"] for r in v) for k, v in runs.items()}
        imp = statistics.median(r["import"] / r["session"] for r in runs["warm"])
        cpu = statistics.median(r["first_cpu"] / r["session_cpu"] for r in runs["warm"] if r["session_cpu"] > 0) \
            if any(r["session_cpu"] > 0 for r in runs["warm"]) else math.inf
        rows.append([name] + ([t] if against is not None else [])
                    + [f"{med['cold']['numba_start'] * 1e3:.0f}/{med['warm']['numba_start'] * 1e3:.0f}",
                       f"{med['cold']['first'] * 1e3:.0f}", f"{med['warm']['first'] * 1e3:.0f}",
                       f"{med['warm']['second'] * 1e3:.1f}",
                       f"{med['warm']['import'] * 1e3:.1f}", f"{med['warm']['session'] * 1e3:.1f}",
                       f"{ratio['cold']:.1f}x", f"{ratio['warm']:.1f}x", f"{imp:.1f}x" if imp else "-",
                       f"{med['cold']['compiled']:.0f}", f"{med['warm']['loaded']:.0f}/{med['warm']['compiled']:.0f}",
                       {**med["warm"], "cpu_ratio": cpu, "second_cold": med["cold"]["second"]}, ratio["warm"]])
    return rows


def print_first_calls(rows, against: bool = False) -> None:
    print("first call (import + trace + compile + first run, one thread; fresh process each, numba's one-time "
          "start paid before it: 'numba ms', cold/warm) / onnxruntime InferenceSession creation in the same "
          "process; cold: empty kernel cache, warm: the one the cold process filled; 2nd call: the next call "
          "(warm); median of rounds")
    lead = ["model"] + (["tree"] if against else [])
    heads = lead + ["numba ms", "cold ms", "warm ms", "2nd call ms", "import ms", "session ms", "cold/session",
                    "warm/session", "import/session", "compiled cold", "loaded/compiled warm"]
    print(table(heads, [r[:-2] for r in rows]))
    for tree in sorted({r[1] for r in rows}) if against else [None]:
        mine = [r for r in rows if tree is None or r[1] == tree]
        worst = max(mine, key=lambda r: r[-1])
        print(f"{tree + ': ' if tree else ''}warm/session: geometric mean {geomean([r[-1] for r in mine]):.1f}x, "
              f"worst {worst[0]} {worst[-1]:.1f}x")
    print("\nwarm first call by phase, CPU ms (parse: the ONNX file read and checked; import: its conversion to a "
          "graph; trace; compile: passes, guards, planning, choices; gc: the cyclic GC's collections; numba: wall ms "
          "of its compiles and cache loads; run: the rest, the first run's compute), beside the wall ms, the second "
          "call (CPU; wall with a cold cache) and the session's CPU ms; first/session in CPU time")
    heads = lead + ["first cpu", "wall", "parse", "import", "trace", "compile", "gc", "numba", "run", "2nd cpu",
                    "2nd cold wall", "session cpu", "first/session cpu"]
    out = []
    for r in rows:
        m = r[-2]
        out.append(r[:len(lead)] + [f"{m[k] * 1e3:.1f}" for k in ("first_cpu", "first", *PHASES, "numba", "run",
                                                                    "second_cpu", "second_cold", "session_cpu")]
                   + [f"{m['cpu_ratio']:.1f}x"])
    print(table(heads, out))


def _picked(name: str, only: str) -> bool:
    """``--only``: the models whose name contains one of its comma-separated texts."""
    return any(part.strip().lower() in name.lower() for part in only.split(","))


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK)} only, few rounds (a smoke run)")
    ap.add_argument("--busy", action="store_true", help="busy / quiet ratios beside a process burning one core")
    ap.add_argument("--only", default="", help="models whose name contains this text (or one of these, a,b,c)")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds per comparison (median)")
    ap.add_argument("--budget", type=float, default=None, help="seconds of calls per timed round")
    ap.add_argument("--ab", action="store_true",
                    help="la with the kernels added for these models / la with the paths they replace")
    ap.add_argument("--fuse-ab", action="store_true",
                    help="la with attention and layer norm fused (fuse_attention, fuse_layer_norm) / without")
    ap.add_argument("--ab-cnn", action="store_true",
                    help="la / la with conv2d[pointwise] and the conv2d_act pass off (conv_pointwise, conv_activation)")
    ap.add_argument("--hoist-ab", action="store_true",
                    help="la with parameter-only steps computed once / every call (param_cache_max_bytes=0)")
    ap.add_argument("--profile", default="", help="print la.profile() and explain() of this model instead")
    ap.add_argument("--batch", type=int, default=1, help=f"with --profile: 1 or {BIG_BATCH}")
    ap.add_argument("--first-call", action="store_true",
                    help="first-call time in fresh processes, cold and warm kernel cache, / ort session creation")
    ap.add_argument("--first-call-child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--cold-rounds", type=int, default=None,
                    help="with --first-call: rounds with an empty kernel cache (default: every round); the "
                         "later rounds are warm only")
    ap.add_argument("--tree", default="", help=argparse.SUPPRESS)  # (read before the imports: see the top)
    ap.add_argument("--against", type=Path, default=None,
                    help="with --first-call: also the lazyarray of this checkout (DIR/lazyarray), alternating: "
                         "before/after rows")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    import onnx  # noqa: F401  (imported once here: the first model's first call does not pay it)
    import onnxruntime  # noqa: F401
    if args.profile:
        profile(args.profile, args.batch)
        return 0
    if args.first_call_child:
        print(json.dumps(first_call_child(args.first_call_child)))
        return 0
    if args.first_call:
        names = [n for n in [m["name"] for m in manifest()] + [ZOO] if _picked(n, args.only)
                 and (not args.quick or n in QUICK + (ZOO,))]
        print_first_calls(first_call_rows(names, args.rounds or (1 if args.quick else 3), args.against,
                                          args.cold_rounds), args.against is not None)
        return 0
    rounds = args.rounds or (1 if args.quick else 5)
    budget = args.budget or (0.01 if args.quick else 0.15)
    threads = (1, 2)
    models = [m for m in manifest() if _picked(m["name"], args.only)
              and (not args.quick or m["name"] in QUICK)]
    before = num_threads()
    rows, firsts = [], {}
    warm = next(m for m in manifest() if m["name"] == WARM_UP)
    Model(warm, (1,)).check()  # process-wide first uses (imports, ort's runtime) are paid by no row
    try:
        burner = _util.Burner().__enter__() if args.busy else None
        for m in models:
            model = Model(m, threads)
            firsts[model.name] = (model.first_call, model.session_s)
            model.check()
            for batch, ins, _ in model.feeds:
                if args.hoist_ab:
                    rows.append(row_hoist(model, batch, ins, rounds, budget))
                elif args.fuse_ab:
                    rows.append(row_fuse(model, batch, ins, threads, rounds, budget))
                elif args.ab_cnn:
                    rows.append(row_ab_cnn(model, batch, ins, threads, rounds, budget))
                elif args.ab:
                    rows.append(row_ab(model, batch, ins, threads, rounds, budget))
                elif args.busy:
                    rows.append(row_busy(model, batch, ins, burner, rounds, budget))
                else:
                    rows.append(row_quiet(model, batch, ins, threads, rounds, budget))
                print(".", end="", file=sys.stderr, flush=True)
    finally:
        if args.busy:
            burner.__exit__(None, None, None)
        la.set_num_threads(before)
    print(file=sys.stderr)
    if args.hoist_ab:
        print("one thread, CPU us per call (median of alternating rounds): every step every call "
              "(param_cache_max_bytes=0) / parameter-only steps computed once (executor/param_cache.py); "
              "steps: per call + kept")
        print(table(["model", "batch", "per-call us", "kept us", "kept/per-call", "steps"],
                    [_fmt(r, {4}) for r in rows]))
        print(f"kept/per-call: geometric mean {geomean([r[4] for r in rows]):.2f}")
    elif args.ab_cnn:
        print("la / la with conv_pointwise and conv_activation off (same run, median of alternating rounds); "
              "steps per call: with / without")
        print(table(["model", "batch"] + [f"new/off {t}t" for t in threads] + ["steps"],
                    [_fmt(r, {2, 3}) for r in rows]))
        print("geometric mean: " + ", ".join(f"{t}t {geomean([r[2 + i] for r in rows]):.2f}x"
                                             for i, t in enumerate(threads)))
    elif args.fuse_ab:
        print("la with attention and layer norm fused / la without those rewrites (FUSE_OFF), wall time, median "
              "of alternating rounds (outputs equal bit for bit); steps per call: unfused -> fused")
        print(table(["model", "batch"] + [f"fused/unfused {t}t" for t in threads] + ["steps"],
                    [_fmt(r, {2, 3}) for r in rows]))
        print("geometric mean: " + ", ".join(f"{t}t {geomean([r[2 + i] for r in rows]):.2f}x"
                                             for i, t in enumerate(threads)))
    elif args.ab:
        print("la with depthwise, direct, compiled_cell / inline_loop, one_blas_thread, fill_copy / la with "
              "depthwise_taps, im2col / batch_last, steps, blas, numpy.pad (same run)")
        print(table(["model", "batch"] + [f"new/replaced {t}t" for t in threads], [_fmt(r, {2, 3}) for r in rows]))
    else:
        (print_busy(rows) if args.busy else print_quiet(rows, firsts, threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
