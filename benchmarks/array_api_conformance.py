"""How much of the Python Array API standard (2024.12) ``la`` covers.

Two tables:

1. namespace coverage: every name of the standard (read from the spec's stubs in the
   array-api-tests checkout, or from ``array_api_strict`` when there is none), present in ``la``
   or missing, per part of the spec (core functions, constants, dtypes, ``linalg``, ``fft``);
2. the public conformance suite, github data-apis/array-api-tests, when it is present: passed /
   failed / skipped per test module, run with ``ARRAY_API_TESTS_MODULE=lazyarray``.

    # a checkout of array-api-tests with its array-api submodule (git submodule update --init)
    python benchmarks/array_api_conformance.py          # the suite vendored under tests/third_party
    ARRAY_API_TESTS_DIR=~/src/array-api-tests python benchmarks/array_api_conformance.py
    python benchmarks/array_api_conformance.py --max-examples 20 -k "test_elementwise"
    python benchmarks/array_api_conformance.py --coverage-only

The suite needs ``hypothesis`` and ``ndindex`` (``pip install hypothesis ndindex``); runs take
a few minutes with ``--max-examples 20``.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lazyarray as la  # noqa: E402

# Names array_api_strict exposes that are not part of the standard.
_STRICT_EXTRAS = {"ArrayAPIStrictFlags", "ModuleType", "Device", "get_array_api_strict_flags",
                  "set_array_api_strict_flags", "reset_array_api_strict_flags", "broadcast_shapes"}
_SPEC_PARTS = {  # stub file -> part (array_object.py holds methods, not names)
    "constants": "constants", "creation_functions": "creation", "data_type_functions": "data types",
    "elementwise_functions": "elementwise", "indexing_functions": "indexing",
    "linear_algebra_functions": "linear algebra", "manipulation_functions": "manipulation",
    "searching_functions": "searching", "set_functions": "sets", "sorting_functions": "sorting",
    "statistical_functions": "statistics", "utility_functions": "utility", "linalg": "linalg", "fft": "fft",
}
_DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float32", "float64", "complex64", "complex128"]


def _stub_names(stubs: Path) -> dict[str, list[str]]:
    """part -> names, from the ``__all__`` of each stub file of the spec."""
    parts: dict[str, list[str]] = {"dtypes": list(_DTYPE_NAMES), "info": ["__array_namespace_info__"]}
    for stem, part in _SPEC_PARTS.items():
        tree = ast.parse((stubs / f"{stem}.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                names = ast.literal_eval(node.value)
                prefix = f"{stem}." if stem in ("linalg", "fft") else ""
                parts.setdefault(part, []).extend(prefix + n for n in names)
    return parts


def _strict_names() -> dict[str, list[str]]:
    import array_api_strict as xs

    core = [n for n in dir(xs) if not n.startswith("_") and n not in _STRICT_EXTRAS
            and n not in ("linalg", "fft") and not isinstance(getattr(xs, n), type(xs))]
    parts = {"core (array_api_strict)": [n for n in core if n not in _DTYPE_NAMES], "dtypes": list(_DTYPE_NAMES)}
    for ext in ("linalg", "fft"):
        mod = getattr(xs, ext)
        parts[ext] = [f"{ext}.{n}" for n in getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")])]
    return parts


def _present(name: str) -> bool:
    obj = la
    for part in name.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def coverage(tests_dir: Path | None) -> tuple[int, int, list[str]]:
    """Print the namespace table; return (present, total, missing names)."""
    stubs = tests_dir / "array-api" / "src" / "array_api_stubs" / "_2024_12" if tests_dir else None
    if stubs is not None and stubs.is_dir():
        parts, source = _stub_names(stubs), f"the spec's stubs ({stubs})"
    else:
        parts, source = _strict_names(), "array_api_strict"
    print(f"Array API 2024.12 namespace coverage of lazyarray (names from {source})\n")
    print(f"{'part':<24}{'present':>9}{'total':>7}  missing")
    present = total = 0
    missing_all: list[str] = []
    for part, names in parts.items():
        names = sorted(set(names))
        missing = [n for n in names if not _present(n)]
        present += len(names) - len(missing)
        total += len(names)
        missing_all += missing
        print(f"{part:<24}{len(names) - len(missing):>9}{len(names):>7}  {' '.join(missing)}")
    print(f"{'all':<24}{present:>9}{total:>7}  ({100 * present / total:.0f}%)\n")
    return present, total, missing_all


def run_suite(tests_dir: Path, max_examples: int, extra: list[str]) -> int:
    """Run array-api-tests against lazyarray; print passed / failed / skipped per test module."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        env = dict(os.environ, ARRAY_API_TESTS_MODULE="lazyarray",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-m", "pytest", "array_api_tests", "-q", "-p", "no:cacheprovider",
               f"--max-examples={max_examples}", f"--junitxml={report}", "-o", "junit_family=xunit1",
               "--disable-warnings", *extra]
        print("$", " ".join(cmd), f"(in {tests_dir})", flush=True)
        proc = subprocess.run(cmd, cwd=tests_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if not report.exists():
            print(proc.stdout[-5000:])
            return 1
        counts: dict[str, Counter] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            module = (case.get("file") or case.get("classname", "?")).rsplit("/", 1)[-1].removesuffix(".py")
            module = module.rsplit(".", 1)[-1] if "." in module else module
            kind = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    kind = "failed"
                elif child.tag == "skipped":
                    kind = "skipped"
            counts.setdefault(module, Counter())[kind] += 1
    print(f"\narray-api-tests against lazyarray (--max-examples={max_examples})\n")
    print(f"{'module':<34}{'passed':>8}{'failed':>8}{'skipped':>9}{'pass %':>8}")
    total = Counter()
    for module in sorted(counts):
        c = counts[module]
        total.update(c)
        run = c["passed"] + c["failed"]
        print(f"{module:<34}{c['passed']:>8}{c['failed']:>8}{c['skipped']:>9}"
              f"{(100 * c['passed'] / run if run else 0):>7.0f}%")
    run = total["passed"] + total["failed"]
    print(f"{'all':<34}{total['passed']:>8}{total['failed']:>8}{total['skipped']:>9}"
          f"{(100 * total['passed'] / run if run else 0):>7.1f}%")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests-dir", default=os.environ.get("ARRAY_API_TESTS_DIR")
                    or str(ROOT / "tests" / "third_party" / "array_api_tests"),
                    help="checkout of github data-apis/array-api-tests (default: $ARRAY_API_TESTS_DIR, else the "
                         "copy vendored under tests/third_party)")
    ap.add_argument("--max-examples", type=int, default=20)
    ap.add_argument("--coverage-only", action="store_true", help="print the namespace table only")
    ap.add_argument("-k", default=None, help="pytest -k expression for the suite")
    args = ap.parse_args(argv)
    tests_dir = Path(args.tests_dir).expanduser() if args.tests_dir else None
    coverage(tests_dir)
    if args.coverage_only:
        return 0
    if tests_dir is None or not (tests_dir / "array_api_tests").is_dir():
        print("array-api-tests not found: set ARRAY_API_TESTS_DIR to a checkout of "
              "github data-apis/array-api-tests (with its array-api submodule) to run the suite")
        return 0
    if os.environ.get("ARRAY_API_TESTS_MODULE", "lazyarray") != "lazyarray":
        print(f"note: ARRAY_API_TESTS_MODULE={os.environ['ARRAY_API_TESTS_MODULE']} is ignored; "
              "the suite runs against lazyarray")
    return run_suite(tests_dir, args.max_examples, ["-k", args.k] if args.k else [])


if __name__ == "__main__":
    sys.exit(main())
