"""Which ONNX operators the importer covers completely, and what the others leave out.

An operator of ``load.CONVERTERS`` is *claimed* when its converter covers every node case ONNX
ships for it; it is *partial* when some feature of it is not converted. ``PARTIAL`` lists, per
partial operator, each uncovered feature as a ``Gap``: what it is, why it is not covered, the error
the importer raises for it (``error``: a regex its message matches; never a silently wrong result)
and which of ONNX's node cases use it (``cases``: a regex over case names).
``tests/onnx/test_conformance.py`` holds this table to the cases: every case of a claimed operator
passes, a case of a partial operator fails exactly when a gap's ``cases`` names it, with that gap's
``error``, and a gap no case fails for is stale. This module does not import ``onnx``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Gap:
    """One feature of an ONNX operator that the importer does not convert."""

    feature: str
    why: str
    error: str  # regex: the GraphFormatError message raised for it matches
    cases: str  # regex: the names of ONNX's node cases that use it

    def names_case(self, name: str) -> bool:
        return re.search(self.cases, name) is not None

    def explains(self, message: str) -> bool:
        return message.startswith("GraphFormatError: ") and re.search(self.error, message) is not None


BFLOAT16 = Gap("bfloat16 tensors", "bfloat16 has no NumPy dtype", r"\(BFLOAT16\)", r"(?i)bf16|bfloat16")
LOW_BIT = Gap("float8 / float4 / int4 / int2 tensors", "these element types have no NumPy dtype",
              r"\((FLOAT8\w*|FLOAT4E2M1|U?INT4|U?INT2)\)", r"(?i)float8|float4|e4m3|e5m2|e8m0|int4|int2(?!\d)")
STRING = Gap("string tensors", "the executor computes on numeric arrays only", r"\(STRING\)", r"_string")
SEQUENCE = Gap("sequence / optional values", "graphs carry tensors only (no Sequence*/Optional* values)",
               r"not sequences, maps or optionals|: (Sequence\w*|Optional\w*) \(node",
               r"_(seq|opt|sequence)(_|$)")

PARTIAL: dict[str, tuple[Gap, ...]] = {
    "Attention": (BFLOAT16,),
    "Cast": (BFLOAT16, LOW_BIT),
    "CastLike": (BFLOAT16, LOW_BIT),
    "Celu": (BFLOAT16,),
    "Compress": (BFLOAT16,),
    "DequantizeLinear": (LOW_BIT,),
    "Einsum": (BFLOAT16,),
    "Equal": (STRING,),
    "Identity": (SEQUENCE,),
    "If": (SEQUENCE,),
    "Loop": (SEQUENCE,
             Gap("Slice bounds computed in the body from the iteration count",
                 "our slices take bounds known when the model is loaded",
                 r"must be known when the model is loaded", r"^test_loop11$")),
    "OneHot": (BFLOAT16,),
    "QuantizeLinear": (LOW_BIT,),
    "Range": (BFLOAT16,),
    "ReverseSequence": (BFLOAT16,),
    "Scan": (Gap("Scan-8 (batched)", "onnx.version_converter drops the batch axis of its inputs, so it is refused",
                 r"Scan before opset 9 is batched", r"^test_scan_sum$"),),
    "Unique": (BFLOAT16,),
}


def partial_reasons() -> dict[str, list[str]]:
    """Partial operator -> one line per uncovered feature (``feature: why``)."""
    return {op: [f"{g.feature}: {g.why}" for g in gaps] for op, gaps in sorted(PARTIAL.items())}
