"""Symbolic dims: ``la.Dim("batch")`` and integer expressions of them (``2*b``, ``b*s``, ``b - 1``,
``(L - 1)//2``, ``max(b, 3)``).

A dim of an aval is an ``int``, ``None`` (a data-dependent size, known only once computed) or a
``DimExpr``. Expressions are kept in one canonical form, a polynomial with integer coefficients
whose variables are symbols and the few operations a polynomial cannot express exactly (floor
division, remainder, max, min), so equal expressions compare and hash equal. Arithmetic that is
exact stays a polynomial (``(48*b)//48 == b``); a result that is a plain number is an ``int``.

Comparisons are decided from the symbols' bounds (``Dim("b", min=1)``: ``b > 0`` is True, ``b < 0``
False); one the bounds cannot decide (``b < 10``) raises ``SymbolicDimError`` instead of guessing,
and so does reading an expression as a Python ``int`` or using it as an index. ``==`` is
structural: ``b == 3`` is False, which is what broadcasting rules need (a symbol is never silently
taken for a particular size; the executor checks every call against its concrete shapes).

>>> import lazyarray as la
>>> b, s = la.Dim("batch"), la.Dim("seq")
>>> (b * s * 48) // 48 == b * s, str(2 * b - 1), (b + 1) > 0
(True, '2*batch - 1', True)
>>> (b * s).evaluate({"batch": 3, "seq": 7})
21
"""
from __future__ import annotations

import ast
import contextlib
import math
from contextvars import ContextVar
from itertools import count

from .args import int_arg
from .errors import ParamError, ShapeError

_INF = math.inf
# While set, a comparison the bounds cannot decide answers False (and ``bool(d)`` True) instead of
# raising: shape rules' checks (``if out < 1: raise``) then pass for symbolic sizes, and the executor
# checks them again with each call's concrete sizes. Only the registry's inference sets it.
_LENIENT: ContextVar[bool] = ContextVar("lazyarray_lenient_dims", default=False)


@contextlib.contextmanager
def lenient():
    """Within: undecidable comparisons of symbolic sizes are False instead of an error."""
    token = _LENIENT.set(True)
    try:
        yield
    finally:
        _LENIENT.reset(token)


class SymbolicDimError(ShapeError):
    """A question about a symbolic size that its bounds cannot answer (``b < 10``, ``int(b)``)."""


class SymAtom:
    """A named symbol with bounds ``min <= value <= max`` (``max`` None: unbounded). Two symbols of
    one name are one symbol."""

    __slots__ = ("name", "min", "max")

    def __init__(self, name: str, lo: int, hi: int | None):
        self.name, self.min, self.max = name, lo, hi

    def __eq__(self, other) -> bool:
        return other.__class__ is SymAtom and other.name == self.name

    def __hash__(self) -> int:
        return hash(("sym", self.name))

    def __str__(self) -> str:
        return self.name

    def bounds(self) -> tuple:
        return self.min, (_INF if self.max is None else self.max)

    def evaluate(self, env: dict, partial: bool = False) -> int:
        if partial and self.name not in env:
            return Dim(self.name, self.min, self.max)
        try:
            v = env[self.name]  # an int, or another expression (a graph inlined into a symbolic trace)
            return v if isinstance(v, DimExpr) else int(v)
        except KeyError:
            raise SymbolicDimError(f"the size {self.name!r} has no value here (known: "
                                   f"{', '.join(sorted(env)) or 'none'})") from None

    def symbols(self) -> dict:
        return {self.name: self}


