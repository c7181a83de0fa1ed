"""ONNX's own node test cases for every operator ``la.onnx``'s import table converts: every case of a
claimed operator passes; a case of a partial operator fails exactly when it uses a feature that
``lazyarray/onnx/coverage.py`` lists as not covered, with the error that names it.

The cases come from ``onnx/backend/test/data/node`` (or are generated in memory by the installed
onnx, which is how that directory is written); ``benchmarks/onnx_conformance.py`` prints the table
over all 1,884 cases.
"""
from __future__ import annotations

import importlib.util

import pytest

onnx = pytest.importorskip("onnx")

from lazyarray.onnx.backend import claimed_ops, node_cases, partial_ops, run_case  # noqa: E402
from lazyarray.onnx.coverage import PARTIAL  # noqa: E402
from lazyarray.onnx.load import CONVERTERS  # noqa: E402


@pytest.fixture(scope="module")
def results():
    """Every node case of an imported operator (claimed or partial) -> (case, why it failed or None)."""
    ops = set(claimed_ops()) | set(PARTIAL)
    return {c.name: (c, run_case(c)) for c in node_cases() if c.op in ops}


def test_the_claim_is_at_least_120_operators_and_the_two_tables_split_the_importer():
    claimed, partial = set(claimed_ops()), set(partial_ops())
    assert len(claimed) >= 120
    assert not claimed & partial
    # (the table keys operators of another domain ``domain.OpType``; node cases name the type)
    assert claimed | partial == {name.rsplit(".", 1)[-1] for name in CONVERTERS}
    assert all(partial_ops()[op] for op in partial)


def test_every_case_of_a_claimed_operator_passes(results):
    claimed = set(claimed_ops())
    if importlib.util.find_spec("PIL") is None:  # (ImageDecoder decodes with Pillow, of the onnx extra)
        claimed.discard("ImageDecoder")
    cases = [(c, why) for c, why in results.values() if c.op in claimed]
    assert len(cases) > 1000  # 1,646 cases of 184 claimed operators with onnx 1.23
    failures = [f"{c.name} ({c.op}): {why}" for c, why in cases if why is not None]
    assert not failures, f"{len(failures)} case(s) of claimed operators fail:\n" + "\n".join(failures)


def test_a_case_of_a_partial_operator_fails_exactly_when_it_uses_a_gap_and_says_so(results):
    wrong = []
    for case, why in results.values():
        gaps = [g for g in PARTIAL.get(case.op, ()) if g.names_case(case.name)]
        if case.op not in PARTIAL:
            continue
        if not gaps and why is not None:
            wrong.append(f"{case.name} ({case.op}) uses no listed gap but fails: {why}")
        elif gaps and why is None:
            wrong.append(f"{case.name} ({case.op}) passes: the gap {gaps[0].feature!r} no longer applies to it")
        elif gaps and not any(g.explains(why) for g in gaps):
            wrong.append(f"{case.name} ({case.op}) should fail naming {[g.feature for g in gaps]}, got: {why}")
    assert not wrong, "\n".join(wrong)


def test_every_gap_is_used_by_a_case():
    # with another onnx version, case names may change: say which gap names none, rather than pass vacuously
    cases = node_cases()
    stale = [(op, g.feature) for op, gaps in PARTIAL.items() for g in gaps
             if not any(c.op == op and g.names_case(c.name) for c in cases)]
    assert not stale, f"gaps that name no node case of their operator in onnx {onnx.__version__}: {stale}"


def test_cases_are_grouped_by_the_operator_they_test():
    ops = {c.name: c.op for c in node_cases()}
    assert len(ops) > 1500  # 1,884 with onnx 1.23
    assert ops["test_gemm_default_no_bias"] == "Gemm"
    assert ops["test_softmax_axis_0_expanded"] == "Softmax"
