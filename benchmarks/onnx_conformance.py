"""How many of ONNX's own node test cases (``onnx/backend/test/data/node``, 1,884 with onnx 1.23)
lazyarray passes through ``la.onnx``'s importer and ``la.CachedOp``.

Prints, per ONNX operator, the cases passed / total (operators the import table claims first,
marked ``*``), then the totals and the pass rate over all cases. ``--failures`` also prints why
each case of a claimed operator failed. Tolerances are ONNX's (rtol 1e-3, atol 1e-7); outputs
must match in dtype and shape too. Needs the ``onnx`` extra (``pip install 'lazyarray[onnx]'``).

    python benchmarks/onnx_conformance.py
    python benchmarks/onnx_conformance.py --failures --op Resize
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._util import table  # noqa: E402
from lazyarray.onnx.backend import claimed_ops, node_cases, run_case  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--failures", action="store_true", help="print why each case of a claimed operator failed")
    ap.add_argument("--op", action="append", default=[], help="only these operators (repeatable)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = node_cases()
    t_load = time.perf_counter() - t0
    claimed = set(claimed_ops())
    passed, total = defaultdict(int), defaultdict(int)
    failures = []
    for case in cases:
        if args.op and case.op not in args.op:
            continue
        why = run_case(case)
        total[case.op] += 1
        if why is None:
            passed[case.op] += 1
        elif case.op in claimed:
            failures.append((case.op, case.name, why))
    ops = sorted(total, key=lambda op: (op not in claimed, op))
    rows = [[("* " if op in claimed else "  ") + op, passed[op], total[op], f"{100 * passed[op] / total[op]:.0f}%"]
            for op in ops]
    print(table(["operator", "passed", "cases", "rate"], rows))
    n_pass, n_all = sum(passed.values()), sum(total.values())
    c_pass = sum(passed[op] for op in ops if op in claimed)
    c_all = sum(total[op] for op in ops if op in claimed)
    print()
    print(f"claimed operators ({len([o for o in ops if o in claimed])}): {c_pass} / {c_all} cases passed"
          f" ({100 * c_pass / max(c_all, 1):.1f}%)")
    print(f"all node cases ({len(ops)} operators): {n_pass} / {n_all} passed ({100 * n_pass / max(n_all, 1):.1f}%)")
    print(f"(cases read or generated in {t_load:.1f} s, run in {time.perf_counter() - t0 - t_load:.1f} s)")
    if args.failures:
        print()
        for op, name, why in failures:
            print(f"{op:20s} {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
