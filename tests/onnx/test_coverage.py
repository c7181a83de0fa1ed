"""The partial-operator table (``lazyarray/onnx/coverage.py``): a gap explains a failure only when the
importer refused with a ``GraphFormatError`` naming it, never a wrong result. (The table is held to
ONNX's node cases in ``test_conformance.py``.)"""
from __future__ import annotations

import re

from lazyarray.onnx.coverage import BFLOAT16, LOW_BIT, PARTIAL, partial_reasons


def test_a_gap_explains_only_a_refusal_that_names_it():
    refusal = "GraphFormatError: ONNX model: graph input 'x': ONNX element type 16 (BFLOAT16) is not supported"
    assert BFLOAT16.explains(refusal)
    assert not LOW_BIT.explains(refusal)
    assert not BFLOAT16.explains("output 0: values differ (max abs error 0.5)")
    assert not BFLOAT16.explains("ValueError: (BFLOAT16) went wrong")


def test_gaps_name_their_cases():
    assert BFLOAT16.names_case("test_attention_4d_causal_bf16_expanded")
    assert LOW_BIT.names_case("test_cast_FLOAT_to_UINT4") and LOW_BIT.names_case("test_castlike_INT2_to_FLOAT")
    assert not LOW_BIT.names_case("test_cast_FLOAT_to_INT32")


def test_every_partial_operator_says_why_per_gap():
    reasons = partial_reasons()
    assert set(reasons) == set(PARTIAL)
    for op, gaps in PARTIAL.items():
        assert len(reasons[op]) == len(gaps) > 0
        for g in gaps:
            re.compile(g.error), re.compile(g.cases)
            assert g.feature and g.why
