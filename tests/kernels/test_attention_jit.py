"""attention_jit's compiled passes called directly: ``scores_pass`` (the score chain over each (batch, head)
block, then each row's maximum subtracted) against the NumPy calls it stands for (``attention._score_chain``,
``np.maximum.reduce``, a subtraction), bit for bit, float32 and float64: every chain op at both positions, extras
broadcast per row, per key, per head and whole, as views, boolean masks, NaN rows and empty dims."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import attention as A
from lazyarray.kernels import attention_jit
from lazyarray.ops.attention import code

pytest.importorskip("numba")

RNG = np.random.default_rng(50)
ALL_OPS = tuple(code(op, pos) for op in ("multiply", "divide", "add", "subtract") for pos in (0, 1))


@pytest.fixture(autouse=True)
def _compiled_kernels(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)


def _view(shape, dtype):
    """A non-contiguous array of ``shape``: the transpose of a C-ordered one's last two axes."""
    a = RNG.uniform(0.5, 2.0, shape[:-2] + (shape[-1], shape[-2])).astype(dtype)
    return a.swapaxes(-1, -2)


def _reference(s, codes, extras):
    want = s.copy()
    A._score_chain(want, codes, iter(extras))
    if want.shape[-1]:
        want -= np.maximum.reduce(want, axis=-1, keepdims=True)
    return want


def _run(s, codes, floats, masks):
    dtype = s.dtype
    fill = [np.zeros((1, 1, 1, 1), dtype)] * (attention_jit.CHAIN_FLOATS - len(floats))
    no_mask = [np.zeros((1, 1, 1, 1), np.bool_)] * (attention_jit.CHAIN_MASKS - len(masks))
    got = s.copy()
    attention_jit.scores_kernel()(got, np.array(codes, np.int64), *floats, *fill, *masks, *no_mask)
    return got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("extra", [(1, 1, 1, 1), (2, 3, 5, 1), (1, 1, 1, 6), (1, 3, 5, 6), (2, 1, 5, 6)])
def test_every_op_bit_for_bit_with_numpys_calls(dtype, extra):
    s = RNG.standard_normal((2, 3, 5, 6)).astype(dtype)
    for c in ALL_OPS:
        e = _view(extra, dtype) if extra[-1] > 1 and extra[-2] > 1 else RNG.uniform(0.5, 2.0, extra).astype(dtype)
        np.testing.assert_array_equal(_run(s, (c,), [e], []), _reference(s, (c,), [e]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_chain_of_four_floats_and_two_masks(dtype):
    s = RNG.standard_normal((3, 2, 7, 9)).astype(dtype)
    scale, bias = np.array(0.25, dtype).reshape(1, 1, 1, 1), _view((1, 2, 7, 9), dtype)
    row_mask = RNG.random((3, 1, 7, 1)) > 0.5
    key_mask = (RNG.random((3, 1, 9, 1)) > 0.3).swapaxes(-1, -2)  # (3, 1, 1, 9), a view
    fills = np.full((1, 1, 1, 1), -1e4, dtype), RNG.standard_normal((1, 1, 7, 1)).astype(dtype)
    codes = (code("multiply", 0), code("add", 1), code("where", 2), code("where", 1))
    got = _run(s, codes, [scale, bias, fills[0], fills[1]], [key_mask, row_mask])
    want = _reference(s, codes, [scale, bias, key_mask, fills[0], row_mask, fills[1]])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_rows_and_ties_as_numpys_maximum(dtype):
    s = RNG.standard_normal((1, 2, 4, 5)).astype(dtype)
    s[0, 0, 1, 2] = np.nan
    s[0, 1, 2, :] = 1.5
    s[0, 1, 3, 0] = -np.inf
    e = RNG.standard_normal((1, 1, 1, 5)).astype(dtype)
    codes = (code("add", 0),)
    np.testing.assert_array_equal(_run(s, codes, [e], []), _reference(s, codes, [e]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(0, 2, 3, 4), (2, 0, 3, 4), (2, 3, 0, 4), (2, 3, 4, 0)])
def test_empty_dims(dtype, shape):
    s = RNG.standard_normal(shape).astype(dtype)
    e = RNG.standard_normal((1, 1) + shape[2:]).astype(dtype)
    codes = (code("multiply", 0), code("subtract", 1))
    got = _run(s, codes, [e, e], [])
    assert got.shape == shape
    np.testing.assert_array_equal(got, _reference(s, codes, [e, e]))
