"""How many of ONNX's own node test cases (``onnx/backend/test/data/node``, 1,884 with onnx 1.23)
lazyarray passes through ``la.onnx``'s importer and ``la.CachedOp``.

Prints, per ONNX operator, the cases passed / total: first the operators the importer claims
(``*``: it converts every case of theirs), then the partial ones (``~``: some feature is not
converted, ``lazyarray/onnx/coverage.py`` says which and why), then the rest; then the totals and the
pass rate over all cases. ``--failures`` also prints the partial operators' gaps and why each case of
an imported operator failed. Tolerances are ONNX's (rtol 1e-3, atol 1e-7); outputs
must match in dtype and shape too. Needs the ``onnx`` extra (``pip install 'lazyarray[onnx]'``).

``--models`` prints instead the table of ONNX's nine light real models (``lazyarray/onnx/light_models.py``,
the input ONNX's harness feeds): graph nodes, seconds to import (``SymbolBlock.imports``), for the
first hybridized call (compiling) and per steady call (median of 3) beside onnxruntime's on the
shipped file (1 thread), the error against the reference output (rtol 1e-3, atol 1e-4), the logits'
(input of the last Softmax) relative error against onnxruntime, and whether the block re-exported
with ``la.onnx.export`` runs in onnxruntime with equal outputs (rtol 1e-5, atol 1e-6; without the
NCHWc layout transform, see tests/onnx/test_light_models.py). Run it with OMP_NUM_THREADS=1.

    python benchmarks/onnx_conformance.py
    python benchmarks/onnx_conformance.py --failures --op Resize
    OMP_NUM_THREADS=1 python benchmarks/onnx_conformance.py --models [--model resnet50]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# run as a script, this folder is first on the path, where benchmarks/onnx.py would shadow the onnx package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks._util import best_of, table  # noqa: E402
from lazyarray.onnx.backend import claimed_ops, node_cases, partial_ops, run_case  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--failures", action="store_true", help="print why each case of a claimed operator failed")
    ap.add_argument("--op", action="append", default=[], help="only these operators (repeatable)")
    ap.add_argument("--models", action="store_true", help="the light real models' table instead")
    ap.add_argument("--model", action="append", default=[], help="with --models: only these (repeatable)")
    args = ap.parse_args(argv)
    if args.models:
        return models_table(args.model)
    t0 = time.perf_counter()
    cases = node_cases()
    t_load = time.perf_counter() - t0
    claimed, partial = set(claimed_ops()), partial_ops()
    passed, total = defaultdict(int), defaultdict(int)
    failures = []
    for case in cases:
        if args.op and case.op not in args.op:
            continue
        why = run_case(case)
        total[case.op] += 1
        if why is None:
            passed[case.op] += 1
        elif case.op in claimed or case.op in partial:
            failures.append((case.op, case.name, why))

    def mark(op):
        return "* " if op in claimed else "~ " if op in partial else "  "

    ops = sorted(total, key=lambda op: (op not in claimed, op not in partial, op))
    rows = [[mark(op) + op, passed[op], total[op], f"{100 * passed[op] / total[op]:.0f}%"] for op in ops]
    print(table(["operator", "passed", "cases", "rate"], rows))

    def tally(group):
        return (len(group), sum(passed[op] for op in group), sum(total[op] for op in group))

    n_ops, c_pass, c_all = tally([op for op in ops if op in claimed])
    print()
    print(f"* claimed operators ({n_ops}): " + (f"all {c_all} cases pass" if c_pass == c_all else
                                             f"{c_pass} / {c_all} cases pass (REGRESSION)"))
    n_ops, p_pass, p_all = tally([op for op in ops if op in partial])
    print(f"~ partial operators ({n_ops}): {p_pass} / {p_all} cases pass; the rest fail naming the uncovered"
          " feature (lazyarray/onnx/coverage.py)")
    n_pass, n_all = sum(passed.values()), sum(total.values())
    print(f"all node cases ({len(ops)} operators): {n_pass} / {n_all} passed ({100 * n_pass / max(n_all, 1):.1f}%)")
    print(f"(cases read or generated in {t_load:.1f} s, run in {time.perf_counter() - t0 - t_load:.1f} s)")
    if args.failures:
        print()
        for op, reasons in partial.items():
            if not args.op or op in args.op:
                print(f"~ {op:18s} " + "; ".join(reasons))
        print()
        for op, name, why in failures:
            print(f"{op:20s} {name}: {why}")
    return 0


def models_table(only: list[str]) -> int:
    import numpy as np
    import onnxruntime as ort

    import lazyarray as la
    from lazyarray.onnx.light_models import harness_inputs, light_models, with_logits

    def session(src, level=None):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        if level is not None:
            opts.graph_optimization_level = level
        return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])

    def outputs(res):
        return [o.asnumpy() for o in (res if isinstance(res, list) else [res])]

    rows, tmp = [], tempfile.mkdtemp()
    for lm in light_models():
        if only and lm.name not in only:
            continue
        model = with_logits(lm.load())  # the shipped graph plus its logits as a second output
        feeds = harness_inputs(model, lm.name)
        src = os.path.join(tmp, "with_logits.onnx")
        with open(src, "wb") as f:
            f.write(model.SerializeToString())
        t0 = time.perf_counter()
        block = la.blocks.SymbolBlock.imports(src, list(feeds))
        block.hybridize()
        t_import = time.perf_counter() - t0
        args = [la.array(v) for v in feeds.values()]
        t0 = time.perf_counter()
        ours = outputs(block(*args))
        t_first = time.perf_counter() - t0
        t_steady = best_of(lambda: outputs(block(*args)), repeat=3)  # noqa: B023 (called at once)
        sess = session(model.SerializeToString())
        want = sess.run(None, feeds)
        t_ort = best_of(lambda: sess.run(None, feeds), repeat=3)  # noqa: B023
        ref, got = lm.reference(), ours[0]
        err = np.abs(got.astype(np.float64) - ref)
        rel = err / np.maximum(np.abs(ref), np.finfo(np.float32).tiny)
        match = got.shape == ref.shape and np.allclose(got, ref, rtol=1e-3, atol=1e-4)
        logit_rel = float(np.max(np.abs(ours[-1].astype(np.float64) - want[-1]) / np.abs(want[-1]).max()))
        path = la.onnx.export(block, os.path.join(tmp, "reexported.onnx"))
        again = session(path, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED).run(None, feeds)
        equal = all(a.shape == o.shape and np.allclose(a, o, rtol=1e-5, atol=1e-6) for a, o in zip(again, ours))
        os.remove(path)
        rows.append([lm.name, len(lm.load().graph.node), f"{t_import:.2f}", f"{t_first:.2f}",
                     f"{t_steady:.3f}", f"{t_ort:.3f}", f"{t_steady / t_ort:.1f}x",
                     f"{err.max():.2g}", f"{rel.max():.2g}", "yes" if match else "NO", f"{logit_rel:.1g}",
                     "yes" if equal else "NO"])
        print(f"  {lm.name} done", file=sys.stderr, flush=True)
    print(table(["model", "nodes", "import s", "first call s", "steady s", "ort s", "ours/ort", "max abs err",
                 "max rel err", "match", "logits rel vs ort", "re-export ort equal"], rows))
    return 0 if all(r[9] == "yes" and r[11] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