class OpAtom:
    """An operation a polynomial does not express exactly: ``floordiv``, ``mod``, ``max``, ``min``."""

    __slots__ = ("kind", "args", "_hash", "_bounds")

    def __init__(self, kind: str, args: tuple):
        self.kind, self.args = kind, args
        self._hash = hash((kind, args))
        self._bounds = None  # (the atom is immutable: its bounds are computed once, on first use)

    def __eq__(self, other) -> bool:
        return other.__class__ is OpAtom and other.kind == self.kind and other.args == self.args

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        a, b = self.args
        if self.kind in ("max", "min"):
            return f"{self.kind}({a}, {b})"
        return f"{_paren(a)}{'//' if self.kind == 'floordiv' else '%'}{_paren(b)}"

    def bounds(self) -> tuple:
        if self._bounds is None:
            self._bounds = self._compute_bounds()
        return self._bounds

    def _compute_bounds(self) -> tuple:
        (alo, ahi), (blo, bhi) = bounds(self.args[0]), bounds(self.args[1])
        if self.kind == "max":
            return max(alo, blo), max(ahi, bhi)
        if self.kind == "min":
            return min(alo, blo), min(ahi, bhi)
        if self.kind == "mod":
            return (0, bhi - 1) if blo > 0 else (-_INF, _INF)
        if blo > 0:  # floor division by a positive value: the extremes are at the corners
            def div(x, y):
                if x in (_INF, -_INF):
                    return x
                return (0 if x >= 0 else -1) if y == _INF else x // y
            corners = [div(x, y) for x in (alo, ahi) for y in (blo, bhi)]
            return min(corners), max(corners)
        return -_INF, _INF

    def evaluate(self, env: dict, partial: bool = False) -> int:
        a, b = (evaluate(x, env, partial) for x in self.args)
        if self.kind == "max":
            return dim_max(a, b)
        if self.kind == "min":
            return dim_min(a, b)
        if isinstance(b, int) and b == 0:
            raise SymbolicDimError(f"{self}: division by zero at {_env_text(env)}")
        return floordiv(a, b) if self.kind == "floordiv" else mod(a, b)

    def symbols(self) -> dict:
        out: dict = {}
        for a in self.args:
            out.update(symbols(a))
        return out


def _akey(atom) -> str:
    return str(atom)


def _paren(x) -> str:
    text = str(x)
    return text if isinstance(x, int) or text.isidentifier() or text.startswith(("max(", "min(")) else f"({text})"


def _env_text(env: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items()))


