"""Which ONNX operators the importer covers completely, and what the others leave out.

An operator of ``load.CONVERTERS`` is *claimed* when its converter covers every node case ONNX
ships for it; it is *partial* when some feature of it is not converted. ``PARTIAL`` lists, per
partial operator, each uncovered feature as a ``Gap``: what it is, why it is not covered, the error
the importer raises for it (``error``: a regex its message matches; never a silently wrong result)
and which of ONNX's node cases use it (``cases``: a regex over case names). A *precision* gap
(``within``) is a feature that runs but rounds differently from the reference: its cases fail, and
the suite holds their error to the stated bound.
``tests/onnx/test_conformance.py`` holds this table to the cases: every case of a claimed operator
passes, a case of a partial operator fails exactly when a gap's ``cases`` names it, with that gap's
``error``, and a gap no case fails for is stale. This module does not import ``onnx``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Gap:
    """One feature of an ONNX operator that the importer does not convert, or (``within`` > 0) does
    not compute as ONNX's reference does."""

    feature: str
    why: str
    error: str  # regex: the GraphFormatError message raised for it matches
    cases: str  # regex: the names of ONNX's node cases that use it
    # > 0: a precision gap. The case runs and its values differ from the reference by at most this
    # fraction of the largest expected magnitude; that bound is what the suite holds it to.
    within: float = 0.0

    def names_case(self, name: str) -> bool:
        return re.search(self.cases, name) is not None

    def explains(self, message: str) -> bool:
        if self.within:
            m = re.search(r"values differ \(max abs error \S+, (\S+) of the largest expected magnitude\)", message)
            return m is not None and float(m.group(1)) <= self.within
        return message.startswith("GraphFormatError: ") and re.search(self.error, message) is not None


STRING = Gap("string tensors", "the executor computes on numeric arrays only", r"\(STRING\)", r"_string")
# bfloat16 / float8 / float4 / int4 / int2 values are imported in their formats (narrow.py); only this differs:
BF16_STEPS = Gap("bfloat16 attention rounded per step", "ONNX's reference rounds every NumPy step (the softmax's "
                 "exp, sum and divide) to bfloat16; lazyarray computes each operator in float32 and rounds its "
                 "result once (more accurate), at most one bfloat16 epsilon (2**-7) of the output's scale apart",
                 "", r"^test_attention_.*_bf16", within=2 ** -7)

PARTIAL: dict[str, tuple[Gap, ...]] = {
    "Attention": (BF16_STEPS,),
    "Equal": (STRING,),
    "Scan": (Gap("Scan-8 (batched)", "onnx.version_converter drops the batch axis of its inputs, so it is refused",
                 r"Scan before opset 9 is batched", r"^test_scan_sum$"),),
}


def partial_reasons() -> dict[str, list[str]]:
    """Partial operator -> one line per uncovered feature (``feature: why``)."""
    return {op: [f"{g.feature}: {g.why}" for g in gaps] for op, gaps in sorted(PARTIAL.items())}
