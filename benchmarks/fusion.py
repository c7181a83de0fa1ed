"""Compiled elementwise graphs against NumPy: the algebra pass, fusion and threads (issue #16).

GELU (tanh form) written as users write it, with ``x**3``, on 16M float32, measured in one run
(fastest of several rounds each):

* NumPy as written (``x**3`` is NumPy's general ``pow``), NumPy with ``x*x*x``, and NumPy by
  hand in place (the fastest NumPy spelling);
* lazyarray hybridized (``la.CachedOp``): without fusion (the algebra pass alone turns ``x**3``
  into multiplies), fused on one thread, fused on every core (``la.set_num_threads``);
* softmax over the rows of a (4096, 4096) float32 array (row-chunked, threaded kernel);
* LayerNorm over the rows of an (8192, 1024) float32 array (``la.nn.layer_norm``, chunked
  two-pass kernel) against NumPy eager written the usual way;
* a 1000-op elementwise chain recorded under ``la.deferred()`` then ``asnumpy()`` (µs per op,
  against the same chain run eagerly);
* optional peers of the GELU, each only when importable: ``jax.jit``, ``numexpr`` and ``numba``
  (``parallel=True``, no fastmath) on 1 and every thread;
* ``fused[mixed]`` against ``fused[chunked]`` (``--mixed``, or ``--only-mixed``): groups with one
  ``exp`` among exact ops (a multiply-add chain, GELU with erf spelled as ONNX exports it) on
  small and medium outputs, each path forced, one thread, process time, median of alternating
  rounds; the last column says which path the chooser takes (``kernels/fused.py``'s cost model).
* groups that end in a reduction over the last axis (``--reduce``, or ``--only-reduce``): row
  groups of a transformer's hidden size, (64, 768) and (8*128, 768) float32 (and (8192, 1024),
  beyond the caches), compiled with and
  without fusion, one thread, process time, median of alternating rounds (values checked bit for
  bit); the last column lists the fused groups the pass made (a reduction whose input is needed
  elsewhere, as in a full layer norm or softmax, stays out of the group).

Target: hybridized GELU at most 0.5x NumPy by hand in place (1.0x jax.jit when jax is installed).

    python benchmarks/fusion.py [--size 16777216]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table

import lazyarray as la
from lazyarray.kernels import fused as kfused
from lazyarray.kernels.fused_chunked import WRITE_AFTER

C = 0.7978845608


def gelu_numpy(x):
    return 0.5 * x * (1.0 + np.tanh(C * (x + 0.044715 * x ** 3)))


def gelu_numpy_mul(x):
    return 0.5 * x * (1.0 + np.tanh(C * (x + 0.044715 * (x * x * x))))


def gelu_by_hand(x):
    y = x * x
    y *= x
    y *= 0.044715
    y += x
    y *= C
    np.tanh(y, out=y)
    y += 1.0
    y *= x
    y *= 0.5
    return y


def gelu_sym(v):
    return 0.5 * v * (1.0 + la.sym.tanh(C * (v + 0.044715 * v ** 3)))


def fastest(fn, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def peer_cases(x, ref):
    """Optional rows: jax.jit, numexpr and numba (1 and all threads) of the same GELU, each when
    importable (install them in a side venv; they are not dependencies), checked against ``ref``."""
    cases = []
    cores = os.cpu_count() or 1
    threads = sorted({1, cores})
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None:
        f = jax.jit(lambda v: 0.5 * v * (1.0 + jnp.tanh(C * (v + 0.044715 * v ** 3))))
        xj = jnp.asarray(x)
        np.testing.assert_allclose(np.asarray(f(xj)), ref, rtol=2e-5, atol=2e-6)
        cases.append(("jax.jit", lambda: f(xj).block_until_ready()))
    try:
        import numexpr
    except ImportError:
        numexpr = None
    if numexpr is not None:
        f32 = np.float32  # float32 constants keep the expression in float32 (Python floats make it float64)
        env = {"x": x, "h": f32(0.5), "one": f32(1), "c": f32(C), "k": f32(0.044715)}
        out = np.empty_like(x)

        def ne_on(n):
            def run():
                numexpr.set_num_threads(n)
                numexpr.evaluate("h * x * (one + tanh(c * (x + k * x**3)))", local_dict=env, out=out)
            return run

        ne_on(1)()
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-6)
        cases += [(f"numexpr, {n} thread{'s' * (n > 1)}", ne_on(n)) for n in threads]
    try:
        import numba
    except ImportError:
        numba = None
    if numba is not None:
        kernel = _numba_gelu(numba)
        out = np.empty_like(x)

        def nb_on(n):
            def run():
                numba.set_num_threads(n)
                kernel(x, out)
            return run

        nb_on(1)()  # compiles
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-6)
        cases += [(f"numba (parallel, no fastmath), {n} thread{'s' * (n > 1)}", nb_on(n)) for n in threads]
    return cases


def _numba_gelu(numba):
    half, one, c, k = (np.float32(v) for v in (0.5, 1.0, C, 0.044715))

    @numba.njit(parallel=True, fastmath=False)
    def gelu(x, out):
        for i in numba.prange(x.size):
            v = x[i]
            out[i] = half * v * (one + np.tanh(c * (v + k * (v * v * v))))

    return gelu


def gelu_rows(n):
    x = np.random.default_rng(0).standard_normal(n).astype("float32")
    xa = la.array(x)
    xs = la.sym.var("x", shape=(n,), dtype="float32")
    unfused = la.CachedOp(gelu_sym(xs), fuse=False)
    fused = la.CachedOp(gelu_sym(xs), fuse=True)
    ref = gelu_by_hand(x)
    for op in (unfused, fused):
        np.testing.assert_allclose(op(xa).asnumpy(), ref, rtol=2e-5, atol=2e-6)
    cores = os.cpu_count() or 1

    def fused_on(threads):
        def run():
            la.set_num_threads(threads)
            fused(xa)
        return run

    cases = [("NumPy as written (x**3)", lambda: gelu_numpy(x)),
             ("NumPy with x*x*x", lambda: gelu_numpy_mul(x)),
             ("NumPy by hand, in place", lambda: gelu_by_hand(x)),
             ("lazyarray hybridized, no fusion", lambda: unfused(xa)),
             ("lazyarray hybridized, fused, 1 thread", fused_on(1)),
             (f"lazyarray hybridized, fused, {cores} threads", fused_on(cores))]
    cases += peer_cases(x, ref)
    best = {name: float("inf") for name, _ in cases}
    for _ in range(3):  # interleaved rounds: a busy machine slows all alike
        for name, fn in cases:
            best[name] = min(best[name], fastest(fn, 2))
    la.set_num_threads(cores)
    hand = best["NumPy by hand, in place"]
    jax_t = best.get("jax.jit")
    return [[name, f"{t * 1e3:.1f}", f"{t / hand:.2f}"] + ([f"{t / jax_t:.2f}"] if jax_t else [])
            for name, t in best.items()], jax_t is not None


def race_against_numpy(cases):
    """Rows (name, ms, speedup over the case named "NumPy eager"): the fastest of alternating rounds."""
    best = {name: float("inf") for name, _ in cases}
    for _ in range(3):
        for name, fn in cases:
            best[name] = min(best[name], fastest(fn, 2))
    ref = best["NumPy eager"]
    return [[name, f"{t * 1e3:.1f}", f"{ref / t:.2f}"] for name, t in best.items()]


def softmax_rows(shape=(4096, 4096)):
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    xa = la.array(x)
    xs = la.sym.var("x", shape=shape, dtype="float32")
    op = la.CachedOp(la.sym.nn.softmax(xs))

    def numpy_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    np.testing.assert_allclose(op(xa).asnumpy(), numpy_softmax(), rtol=1e-5, atol=1e-9)
    cases = [("NumPy eager", numpy_softmax), ("la.nn.softmax eager", lambda: la.nn.softmax(xa)),
             ("lazyarray hybridized", lambda: op(xa))]
    return race_against_numpy(cases)


def layer_norm_rows(shape=(8192, 1024), eps=1e-5):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype("float32")
    g, b = rng.standard_normal(shape[-1]).astype("float32"), rng.standard_normal(shape[-1]).astype("float32")
    xa, ga, ba = la.array(x), la.array(g), la.array(b)
    xs, gs, bs = (la.sym.var(n, shape=a.shape, dtype="float32") for n, a in (("x", x), ("g", g), ("b", b)))
    op = la.CachedOp(la.sym.nn.layer_norm(xs, gs, bs, eps=eps))

    def numpy_layer_norm():
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * g + b

    np.testing.assert_allclose(op(xa, ga, ba).asnumpy(), numpy_layer_norm(), rtol=1e-4, atol=1e-4)
    cases = [("NumPy eager", numpy_layer_norm), ("la.nn.layer_norm eager", lambda: la.nn.layer_norm(xa, ga, ba, eps=eps)),
             ("lazyarray hybridized", lambda: op(xa, ga, ba))]
    return race_against_numpy(cases)


def chain_rows(n_ops=1000):
    x = la.array(np.random.default_rng(0).random(1000).astype("float32"))

    def chain():
        y = x
        for i in range(n_ops):
            y = la.tanh(y) if i % 2 == 0 else y * 1.0001
        return y

    def recorded():
        with la.deferred():
            y = chain()
        return y.asnumpy()

    np.testing.assert_allclose(recorded(), chain().asnumpy(), rtol=1e-5)
    t_eager = fastest(chain)
    t_lazy = fastest(recorded)
    return [["eager", f"{t_eager / n_ops * 1e6:.2f}"], ["record + asnumpy()", f"{t_lazy / n_ops * 1e6:.2f}"]]


def _erf_poly_gelu(x, b):
    """GELU of ``x + b`` with erf as ONNX exports spell it (Abramowitz-Stegun 7.1.26: one exp)."""
    v = x + b
    z = v / 1.4142135
    az = la.sym.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * az)
    p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return v * 0.5 * (1.0 + la.sym.sign(z) * (1.0 - p * la.sym.exp(la.sym.negative(az * az))))


def _exp_chain(x, b, n):
    y = x + b
    for _ in range(n):
        y = y * 0.999 + 0.001
    y = la.sym.exp(y)
    for _ in range(n):
        y = y * 0.999 + 0.001
    return y


def _ulps(a, b):
    """Distance in units in the last place between float arrays ``a`` and ``b`` (0 where both are NaN)."""
    ints = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = (v.view(ints).astype(np.int64) for v in (a, b))
    sign = np.int64(np.iinfo(ints).min)
    ia = np.where(ia < 0, sign - ia, ia)  # (ordered: -0.0 and 0.0 one apart... and negatives below)
    ib = np.where(ib < 0, sign - ib, ib)
    d = np.abs(ia - ib)
    d[np.isnan(a) & np.isnan(b)] = 0
    return d


def ulp_rows(step=97):
    """How far numba's compiled exp, log and tanh (the C library's) are from NumPy's: float32 (computed
    in float64 and rounded, the most accurate a compiled float32 op can be) over every ``step``-th
    float32, and float64 over a million random values; why ``fused[mixed]`` leaves them to NumPy."""
    import math

    import numba

    @numba.njit
    def libm(x, out, which):
        for i in range(x.size):
            v = np.float64(x[i])
            out[i] = math.exp(v) if which == 0 else math.log(v) if which == 1 else math.tanh(v)

    rows = []
    rng = np.random.default_rng(0)
    x64 = np.concatenate([rng.standard_normal(500_000) * 30, rng.uniform(0, 700, 500_000)])
    for which, name, fn in ((0, "exp", np.exp), (1, "log", np.log), (2, "tanh", np.tanh)):
        worst, over, count = 0, 0, 0
        for start in range(0, 2**32, 2**28):
            x = np.arange(start, start + 2**28, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
            mine = np.empty(x.size, np.float64)
            libm(x, mine, which)
            with np.errstate(all="ignore"):
                d = _ulps(mine.astype(np.float32), fn(x))
            worst, over, count = max(worst, int(d.max())), over + int((d > 1).sum()), count + x.size
        x = np.abs(x64) if name == "log" else x64
        mine = np.empty(x.size)
        libm(x, mine, which)
        d = _ulps(mine, fn(x))
        rows.append([name, worst, f"{over / count:.2e}", int(d.max()), f"{(d > 0).mean():.2e}"])
    return rows


def _forced(path):
    """The chooser made to take ``path`` for every group it admits (a benchmark's A/B only)."""
    real = kfused.admission

    def admission(graph):
        _, table, plan = real(graph)
        return (path if plan else "chunked"), table, plan

    return admission


def mixed_rows(rounds=7):
    """Per group and shape: us per call of fused[mixed] and fused[chunked], their ratio, the chooser's pick."""
    rows = []
    cases = [("exp chain, 101 ops", lambda x, b: _exp_chain(x, b, 25), [(4, 4), (16, 64), (64, 64)]),
             ("exp chain, 401 ops", lambda x, b: _exp_chain(x, b, 100), [(4, 4), (64, 64)]),
             ("GELU, erf as ONNX spells it (25 ops)", _erf_poly_gelu, [(1, 32), (16, 64), (64, 64), (8, 8, 8, 64)])]
    la.set_num_threads(1)
    real = kfused.admission
    try:
        for label, build, shapes in cases:
            for shape in shapes:
                rng = np.random.default_rng(0)
                x, b = rng.standard_normal(shape).astype("float32"), rng.standard_normal(shape[-1]).astype("float32")
                xa, ba = la.array(x), la.array(b)
                xs, bs = la.sym.var("x", shape=shape, dtype="float32"), la.sym.var("b", shape=b.shape, dtype="float32")
                ops, outs = {}, {}
                for path in ("mixed", "chunked", "chosen"):
                    kfused.admission = real if path == "chosen" else _forced(path)
                    ops[path] = la.CachedOp(build(xs, bs))
                    with la.tuning(fused_jit_after=0):
                        for _ in range(3):
                            outs[path] = ops[path](xa, ba).asnumpy()
                        text = str(ops[path].explain(xa, ba))
                    if path == "chosen":
                        pick = "mixed" if "fused[mixed]" in text else "chunked"
                kfused.admission = real
                assert np.array_equal(outs["mixed"], outs["chunked"])  # (bit for bit)
                reps = max(5, int(2e5 // x.size))
                got = {"mixed": [], "chunked": []}
                with la.tuning(fused_jit_after=0):
                    for _ in range(rounds):
                        for path in got:
                            t = time.process_time()
                            for _ in range(reps):
                                ops[path](xa, ba)
                            got[path].append((time.process_time() - t) / reps * 1e6)
                med = {k: float(np.median(v)) for k, v in got.items()}
                rows.append([label, "x".join(map(str, shape)), f"{med['mixed']:.1f}", f"{med['chunked']:.1f}",
                             f"{med['mixed'] / med['chunked']:.2f}", pick])
    finally:
        kfused.admission = real
        la.set_num_threads(os.cpu_count() or 1)
    return rows


def _reduce_cases():
    """(label, build(x, g) -> Symbol) for the row groups of ``reduce_rows``."""
    s = la.sym

    def variance(x, g):  # a layer norm's variance as users write it: the centred values used once
        return s.mean(s.square(x - s.mean(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)

    def rms(x, g):  # RMSNorm's mean square, scaled rows
        return s.mean(s.square(x * g), axis=-1, keepdims=True)

    def logsumexp(x, g):  # a softmax's denominator (cross-entropy's log-sum-exp)
        return s.sum(s.exp(x - s.max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)

    def row_max(x, g):
        return s.max(s.abs(x * g - 1.0), axis=-1)

    def layer_norm(x, g):  # every piece: (x - m) is read by the variance and the output
        d = x - s.mean(x, axis=-1, keepdims=True)
        return d / s.sqrt(s.mean(d * d, axis=-1, keepdims=True) + 1e-5) * g

    def softmax(x, g):  # exp(x - max) is read by the sum and the division
        e = s.exp(x - s.max(x, axis=-1, keepdims=True))
        return e / s.sum(e, axis=-1, keepdims=True)

    return [("layer-norm variance: mean((x - mean x)^2)", variance), ("RMS: mean((x * g)^2)", rms),
            ("softmax denominator: sum(exp(x - max x))", logsumexp), ("max |x * g - 1|", row_max),
            ("layer norm, whole", layer_norm), ("softmax, whole", softmax)]


def reduce_rows(rounds=11):
    """Per row group and shape: us per call compiled with and without fusion, their ratio, the groups."""
    rows = []
    la.set_num_threads(1)
    try:
        for label, build in _reduce_cases():
            for shape in [(64, 768), (8 * 128, 768), (8192, 1024)]:
                rng = np.random.default_rng(0)
                x, g = rng.standard_normal(shape).astype("float32"), rng.standard_normal(shape[-1]).astype("float32")
                xa, ga = la.array(x), la.array(g)
                sym = build(la.sym.var("x", shape=shape, dtype="float32"), la.sym.var("g", shape=g.shape,
                                                                                        dtype="float32"))
                ops = {"fused": la.CachedOp(sym), "unfused": la.CachedOp(sym, fuse=False)}
                names = [n.name for n in ops["fused"].compiled().topo() if n.op is not None and n.op.name == "fused"]
                inputs = [a for k, a in (("x", xa), ("g", ga)) if k in sym.list_inputs()]
                outs = {k: op(*inputs).asnumpy() for k, op in ops.items()}
                assert np.array_equal(outs["fused"], outs["unfused"])  # (bit for bit)
                for op in ops.values():  # (past the first calls: a hot group runs its written function)
                    for _ in range(WRITE_AFTER):
                        op(*inputs)
                reps = max(5, int(2e6 // x.size))
                got = {k: [] for k in ops}
                for r in range(rounds):
                    for k, op in list(ops.items())[::1 if r % 2 else -1]:  # (which goes first alternates)
                        t = time.process_time()
                        for _ in range(reps):
                            op(*inputs)
                        got[k].append((time.process_time() - t) / reps * 1e6)
                med = {k: float(np.median(v)) for k, v in got.items()}
                rows.append([label, "x".join(map(str, shape)), f"{med['fused']:.1f}", f"{med['unfused']:.1f}",
                             f"{med['fused'] / med['unfused']:.2f}", " ".join(names) or "-"])
    finally:
        la.set_num_threads(os.cpu_count() or 1)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--mixed", action="store_true", help="also fused[mixed] / fused[chunked] rows")
    ap.add_argument("--only-mixed", action="store_true", help="only the fused[mixed] / fused[chunked] rows")
    ap.add_argument("--reduce", action="store_true", help="also groups that end in a reduction")
    ap.add_argument("--only-reduce", action="store_true", help="only the groups that end in a reduction")
    ap.add_argument("--ulp", action="store_true", help="only: numba's exp/log/tanh against NumPy's, in ulps")
    args = ap.parse_args()
    if args.ulp:
        print("numba's (the C library's) exp, log, tanh against NumPy's: float32 over every 97th float32 (computed "
              "in float64, rounded), float64 over 1M random values")
        print(table(["op", "f32 max ulp", "f32 share > 1 ulp", "f64 max ulp", "f64 share differing"], ulp_rows()))
        return
    if args.reduce or args.only_reduce:
        print("row groups ending in a reduction over the last axis, float32, 1 thread, us per call compiled with "
              "and without fusion (process time, median of 11 rounds, which goes first alternating; values checked "
              "bit for bit)")
        print(table(["row group", "shape", "fused us", "unfused us", "fused/unfused", "fused groups"],
                    reduce_rows()))
        print()
        if args.only_reduce:
            return
    if args.mixed or args.only_mixed:
        print("fused[mixed] / fused[chunked], float32, 1 thread, us per call (process time, median of 7 "
              "alternating rounds; values checked bit for bit); chosen: the chooser's pick")
        print(table(["group", "shape", "mixed us", "chunked us", "mixed/chunked", "chosen"], mixed_rows()))
        print()
        if args.only_mixed:
            return
    rows, with_jax = gelu_rows(args.size)
    target = "<= 1.0x jax.jit" if with_jax else "<= 0.5x NumPy by hand"
    print(f"GELU (tanh form, x**3) on {args.size:,} float32 (target: hybridized {target})")
    print(table(["implementation", "ms", "x by hand"] + ["x jax.jit"] * with_jax, rows))
    print()
    print(f"softmax over rows of (4096, 4096) float32 on {os.cpu_count()} threads (target: >= 2x NumPy eager)")
    print(table(["implementation", "ms", "speedup"], softmax_rows()))
    print()
    print(f"LayerNorm over rows of (8192, 1024) float32 on {os.cpu_count()} threads (target: >= 2x NumPy eager)")
    print(table(["implementation", "ms", "speedup"], layer_norm_rows()))
    print()
    print("1000-op elementwise chain on 1000 float32 (target: record + asnumpy() <= 3 us per op)")
    print(table(["mode", "us / op"], chain_rows()))


if __name__ == "__main__":
    main()
