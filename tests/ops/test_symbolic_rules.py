"""Every shape rule with a symbolic batch (the audit issue #32 asks for, as #11 audited gradients):
for each sample of the case table, axis 0 of the inputs that share the first input's leading size
becomes ``la.Dim("n")``; the rule's answer, evaluated at the real size, must equal its answer for
the concrete shapes, dim by dim, or be unknown (``None``) there. A rule may not decide anything
about a symbol it cannot know (a wrong expression would be a wrong re-export or a wrong loader
decision); the executor's concrete inference before every run is checked elsewhere."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.aval import Aval
from lazyarray.dim import SymbolicDimError, has_symbols
from lazyarray.ops import registry

from .cases import CASES, rng_for

N = la.Dim("n")
# (ops without inputs take their sizes as parameters: tests/graph/passes/test_bind_dims.py; squeeze's
# samples squeeze leading 1s: its own test below)
OPS = sorted(name for name, c in CASES.items() if c.kind == "plain" and registry.get(name).inputs
             and name != "squeeze")


def _arrays(args):
    for a in args:
        if a is not None:
            yield from (np.asarray(x) for x in (a if isinstance(a, list) else [a]))


def _avals(args, symbolic_size):
    """The avals of the sample, axis 0 symbolic (``n``) wherever it has ``symbolic_size``."""
    return [Aval((N,) + x.shape[1:] if symbolic_size is not None and x.shape and x.shape[0] == symbolic_size
                 else x.shape, x.dtype, la.cpu()) for x in _arrays(args)]


def _lead(args):
    for a in args:
        for x in (a if isinstance(a, list) else [a]) if a is not None else []:
            if np.ndim(x) >= 1:
                return np.shape(x)[0]
    return None


@pytest.mark.parametrize("name", OPS)
def test_a_rule_with_a_symbolic_batch_agrees_with_its_concrete_answer(name):
    op = registry.get(name)
    case = CASES[name]
    checked = 0
    for s in case.samples(rng_for("symbolic", name), case.dtypes[0], False):
        n = _lead(s.args)
        if n is None or n < 2:  # (size 0 and 1 are where NumPy's rules branch: the symbol is >= 1)
            continue
        try:
            params = op.make_params(dict(s.params))
            want = registry.infer(op, _avals(s.args, None), params)
        except la.LazyArrayError:
            continue  # (a sample of an error path)
        try:
            got = registry.infer(op, _avals(s.args, n), params)
        except (SymbolicDimError, la.ShapeError) as exc:
            pytest.fail(f"{name}[{s.name}]: the rule refused a symbolic batch: {exc}")
        for g, w in zip(got, want):
            assert g.shape is not None and len(g.shape) == len(w.shape), (name, s.name, g.shape, w.shape)
            for gd, wd in zip(g.shape, w.shape):
                if gd is None:
                    continue
                value = gd.evaluate({"n": n}) if has_symbols((gd,)) else gd
                assert value == wd, f"{name}[{s.name}]: symbolic {g.shape} at n={n} is not {w.shape}"
        checked += 1
    assert checked, f"{name}: no sample with a leading axis of 2 or more; add one to tests/ops/cases.py"


def _one_axis(args, axis):
    """The avals with only ``axis`` of the first array that has it symbolic (``n``)."""
    out, done = [], False
    for x in _arrays(args):
        shape = x.shape
        if not done and len(shape) > axis:
            shape, done = shape[:axis] + (N,) + shape[axis + 1:], True
        out.append(Aval(shape, x.dtype, la.cpu()))
    return out


@pytest.mark.parametrize("name", OPS)
def test_a_rule_with_any_one_symbolic_axis_never_gives_a_wrong_size(name):
    """Any one axis of the first input symbolic (a dynamic sequence length, a spatial size): the
    answer evaluated at the real size equals the concrete one wherever it is not unknown. A rule may
    refuse here (a size its checks must know), but it may not be wrong."""
    op = registry.get(name)
    case = CASES[name]
    for s in case.samples(rng_for("symbolic-axis", name), case.dtypes[0], False):
        first = next((x for a in s.args if a is not None for x in (a if isinstance(a, list) else [a])), None)
        if first is None:
            continue
        try:
            params = op.make_params(dict(s.params))
            want = registry.infer(op, _avals(s.args, None), params)
        except la.LazyArrayError:
            continue
        for axis, size in enumerate(np.shape(first)):
            if size < 2:
                continue
            try:
                got = registry.infer(op, _one_axis(s.args, axis), params)
            except la.LazyArrayError:
                continue  # (refused: the executor infers again with the real size)
            for g, w in zip(got, want):
                if g.shape is None:
                    continue
                assert len(g.shape) == len(w.shape), (name, s.name, axis, g.shape, w.shape)
                for gd, wd in zip(g.shape, w.shape):
                    if gd is not None:
                        value = gd.evaluate({"n": size}) if has_symbols((gd,)) else gd
                        assert value == wd, f"{name}[{s.name}] axis {axis}: {g.shape} at n={size} is not {w.shape}"


def test_squeeze_keeps_a_symbolic_batch_and_drops_the_named_axis():
    x = la.sym.var("x", shape=(N, 1, 3))
    assert la.sym.squeeze(x, axis=1).outputs[0].aval.shape == (N, 3)
    op = la.CachedOp(la.sym.squeeze(x, axis=1))
    assert op(la.zeros((4, 1, 3))).shape == (4, 3) and op(la.zeros((1, 1, 3))).shape == (1, 3)
