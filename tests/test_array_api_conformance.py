"""A fast subset of the public Array API conformance suite (github data-apis/array-api-tests).

Runs when ``ARRAY_API_TESTS_DIR`` points at a checkout of the suite with its ``array-api`` submodule
(``git submodule update --init``); skips cleanly otherwise (the suite is not vendored yet). The subset
is seven test modules at ``--max-examples=2`` (about 15 s). It fails on any failure not in ``KNOWN_FAILURES``
(each listed with its reason: the remaining work of issue #13). test_linalg is left out: with some
hypothesis seeds one of its examples runs for minutes (not investigated yet).
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["test_constants", "test_data_type_functions", "test_creation_functions", "test_set_functions",
           "test_sorting_functions", "test_searching_functions", "test_manipulation_functions"]
KNOWN_FAILURES = {  # test id -> why (issue #13, still open)
    "test_data_type_functions::test_finfo[dtype0]": "finfo of complex64: the suite wants float32 limits' dtype",
    "test_data_type_functions::test_finfo[dtype2]": "finfo of complex64/128: as above",
    "test_creation_functions::test_full": "la.full's default dtype is float32 for ints/bools (our API contract)",
    "test_creation_functions::test_full_like": "full_like with a complex fill_value",
    "test_creation_functions::test_ones": "la.ones default dtype (float32) vs the suite's default float",
    "test_creation_functions::test_zeros": "as test_ones",
    "test_searching_functions::test_searchsorted": "searchsorted's sorter= argument is not supported",
    "test_manipulation_functions::test_concat": "concat(axis=None) (flatten first) is not supported",
    "test_manipulation_functions::test_tile": "tile reps longer than x.ndim",
}


def _suite_dir() -> Path | None:
    d = os.environ.get("ARRAY_API_TESTS_DIR")
    return Path(d) if d and (Path(d) / "array_api_tests").is_dir() else None


@pytest.mark.skipif(_suite_dir() is None, reason="set ARRAY_API_TESTS_DIR to a checkout of data-apis/array-api-tests")
def test_fast_conformance_subset(tmp_path):
    tests_dir = _suite_dir()
    report = tmp_path / "report.xml"
    env = dict(os.environ, ARRAY_API_TESTS_MODULE="lazyarray",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("ARRAY_API_TESTS_SKIP_DTYPES", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--max-examples=2",
           "--disable-warnings", f"--junitxml={report}", "-o", "junit_family=xunit1",
           *[f"array_api_tests/{m}.py" for m in MODULES]]
    proc = subprocess.run(cmd, cwd=tests_dir, env=env, capture_output=True, text=True, timeout=600)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    failed, passed = set(), 0
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        tid = f"{module}::{case.get('name')}"
        if any(c.tag in ("failure", "error") for c in case):
            failed.add(tid)
        elif not any(c.tag == "skipped" for c in case):
            passed += 1
    assert passed >= 60, proc.stdout[-3000:]
    assert sorted(failed - set(KNOWN_FAILURES)) == [], "new conformance failures"
