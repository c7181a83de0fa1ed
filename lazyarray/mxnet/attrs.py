"""MXNet's string-encoded operator attributes, parsed without ``eval``.

An MXNet 1.x symbol file stores every attribute as a string written by its C++ parameter
printer: ``"(3, 3)"``, ``"[1,1]"``, ``"True"``, ``"None"``, ``"1e-05"``, ``"relu"``. ``Attrs`` reads
them by the type the operator declares (``ints``, ``int``, ``float``, ``bool``, ``choice``), with a
regular-expression tokenizer for tuples: a file can never run code, and a bad value raises
``GraphFormatError`` naming the node, the attribute and the value.
"""
from __future__ import annotations

import math
import re

from ..errors import GraphFormatError

_INT = re.compile(r"\s*([+-]?\d{1,19})\s*(L)?\s*")
_NONE = ("None", "none", "")
_TRUE = ("True", "true", "1")
_FALSE = ("False", "false", "0")
_MAX_ITEMS = 64  # shapes and tuples: at most NumPy's 64 dims
_MISSING = object()


def parse_ints(text: str) -> tuple[int | None, ...] | None:
    """``"(3, 3)"`` / ``"[3,3]"`` / ``"3"`` / ``"(3,)"`` / ``"()"`` -> a tuple of ints; ``"None"`` -> None.

    Items may be ``None`` (MXNet's optional tuples, e.g. ``slice``'s ``(None, 2)``). ``ValueError``
    for anything else.

    >>> parse_ints("(3, 3)"), parse_ints("[1,-1]"), parse_ints("7"), parse_ints("None")
    ((3, 3), (1, -1), (7,), None)
    """
    s = text.strip()
    if s in _NONE:
        return None
    if s[:1] in "([":
        close = ")" if s[0] == "(" else "]"
        if not s.endswith(close):
            raise ValueError(f"unbalanced brackets in {text!r}")
        s = s[1:-1].strip()
        if not s:
            return ()
        parts = s.split(",")
        if parts[-1].strip() == "":  # "(3,)"
            parts = parts[:-1]
    else:
        parts = [s]
    if len(parts) > _MAX_ITEMS:
        raise ValueError(f"more than {_MAX_ITEMS} items")
    out: list[int | None] = []
    for p in parts:
        if p.strip() in ("None", "none"):
            out.append(None)
            continue
        m = _INT.fullmatch(p)
        if m is None:
            raise ValueError(f"{p.strip()!r} is not an integer")
        out.append(int(m.group(1)))
    return tuple(out)


def parse_bool(text: str) -> bool:
    s = text.strip()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise ValueError("expected True or False")


def parse_float(text: str) -> float:
    s = text.strip()
    if len(s) > 40:
        raise ValueError("too long for a number")
    value = float(s)  # "inf", "-inf", "1e-05"; float() parses, it never evaluates
    if math.isnan(value):
        raise ValueError("NaN is not a valid attribute")
    return value


class Attrs:
    """The attributes of one MXNet node, read by type; names every problem.

    >>> a = Attrs({"kernel": "(3, 3)", "no_bias": "True"}, "node 2 'conv0' (Convolution)")
    >>> a.ints("kernel"), a.bool("no_bias", False), a.int("num_group", 1)
    ((3, 3), True, 1)
    """

    def __init__(self, raw: dict, where: str):
        self.raw = raw
        self.where = where

    def _get(self, name: str, default, parse, what: str):
        text = self.raw.get(name, _MISSING)
        if text is _MISSING:
            if default is _MISSING:
                raise GraphFormatError(f"{self.where}: missing attribute {name!r}")
            return default
        if not isinstance(text, str):
            raise GraphFormatError(f"{self.where}: attribute {name!r} must be a string, got {type(text).__name__}")
        try:
            return parse(text)
        except (ValueError, OverflowError) as exc:
            raise GraphFormatError(f"{self.where}: attribute {name}={text[:60]!r} is not {what} ({exc})") from None

    def ints(self, name: str, default=_MISSING) -> tuple | None:
        return self._get(name, default, parse_ints, "a tuple of integers")

    def int(self, name: str, default=_MISSING) -> int | None:
        """An integer; ``"None"`` (or empty) only where the attribute is optional (``default=None``):
        MXNet's plain int parameters (``num_group``) have no such value."""
        def one(text):
            v = parse_ints(text)
            if v is None:
                if default is None:
                    return None
                raise ValueError("expected an integer" + ("" if default is _MISSING else f", e.g. the default {default}"))
            if len(v) != 1 or v[0] is None:
                raise ValueError("expected one integer")
            return v[0]
        return self._get(name, default, one, "an integer")

    def float(self, name: str, default=_MISSING) -> float | None:
        return self._get(name, default, lambda t: None if t.strip() in _NONE else parse_float(t), "a number")

    def bool(self, name: str, default=_MISSING) -> bool:
        return self._get(name, default, parse_bool, "True or False")

    def choice(self, name: str, default: str | None, choices: tuple[str, ...]) -> str:
        """One of ``choices``; ``default=None``: the attribute is required."""
        value = self._get(name, _MISSING if default is None else default, lambda t: t.strip(), "a string")
        if value not in choices:
            raise GraphFormatError(f"{self.where}: attribute {name}={value!r} is not supported; "
                                   f"supported: {', '.join(choices)}")
        return value
