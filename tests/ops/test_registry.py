"""The registry itself: every op has a test case, params validate and round-trip through JSON,
composite and random ops get their tailored checks."""
from __future__ import annotations

import json

import numpy as np
import pytest

import lazyarray as la
from lazyarray.ops import registry
from lazyarray.ops.params import REQUIRED

from .cases import CASES, rng_for
from .checks import call, op_function, samples

OPS = registry.all_ops()
OP_IDS = [op.name for op in OPS]


def test_every_registered_op_has_a_test_case():
    missing = sorted(set(OP_IDS) - set(CASES))
    assert not missing, f"ops without an entry in tests/ops/cases.py: {missing}"


def test_every_test_case_names_a_registered_op():
    assert sorted(set(CASES) - set(OP_IDS)) == []


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_case_kind_matches_the_op(op):
    case = CASES[op.name]
    want = "compose" if op.compose is not None else "random" if op.random else "plain"
    assert case.kind == want
    if case.grad:
        assert op.differentiable, f"{op.name}: the case checks gradients the op does not define"


@pytest.mark.parametrize("op", [op for op in OPS if op.differentiable and op.compose is None and not op.random
                                and CASES[op.name].grad == () and not CASES[op.name].extra.get("grad_raises")],
                         ids=lambda op: op.name)
def test_ops_with_a_zero_gradient_rule_give_zero_gradients(op):
    """Comparisons, sign, stop_gradient...: their gradient is zero by definition."""
    s = samples(op.name, "float64", small=True)[0]
    args = [la.array(np.asarray(a)) if not isinstance(a, list) else [la.array(x) for x in a] for a in s.args]
    x = args[0] if not isinstance(args[0], list) else args[0][0]
    x.attach_grad()
    with la.autograd.record():
        y = call(op.name, s, args)
        z = (y.astype("float64") * 3.0).sum() if y.dtype.kind == "b" else (y * 3.0).sum()
    z.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros(x.shape))


@pytest.mark.parametrize("op", [op for op in OPS if op.params], ids=lambda op: op.name)
def test_params_round_trip_through_json(op):
    """Every param value the cases use converts to JSON text and back to an equal value."""
    seen = 0
    for dt in CASES[op.name].dtypes:
        for s in samples(op.name, dt):
            full = op.make_params(s.params)
            for p in op.params:
                v = full[p.name]
                text = json.dumps(p.type.to_json(v))
                back = p.type.from_json(json.loads(text), op.name, p.name)
                assert back == v and type(back) is type(v), f"{op.name}.{p.name}: {v!r} -> {text} -> {back!r}"
                seen += 1
    assert seen


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_unknown_param_is_rejected_with_the_known_ones(op):
    with pytest.raises(la.ParamError) as info:
        op.make_params({"no_such_param": 1})
    msg = str(info.value)
    assert op.name in msg and "no_such_param" in msg
    for p in op.params:
        assert p.name in msg
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("op", [op for op in OPS if any(p.default is REQUIRED for p in op.params)],
                         ids=lambda op: op.name)
def test_missing_required_param_is_named(op):
    req = next(p for p in op.params if p.default is REQUIRED)
    with pytest.raises(la.ParamError, match=rf"{op.name}: missing required parameter '{req.name}'"):
        op.make_params({})


@pytest.mark.parametrize("op", [op for op in OPS if op.params], ids=lambda op: op.name)
def test_param_of_the_wrong_type_is_rejected(op):
    p = op.params[0]
    bad = object()
    with pytest.raises(la.LazyArrayError) as info:
        op.make_params({p.name: bad})
    assert op.name in str(info.value)
    assert isinstance(info.value, (TypeError, ValueError))


def test_unknown_param_through_the_public_function():
    x = la.ones((2, 3))
    with pytest.raises(la.ParamError, match=r"max: unknown parameter 'axes'.*axis, keepdims"):
        la.max(x, axes=0)
    with pytest.raises(TypeError, match="smooth_l1: parameter 'scalar' must be a number"):
        la.smooth_l1(x, scalar="2")


def test_illegal_param_values_name_the_op():
    x = la.ones((2, 3))
    with pytest.raises(la.ParamValueError, match="smooth_l1: scalar must be > 0"):
        la.smooth_l1(x, scalar=0.0)
    with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\)"):
        la.nn.dropout(x, p=1.0, training=True)
    with pytest.raises(la.ParamValueError, match="cast_storage"):
        la.cast_storage(x, stype="coo")


def test_get_suggests_close_names():
    with pytest.raises(KeyError, match="did you mean.*multiply"):
        registry.get("multipy")


def test_public_function_docstrings_name_inputs_and_params():
    assert op_function("smooth_l1").__doc__.startswith("smooth_l1(x, scalar=1.0)")
    assert op_function("dense").__doc__.startswith("nn.dense(x, weight, bias?)")


# -- composite and random ops ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_mask_values_scale_and_rate(dtype):
    la.random.seed(3)
    p = 0.3
    m = la.nn.dropout_mask(la.ones((200, 100), dtype=dtype), p=p).asnumpy()
    assert m.dtype == np.dtype(dtype)
    kept = m != 0
    np.testing.assert_allclose(m[kept], 1.0 / (1.0 - p), rtol=1e-6)
    n = m.size
    assert abs(kept.mean() - (1 - p)) < 4 * np.sqrt(p * (1 - p) / n)


def test_dropout_mask_is_reproducible_after_seed():
    x = la.ones((50,))
    la.random.seed(11)
    a = la.nn.dropout_mask(x, p=0.5).asnumpy()
    la.random.seed(11)
    b = la.nn.dropout_mask(x, p=0.5).asnumpy()
    c = la.nn.dropout_mask(x, p=0.5).asnumpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_dropout_mask_records_lazily_with_static_shape():
    x = la.ones((4, 5))
    with la.deferred():
        m = la.nn.dropout_mask(x, p=0.5)
    assert m.is_lazy and m.static_shape == (4, 5) and m.dtype == np.float32
    assert set(np.unique(m.asnumpy())) <= {0.0, 2.0}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_composite_expands_to_mask_times_x(dtype):
    la.random.seed(5)
    x = la.array(rng_for("dropout", dtype).standard_normal((300, 40)).astype(dtype))
    y = la.nn.dropout(x, p=0.25, training=True).asnumpy()
    xv = x.asnumpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], xv[kept] / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.02
    # the scaling keeps the expectation: E[y] = x
    assert abs(y.mean() - xv.mean()) < 0.05
    # identity when not training, and with p = 0
    np.testing.assert_array_equal(la.nn.dropout(x, p=0.25, training=False).asnumpy(), xv)
    np.testing.assert_array_equal(la.nn.dropout(x, p=0.0, training=True).asnumpy(), xv)


def test_dropout_records_the_ops_it_expands_to():
    x = la.ones((3, 4))
    with la.deferred():
        y = la.nn.dropout(x, p=0.5, training=True)
    assert y._entry.node.op.name == "multiply"
    assert {e.node.op.name for e in y._entry.node.inputs if e.node.op is not None} == {"dropout_mask"}
    assert set(np.unique(y.asnumpy())) <= {0.0, 2.0}


def test_dropout_gradient_is_the_mask():
    la.random.seed(2)
    x = la.ones((20, 10))
    x.attach_grad()
    with la.autograd.record():
        y = la.nn.dropout(x, p=0.5)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), y.asnumpy())
