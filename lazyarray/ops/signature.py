"""The Python face of a registry entry: its ``inspect.Signature``, its docstring, its stub line.

``la.<op>`` (``functions.py``) and ``la.sym.<op>`` (``sym.py``) are generated from ``OpDef`` entries
at import time; this module turns the same entry into what ``help()``, ``inspect.signature`` and
type checkers read, so the three can never disagree with the registry or with each other.
Annotations are text (as in every module here with ``from __future__ import annotations``):
the stub generator (``lazyarray/_stubs.py``) writes them verbatim into the ``.pyi`` files.

* inputs are positional-or-keyword; ``"bias?"`` defaults to ``None``; ``"*seq"`` is one
  parameter taking a sequence of arrays;
* params follow, with their defaults (a required param after a defaulted one is keyword-only);
  params listed in ``VARARG_PARAMS`` are ``*sizes`` (``la.tile(x, 2, 3)``);
* ``out=None`` is keyword-only on single-output ops of ``la``.

``bind_inputs`` puts inputs passed by name in their places, for ``la.<op>`` and ``la.sym.<op>`` alike.
"""
from __future__ import annotations

import inspect
from inspect import Parameter

from ..errors import ParamError
from .params import REQUIRED
from .registry import OpDef

# Ops whose one tuple param may also be spread over the positional arguments: ``la.tile(x, 2, 3)``.
VARARG_PARAMS = {"expand": "sizes", "repeat": "sizes"}
_P = Parameter


def input_annotation(name: str, array: str) -> str:
    """The annotation of an input spelled ``name`` in ``OpDef.inputs`` (``x``, ``bias?``, ``*seq``)."""
    if name.startswith("*"):
        return f"Sequence[{array}]"
    return f"{array} | None" if name.endswith("?") else f"{array} | float"


def return_annotation(op: OpDef, array: str) -> str:
    n = op.num_outputs
    if n == 1:
        return array
    return f"tuple[{', '.join([array] * n)}]" if isinstance(n, int) else f"{array} | tuple[{array}, ...]"


def signature(op: OpDef, array: str = "NDArray", params_by_position: bool = True,
              out: bool = True) -> inspect.Signature:
    """The signature of the public function of ``op``; ``array`` names the array type (``Symbol`` in
    ``la.sym``, whose functions take params by name only and have no ``out=``)."""
    ps: list[Parameter] = []
    for name in op.inputs:
        ann = input_annotation(name, array)
        ps.append(_P(name.strip("*?"), _P.POSITIONAL_OR_KEYWORD, annotation=ann,
                     default=None if name.endswith("?") else _P.empty))
    vararg = VARARG_PARAMS.get(op.name)
    kind = _P.POSITIONAL_OR_KEYWORD if params_by_position else _P.KEYWORD_ONLY
    defaulted = any(p.default is not _P.empty for p in ps)
    for p in op.params:
        ann = p.type.annotation
        if p.name == vararg and params_by_position:
            ps.append(_P(p.name, _P.VAR_POSITIONAL, annotation=ann))
            kind = _P.KEYWORD_ONLY
            continue
        required = p.default is REQUIRED
        this_kind = _P.KEYWORD_ONLY if (required and defaulted) else kind
        ps.append(_P(p.name, this_kind, annotation=ann, default=_P.empty if required else p.default))
        defaulted = defaulted or not required
    if out and op.num_outputs == 1:
        ps.append(_P("out", _P.KEYWORD_ONLY, annotation=f"{array} | None", default=None))
    return inspect.Signature(ps, return_annotation=return_annotation(op, array))


def docstring(op: OpDef, sig: inspect.Signature, title: str) -> str:
    """``title`` (one line naming the op), then an ``Args`` section with one line per parameter of
    ``sig`` (type, default, the param's own doc) and ``Returns``: all read from the entry."""
    docs = {p.name: p.doc for p in op.params}
    lines = [title, "", "Args:"]
    for p in sig.parameters.values():
        star = "*" if p.kind is _P.VAR_POSITIONAL else ""
        extra = [] if p.default is _P.empty else [f"default {p.default!r}"]
        if p.kind is _P.KEYWORD_ONLY:
            extra.insert(0, "keyword-only")
        what = docs.get(p.name) or _default_doc(op, p)
        lines.append(f"    {star}{p.name} ({', '.join([p.annotation, *extra])}): {what}")
    lines += ["", "Returns:", f"    {sig.return_annotation}: " + ("the result." if op.num_outputs == 1 else "the outputs.")]
    return "\n".join(lines)


def _default_doc(op: OpDef, p: Parameter) -> str:
    if p.name == "out":
        return "an existing normal array to write the result into (not inside deferred compute)."
    names = [n.strip("*?") for n in op.inputs]
    if p.name in names:
        spelled = op.inputs[names.index(p.name)]
        if spelled.startswith("*"):
            return "a sequence of input arrays."
        return "optional input array (left out: None)." if spelled.endswith("?") else "input array."
    if p.kind is _P.VAR_POSITIONAL:
        return "sizes, as separate ints or one tuple."
    return f"parameter {p.name!r} of {op.qualname}."


def passed_twice(op: OpDef, name: str) -> ParamError:
    """The error for ``name`` passed by position and by name (Python's own wording, which says
    whether it is an input or a parameter of the op)."""
    kind = "input" if name in input_names(op) else "parameter"
    return ParamError(f"{op.name}() got multiple values for {kind} {name!r} (passed by position and "
                      "by name); pass it once")


def input_names(op: OpDef) -> list[str]:
    """The inputs' names as a caller spells them (``bias?`` -> ``bias``, ``*seq`` -> ``seq``)."""
    return [n.strip("*?") for n in op.inputs]


def bind_inputs(op: OpDef, inputs: tuple | list, kwargs: dict) -> tuple:
    """``inputs`` (passed by position) completed with the inputs passed by name, which are popped
    from ``kwargs``, in declared order (an input whose name is also a param's stays a param).

    An input passed both ways raises ``ParamError`` (like Python's "got multiple values for
    argument"), as does a required input left out before one passed by name; a missing optional
    input in between becomes ``None``.
    """
    params = {p.name for p in op.params}
    names = [n if n not in params else None for n in input_names(op)]
    for n in names[:len(inputs)]:
        if n in kwargs:
            raise passed_twice(op, n)
    out = list(inputs)
    for i in range(len(inputs), len(names)):
        if not any(n in kwargs for n in names[i:]):
            break
        n = names[i]
        if n in kwargs:
            out.append(kwargs.pop(n))
        elif op.inputs[i].endswith("?"):
            out.append(None)
        else:
            later = ", ".join(repr(m) for m in names[i + 1:] if m in kwargs)
            raise ParamError(f"{op.name}() missing input {n!r} (inputs are {', '.join(input_names(op))}; "
                             f"{later} was passed by name)")
    return tuple(out)