class DimExpr:
    """An integer expression of symbolic dims (see the module docstring). Immutable and hashable."""

    # ``_bounds`` and ``_text`` are filled on first use: an expression never changes, and import and
    # recording ask the same shapes' bounds (every shape check) and text (rule messages) many times.
    __slots__ = ("_terms", "_hash", "_bounds", "_text")

    def __init__(self, terms: dict):
        # monomial (a sorted tuple of atoms, repeated for powers) -> nonzero int coefficient
        if terms.__class__ is not dict:
            raise ParamError(f"la.DimExpr: terms must be a dict of monomial -> coefficient, got "
                             f"{type(terms).__name__} {terms!r}"[:200] + "; make sizes with la.Dim('name') and "
                             "arithmetic on it (2 * la.Dim('seq') + 1)")
        self._terms = terms
        self._hash = hash(frozenset(terms.items()))
        self._bounds = self._text = None

    # -- arithmetic -----------------------------------------------------------------------
    def __add__(self, other):
        t = _terms(other)
        if t is None:
            return NotImplemented
        out = dict(self._terms)
        for m, c in t.items():
            out[m] = out.get(m, 0) + c
        return _make(out)

    __radd__ = __add__

    def __neg__(self):
        return _make({m: -c for m, c in self._terms.items()})

    def __pos__(self):
        return self

    def __sub__(self, other):
        t = _terms(other)
        return NotImplemented if t is None else self + _make({m: -c for m, c in t.items()})

    def __rsub__(self, other):
        return -self + other

    def __mul__(self, other):
        t = _terms(other)
        if t is None:
            return NotImplemented
        out: dict = {}
        for m1, c1 in self._terms.items():
            for m2, c2 in t.items():
                m = tuple(sorted(m1 + m2, key=_akey))
                out[m] = out.get(m, 0) + c1 * c2
        return _make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return floordiv(self, other)

    def __rfloordiv__(self, other):
        return floordiv(other, self)

    def __mod__(self, other):
        return mod(self, other)

    def __divmod__(self, other):
        return floordiv(self, other), mod(self, other)

    def __rdivmod__(self, other):
        return floordiv(other, self), mod(other, self)

    def __rmod__(self, other):
        return mod(other, self)

    # -- comparisons ------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if other.__class__ is TracedSize:
            return other.__eq__(self)
        return other.__class__ in (DimExpr, Dim) and other._terms == self._terms

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other) -> bool:
        return _decide(_int_minus(other, self) or other - self, "positive", self, "<", other)

    def __le__(self, other) -> bool:
        return _decide(_int_minus(other, self) or other - self, "nonnegative", self, "<=", other)

    def __gt__(self, other) -> bool:
        return _decide(_int_minus(self, other) or self - other, "positive", self, ">", other)

    def __ge__(self, other) -> bool:
        return _decide(_int_minus(self, other) or self - other, "nonnegative", self, ">=", other)

    def __bool__(self) -> bool:
        lo, hi = self.bounds()
        if lo > 0 or hi < 0 or _LENIENT.get():
            return True
        raise SymbolicDimError(f"whether the size {self} is zero depends on its value; "
                               "give concrete input shapes or bound the dim (la.Dim(name, min=1))")

    def __index__(self) -> int:
        raise SymbolicDimError(
            f"the size {self} is symbolic here and has no single int value; code that needs the number "
            "runs once the inputs' shapes are known (call the graph), or give concrete input shapes")

    __int__ = __index__

    # -- queries --------------------------------------------------------------------------
    def bounds(self) -> tuple:
        """``(lo, hi)``: the least and largest values the symbols' bounds allow (``hi`` may be inf)."""
        if self._bounds is None:
            self._bounds = self._compute_bounds()
        return self._bounds

    def _compute_bounds(self) -> tuple:
        lo = hi = 0
        for m, c in self._terms.items():
            mlo, mhi = 1, 1
            for atom in m:
                mlo, mhi = _imul((mlo, mhi), atom.bounds())
            tlo, thi = _imul((c, c), (mlo, mhi))
            lo, hi = lo + tlo, hi + thi
        return lo, hi

    def evaluate(self, env: dict, partial: bool = False) -> int:
        """The value when each symbol is ``env[name]``: an int (or, substituting one graph's symbols
        by another's, an expression); ``partial``: symbols ``env`` lacks stay themselves."""
        total = 0
        for m, c in self._terms.items():
            v = c
            for atom in m:
                v *= atom.evaluate(env, partial)
            total += v
        return total

    def symbols(self) -> dict:
        """name -> symbol of every symbol in the expression."""
        out: dict = {}
        for m in self._terms:
            for atom in m:
                out.update(atom.symbols())
        return out

    def as_symbol(self) -> str | None:
        """The symbol's name when the expression is one plain symbol, else None."""
        if len(self._terms) == 1:
            (m, c), = self._terms.items()
            if c == 1 and len(m) == 1 and m[0].__class__ is SymAtom:
                return m[0].name
        return None

    def linear_in(self, name: str) -> tuple | None:
        """``(a, rest)`` with ``self == a*name + rest`` and ``rest`` free of ``name``, when the
        expression is linear in that symbol (``a`` an int), else None."""
        a, rest = 0, {}
        for m, c in self._terms.items():
            hits = [atom for atom in m if atom.__class__ is SymAtom and atom.name == name]
            if not hits:
                if any(name in atom.symbols() for atom in m):
                    return None
                rest[m] = c
            elif len(m) == 1:
                a += c
            else:
                return None
        return (a, _make(rest)) if a else None

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._write_text()
        return self._text

    def _write_text(self) -> str:
        parts = []
        for m, c in sorted(self._terms.items(), key=lambda mc: (len(mc[0]) == 0, [_akey(a) for a in mc[0]])):
            body = "*".join(_paren(a) if a.__class__ is OpAtom and a.kind not in ("max", "min") and len(m) > 1
                            else str(a) for a in m)
            mag = abs(c)
            text = str(mag) if not m else body if mag == 1 else f"{mag}*{body}"
            parts.append((c < 0, text))
        out = ("-" if parts[0][0] else "") + parts[0][1]
        for neg, text in parts[1:]:
            out += (" - " if neg else " + ") + text
        return out

    __repr__ = __str__

    def __format__(self, spec: str) -> str:  # (f"{d:>6}" pads the text, as for the ints beside it)
        return format(str(self), spec)

    def __reduce__(self):  # pickles (distributed runs, caches) rebuild through the canonical form
        return (_rebuild, (to_json(self), json_symbols([self])))


class Dim(DimExpr):
    """A named symbolic size, ``la.Dim(name, min=1, max=None)`` (torch.export's ``Dim``).

    >>> import lazyarray as la
    >>> b = la.Dim("batch")
    >>> b, b.name, b.min, b.max
    (batch, 'batch', 1, None)
    """

    __slots__ = ("name", "min", "max")

    def __init__(self, name: str, min: int = 1, max: int | None = None):  # noqa: A002 (torch's names)
        if not isinstance(name, str) or not name.isidentifier():
            raise ShapeError(f"Dim: name {name!r} must be an identifier such as 'batch'")
        lo = int_arg(min, f"la.Dim({name!r})", "min")
        hi = None if max is None else int_arg(max, f"la.Dim({name!r})", "max")
        if lo < 0 or (hi is not None and hi < lo):
            raise ShapeError(f"Dim({name!r}): bounds min={min}, max={max} must satisfy 0 <= min <= max")
        self.name, self.min, self.max = name, lo, hi
        super().__init__({(SymAtom(name, lo, self.max),): 1})

    def __reduce__(self):
        return (Dim, (self.name, self.min, self.max))


