"""The public namespace is typed and documented: every function of ``la``, ``la.nn``, ``la.linalg``, ``la.fft``
and ``la.sym`` has a docstring; the generated ones have a signature and an ``Args`` section built
from their registry entry (so they list exactly the parameters the signature has); every public
``NDArray`` method and property has a docstring (issue #13, item 5)."""
from __future__ import annotations

import inspect
import re

import pytest

import lazyarray as la
from lazyarray.ops import registry


def _public_functions(mod) -> dict:
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    out = {}
    for n in names:
        f = getattr(mod, n)
        if callable(f) and not inspect.isclass(f) and not inspect.ismodule(f):
            out[f"{mod.__name__}.{n}"] = f
    return out


PUBLIC = {**_public_functions(la), **_public_functions(la.nn), **_public_functions(la.linalg),
          **_public_functions(la.fft)}
GENERATED = {k: f for k, f in PUBLIC.items() if hasattr(f, "op")}
_SYM_NS = {"nn": la.sym.nn, "linalg": la.sym.linalg, "fft": la.sym.fft}
SYM = {op.qualname: getattr(_SYM_NS.get(op.namespace, la.sym), {"var": "variance"}.get(op.name, op.name))
       for op in registry.all_ops()}


def _args_section(doc: str) -> list[str] | None:
    """Parameter names listed under ``Args:`` (``*sizes`` for a variadic one), or None without one."""
    m = re.search(r"^\s*Args:\n((?:[ \t]+\S.*\n?)+)", doc, re.M)
    if m is None:
        return None
    return re.findall(r"^\s{4}(\*{0,2}\w+) \(", m.group(1), re.M)


def _signature_names(f) -> list[str]:
    return [("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + p.name
            for p in inspect.signature(f).parameters.values()]


def test_the_namespaces_are_found():
    assert len(GENERATED) > 150 and len(PUBLIC) > len(GENERATED)
    assert {"lazyarray.relu", "lazyarray.max", "lazyarray.nn.dense", "lazyarray.linalg.inv"} <= set(GENERATED)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_function_has_a_docstring(name):
    doc = inspect.getdoc(PUBLIC[name])
    assert doc and doc.strip(), f"{name} has no docstring"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_an_args_section_lists_exactly_the_signature(name):
    f = PUBLIC[name]
    listed = _args_section(inspect.getdoc(f) or "")
    if hasattr(f, "op"):
        assert listed is not None, f"{name}: generated docstring without an Args section"
    if listed is not None:
        assert listed == _signature_names(f), name
    assert "Returns:" in (f.__doc__ or "") or not hasattr(f, "op")


@pytest.mark.parametrize("name", sorted(SYM))
def test_sym_functions_are_documented_from_the_registry(name):
    f = SYM[name]
    assert _args_section(f.__doc__) == _signature_names(f)
    sig = inspect.signature(f)
    assert sig.return_annotation == "Symbol" or "tuple" in sig.return_annotation
    # la.sym takes params by name only (positional arguments are inputs)
    op = registry.get(name.split(".")[-1])
    assert all(sig.parameters[p.name].kind is inspect.Parameter.KEYWORD_ONLY for p in op.params)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_signature_follows_the_registry(name):
    f = GENERATED[name]
    op = f.op
    params = inspect.signature(f).parameters
    names = [n.strip("*?") for n in op.inputs] + [p.name for p in op.params]
    assert [n for n in params if n != "out"] == names
    for n in op.inputs:
        p = params[n.strip("*?")]
        assert p.kind is p.POSITIONAL_OR_KEYWORD
        assert (p.default is None) if n.endswith("?") else (p.default is p.empty)
        assert "NDArray" in p.annotation
    for q in op.params:
        p = params[q.name]
        assert p.annotation == q.type.annotation
        if p.kind is not p.VAR_POSITIONAL:
            assert p.default == (p.empty if q.default is registry.REQUIRED else q.default)
    if op.num_outputs == 1:
        assert params["out"].kind is inspect.Parameter.KEYWORD_ONLY and params["out"].default is None


def test_signatures_show_in_inspect_and_help():
    assert str(inspect.signature(la.max)) == (
        "(x: 'NDArray | float', axis: 'int | Sequence[int] | None' = None, keepdims: 'bool' = False, *, "
        "out: 'NDArray | None' = None) -> 'NDArray'")
    assert str(inspect.signature(la.sum)) == (  # the standard's, written out in array_api.py
        "(x: 'NDArray', /, axis: 'int | Sequence[int] | None' = None, keepdims: 'builtins.bool' = False, *, "
        "dtype: 'DTypeLike | None' = None, out: 'NDArray | None' = None) -> 'NDArray'")
    assert str(inspect.signature(la.nn.dense)) == (
        "(x: 'NDArray | float', weight: 'NDArray | float', bias: 'NDArray | None' = None, *, "
        "out: 'NDArray | None' = None) -> 'NDArray'")
    assert str(inspect.signature(la.concatenate)).startswith("(arrays: 'Sequence[NDArray]', /, axis: 'int | None' = 0")
    assert str(inspect.signature(la.tile)).startswith("(x: 'NDArray', repetitions: 'int | Sequence[int]', /, *more")
    text = pydoc_text(la.relu)
    assert "relu(x: 'NDArray | float', *, out: 'NDArray | None' = None) -> 'NDArray'" in text
    assert "Args:" in text and "Returns:" in text


def pydoc_text(f) -> str:
    import pydoc

    return pydoc.render_doc(f, renderer=pydoc.plaintext)


def test_signatures_describe_calls_that_work():
    """The signature binds the calls the function accepts (positional params, names, *sizes)."""
    x = la.array([[1.0, 2.0], [3.0, 4.0]])
    for f, args, kwargs in [(la.sum, (x, 0), {}), (la.sum, (x,), {"axis": 0, "keepdims": True}),
                            (la.nn.dense, (x, x), {}), (la.nn.dense, (x, x, la.ones((2,))), {}),
                            (la.tile, (x, 2, 1), {}), (la.concatenate, ([x, x],), {"axis": 1}),
                            (la.relu, (x,), {"out": la.zeros((2, 2))})]:
        inspect.signature(f).bind(*args, **kwargs)
        assert isinstance(f(*args, **kwargs), la.NDArray)


def test_every_ndarray_method_and_property_has_a_docstring():
    missing = []
    for name, v in vars(la.NDArray).items():
        if name.startswith("_"):
            continue
        doc = v.fget.__doc__ if isinstance(v, property) else getattr(v, "__doc__", None)
        if not (doc and doc.strip()):
            missing.append(name)
    assert missing == []
