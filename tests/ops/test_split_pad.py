"""split / array_split (multi-output composites), pad, tril / triu and expand without sizes:
NumPy values, exact static shapes under ``la.deferred()``, ``la.sym`` + JSON round trips,
finite-difference gradients, named errors, and hybridized blocks that stay right for every
batch size (no split bound is baked into a trace)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn

from .cases import ARRAY_SPLIT_CASES, PAD_CASES, SPLIT_CASES

SPLITS = [("split", np.split, c) for c in SPLIT_CASES] + [("array_split", np.array_split, c)
                                                          for c in ARRAY_SPLIT_CASES]
SPLIT_IDS = [f"{name}-{s}-{n}-axis{ax}" for name, _, (s, n, ax) in SPLITS]


def _x(shape, dtype="float64", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- split / array_split -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("name,ref,case", SPLITS, ids=SPLIT_IDS)
def test_split_matches_numpy_eager_and_deferred(name, ref, case, dtype):
    shape, ios, axis = case
    x = _x(shape, dtype)
    want = ref(x, ios, axis=axis)
    fn = getattr(la, name)
    eager = fn(la.array(x), ios, axis=axis)
    assert isinstance(eager, tuple) and len(eager) == len(want)
    with la.deferred():
        lazy = fn(la.array(x), indices_or_sections=ios, axis=axis)
    assert len(lazy) == len(want)
    for e, lz, w in zip(eager, lazy, want):
        assert lz.is_lazy and lz.static_shape == w.shape and lz.dtype == w.dtype  # exact without running
        np.testing.assert_array_equal(e.asnumpy(), w)
        np.testing.assert_array_equal(lz.asnumpy(), w)


@pytest.mark.parametrize("name,ref,case", SPLITS[:6] + SPLITS[-3:], ids=SPLIT_IDS[:6] + SPLIT_IDS[-3:])
def test_split_gradient_matches_finite_differences(name, ref, case):
    shape, ios, axis = case
    x_np = _x(shape)
    heads = [np.random.default_rng(i).standard_normal(p.shape) for i, p in enumerate(ref(x_np, ios, axis=axis))]
    fn = getattr(la, name)

    def loss(v):
        return sum(float(np.sum(p.asnumpy() * h)) for p, h in zip(fn(la.array(v), ios, axis=axis), heads))

    for deferred in (False, True):
        x = la.array(x_np)
        x.attach_grad()
        with la.autograd.record():
            if deferred:
                with la.deferred():
                    parts = fn(x, ios, axis=axis)
            else:
                parts = fn(x, ios, axis=axis)
            total = sum((p * la.array(h)).sum() for p, h in zip(parts, heads))
        total.backward()
        numeric = np.zeros(shape)
        for k in range(x_np.size):
            d = np.zeros(shape)
            d.reshape(-1)[k] = 1e-6
            numeric.reshape(-1)[k] = (loss(x_np + d) - loss(x_np - d)) / 2e-6
        np.testing.assert_allclose(x.grad.asnumpy(), numeric, rtol=1e-6, atol=1e-7)


def test_split_through_sym_and_json_round_trip():
    x = la.sym.var("x", shape=(6, 4))
    parts = la.sym.split(x, indices_or_sections=3)
    assert len(parts.outputs) == 3
    assert parts.infer_shape()[1] == [(2, 4)] * 3
    assert la.sym.array_split(x, indices_or_sections=4).infer_shape()[1] == [(2, 4), (2, 4), (1, 4), (1, 4)]
    assert la.sym.split(x, indices_or_sections=[1, 5], axis=0).infer_shape()[1] == [(1, 4), (4, 4), (1, 4)]
    back = la.Symbol.from_json(parts.to_json())
    assert back.to_json() == parts.to_json()
    data = _x((6, 4), "float32")
    got = la.CachedOp(back)(la.array(data))
    for g, w in zip(got, np.split(data, 3)):
        np.testing.assert_array_equal(g.asnumpy(), w)
    # the sizes follow the input when the graph runs: the same symbol serves another row count
    data9 = _x((9, 4), "float32")
    for g, w in zip(la.CachedOp(back)(la.array(data9)), np.split(data9, 3)):
        np.testing.assert_array_equal(g.asnumpy(), w)


def test_split_of_a_var_without_shape_infers_later():
    x = la.sym.var("x")
    parts = la.sym.array_split(x, indices_or_sections=3, axis=-1)
    assert parts.infer_shape(x=(2, 7))[1] == [(2, 3), (2, 2), (2, 2)]
    parts = la.sym.split(x, indices_or_sections=[2], axis=-1)
    assert parts.infer_shape(x=(2, 7))[1] == [(2, 2), (2, 5)]


def test_split_errors_are_named():
    x = la.ones((7, 4))
    with pytest.raises(la.ShapeError, match=r"split: axis 0 of size 7 does not split into 3 equal sections"):
        la.split(x, 3)
    with la.deferred(), pytest.raises(la.ShapeError, match="equal sections"):
        la.split(x, 3)
    with pytest.raises(la.ShapeError, match="equal sections"):
        la.sym.split(la.sym.var("x", shape=(7, 4)), indices_or_sections=3)
    with pytest.raises(la.ParamValueError, match=r"split: the number of sections must be >= 1, got 0"):
        la.split(x, 0)
    with pytest.raises(la.ParamValueError, match=r"array_split: the number of sections must be >= 1"):
        la.array_split(x, -2)
    with pytest.raises(la.AxisError, match="axis 2 is out of range"):
        la.split(x, 2, axis=2)
    with pytest.raises(la.AxisError):
        la.split(la.array(1.0), 1)
    with pytest.raises(la.ParamError, match="indices_or_sections"):
        la.split(x, 2.5)
    with pytest.raises(la.ParamError, match="indices_or_sections"):
        la.split(x, None)


def test_split_sections_of_an_unknown_size_are_read_when_it_runs():
    x = la.array(np.arange(12.0).reshape(6, 2))
    mask = la.array(np.array([1, 0, 1, 1, 1, 1], bool))
    with la.deferred():
        parts = la.array_split(x[mask], 2)  # 5 rows, known only when it runs
    assert parts[0].static_shape == (None, 2)
    want = np.array_split(np.arange(12.0).reshape(6, 2)[[0, 2, 3, 4, 5]], 2)
    for p, w in zip(parts, want):
        np.testing.assert_array_equal(p.asnumpy(), w)


class _Halves(nn.HybridBlock):
    def forward(self, x):
        a, b = la.array_split(x, 2)
        return a.sum(axis=0) * 10 + b.sum(axis=0)


class _Thirds(nn.HybridBlock):
    def forward(self, x):
        parts = la.split(x, 3, axis=1)
        return parts[0] - parts[2]


def test_hybridized_split_is_right_for_every_batch_size():
    for block in (_Halves, _Thirds):
        imp, hyb = block(), block()
        imp.initialize()
        hyb.initialize()
        hyb.hybridize()
        for n in (4, 6, 3, 7, 4):
            x = la.array(_x((n, 6), "float32", seed=n))
            np.testing.assert_allclose(hyb(x).asnumpy(), imp(x).asnumpy(), rtol=1e-6)


def test_hybridized_uneven_split_raises_like_eager():
    hyb = _Thirds()
    hyb.initialize()
    hyb.hybridize()
    hyb(la.ones((2, 6)))
    with pytest.raises(la.ShapeError, match="equal sections"):
        _Thirds()(la.ones((2, 7)))
    with pytest.raises(la.ShapeError, match="equal sections"):
        hyb(la.ones((2, 7)))


# -- pad -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,pad_width,mode", PAD_CASES, ids=[f"{s}-{p}-{m}" for s, p, m in PAD_CASES])
def test_pad_through_sym_json_and_a_compiled_graph(shape, pad_width, mode):
    data = _x(shape, "float32")
    x = la.sym.var("x", shape=shape)
    y = la.sym.pad(x, pad_width=pad_width, mode=mode, constant_values=1.5)
    want = np.pad(data, pad_width, mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    assert y.infer_shape()[1] == [want.shape]
    back = la.Symbol.from_json(y.to_json())
    assert back.to_json() == y.to_json()
    np.testing.assert_array_equal(la.CachedOp(back)(la.array(data)).asnumpy(), want)


def test_pad_width_forms_are_numpys():
    x = la.array(_x((2, 3)))
    for pw in (2, (2,), (1, 2), [(1, 2)], ((1, 2), (3, 0)), np.array([[1, 2], [3, 0]]), ((1,), (2,)),
               [[np.int64(1), 2], [0, 1]]):
        np.testing.assert_array_equal(la.pad(x, pw).asnumpy(), np.pad(x.asnumpy(), pw))


def test_pad_errors_are_named():
    x = la.ones((2, 3))
    with pytest.raises(la.ParamValueError, match=r"pad: pad_width must be >= 0"):
        la.pad(x, -1)
    with pytest.raises(la.ParamValueError, match=r"pad: pad_width must be >= 0"):
        la.pad(x, ((1, 1), (0, -2)))
    with pytest.raises(la.ShapeError, match=r"pad: pad_width \(\(1, 2\), \(3, 4\), \(5, 6\)\) does not fit an "
                                             r"array of 2 dims"):
        la.pad(x, ((1, 2), (3, 4), (5, 6)))
    with pytest.raises(la.ShapeError, match="does not fit an array of 2 dims"):
        la.pad(x, (1, 2, 3))
    with pytest.raises(la.ParamError, match="pad: parameter 'pad_width' must be an int, a"):
        la.pad(x, 1.5)
    with pytest.raises(la.ParamError, match="pad_width"):
        la.pad(x, ((1, 2), (3,)))
    with pytest.raises(la.ParamValueError, match="mode"):
        la.pad(x, 1, mode="wrap")
    with pytest.raises(la.ShapeError, match=r"cannot pad axis 0 of size 0 in mode 'edge'"):
        la.pad(la.ones((0, 3)), 1, mode="edge")
    with la.deferred(), pytest.raises(la.ShapeError, match="cannot pad axis 0 of size 0 in mode 'reflect'"):
        la.pad(la.ones((0, 3)), 1, mode="reflect")


def test_pad_sizes_are_checked_before_anything_allocates(monkeypatch):
    monkeypatch.setattr(la.config, "max_alloc_bytes", 2**30)
    with pytest.raises(la.OutOfMemoryError, match="pad: result float32"):
        la.pad(la.ones((2, 3)), 10**6)
    with pytest.raises(la.ShapeError, match="pad"):
        la.pad(la.ones((2, 3)), 2**63)
    with la.deferred(), pytest.raises(la.OutOfMemoryError, match="pad: result"):
        la.pad(la.ones((2, 3)), ((10**5, 0), (10**5, 0)))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_gradient_through_a_data_dependent_size(mode):
    """Recorded under la.deferred() after a boolean mask the padded axis has no static size: the
    gradient reads it when it runs, and equals the eager one."""
    data = _x((6, 3))
    keep = np.array([1, 0, 1, 1, 0, 1], bool)
    head = np.random.default_rng(1).standard_normal((4 + 3, 3 + 2))
    grads = []
    for deferred in (False, True):
        x = la.array(data)
        x.attach_grad()
        with la.autograd.record():
            if deferred:
                with la.deferred():
                    y = la.pad(x[la.array(keep)], ((2, 1), (1, 1)), mode=mode)
                assert y.static_shape == (None, 5)
            else:
                y = la.pad(x[la.array(keep)], ((2, 1), (1, 1)), mode=mode)
            loss = (y * la.array(head)).sum()
        loss.backward()
        grads.append(x.grad.asnumpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
    assert np.all(grads[0][~keep] == 0)


def test_pad_second_order_gradient():
    x = la.array(_x((4,)))
    x.attach_grad()
    head = la.array(_x((7,), seed=3))
    with la.autograd.record():
        y = la.pad(x, (2, 1), mode="reflect")
        g = la.pad_grad(y * head, pad_width=(2, 1), mode="reflect")
        loss = (g * g).sum()
    loss.backward()
    # numeric check of d loss / d x
    def f(v):
        yy = np.pad(v, (2, 1), mode="reflect") * head.asnumpy()
        gg = la.pad_grad(la.array(yy), pad_width=(2, 1), mode="reflect").asnumpy()
        return float(np.sum(gg * gg))
    xv = x.asnumpy()
    num = np.array([(f(xv + e * 1e-6) - f(xv - e * 1e-6)) / 2e-6 for e in np.eye(4)])
    np.testing.assert_allclose(x.grad.asnumpy(), num, rtol=1e-6, atol=1e-6)


# -- tril / triu -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tril_triu_through_sym_json_and_errors(name):
    data = _x((2, 3, 4), "float32")
    y = getattr(la.sym, name)(la.sym.var("x", shape=(2, 3, 4)), k=1)
    back = la.Symbol.from_json(y.to_json())
    np.testing.assert_array_equal(la.CachedOp(back)(la.array(data)).asnumpy(), getattr(np, name)(data, 1))
    assert getattr(la.sym, name)(la.sym.var("v", shape=(5,))).infer_shape()[1] == [(5, 5)]
    with pytest.raises(la.ShapeError, match=f"{name} needs an array of at least 1 dim"):
        getattr(la, name)(la.array(2.0))
    with la.deferred(), pytest.raises(la.ShapeError, match=f"{name} needs an array of at least 1 dim"):
        getattr(la, name)(la.array(2.0))


# -- expand without sizes, ragged lists --------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (3,), (2, 1, 4)])
def test_expand_without_sizes_keeps_the_shape(shape):
    data = _x(shape, "float32")
    x = la.array(data)
    for y in (la.expand(x), x.expand(), la.expand(x, ()), x.expand(())):
        assert y.shape == shape
        np.testing.assert_array_equal(y.asnumpy(), np.broadcast_to(data, shape))
    with la.deferred():
        lazy = (la.expand(x), x.expand())
    for y in lazy:
        assert y.is_lazy and y.static_shape == shape
        np.testing.assert_array_equal(y.asnumpy(), data)
    assert la.sym.expand(la.sym.var("x", shape=shape)).infer_shape()[1] == [shape]


def test_expand_with_too_few_sizes_still_fails():
    with pytest.raises(la.ShapeError, match="give at least one size per dim"):
        la.expand(la.ones((2, 3)), 3)


@pytest.mark.parametrize("ragged", [[[1, 2], [3]], [[1.0], 2.0], [[[1, 2], [3, 4]], [[5, 6]]]])
def test_ragged_nested_lists_raise_shape_error(ragged):
    with pytest.raises(la.ShapeError, match="ragged nested lists") as info:
        la.array(ragged)
    assert isinstance(info.value, ValueError)