class TracedSize(DimExpr):
    """A symbolic size as a hybridize trace hands it to ``forward`` (``x.shape[0]`` of a batch
    traced as ``la.Dim("batch")``). It flows into ops as itself (``x.reshape(n, -1)``,
    ``la.zeros((n, 3))``: the graph computes with each call's batch), and arithmetic keeps it a
    ``TracedSize``. Python code that would decide something with it is stopped instead of being
    answered for one size: ``n == 1``, ``n > 3`` and ``bool(n)`` are answered only where the
    bounds decide them, ``int(n)``, ``range(n)``, ``len(x)`` never; the trace then falls back to
    concrete shapes (one trace per batch size, guarded)."""

    __slots__ = ()

    @staticmethod
    def of(d):
        return TracedSize(d._terms) if isinstance(d, DimExpr) else d

    def plain(self) -> DimExpr:
        """The same expression as a plain ``DimExpr`` (what op parameters hold)."""
        return DimExpr(self._terms)

    def __eq__(self, other) -> bool:
        t = _terms(other)
        if t is None:
            return False
        return decided_eq(self.plain(), _make(dict(t)), "a hybridized forward must not branch on a batch size "
                          "(compute with it through ops, or use hybridize(static_shape=True))")

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = DimExpr.__hash__

    def __reduce__(self):
        return (TracedSize.of, (self.plain(),))


def _traced(method):
    def wrapped(self, *args):
        out = method(self, *args)
        return TracedSize.of(out) if out.__class__ is DimExpr or out.__class__ is Dim else out
    wrapped.__name__ = method.__name__
    return wrapped


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__pos__"):
    setattr(TracedSize, _name, _traced(getattr(DimExpr, _name)))


_FRESH = count()


def fresh(prefix: str = "u", lo: int = 0) -> Dim:
    """A new symbol no other expression uses (``u0``, ``u1``, ...)."""
    return Dim(f"_{prefix}{next(_FRESH)}", min=lo)


# -- helpers over ints and expressions --------------------------------------------------
def is_symbolic(d) -> bool:
    c = d.__class__
    return c is DimExpr or c is Dim or c is TracedSize


def has_symbols(shape) -> bool:
    """True when a shape (or any nested tuple / slice of a parameter) holds a symbolic dim."""
    if shape is None:
        return False
    for d in shape:
        c = d.__class__
        if c is DimExpr or c is Dim or c is TracedSize:
            return True
        if c is tuple or c is list:
            if has_symbols(d):
                return True
        elif c is slice and has_symbols((d.start, d.stop, d.step)):
            return True
    return False


def _terms(x) -> dict | None:
    if isinstance(x, DimExpr):
        return x._terms
    if isinstance(x, int) and not isinstance(x, bool) or hasattr(x, "__index__") and not isinstance(x, (bool, float)):
        try:
            v = int(x.__index__())
        except (TypeError, SymbolicDimError):
            return None
        return {(): v} if v else {}
    return None


def _make(terms: dict):
    terms = {m: c for m, c in terms.items() if c}
    if not terms:
        return 0
    if len(terms) == 1 and () in terms:
        return terms[()]
    return DimExpr(terms)


def _imul(a: tuple, b: tuple) -> tuple:
    def mul(x, y):
        return 0 if x == 0 or y == 0 else x * y
    prods = [mul(x, y) for x in a for y in b]
    return min(prods), max(prods)


def bounds(x) -> tuple:
    return (x, x) if isinstance(x, int) else x.bounds()


def evaluate(x, env: dict, partial: bool = False) -> int:
    return x if isinstance(x, int) else x.evaluate(env, partial)


def symbols(x) -> dict:
    return {} if isinstance(x, int) else x.symbols()


def decided_eq(a, b, fix: str = "give concrete input shapes") -> bool:
    """``a == b`` for sizes when it holds for every value of their symbols (structurally equal: True;
    never equal by the bounds: False); else ``SymbolicDimError`` (``fix`` says what to do)."""
    if a == b:
        return True
    lo, hi = bounds(a - b)
    if lo > 0 or hi < 0:
        return False
    raise SymbolicDimError(f"whether {a} == {b} depends on the sizes' values; {fix}")


