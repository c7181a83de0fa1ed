"""The partial-operator table (``lazyarray/onnx/coverage.py``): a gap explains a failure only when the
importer refused with a ``GraphFormatError`` naming it, never a wrong result; a precision gap only a
value difference within its stated bound. (The table is held to ONNX's node cases in
``test_conformance.py``.)"""
from __future__ import annotations

import re

from lazyarray.onnx.coverage import BF16_STEPS, PARTIAL, STRING, partial_reasons


def test_a_gap_explains_only_a_refusal_that_names_it():
    refusal = "GraphFormatError: ONNX model: graph input 'x': ONNX element type 8 (STRING) is not supported"
    assert STRING.explains(refusal)
    assert not STRING.explains("GraphFormatError: ONNX model: graph input 'x': only tensor inputs")
    assert not STRING.explains("output 0: values differ (max abs error 0.5, 0.001 of the largest expected magnitude)")
    assert not STRING.explains("ValueError: (STRING) went wrong")


def test_a_precision_gap_explains_only_value_differences_within_its_bound():
    assert BF16_STEPS.within > 0
    inside = f"output 0: values differ (max abs error 0.0039, {BF16_STEPS.within / 2:.3g} of the largest expected magnitude)"
    outside = f"output 0: values differ (max abs error 0.5, {BF16_STEPS.within * 2:.3g} of the largest expected magnitude)"
    assert BF16_STEPS.explains(inside)
    assert not BF16_STEPS.explains(outside)
    assert not BF16_STEPS.explains("GraphFormatError: ONNX model: node 'a' (Attention): anything")
    assert not BF16_STEPS.explains("output 0: dtype float32, expected bfloat16")


def test_gaps_name_their_cases():
    assert BF16_STEPS.names_case("test_attention_4d_causal_bf16_expanded")
    assert not BF16_STEPS.names_case("test_attention_4d_causal")
    assert STRING.names_case("test_equal_string") and not STRING.names_case("test_equal")


def test_every_partial_operator_says_why_per_gap():
    reasons = partial_reasons()
    assert set(reasons) == set(PARTIAL)
    for op, gaps in PARTIAL.items():
        assert len(reasons[op]) == len(gaps) > 0
        for g in gaps:
            re.compile(g.error), re.compile(g.cases)
            assert g.feature and g.why
