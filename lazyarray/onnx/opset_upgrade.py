"""Models of an older ONNX operator set (opset 7 to 12) -> opset 13, before conversion.

Every converter of the import table implements an operator as defined at opset 13 and later. A
model declaring an older opset is read in one of two ways:

* when every operator it uses has the same definition at 13 (``onnx.defs`` since-versions; the
  control-flow bodies included), the model means what the converters implement and is read as is;
* otherwise ``onnx.version_converter`` (ONNX's own tool for the job: one adapter per operator
  change, e.g. opset 9's ``BatchNormalization``, opset 11's coerced-2-D ``Softmax``, ``Dropout``'s
  ``ratio`` attribute becoming an input) rewrites it to opset 13, and the result is checked.

A model the converter cannot bring up (no adapter for one of its operators, a malformed graph)
raises ``GraphFormatError`` naming the opset, the changed operators and the converter's reason;
so does one using an operator form the converter gets wrong (``CONVERTED_WRONGLY``: Scan-8).
Only ``upgrade`` is called by ``load.py``.
"""
from __future__ import annotations

from ..errors import GraphFormatError

TARGET_OPSET = 13  # the oldest definitions the converters implement
DEFAULT_DOMAINS = ("", "ai.onnx")

# Operator forms onnx.version_converter converts wrongly, refused instead: op -> (the first opset
# whose form it converts right, why). Scan-8 carries a batch axis on every state and scan input;
# the converter's adapter removes that axis from the graph's declared inputs, so the converted
# model takes differently shaped inputs than the file's (ONNX's test_scan_sum then fails).
CONVERTED_WRONGLY = {
    "Scan": (9, "Scan before opset 9 is batched (a leading batch axis on every state and scan input), and "
                "onnx.version_converter's Scan 8->9 adapter drops that axis from the graph's inputs, which "
                "changes the model's interface"),
}


def default_opset(model, what: str) -> int:
    """The version of the default ONNX operator set that ``model`` imports."""
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if versions:
        return int(versions[0])
    if any(nd.domain in DEFAULT_DOMAINS for nd in all_nodes(model.graph)):
        raise GraphFormatError(f"{what}: uses operators of the default ONNX operator set but imports no version of it")
    return TARGET_OPSET  # only other domains' operators (ai.onnx.ml): no default-set version applies


def changed_operators(model, version: int) -> list[str]:
    """The default-domain operators of ``model`` (bodies included) whose definition at ``version``
    differs from the one at ``TARGET_OPSET`` (or that are unknown at either), sorted."""
    import onnx

    changed = []
    for op in sorted({nd.op_type for nd in all_nodes(model.graph) if nd.domain in DEFAULT_DOMAINS}):
        try:
            same = (onnx.defs.get_schema(op, version).since_version
                    == onnx.defs.get_schema(op, TARGET_OPSET).since_version)
        except Exception:  # noqa: BLE001 (SchemaError: an op unknown at that version)
            same = False
        if not same:
            changed.append(op)
    return changed


def all_nodes(graph):
    """The nodes of ``graph`` and of the body graphs its control-flow nodes hold."""
    for nd in graph.node:
        yield nd
        for a in nd.attribute:
            if a.HasField("g"):
                yield from all_nodes(a.g)
            for g in a.graphs:
                yield from all_nodes(g)


def upgrade(model, what: str, check):
    """``model`` itself when it is at opset 13 or later, or its operators mean the same at 13; else the
    model converted to opset 13 by ``onnx.version_converter`` and checked by ``check(model)`` (which
    raises on an invalid model); ``GraphFormatError`` when it cannot be converted."""
    version = default_opset(model, what)
    if version >= TARGET_OPSET:
        return model
    changed = changed_operators(model, version)
    if not changed:
        return model
    wrong = [(op, why) for op, (since, why) in CONVERTED_WRONGLY.items() if version < since and op in changed]
    if wrong:
        raise GraphFormatError(f"{what}: uses opset {version}; lazyarray reads opset {TARGET_OPSET} and later, "
                               f"and cannot convert it: {'; '.join(why for _, why in wrong)}. Fix: re-export the "
                               f"model at opset {TARGET_OPSET} or later")
    from onnx import version_converter

    fix = (f"re-export the model at opset {TARGET_OPSET} or later, or convert it with another tool "
           f"(onnx.version_converter.convert_version(model, {TARGET_OPSET}) is what lazyarray tried)")
    head = (f"{what}: uses opset {version}; lazyarray reads opset {TARGET_OPSET} and later, and "
            f"{', '.join(changed)} changed since {version}")
    try:
        converted = version_converter.convert_version(model, TARGET_OPSET)
    except Exception as exc:  # noqa: BLE001 (the converter raises RuntimeError, ValueError, C++ errors)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphFormatError(f"{head}. onnx.version_converter could not convert it: {reason}. Fix: {fix}") from None
    try:
        if default_opset(converted, what) != TARGET_OPSET:
            raise ValueError(f"the result declares opset {default_opset(converted, what)}")
        check(converted)
    except Exception as exc:  # noqa: BLE001 (GraphFormatError from the check, or the converter's oddities)
        raise GraphFormatError(f"{head}. onnx.version_converter's opset-{TARGET_OPSET} model is invalid: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}. Fix: {fix}"
                               ) from None
    return converted