def _int_minus(a, b) -> tuple | None:
    """The bounds of ``a - b`` where one side is an int, from the other's own (kept) bounds: what the
    expression ``a - b`` would give, without building it (a shape rule's ``d < -1`` on a symbolic dim,
    asked of every dim of every reshape an importer records); None otherwise."""
    if b.__class__ is int:
        lo, hi = a.bounds()
        return lo - b, hi - b
    if a.__class__ is int:
        lo, hi = b.bounds()
        return a - hi, a - lo
    return None


def _decide(diff, want: str, a, op: str, b) -> bool:
    """Whether ``a op b`` (``diff`` is the side that must be positive / nonnegative, or its bounds as a
    tuple), from the bounds; the message's text is written only when it is raised."""
    lo, hi = diff if diff.__class__ is tuple else bounds(diff)
    if want == "positive":
        if lo > 0:
            return True
        if hi <= 0:
            return False
    else:
        if lo >= 0:
            return True
        if hi < 0:
            return False
    if _LENIENT.get():
        return False
    raise SymbolicDimError(f"whether {a} {op} {b} depends on the sizes' values; give concrete input shapes, or "
                           "bound the dims (la.Dim(name, min=..., max=...)) so that it is decided")


def floordiv(a, b):
    """``a // b`` for ints and expressions, exact where it can be."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if isinstance(b, int):
        if b == 1:
            return a
        if b > 0:  # P // b + c // b when every non-constant coefficient of P is a multiple of b
            ta = _terms(a)
            if all(c % b == 0 for m, c in ta.items() if m):
                return _make({m: c // b for m, c in ta.items() if m}) + ta.get((), 0) // b
    elif a == b:
        return 1
    else:
        q = _exact_quotient(_terms(a), _terms(b))
        if q is not None:
            return q
    return DimExpr({(OpAtom("floordiv", (a, b)),): 1})


def mod(a, b):
    """``a % b`` for ints and expressions."""
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    if isinstance(b, int) and b > 0:
        ta = _terms(a)
        if all(c % b == 0 for m, c in ta.items() if m):
            return ta.get((), 0) % b
    elif not isinstance(b, int) and (a == b or _exact_quotient(_terms(a), _terms(b)) is not None):
        return 0
    return DimExpr({(OpAtom("mod", (a, b)),): 1})


def _exact_quotient(ta: dict, tb: dict):
    """``a / b`` when ``b`` is one monomial that divides every term of ``a`` exactly, else None."""
    if ta is None or tb is None or len(tb) != 1:
        return None
    (mb, cb), = tb.items()
    if not mb or cb == 0:
        return None
    out = {}
    for m, c in ta.items():
        rest = list(m)
        for atom in mb:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % cb:
            return None
        out[tuple(rest)] = c // cb
    return _make(out)


def dim_max(a, b):
    """``max(a, b)``, decided from the bounds where it can be."""
    return _extreme("max", a, b)


def dim_min(a, b):
    """``min(a, b)``, decided from the bounds where it can be."""
    return _extreme("min", a, b)


def _extreme(kind: str, a, b):
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b) if kind == "max" else min(a, b)
    lo, hi = bounds(a - b)
    if lo >= 0:  # a >= b
        return a if kind == "max" else b
    if hi <= 0:  # a <= b
        return b if kind == "max" else a
    a, b = sorted((a, b), key=str)
    return DimExpr({(OpAtom(kind, (a, b)),): 1})


def substitute(value, env: dict, partial: bool = False):
    """``value`` with every symbolic dim evaluated at ``env`` (ints, tuples, lists, slices inside);
    ``partial``: symbols ``env`` lacks stay as they are."""
    c = value.__class__
    if c is DimExpr or c is Dim or c is TracedSize:
        return value.evaluate(env, partial)
    if c is tuple:
        return tuple(substitute(v, env, partial) for v in value)
    if c is list:
        return [substitute(v, env, partial) for v in value]
    if c is slice:
        return slice(*(substitute(p, env, partial) for p in (value.start, value.stop, value.step)))
    return value


# -- text form (JSON, ONNX dim_param) -----------------------------------------------------
def to_json(d) -> int | str | None:
    """An int or None as is; an expression as its text (``"2*batch - 1"``)."""
    return str(d) if is_symbolic(d) else d


def json_symbols(dims) -> dict:
    """name -> [min, max] of the symbols in ``dims`` (ints and None skipped)."""
    out = {}
    for d in dims:
        if is_symbolic(d):
            for name, s in d.symbols().items():
                out[name] = [s.min, s.max]
    return out


def parse(text: str, known: dict | None = None):
    """An expression from its text; ``known`` maps symbol names to ``[min, max]`` bounds.

    Only integers, names, ``+ - * // %``, unary minus, parentheses and ``max``/``min`` calls are
    read (the text is parsed, never evaluated as Python)."""
    known = known or {}
    try:
        tree = ast.parse(str(text).strip(), mode="eval").body
    except SyntaxError:
        raise ShapeError(f"{text!r} is not a size expression (ints, names, + - * // %, max, min)") from None

    def walk(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name):
            lo, hi = known.get(n.id, (1, None))
            return Dim(n.id, lo, hi)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -walk(n.operand)
        if isinstance(n, ast.BinOp):
            ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                   ast.FloorDiv: floordiv, ast.Mod: mod}
            fn = ops.get(type(n.op))
            if fn is not None:
                return fn(walk(n.left), walk(n.right))
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("max", "min")
                and len(n.args) == 2 and not n.keywords):
            return (dim_max if n.func.id == "max" else dim_min)(walk(n.args[0]), walk(n.args[1]))
        raise ShapeError(f"{text!r} is not a size expression (ints, names, + - * // %, max, min)")

    return walk(tree)


def _rebuild(text, known):
    return parse(text, known)


# -- binding symbols to a call's sizes ----------------------------------------------------
def bind(declared: dict, given: dict, what: str = "call") -> dict:
    """Symbol values that make each declared shape equal its given shape, or ``ShapeError``.

    ``declared``/``given``: input name -> shape. Plain symbols bind first, then dims linear in one
    unbound symbol (``2*b``); every declared dim is then checked against the given size and the
    symbols' bounds. Returns name -> int.
    """
    env: dict = {}
    pending = []
    for name, shape in declared.items():
        got = given.get(name)
        if shape is None or got is None:
            continue
        if len(shape) != len(got):
            raise ShapeError(f"{what}: input {name!r} has {len(got)} dims {tuple(got)}; the graph declares "
                             f"{len(shape)}: {_shape_text(shape)}")
        for axis, (d, n) in enumerate(zip(shape, got)):
            if is_symbolic(d):
                sym = d.as_symbol()
                if sym is not None and sym not in env:
                    env[sym] = int(n)
                else:
                    pending.append((name, axis, d, int(n)))
            elif d is not None and d != n:
                raise ShapeError(f"{what}: input {name!r} has size {n} on axis {axis} (shape {tuple(got)}); "
                                 f"the graph was built for {d} there (declared shape {_shape_text(shape)}); call "
                                 "it at that size, or make that axis dynamic (a model loaded without "
                                 "input_shapes, la.Dim in the input's shape)")
    for name, axis, d, n in pending:  # linear in one unbound symbol: solve for it
        free = [s for s in d.symbols() if s not in env]
        if len(free) == 1:
            lin = d.linear_in(free[0])
            if lin is not None:
                a, rest = lin
                try:
                    r = evaluate(rest, env)
                except SymbolicDimError:
                    continue
                if (n - r) % a == 0:
                    env[free[0]] = (n - r) // a
    for name, axis, d, n in pending:
        try:
            v = d.evaluate(env)
        except SymbolicDimError:
            raise ShapeError(f"{what}: cannot tell the sizes of {d} from input {name!r} axis {axis} (size "
                             f"{n}); declare a plain symbol on some input axis for each of its symbols") from None
        if v != n:
            raise ShapeError(f"{what}: input {name!r} has size {n} on axis {axis}, but the graph declares "
                             f"{d} there, which is {v} with {_env_text(env)}; give the inputs sizes that fit "
                             "each other as declared")
    _check_bounds(declared, env, what)
    return env


def _check_bounds(declared: dict, env: dict, what: str) -> None:
    for shape in declared.values():
        for d in shape or ():
            if is_symbolic(d):
                for name, s in d.symbols().items():
                    if name in env and (env[name] < s.min or (s.max is not None and env[name] > s.max)):
                        hi = "inf" if s.max is None else s.max
                        raise ShapeError(f"{what}: size {name}={env[name]} is outside its declared range "
                                         f"[{s.min}, {hi}] (la.Dim({name!r}, min={s.min}, max={s.max})); call "
                                         "it with a size in that range, or declare a wider range")


def _shape_text(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
