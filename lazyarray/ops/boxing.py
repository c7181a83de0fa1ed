"""The ``boxing`` op: the explicit communication node of a global graph, converting ``x`` from SBP
``src`` to SBP ``dst``. On one process the logical value does not change, so its kernel copies; on a
cluster the distributed executor runs the collective instead. Its SBP attributes are a param type
(``"S(0)"`` / ``"B"`` / ``"P(sum)"`` in JSON)."""
from __future__ import annotations

from ..sbp import SBPError, parse
from .params import ParamType
from .registry import OpDef, Param, register


class _SBPType(ParamType):
    """An SBP signature attribute, ``"S(0)"`` / ``"B"`` / ``"P(sum)"`` in JSON."""

    name = "sbp"

    def convert(self, value, op, param):
        try:
            return parse(value)
        except SBPError as exc:
            raise self._bad(value, op, param, "an SBP such as 'S(0)', 'B' or 'P(sum)'") from exc

    def to_json(self, value):
        return str(value)


SBP_PARAM = _SBPType()

register(OpDef(
    # a copy, not a view: on a cluster the collective delivers a new array, so the node holds a
    # buffer of its own in the memory plan (as copy_to does) and shows there by its name
    "boxing", ("x",), lambda xp, x, src, dst, out=None: x.copy(),
    params=(Param("src", SBP_PARAM), Param("dst", SBP_PARAM)),
    grad=lambda F, ins, y, g, src, dst: [g],
    doc="x converted from SBP src to SBP dst: the explicit communication node of a global graph "
        "(the logical value does not change, so on one process it is x itself)",
))
