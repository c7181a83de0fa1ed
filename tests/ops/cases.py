"""The op test table: one ``Case`` per registered op name.

A case says how to make valid random inputs and params for a dtype (``samples``), the NumPy
reference (``ref``), the dtypes to check the forward pass in, and which inputs a
finite-difference gradient check perturbs. The generic checks in ``checks.py`` read it;
``test_registry.py`` fails when a registered op has no case here.

Inputs are NumPy arrays (a list of them for ``*seq`` inputs); ``checks.to_la`` converts them.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

import lazyarray as la

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
ALL = FLOATS + INTS
COMPLEX = ("complex64", "complex128")

# The broadcasting pairs every binary op is checked on (both orders).
BROADCAST_PAIRS = [
    ((13, 17), (13, 17)),
    ((2, 3, 20), (1,)),
    ((100, 5, 2), (100, 1, 1)),
    ((2, 100, 3), (100, 1)),
    ((1, 3, 100), (100,)),
    ((2, 50, 2, 1), (50, 2, 1)),
    ((2, 3, 4, 5), (2, 3, 1, 5)),
]
# Small pairs for gradient checks (broadcast gradients must be summed back).
SMALL_PAIRS = [((3, 4), (3, 4)), ((2, 3, 4), (1,)), ((3, 1), (1, 4)), ((2, 3), (3,)), ((), (2, 3))]


@dataclass(frozen=True)
class Sample:
    args: tuple  # NumPy arrays (a list for *seq inputs), or None for a missing optional input
    params: dict
    name: str


@dataclass(frozen=True)
class Case:
    """How to test one op.

    * ``samples(rng, dtype, small)``: valid inputs; ``small`` = for gradient checks (float64).
    * ``ref(*args, **params)``: the NumPy result.
    * ``dtypes``: forward-check dtypes. ``grad``: positions of inputs to differentiate ("" = none).
    * ``kind``: ``"plain"``, ``"compose"`` or ``"random"`` (the last two get tailored tests).
    """

    family: str
    samples: Callable
    ref: Callable | None
    dtypes: tuple = FLOATS
    grad: tuple = ()
    kind: str = "plain"
    rtol32: float = 1e-5
    data_dependent: bool = False
    fd_eps: float = 1e-6
    extra: dict = field(default_factory=dict)


def rng_for(*parts) -> np.random.Generator:
    """A generator seeded from the test's identity: reproducible, different per test."""
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def rand(rng, shape, dtype, low=None, high=None):
    dt = np.dtype(dtype)
    if dt.kind == "c":
        real = np.dtype(dt.char.lower())  # complex64 -> float32
        return (rand(rng, shape, real, low, high) + 1j * rand(rng, shape, real, low, high)).astype(dt)
    if dt.kind == "f":
        if low is None:
            return rng.standard_normal(shape).astype(dt)
        return rng.uniform(low, high, shape).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    lo = -5 if low is None else int(np.ceil(low))
    hi = 6 if high is None else int(high)
    return rng.integers(lo, hi, shape).astype(dt)


def positive(rng, shape, dtype):
    return rand(rng, shape, dtype, 0.5, 3.0) if np.dtype(dtype).kind == "f" else rand(rng, shape, dtype, 1, 10)


# -- sample generators --------------------------------------------------------------------
def binary(gen_a=rand, gen_b=rand):
    def samples(rng, dtype, small):
        out = []
        for sa, sb in SMALL_PAIRS if small else BROADCAST_PAIRS:
            out.append(Sample((gen_a(rng, sa, dtype), gen_b(rng, sb, dtype)), {}, f"{sa}&{sb}"))
            if sa != sb:
                out.append(Sample((gen_a(rng, sb, dtype), gen_b(rng, sa, dtype)), {}, f"{sb}&{sa}"))
        return out

    return samples


def ties(rng, shape, dtype):
    """Values from a small set, so comparisons see equal elements too."""
    return rng.integers(-2, 3, shape).astype(dtype)


def unary(gen=rand, shapes=((3, 4), (2, 3, 5), (), (7,)), params=({},)):
    def samples(rng, dtype, small):
        return [Sample((gen(rng, s, dtype),), dict(p), f"{s}" + (f"-{p}" if p else ""))
                for s in (shapes[:2] if small else shapes) for p in params]

    return samples


def away_from_zero(rng, shape, dtype):
    """Random values with |x| >= 0.1 (kinks of abs / relu stay outside finite differences)."""
    x = rand(rng, shape, dtype)
    if np.dtype(dtype).kind == "f":
        x = np.where(np.abs(x) < 0.1, np.copysign(0.1, x) + x, x).astype(dtype)
    return x


def _heaviside_samples(rng, dtype, small):
    out = []
    for s in binary(away_from_zero)(rng, dtype, small):
        a = s.args[0].copy()
        a.reshape(-1)[::3] = 0  # x == 0 is where y matters (and where d/dy is 1)
        out.append(Sample((a, s.args[1]), {}, s.name))
    return out


def _power_samples(rng, dtype, small):
    if np.dtype(dtype).kind == "f":
        return binary(positive, lambda r, s, d: rand(r, s, d, -2.0, 2.0))(rng, dtype, small)
    return binary(lambda r, s, d: rand(r, s, d, -3, 4), lambda r, s, d: rand(r, s, d, 0, 4))(rng, dtype, small)


def _where_samples(rng, dtype, small):
    shapes = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)), ((2, 3), (3,), ())]
    if not small:
        shapes.append(((2, 100, 3), (100, 1), (1, 3)))
    return [Sample((rng.random(c) < 0.5, rand(rng, a, dtype), rand(rng, b, dtype)), {}, f"{c}&{a}&{b}")
            for c, a, b in shapes]


def _smooth_l1_samples(rng, dtype, small):
    out = []
    for s in (1.0, 2.0, 0.5):
        t = 1.0 / (s * s)  # the turning point: |x| = 1/s**2
        pts = np.array([-2 * t, -t - 0.05 * t, -t + 0.05 * t, -0.3 * t, 0.3 * t, t - 0.05 * t, t + 0.05 * t, 3 * t])
        x = np.concatenate([pts, rng.uniform(-3 * t, 3 * t, 4)]).astype(dtype).reshape(3, 4)
        out.append(Sample((x,), {"scalar": s}, f"scalar={s}"))
    return out


def _reduce_samples(int_axis_only=False):
    def samples(rng, dtype, small):
        x = rand(rng, (3, 4, 5) if not small else (2, 3, 4), dtype)
        if np.dtype(dtype).kind == "f" and small:
            x = x + np.arange(x.size).reshape(x.shape) * 1e-3  # no ties: max/min are smooth here
        axes = [None, 0, -1, 1] if int_axis_only else [None, 0, -1, (0, 2), (1,), ()]
        out = []
        for ax in axes:
            for kd in (False, True):
                out.append(Sample((x,), {"axis": ax, "keepdims": kd}, f"axis={ax}-keepdims={kd}"))
        out.append(Sample((rand(rng, (), dtype),), {}, "0d"))
        return out

    return samples


def _argmax_ref(x, axis=None, keepdims=False):
    return np.argmax(x, axis=axis, keepdims=keepdims)


def _mean_ref(x, axis=None, keepdims=False):
    return np.mean(x, axis=axis, keepdims=keepdims)


def _size_samples(rng, dtype, small):
    x = rand(rng, (3, 4, 5), dtype)
    out = [Sample((x,), {"axis": ax}, f"axis={ax}") for ax in (None, 0, -1, (0, 2), ())]
    out += [Sample((x,), {"axis": (1, 2), "dtype": dtype}, f"dtype={dtype}"),
            Sample((rand(rng, (), dtype),), {}, "0d"), Sample((rand(rng, (0, 3), dtype),), {"axis": 1}, "empty")]
    return out


def _size_ref(x, axis=None, dtype="int64"):
    axes = range(x.ndim) if axis is None else [axis] if isinstance(axis, int) else axis
    return np.asarray(int(np.prod([x.shape[a] for a in axes], dtype=np.int64)), dtype=dtype)


def _sum_to_samples(rng, dtype, small):
    cases = [((2, 3, 4), (3, 1)), ((2, 3, 4), (1, 4)), ((3, 4), (3, 4)), ((2, 3), ()), ((5, 1, 3), (1, 1, 3))]
    return [Sample((rand(rng, src, dtype),), {"shape": dst}, f"{src}->{dst}") for src, dst in cases]


def _sum_to_ref(x, shape):
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    # sum_to sums gradients back: the result keeps x's dtype (unlike np.sum of small ints)
    return np.sum(x, axis=axes, dtype=x.dtype).reshape(shape) if axes else x.reshape(shape)


def _like_samples(pairs):
    def samples(rng, dtype, small):
        return [Sample((rand(rng, a, dtype), rand(rng, b, dtype)), {}, f"{a}&{b}") for a, b in pairs]

    return samples


# -- shape ops ----------------------------------------------------------------------------
def _reshape_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 4), dtype)
    return [Sample((x,), {"shape": s}, f"->{s}") for s in [(6, 4), (-1,), (4, -1, 2), (24,), (2, 3, 4, 1)]]


def _reshape_codes_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 4), dtype)
    return [Sample((x,), {"codes": c, "reverse": r}, f"{c}{' reverse' if r else ''}")
            for c, r in [((0, -1), False), ((-2,), False), ((-3, -2), False), ((-4, 1, 2, -2), False),
                         ((0, 0, -1), False), ((-1, 0), True), ((6, -1), False)]]


def _reshape_codes_ref(x, codes, reverse=False):  # MXNet's table, written out for these samples
    return x.reshape({((0, -1), False): (2, 12), ((-2,), False): (2, 3, 4), ((-3, -2), False): (6, 4),
                      ((-4, 1, 2, -2), False): (1, 2, 3, 4), ((0, 0, -1), False): (2, 3, 4),
                      ((-1, 0), True): (6, 4), ((6, -1), False): (6, 4)}[(tuple(codes), reverse)])


def _transpose_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 4), dtype)
    return [Sample((x,), {"axes": a}, f"axes={a}") for a in [None, (1, 0, 2), (2, 0, 1), (-1, 0, 1)]] + [
        Sample((rand(rng, (3, 5), dtype),), {}, "2d")]


def _broadcast_to_samples(rng, dtype, small):
    cases = [((3, 1), (3, 4)), ((4,), (2, 3, 4)), ((1, 1), (2, 5)), ((), (2, 2)), ((2, 3), (2, 3))]
    return [Sample((rand(rng, s, dtype),), {"shape": t}, f"{s}->{t}") for s, t in cases]


def expand_ref(x, sizes):
    """PyTorch ``expand`` written out from its definition."""
    lead = len(sizes) - x.ndim
    shape = tuple(sizes[i] if i < lead or sizes[i] != -1 else x.shape[i - lead] for i in range(len(sizes)))
    return np.broadcast_to(x, shape)


EXPAND_CASES = [((3, 1), (3, 4)), ((3, 1), (-1, 4)), ((3, 1), (2, 3, 5)), ((3, 1), (2, -1, -1)),
                ((1,), (4,)), ((), (2, 3)), ((2, 3), (2, 3)), ((1, 3), (0, 3))]


def _expand_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype),), {"sizes": t}, f"{s}->{t}") for s, t in EXPAND_CASES]


def repeat_ref(x, sizes):
    """np.tile (PyTorch ``repeat`` where it is defined: new dims in front, then tile)."""
    return np.tile(x, sizes)


REPEAT_CASES = [((2, 3), (2, 2)), ((2, 3), (1, 1)), ((2, 3), (3, 1, 2)), ((3,), (2, 2)), ((), (3,)),
                ((2, 1), (1, 3)), ((2, 3), (0, 1)), ((2, 3), (2,)), ((2, 1, 3), (3, 1))]


def _repeat_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype),), {"sizes": t}, f"{s}x{t}") for s, t in REPEAT_CASES]


_REPEAT_ELEMENTS = [((2, 3), (2,), None), ((2, 3), (3,), 1), ((2, 3), (1, 0, 2), 1), ((4,), (0, 2, 1, 3), 0),
                    ((2, 3), (2,), -2), ((), (3,), None), ((3, 2), (0,), 0)]


def _repeat_elements_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype),), {"repeats": r, "axis": a}, f"{s}x{r}@{a}") for s, r, a in _REPEAT_ELEMENTS]


def _repeat_elements_ref(x, repeats, axis=None):
    return np.repeat(x, repeats[0] if len(repeats) == 1 else np.asarray(repeats), axis=axis)


def _repeat_elements_grad_samples(rng, dtype, small):
    out = []
    for s, r, a in _REPEAT_ELEMENTS:
        like = rand(rng, s, dtype)
        g = rand(rng, _repeat_elements_ref(like, r, a).shape, dtype)
        out.append(Sample((g, like), {"repeats": r, "axis": a}, f"{s}x{r}@{a}"))
    return out


def _repeat_elements_grad_ref(g, like, repeats, axis=None):
    """Each element's copies summed: the transpose of repeat, by brute force."""
    n = like.size if axis is None else like.shape[axis]
    counts = [repeats[0]] * n if len(repeats) == 1 else list(repeats)
    src = np.repeat(np.arange(n), counts)
    gg = g.reshape(-1) if axis is None else np.moveaxis(g, axis, 0)
    res = np.zeros((n,) + gg.shape[1:], dtype=g.dtype)
    np.add.at(res, src, gg)
    return res.reshape(like.shape) if axis is None else np.moveaxis(res, 0, axis)


def _seq_samples(rng, dtype, small):
    out = [Sample(([rand(rng, (2, 3), dtype), rand(rng, (4, 3), dtype)],), {"axis": 0}, "axis=0"),
           Sample(([rand(rng, (2, 3), dtype), rand(rng, (2, 1), dtype), rand(rng, (2, 2), dtype)],),
                  {"axis": -1}, "axis=-1"),
           Sample(([rand(rng, (5,), dtype)],), {}, "one")]
    return out


def _stack_samples(rng, dtype, small):
    return [Sample(([rand(rng, (2, 3), dtype) for _ in range(3)],), {"axis": ax}, f"axis={ax}")
            for ax in (0, 1, 2, -1)] + [Sample(([rand(rng, (), dtype)] * 2,), {}, "0d")]


def _squeeze_samples(rng, dtype, small):
    x = rand(rng, (1, 3, 1, 2), dtype)
    return [Sample((x,), {"axis": a}, f"axis={a}") for a in [None, 0, 2, (0, 2), -2]]


def _squeeze_ref(x, axis=None):
    return np.squeeze(x, axis=axis)


def _expand_dims_samples(rng, dtype, small):
    x = rand(rng, (2, 3), dtype)
    return [Sample((x,), {"axis": a}, f"axis={a}") for a in [0, 1, 2, -1, (0, 3)]]


GETITEM_KEYS = [(1,), (slice(None), 2), (slice(1, None, 2),), (Ellipsis, -1), (None, 0, slice(None, 2)),
                (slice(None, None, -1), Ellipsis, None), (-1, -2, 1)]


def _getitem_samples(rng, dtype, small):
    x = rand(rng, (3, 4, 5), dtype)
    return [Sample((x,), {"key": k}, f"key{i}") for i, k in enumerate(GETITEM_KEYS)]


def _getitem_ref(x, key):
    return x[key]


def _index_grad_samples(rng, dtype, small):
    like = rand(rng, (3, 4, 5), dtype)
    return [Sample((rand(rng, like[k].shape, dtype), like), {"key": k}, f"key{i}")
            for i, k in enumerate(GETITEM_KEYS)]


def _index_grad_ref(g, like, key):
    res = np.zeros(like.shape, g.dtype)
    res[key] = g
    return res


def _slice_like_samples(rng, dtype, small):
    x = rand(rng, (5, 3), dtype)
    out = [Sample((x, rand(rng, (n, 1), dtype)), {"drop": d}, f"axis0-n{n}-drop={d}")
           for n in (0, 2, 5) for d in (False, True)]
    x3 = rand(rng, (2, 6, 3), dtype)
    return out + [Sample((x3, rand(rng, (1, 4, 1), dtype)), {"axis": 1}, "axis1"),
                  Sample((x3, rand(rng, (2, 6, 1), dtype)), {"axis": -1, "drop": True}, "axis-1-drop")]


def _slice_like_ref(x, like, axis=0, drop=False):
    ax = axis % x.ndim
    n = like.shape[ax]
    return x[(slice(None),) * ax + (slice(n, None) if drop else slice(0, n),)]


def _boolean_mask_samples(rng, dtype, small):
    x = rand(rng, (4, 3), dtype)
    return [Sample((x, rng.random((4, 3)) < 0.5), {}, "full-mask"),
            Sample((x, rng.random((4,)) < 0.5), {}, "row-mask")]


def _boolean_mask_grad_samples(rng, dtype, small):
    out = []
    for s in _boolean_mask_samples(rng, dtype, small):
        x, m = s.args
        out.append(Sample((rand(rng, x[m].shape, dtype), x, m), {}, s.name))
    return out


def _mask_grad_ref(g, like, mask):
    res = np.zeros(like.shape, g.dtype)
    res[mask] = g
    return res


def _advanced_index_samples(rng, dtype, small):
    x = rand(rng, (4, 3, 5), dtype)
    rows, cols = np.array([0, 3, 3, -1]), np.array([[1], [2]], dtype=np.int32)
    return [Sample((x, [rows, np.array([2, 0, 2, 1])]), {"key": (0, 0), "positions": (0, 1)}, "two-arrays"),
            Sample((x, [cols]), {"key": (1, 0), "positions": (1,)}, "int-then-array"),
            Sample((x, [rows, cols]), {"key": (0, slice(None), 0), "positions": (0, 2)}, "split-arrays"),
            Sample((x, [cols]), {"key": (None, slice(1, 3), 0), "positions": (2,)}, "newaxis-slice-array")]


def _advanced_index_ref(x, indices, key, positions):
    k = list(key)
    for p, i in zip(positions, indices):
        k[p] = i
    return x[tuple(k)]


def _advanced_index_grad_samples(rng, dtype, small):
    out = []
    for s in _advanced_index_samples(rng, dtype, small):
        x, idx = s.args
        g = rand(rng, _advanced_index_ref(x, idx, **s.params).shape, dtype)
        out.append(Sample((g, x, idx), s.params, s.name))
    return out


def _advanced_index_grad_ref(g, like, indices, key, positions):
    res = np.zeros(like.shape, g.dtype)
    k = list(key)
    for p, i in zip(positions, indices):
        k[p] = i
    np.add.at(res, tuple(k), g)  # (a loop over the broadcast index positions gives the same sums)
    return res


def _take_samples(rng, dtype, small):
    x = rand(rng, (4, 3, 2), dtype)
    return [Sample((x, np.array([0, 3, 3, -1])), {}, "axis0-repeats"),
            Sample((x, np.array([[2, 0], [1, 1]])), {"axis": 1}, "axis1-2d-idx"),
            Sample((x, np.array([1], dtype=np.int32)), {"axis": -1}, "axis-1-int32")]


def _take_ref(x, indices, axis=0):
    return np.take(x, indices, axis=axis)


def _take_grad_samples(rng, dtype, small):
    out = []
    for s in _take_samples(rng, dtype, small):
        x, idx = s.args
        out.append(Sample((rand(rng, _take_ref(x, idx, **s.params).shape, dtype), x, idx), s.params, s.name))
    return out


def _take_grad_ref(g, like, indices, axis=0):
    res = np.zeros(like.shape, g.dtype)
    ax = axis % like.ndim
    idx = indices.reshape(-1)
    gm = np.moveaxis(g.reshape(like.shape[:ax] + (idx.size,) + like.shape[ax + 1:]), ax, 0)
    for j, i in enumerate(idx):
        np.moveaxis(res, ax, 0)[i] += gm[j]
    return res


def _nonzero_samples(rng, dtype, small):
    return [Sample((ties(rng, s, dtype),), {}, f"{s}") for s in [(3, 4), (6,), (2, 2, 2)]]


# -- triangles, pad, split ----------------------------------------------------------------------
TRI_CASES = [((4, 5), 0), ((4, 5), 1), ((4, 5), -2), ((2, 3, 4), 0), ((3, 3), 5), ((3, 3), -5), ((5,), 0),
             ((5,), -1), ((0, 3), 0)]


def _tri_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype),), {"k": k} if k else {}, f"{s}-k{k}") for s, k in TRI_CASES]


# (shape, pad_width, mode): every numpy form of pad_width, every mode, 0-d and empty arrays
PAD_CASES = [((3, 4), 1, "constant"), ((3, 4), (1, 2), "constant"), ((3, 4), ((0, 1), (2, 0)), "constant"),
             ((2, 3, 4), ((1,), (0,), (2,)), "constant"), ((3, 4), ((1, 2),), "edge"), ((3, 4), 2, "edge"),
             ((4, 5), ((2, 1), (3, 4)), "reflect"), ((3,), (5, 4), "reflect"), ((1, 3), 2, "reflect"),
             ((2, 3), 0, "reflect"), ((0, 3), ((1, 1), (0, 0)), "constant"), ((), 2, "constant"),
             ((2, 2), [[1, 0], [0, 1]], "edge")]


def _pad_samples(rng, dtype, small):
    out = []
    for i, (s, pw, mode) in enumerate(PAD_CASES):
        params = {"pad_width": pw} if mode == "constant" and i % 2 else {"pad_width": pw, "mode": mode}
        if mode == "constant" and i % 3 == 0:
            params["constant_values"] = 2.5 if np.dtype(dtype).kind == "f" else 3
        out.append(Sample((rand(rng, s, dtype),), params, f"{s}-{pw}-{mode}"))
    return out


def _pad_ref(x, pad_width, mode="constant", constant_values=0.0):
    if mode == "constant":
        return np.pad(x, pad_width, mode="constant", constant_values=constant_values)
    return np.pad(x, pad_width, mode=mode)


def _pad_grad_samples(rng, dtype, small):
    out = []
    for s in _pad_samples(rng, dtype, small):
        p = {k: v for k, v in s.params.items() if k != "constant_values"}
        out.append(Sample((rand(rng, _pad_ref(s.args[0], **p).shape, dtype),), p, s.name))
    return out


def _pad_grad_ref(g, pad_width, mode="constant"):
    """The adjoint of numpy.pad, one column of its Jacobian at a time."""
    like = tuple(np.array(g.shape, int) - np.broadcast_to(np.asarray(pad_width), (g.ndim, 2)).sum(axis=1))
    res = np.zeros(like, np.float64)
    for k in range(res.size):
        e = np.zeros(like, np.float64)
        e.reshape(-1)[k] = 1.0
        res.reshape(-1)[k] = np.sum(_pad_ref(e, pad_width, mode) * g)
    return res.astype(g.dtype)


SECTION_CASES = [((7, 3), 3, 0, 0, False), ((7, 3), 3, 2, 0, False), ((2, 9), 4, 1, -1, False),
                 ((6, 2), 3, 1, 0, True), ((2, 5), 7, 6, 1, False), ((0, 2), 2, 1, 0, True)]


def _section_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype),), {"sections": n, "index": i, "axis": ax, "even": ev}, f"{s}-{n}-{i}-{ax}-{ev}")
            for s, n, i, ax, ev in SECTION_CASES]


def _section_ref(x, sections, index, axis=0, even=False):
    return np.array_split(x, sections, axis=axis)[index]


def _section_grad_samples(rng, dtype, small):
    out = []
    for s in _section_samples(rng, dtype, small):
        x = s.args[0]
        out.append(Sample((rand(rng, _section_ref(x, **s.params).shape, dtype), x), s.params, s.name))
    return out


def _section_grad_ref(g, like, sections, index, axis=0, even=False):
    res = np.zeros(like.shape, g.dtype)
    ax = axis % like.ndim
    bounds = np.cumsum([0] + [p.shape[ax] for p in np.array_split(like, sections, axis=axis)])
    res[(slice(None),) * ax + (slice(bounds[index], bounds[index + 1]),)] = g
    return res


# (shape, indices_or_sections, axis): numpy.split / array_split (split: only equal sections)
SPLIT_CASES = [((6, 4), 3, 0), ((6, 4), 2, 1), ((6, 4), 2, -1), ((5, 4), [1, 3], 0), ((5, 4), [-2], 0),
               ((2, 7), [2, 2, 9], 1), ((4,), 1, 0), ((6,), [], 0), ((0, 3), 2, 0), ((3, 5), [4, 1], -1)]
ARRAY_SPLIT_CASES = SPLIT_CASES + [((7, 2), 3, 0), ((2, 5), 4, 1), ((3,), 5, 0)]


def _split_samples(cases):
    def samples(rng, dtype, small):
        return [Sample((rand(rng, s, dtype),), {"indices_or_sections": n, "axis": ax}, f"{s}-{n}-axis{ax}")
                for s, n, ax in cases]

    return samples


def _random_samples(a, b):
    def samples(rng, dtype, small):
        return [Sample((), {"shape": (3, 4), "dtype": dtype, "device": la.cpu(0)}, "default"),
                Sample((), {"shape": (5,), a[0]: a[1], b[0]: b[1], "dtype": dtype, "device": la.cpu(1)}, "params"),
                Sample((), {"shape": (), "dtype": dtype, "device": la.cpu(0)}, "0d"),
                Sample((), {"shape": (0, 2), "dtype": dtype, "device": la.cpu(0)}, "empty")]

    return samples


# -- sized (ops/sized.py: sizes as parameters, symbolic until a call binds them) ---------------
def _fill_samples(rng, dtype, small):
    return [Sample((), {"shape": (3, 4), "value": 2, "dtype": dtype}, "matrix"),
            Sample((), {"shape": (), "value": 1, "dtype": dtype}, "0d"),
            Sample((), {"shape": (0, 3), "dtype": dtype}, "empty")]


def _iota_samples(rng, dtype, small):
    return [Sample((), {"bounds": (0, 5, 1), "dtype": dtype}, "up"),
            Sample((), {"bounds": (9, 1, -3), "dtype": dtype}, "down"),
            Sample((), {"bounds": (4, 4, 1), "dtype": dtype}, "empty")]


def _dim_values_samples(rng, dtype, small):
    return [Sample((), {"values": (3, 4, 5), "shape": (3,)}, "vector"),
            Sample((), {"values": (2, 3, 4, 5), "shape": (2, 2)}, "matrix"),
            Sample((), {"values": (7,), "shape": ()}, "0d")]


# -- linear algebra / nn -----------------------------------------------------------------
def _dot_samples(rng, dtype, small):
    shapes = [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((), (2, 3)), ((2, 3), ())]
    if not small:
        shapes.append(((2, 3, 4), (5, 4, 2)))
    out = [Sample((rand(rng, a, dtype), rand(rng, b, dtype)), {}, f"{a}@{b}") for a, b in shapes]
    # transpose_a: a.T @ b (the row_sparse gradient path of dot(csr, W); dense here)
    return out + [Sample((rand(rng, a, dtype), rand(rng, b, dtype)), {"transpose_a": True}, f"{a}.T@{b}")
                  for a, b in [((4, 3), (4, 5)), ((4, 3), (4,))]]


def _dot_ref(a, b, transpose_a=False):
    return np.asarray(np.dot(a.T if transpose_a else a, b))


def _matmul_samples(rng, dtype, small):
    shapes = [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((2, 3, 4), (4, 2)),
              ((2, 1, 3, 4), (5, 4, 2)), ((3,), (2, 3, 4))]
    return [Sample((rand(rng, a, dtype), rand(rng, b, dtype)), {}, f"{a}@{b}") for a, b in shapes]


def _dense_samples(rng, dtype, small):
    return [Sample((rand(rng, (4, 3), dtype), rand(rng, (5, 3), dtype), rand(rng, (5,), dtype)), {}, "bias"),
            Sample((rand(rng, (4, 3), dtype), rand(rng, (5, 3), dtype)), {}, "no-bias"),
            Sample((rand(rng, (2, 4, 3), dtype), rand(rng, (5, 3), dtype), rand(rng, (5,), dtype)), {}, "3d")]


def _dense_ref(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def _softmax_samples(rng, dtype, small):
    return [Sample((rand(rng, (3, 4), dtype) * 3,), {"axis": a}, f"axis={a}") for a in (-1, 0)] + [
        Sample((rand(rng, (2, 3, 4), dtype),), {"axis": 1}, "3d-axis=1"),
        Sample((np.array([[1000.0, 0.0, -1000.0]], dtype=dtype),), {}, "large")]


def _softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax_ref(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _sce_samples(rng, dtype, small):
    return [Sample((rand(rng, (5, 4), dtype), rng.integers(0, 4, (5,))), {}, "2d"),
            Sample((rand(rng, (2, 3, 4), dtype), rng.integers(0, 4, (2, 3)).astype(np.int32)), {}, "3d")]


def _sce_ref(logits, labels):
    logp = _log_softmax_ref(logits.astype(np.float64))
    picked = np.take_along_axis(logp, labels[..., None].astype(np.int64), axis=-1)
    return np.asarray(-picked.mean()).astype(logits.dtype)


def _sce_rows_samples(rng, dtype, small):
    return [Sample((rand(rng, (5, 4), dtype), rng.integers(0, 4, (5,))), {}, "2d"),
            Sample((rand(rng, (2, 3, 4), dtype), rng.integers(0, 4, (2, 3)).astype(np.int32)), {}, "3d"),
            Sample((rand(rng, (4,), dtype), np.array(2)), {}, "1d")]


def _sce_rows_ref(logits, labels):
    logp = _log_softmax_ref(logits.astype(np.float64))
    picked = np.take_along_axis(logp, labels[..., None].astype(np.int64), axis=-1)[..., 0]
    return (-picked).astype(logits.dtype)


def _sce_rows_grad_samples(rng, dtype, small):
    return [Sample((rand(rng, (5, 4), dtype), rng.integers(0, 4, (5,)), rand(rng, (5,), dtype)), {}, "2d"),
            Sample((rand(rng, (2, 3, 4), dtype), rng.integers(0, 4, (2, 3)), rand(rng, (2, 3), dtype)), {}, "3d")]


def _sce_rows_grad_ref(logits, labels, g):
    p = np.exp(_log_softmax_ref(logits.astype(np.float64)))
    onehot = (labels[..., None] == np.arange(logits.shape[-1]))
    return ((p - onehot) * g[..., None]).astype(logits.dtype)


def _sce_probs_ref(logits, labels):
    return [_sce_rows_ref(logits, labels), np.exp(_log_softmax_ref(logits.astype(np.float64))).astype(logits.dtype)]


def _sce_grad_saved_samples(rng, dtype, small):
    out = []
    for s in _sce_rows_grad_samples(rng, dtype, small):
        logits, labels, g = s.args
        probs = np.exp(_log_softmax_ref(logits.astype(np.float64))).astype(dtype)
        out.append(Sample((probs, labels, g), {}, s.name))
    return out


def _sce_grad_saved_ref(probs, labels, g):
    onehot = (labels[..., None] == np.arange(probs.shape[-1]))
    return ((probs.astype(np.float64) - onehot) * g[..., None]).astype(probs.dtype)


def _relu_grad_samples(rng, dtype, small):
    out = []
    for s in ((3, 4), (2, 3, 5), ()):
        y = np.maximum(away_from_zero(rng, s, dtype), 0).astype(dtype)
        out.append(Sample((y, rand(rng, s, dtype)), {}, f"{s}"))
    return out


def _one_hot_samples(rng, dtype, small):
    return [Sample((rng.integers(0, 5, (4,)),), {"depth": 5}, "1d"),
            Sample((rng.integers(0, 3, (2, 3)).astype(np.int32),), {"depth": 3, "dtype": dtype}, "2d")]


def _one_hot_ref(indices, depth, dtype="float32"):
    return (indices[..., None] == np.arange(depth)).astype(dtype)


def _one_hot_like_samples(rng, dtype, small):
    return [Sample((rng.integers(0, 5, (4,)), rand(rng, (4, 5), dtype)), {}, "1d"),
            Sample((rng.integers(0, 3, (2, 3)).astype(np.int32), rand(rng, (2, 3, 3), dtype)), {}, "2d"),
            Sample((np.array(2), rand(rng, (4,), dtype)), {}, "0d")]


def _one_hot_like_ref(indices, like):
    return _one_hot_ref(indices, like.shape[-1], like.dtype)


# -- core -----------------------------------------------------------------------------------
def _cast_samples(rng, dtype, small):
    x = rand(rng, (3, 4), dtype)
    targets = ("float64",) if small else ("float32", "float64", "int32", "bool")
    return [Sample((x,), {"dtype": t}, f"to-{t}") for t in targets]


def _cast_storage_samples(rng, dtype, small):
    x = rand(rng, (4, 5), dtype)
    x[1] = 0
    x[:, 2] = 0
    return [Sample((x,), {"stype": s}, s) for s in ("default", "csr", "row_sparse")]


def _copy_to_samples(rng, dtype, small):
    return [Sample((rand(rng, (3, 4), dtype),), {"device": la.cpu(1)}, "cpu1"),
            Sample((rand(rng, (2,), dtype),), {"device": la.cpu(0)}, "cpu0")]


def _ident(x, **params):
    return x


def ew(fn):
    """A NumPy elementwise reference that keeps 0-d results as arrays."""
    return lambda *a, **p: np.asarray(fn(*a, **p))


def _sigmoid_ref(x):
    return 1.0 / (1.0 + np.exp(-x))


def _smooth_l1_ref(x, scalar=1.0):
    s2 = scalar * scalar
    return np.where(np.abs(x) < 1.0 / s2, 0.5 * (scalar * x) ** 2, np.abs(x) - 0.5 / s2).astype(x.dtype)


def _quadratic_ref(x, a=0.0, b=0.0, c=0.0):
    return a * x ** 2 + b * x + c


_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
            "greater": np.greater, "greater_equal": np.greater_equal}

def _call_samples(rng, dtype, small):
    """``call`` of y = exp(x) * 2 + x, with its backward graph g * (exp(x) * 2 + 1)."""
    from lazyarray.executor.call import SubGraph

    out = []
    for shape in ((3, 4), ()):
        x = la.sym.var("x", shape=shape, dtype=dtype)
        g = la.sym.var("g", shape=shape, dtype=dtype)
        graph = SubGraph(la.sym.exp(x) * 2 + x)
        backward = SubGraph(g * (la.sym.exp(x) * 2 + 1), ["x", "g"])
        params = {"graph": graph, "backward": backward, "inputs_read": (0,), "heads_read": (0,), "grad_pos": (0,)}
        out.append(Sample(([rand(rng, shape, dtype)],), params, f"{shape}"))
    return out


def _fused_samples(rng, dtype, small):
    """``fused`` group tanh(x * b) + x, with b a row broadcast along axis 0 (and 0-d: no chunks)."""
    from lazyarray.executor.call import SubGraph
    from lazyarray.executor.fusion import fuse
    from lazyarray.graph.symbol import Symbol

    out = []
    for shape, bshape in (((3, 4), (4,)), ((), ()), ((128, 3000), (1, 3000)), ((5, 2, 3), (5, 1, 3))):
        if small and len(shape) > 1 and shape[0] > 10:
            continue
        x = la.sym.var("x", shape=shape, dtype=dtype)
        b = la.sym.var("b", shape=bshape, dtype=dtype)
        (e,) = fuse(list((la.sym.tanh(x * b) + x).outputs))
        assert e.node.op.name == "fused"
        graph = e.node.params["graph"]
        assert isinstance(graph, SubGraph) and isinstance(graph.sym, Symbol)
        order = {v.name: k for k, v in enumerate(n.node for n in e.node.inputs)}
        vals = {"x": rand(rng, shape, dtype), "b": rand(rng, bshape, dtype)}
        args = [vals[n.node.name] for n in e.node.inputs]
        assert sorted(order) == ["b", "x"]
        out.append(Sample((args,), {"graph": graph}, f"{shape}x{bshape}"))
    return out


def _fused_ref(seq, graph):
    names = [n.name for n in graph.sym.input_nodes()]
    v = dict(zip(graph.names, seq))
    assert set(names) <= set(v)
    x, b = (v[k] for k in _fused_roles(graph))
    return np.tanh(x * b) + x


def _fused_roles(graph):
    """The sub-graph input names standing for x (read twice) and b (read once)."""
    reads = {}
    for n in graph.sym.topo():
        for e in n.inputs:
            if e.node.op is None:
                reads[e.node.name] = reads.get(e.node.name, 0) + 1
    x = max(reads, key=reads.get)
    return x, next(k for k in reads if k != x)


def _cond_samples(rng, dtype, small):
    """``cond`` choosing y = exp(x) * 2 + x or y = x * x - x (both branches)."""
    from lazyarray.executor.call import SubGraph

    out = []
    for shape in ((3, 4), ()):
        x = la.sym.var("x", shape=shape, dtype=dtype)
        then_graph, else_graph = SubGraph(la.sym.exp(x) * 2 + x), SubGraph(x * x - x)
        for flag in (True, False):
            out.append(Sample((np.array(flag), [rand(rng, shape, dtype)]),
                              {"then_graph": then_graph, "else_graph": else_graph}, f"{shape}-{flag}"))
    return out


def _cond_ref(pred, seq, **p):
    x = seq[0]
    return np.exp(x) * 2 + x if pred else x * x - x


def _while_samples(rng, dtype, small):
    """``while_loop`` doubling x until its sum reaches 50 (at most 3 times in the second sample)."""
    from lazyarray.executor.call import SubGraph

    x = la.sym.var("x", shape=(2, 3), dtype=dtype)
    cond_graph, body_graph = SubGraph(la.sym.sum(x) < 50), SubGraph(x * 2)
    return [Sample(([positive(rng, (2, 3), dtype)],), {"cond_graph": cond_graph, "body_graph": body_graph,
                                                       "n_vars": 1, "max_iterations": bound}, f"bound={bound}")
            for bound in (-1, 3)]


def _while_ref(seq, n_vars, max_iterations, **p):
    x, done = seq[0], 0
    while x.sum() < 50 and (max_iterations < 0 or done < max_iterations):
        x, done = x * 2, done + 1
    return x


def _foreach_samples(rng, dtype, small):
    """``foreach`` without states: y = exp(x) * 2 + x on each row."""
    from lazyarray.executor.call import SubGraph

    x = la.sym.var("x", shape=(3,), dtype=dtype)
    body = SubGraph(la.sym.exp(x) * 2 + x)
    return [Sample(([rand(rng, (4, 3), dtype)],), {"body": body, "n_data": 1, "n_states": 0}, "map")]


CASES: dict[str, Case] = {
    "fused": Case("graph", _fused_samples, _fused_ref, FLOATS, grad=(0,)),
    "call": Case("graph", _call_samples, lambda seq, **p: np.exp(seq[0]) * 2 + seq[0], FLOATS, grad=(0,)),
    "cond": Case("graph", _cond_samples, _cond_ref, FLOATS, grad=(1,)),
    # its gradient rule raises AutogradError (use foreach): tests/executor/test_control_flow.py
    "while_loop": Case("graph", _while_samples, _while_ref, FLOATS, extra={"grad_raises": True}),
    "foreach": Case("graph", _foreach_samples, lambda seq, **p: np.exp(seq[0]) * 2 + seq[0], FLOATS, grad=(0,)),
    # elementwise binary
    "add": Case("elementwise", binary(), ew(np.add), ALL + COMPLEX, grad=(0, 1)),
    "subtract": Case("elementwise", binary(), ew(np.subtract), ALL + COMPLEX, grad=(0, 1)),
    "multiply": Case("elementwise", binary(), ew(np.multiply), ALL + COMPLEX, grad=(0, 1)),
    "divide": Case("elementwise", binary(rand, lambda r, s, d: positive(r, s, d) * (1 if r.random() < .5 else -1)),
                   ew(np.true_divide), ALL, grad=(0, 1)),
    "power": Case("elementwise", _power_samples, ew(np.power), ALL, grad=(0, 1)),
    "maximum": Case("elementwise", binary(), ew(np.maximum), ALL, grad=(0, 1)),
    "minimum": Case("elementwise", binary(), ew(np.minimum), ALL, grad=(0, 1)),
    # d/dx is 0 by definition (x jumps at 0, no finite difference exists there): test_elementwise
    "heaviside": Case("elementwise", _heaviside_samples, ew(np.heaviside), ALL, grad=(1,)),
    **{name: Case("elementwise", binary(ties, ties), ew(fn), ALL) for name, fn in _COMPARE.items()},
    "where": Case("elementwise", _where_samples, ew(np.where), ALL, grad=(1, 2)),
    # elementwise unary
    "negative": Case("elementwise", unary(), ew(np.negative), ALL + COMPLEX, grad=(0,)),
    "abs": Case("elementwise", unary(away_from_zero), ew(np.abs), ALL + COMPLEX, grad=(0,)),
    "sign": Case("elementwise", unary(away_from_zero), ew(np.sign), ALL, grad=(0,)),
    "exp": Case("elementwise", unary(), ew(np.exp), ALL + COMPLEX, grad=(0,)),
    "log": Case("elementwise", unary(positive), ew(np.log), ALL, grad=(0,)),
    "sqrt": Case("elementwise", unary(positive), ew(np.sqrt), ALL, grad=(0,)),
    "square": Case("elementwise", unary(), ew(np.square), ALL + COMPLEX, grad=(0,)),
    "sin": Case("elementwise", unary(), ew(np.sin), ALL + COMPLEX, grad=(0,)),
    "cos": Case("elementwise", unary(), ew(np.cos), ALL + COMPLEX, grad=(0,)),
    "tanh": Case("elementwise", unary(), ew(np.tanh), ALL + COMPLEX, grad=(0,)),
    "sigmoid": Case("elementwise", unary(lambda r, s, d: rand(r, s, d) * 3), ew(_sigmoid_ref), ALL, grad=(0,)),
    "relu": Case("elementwise", unary(away_from_zero), ew(lambda x: np.maximum(x, 0)), ALL, grad=(0,)),
    "relu_grad": Case("elementwise", _relu_grad_samples, ew(lambda y, g: g * (y > 0)), FLOATS, grad=(1,)),
    "smooth_l1": Case("elementwise", _smooth_l1_samples, ew(_smooth_l1_ref), FLOATS, grad=(0,)),
    "quadratic": Case("elementwise", unary(params=({}, {"a": 2.0, "b": -1.0, "c": 0.5}, {"b": 3.0})),
                      ew(_quadratic_ref), FLOATS, grad=(0,)),
    # reductions
    "sum": Case("reduce", _reduce_samples(), ew(np.sum), ALL + COMPLEX, grad=(0,)),
    "mean": Case("reduce", _reduce_samples(), ew(_mean_ref), ALL, grad=(0,)),
    "max": Case("reduce", _reduce_samples(), ew(np.max), ALL, grad=(0,)),
    "min": Case("reduce", _reduce_samples(), ew(np.min), ALL, grad=(0,)),
    "argmax": Case("reduce", _reduce_samples(int_axis_only=True), ew(_argmax_ref), ALL),
    "sum_to": Case("reduce", _sum_to_samples, ew(_sum_to_ref), ALL, grad=(0,)),
    "size": Case("reduce", _size_samples, _size_ref, ALL),
    "sum_like": Case("reduce", _like_samples([((2, 3, 4), (3, 1)), ((3, 4), (3, 4)), ((2, 5), ())]),
                     lambda x, like: np.asarray(_sum_to_ref(x, like.shape)), ALL, grad=(0,)),
    # shape
    "reshape": Case("shape", _reshape_samples, lambda x, shape: np.reshape(x, shape), ALL, grad=(0,)),
    "reshape_codes": Case("shape", _reshape_codes_samples, _reshape_codes_ref, ALL, grad=(0,)),
    "reshape_like": Case("shape", _like_samples([((2, 6), (3, 4)), ((4,), (2, 2)), ((1,), ())]),
                         lambda x, like: np.reshape(x, like.shape), ALL, grad=(0,)),
    "transpose": Case("shape", _transpose_samples, lambda x, axes=None: np.transpose(x, axes), ALL, grad=(0,)),
    "broadcast_to": Case("shape", _broadcast_to_samples, lambda x, shape: np.broadcast_to(x, shape), ALL,
                         grad=(0,)),
    "broadcast_like": Case("shape", _like_samples([((3, 1), (3, 4)), ((4,), (2, 3, 4)), ((), (2,))]),
                           lambda x, like: np.broadcast_to(x, like.shape), ALL, grad=(0,)),
    "expand": Case("shape", _expand_samples, expand_ref, ALL, grad=(0,)),
    "repeat": Case("shape", _repeat_samples, repeat_ref, ALL, grad=(0,)),
    "repeat_elements": Case("shape", _repeat_elements_samples, _repeat_elements_ref, ALL, grad=(0,)),
    "repeat_elements_grad": Case("shape", _repeat_elements_grad_samples, _repeat_elements_grad_ref, ALL, grad=(0,)),
    "concatenate": Case("shape", _seq_samples, lambda seq, axis=0: np.concatenate(seq, axis=axis), ALL,
                        grad=(0,)),
    "stack": Case("shape", _stack_samples, lambda seq, axis=0: np.stack(seq, axis=axis), ALL, grad=(0,)),
    "squeeze": Case("shape", _squeeze_samples, _squeeze_ref, ALL, grad=(0,)),
    "expand_dims": Case("shape", _expand_dims_samples, lambda x, axis: np.expand_dims(x, axis), ALL, grad=(0,)),
    "getitem": Case("shape", _getitem_samples, _getitem_ref, ALL, grad=(0,)),
    "index_grad": Case("shape", _index_grad_samples, _index_grad_ref, ALL, grad=(0,)),
    "slice_like": Case("shape", _slice_like_samples, _slice_like_ref, ALL, grad=(0,)),
    "boolean_mask": Case("shape", _boolean_mask_samples, lambda x, m: x[m], ALL, grad=(0,),
                         data_dependent=True),
    "boolean_mask_grad": Case("shape", _boolean_mask_grad_samples, _mask_grad_ref, ALL),
    "take": Case("shape", _take_samples, _take_ref, ALL, grad=(0,)),
    "take_grad": Case("shape", _take_grad_samples, _take_grad_ref, ALL),
    "advanced_index": Case("shape", _advanced_index_samples, _advanced_index_ref, ALL, grad=(0,)),
    "advanced_index_grad": Case("shape", _advanced_index_grad_samples, _advanced_index_grad_ref, ALL, grad=(0,)),
    "nonzero": Case("shape", _nonzero_samples, lambda x: np.argwhere(x).astype(np.int64), ALL,
                    data_dependent=True),
    "tril": Case("shape", _tri_samples, lambda x, k=0: np.tril(x, k), ALL, grad=(0,)),
    "triu": Case("shape", _tri_samples, lambda x, k=0: np.triu(x, k), ALL, grad=(0,)),
    "pad": Case("shape", _pad_samples, _pad_ref, ALL, grad=(0,)),
    "pad_grad": Case("shape", _pad_grad_samples, _pad_grad_ref, ALL, grad=(0,)),
    "split_section": Case("shape", _section_samples, _section_ref, ALL, grad=(0,)),
    "split_section_grad": Case("shape", _section_grad_samples, _section_grad_ref, ALL, grad=(0,)),
    "split": Case("shape", _split_samples(SPLIT_CASES), np.split, ALL, kind="compose"),
    "array_split": Case("shape", _split_samples(ARRAY_SPLIT_CASES), np.array_split, ALL, kind="compose"),
    # random sampling (lazyarray/ops/sampling.py): tailored tests in tests/test_random_ops.py
    "fill": Case("sized", _fill_samples, lambda shape, value=0, dtype="int64", device=None:
                 np.full(shape, value, dtype=dtype), ALL),
    "iota": Case("sized", _iota_samples, lambda bounds, dtype="int64", device=None:
                 np.arange(*bounds, dtype=dtype), ALL),
    "dim_values": Case("sized", _dim_values_samples, lambda values, shape, device=None:
                       np.array(values, np.int64).reshape(shape), ("int64",)),
    "random_uniform": Case("random", _random_samples(("low", -2.0), ("high", 3.0)), None, FLOATS, kind="random"),
    "random_normal": Case("random", _random_samples(("loc", 1.0), ("scale", 0.5)), None, FLOATS, kind="random"),
    # linear algebra / nn
    "dot": Case("nn", _dot_samples, _dot_ref, ALL, grad=(0, 1), rtol32=1e-4),
    "matmul": Case("nn", _matmul_samples, ew(np.matmul), ALL, grad=(0, 1), rtol32=1e-4),
    "dense": Case("nn", _dense_samples, _dense_ref, ALL, grad=(0, 1, 2), rtol32=1e-4),
    "softmax": Case("nn", _softmax_samples, _softmax_ref, FLOATS, grad=(0,)),
    "log_softmax": Case("nn", _softmax_samples, _log_softmax_ref, FLOATS, grad=(0,)),
    "softmax_cross_entropy": Case("nn", _sce_samples, _sce_ref, FLOATS, grad=(0,), rtol32=1e-4),
    "softmax_cross_entropy_rows": Case("nn", _sce_rows_samples, _sce_rows_ref, FLOATS, grad=(0,), rtol32=1e-4),
    "softmax_cross_entropy_rows_with_probs": Case("nn", _sce_rows_samples, _sce_probs_ref, FLOATS, rtol32=1e-4),
    "softmax_cross_entropy_rows_grad_saved": Case("nn", _sce_grad_saved_samples, _sce_grad_saved_ref, FLOATS,
                                                  rtol32=1e-4),
    "softmax_cross_entropy_rows_grad": Case("nn", _sce_rows_grad_samples, _sce_rows_grad_ref, FLOATS, grad=(0, 2),
                                            rtol32=1e-4),
    "one_hot": Case("nn", _one_hot_samples, _one_hot_ref, ("int64",)),
    "one_hot_like": Case("nn", _one_hot_like_samples, _one_hot_like_ref, ALL),
    "dropout": Case("nn", unary(), None, FLOATS, kind="compose"),
    "dropout_mask": Case("nn", unary(params=({"p": 0.3},)), None, FLOATS, kind="random"),
    # core
    "zeros_like": Case("core", unary(), ew(np.zeros_like), ALL),
    "ones_like": Case("core", unary(), ew(np.ones_like), ALL),
    "cast": Case("core", _cast_samples, lambda x, dtype: x.astype(dtype), ALL, grad=(0,)),
    "copy": Case("core", unary(), ew(np.copy), ALL, grad=(0,)),
    "copy_to": Case("core", _copy_to_samples, _ident, ALL, grad=(0,)),
    "stop_gradient": Case("core", unary(), _ident, ALL),
    "cast_storage": Case("core", _cast_storage_samples, _ident, ALL, grad=(0,)),
    # global graphs (la.sbp): the logical value is unchanged on one process
    "boxing": Case("core", unary(params=({"src": "S(0)", "dst": "B"}, {"src": "P(sum)", "dst": "S(1)"})),
                   _ident, ALL, grad=(0,)),
}


def case_params(families=None, kinds=("plain",), dtype_filter=None):
    """``pytest.param`` rows (op name, dtype) for the cases of ``families``."""
    import pytest

    rows = []
    for name, case in sorted(CASES.items()):
        if families is not None and case.family not in families:
            continue
        if case.kind not in kinds:
            continue
        for dt in case.dtypes:
            if dtype_filter is None or dt in dtype_filter:
                rows.append(pytest.param(name, dt, id=f"{name}-{dt}"))
    return rows


def grad_params(families=None):
    """``pytest.param`` rows (op name) for the differentiable cases of ``families``."""
    import pytest

    return [pytest.param(name, id=name) for name, case in sorted(CASES.items())
            if case.grad and case.kind == "plain" and (families is None or case.family in families)]


# -- conv family (lazyarray/ops/conv.py) ------------------------------------------------------------
def _conv_geometry(x, kh, kw, stride, padding, fill=0.0):
    (sh, sw), (ph, pw) = (tuple(stride) * 2)[:2], (tuple(padding) * 2)[:2]
    xp_ = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    ho, wo = (xp_.shape[2] - kh) // sh + 1, (xp_.shape[3] - kw) // sw + 1
    return xp_, sh, sw, ho, wo


def _conv2d_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """Explicit loops over output pixels and groups; dilation = a step between kernel taps."""
    (kh, kw), (dh, dw) = w.shape[2:], dilation
    xp_, sh, sw, ho, wo = _conv_geometry(x, (kh - 1) * dh + 1, (kw - 1) * dw + 1, stride, padding)
    og, cg = w.shape[0] // groups, w.shape[1]
    out = np.zeros((x.shape[0], w.shape[0], ho, wo), np.result_type(x, w))
    for g in range(groups):
        for i in range(ho):
            for j in range(wo):
                patch = xp_[:, g * cg:(g + 1) * cg, i * sh:i * sh + (kh - 1) * dh + 1:dh,
                            j * sw:j * sw + (kw - 1) * dw + 1:dw]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("ncij,ocij->no", patch, w[g * og:(g + 1) * og])
    return out if b is None else out + b[None, :, None, None]


_CONV_GEOMETRIES = [({}, "plain"), ({"stride": (2, 2), "padding": (1, 1)}, "s2-p1"),
                    ({"stride": (2, 1), "padding": (0, 1)}, "s21-p01"),
                    ({"dilation": (2, 1), "padding": (1, 1)}, "dil21-p1")]


def _conv2d_samples(rng, dtype, small):
    x, w, b = rand(rng, (2, 3, 5, 6), dtype), rand(rng, (4, 3, 3, 2), dtype), rand(rng, (4,), dtype)
    out = [Sample((x, w, b), p, name) for p, name in _CONV_GEOMETRIES]
    x4 = rand(rng, (2, 4, 5, 6), dtype)
    out.append(Sample((x4, rand(rng, (6, 2, 3, 2), dtype), rand(rng, (6,), dtype)),
                      {"groups": 2, "stride": (2, 1), "dilation": (1, 2)}, "groups2-dil12"))
    out.append(Sample((x4, rand(rng, (4, 1, 3, 3), dtype), rand(rng, (4,), dtype)),
                      {"groups": 4, "padding": (1, 1), "dilation": (2, 2)}, "depthwise-dil2"))
    out.append(Sample((x4, rand(rng, (8, 1, 2, 2), dtype), rand(rng, (8,), dtype)),
                      {"groups": 4, "stride": (2, 2)}, "groups4-multiplier2"))
    return out + [Sample((x, w), {}, "no-bias")]


def _conv2d_input_grad_samples(rng, dtype, small):
    out = []
    for s in _conv2d_samples(rng, dtype, small)[:-1]:
        x, w, _ = s.args
        g = rand(rng, _conv2d_ref(x, w, **s.params).shape, dtype)
        out.append(Sample((g, w, x), s.params, s.name))
    return out


def _conv2d_input_grad_ref(g, w, like, **params):
    # The transpose of conv2d in x, column by column of the Jacobian.
    res = np.zeros(like.shape, g.dtype)
    for k in range(like.size):
        e = np.zeros(like.shape, np.float64)
        e.reshape(-1)[k] = 1.0
        res.reshape(-1)[k] = np.sum(_conv2d_ref(e, w.astype(np.float64), **params) * g)
    return res


def _conv2d_weight_grad_samples(rng, dtype, small):
    out = []
    for s in _conv2d_samples(rng, dtype, small)[:-1]:
        x, w, _ = s.args
        g = rand(rng, _conv2d_ref(x, w, **s.params).shape, dtype)
        out.append(Sample((g, x), {"kernel": w.shape[2:], **s.params}, s.name))
    return out


def _conv2d_weight_grad_ref(g, x, kernel, groups=1, **params):
    shape = (g.shape[1], x.shape[1] // groups) + tuple(kernel)
    res = np.zeros(shape, g.dtype)
    for k in range(res.size):
        e = np.zeros(shape, np.float64)
        e.reshape(-1)[k] = 1.0
        res.reshape(-1)[k] = np.sum(_conv2d_ref(x.astype(np.float64), e, groups=groups, **params) * g)
    return res


def _conv2d_transpose_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0),
                          dilation=(1, 1), groups=1):
    """Each input pixel scatters x[pixel] @ w[:, :, tap] to the output pixel every tap reaches."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = stride, padding, output_padding, dilation
    ho = (h - 1) * sh - 2 * ph + (kh - 1) * dh + 1 + oh
    wo = (wd - 1) * sw - 2 * pw + (kw - 1) * dw + 1 + ow
    out = np.zeros((n, cog * groups, ho + 2 * ph, wo + 2 * pw), np.result_type(x, w))
    for g in range(groups):
        xs, ws = x[:, g * cig:(g + 1) * cig], w[g * cig:(g + 1) * cig]
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for c in range(kw):
                        out[:, g * cog:(g + 1) * cog, i * sh + a * dh, j * sw + c * dw] += xs[:, :, i, j] @ ws[:, :, a, c]
    out = out[:, :, ph:ph + ho, pw:pw + wo]
    return out if b is None else out + b[None, :, None, None]


def _conv2d_transpose_samples(rng, dtype, small):
    x = rand(rng, (2, 4, 3, 4), dtype)
    w, b = rand(rng, (4, 3, 3, 2), dtype), rand(rng, (3,), dtype)
    wg, bg = rand(rng, (4, 2, 2, 3), dtype), rand(rng, (4,), dtype)
    return [Sample((x, w, b), {}, "plain"),
            Sample((x, w, b), {"stride": (2, 2), "padding": (1, 0), "output_padding": (1, 0)}, "s2-p10-op10"),
            Sample((x, wg, bg), {"groups": 2, "dilation": (2, 1), "stride": (1, 2), "output_padding": (0, 1)},
                   "groups2-dil21"),
            Sample((x, rand(rng, (4, 1, 3, 3), dtype)), {"groups": 4, "stride": (2, 2), "padding": (1, 1)},
                   "depthwise-no-bias")]


def _pool_out(size, k, s, p, ceil):
    span = size + 2 * p - k
    return (-(-span // s) if ceil else span // s) + 1


def _pool_windows(x, kernel, stride, padding, ceil_mode, fill):
    """``(i, j, rows, cols, window)`` per output pixel: windows of x padded with ``fill``, clipped
    to the padded input (ceil mode's last windows are partial)."""
    (kh, kw), (ph, pw) = kernel, padding
    sh, sw = (k if s == 0 else s for k, s in zip(kernel, stride))
    xp_ = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    ho = _pool_out(x.shape[2], kh, sh, ph, ceil_mode)
    wo = _pool_out(x.shape[3], kw, sw, pw, ceil_mode)
    for i in range(ho):
        for j in range(wo):
            rows = (i * sh, min(i * sh + kh, xp_.shape[2]))
            cols = (j * sw, min(j * sw + kw, xp_.shape[3]))
            yield i, j, rows, cols, xp_[:, :, rows[0]:rows[1], cols[0]:cols[1]]


_POOL_GEOMETRIES = [({}, "2x2"), ({"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)}, "3x3-s2-p1"),
                    ({"kernel": (3, 2), "stride": (1, 1)}, "3x2-s1"),
                    ({"kernel": (3, 3), "stride": (2, 2), "ceil_mode": True}, "3x3-s2-ceil"),
                    ({"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}, "3x3-s2-p1-ceil")]


def _max_pool2d_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 6, 5), dtype)
    return [Sample((x,), p, name) for p, name in _POOL_GEOMETRIES]


def _max_pool2d_ref(x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False):
    out = {}
    for i, j, _, _, win in _pool_windows(x, kernel, stride, padding, ceil_mode, -np.inf):
        out[i, j] = win.max(axis=(2, 3))
    ho, wo = max(out)[0] + 1, max(out)[1] + 1
    return np.stack([np.stack([out[i, j] for j in range(wo)], -1) for i in range(ho)], -2).astype(x.dtype)


def _max_pool2d_grad_samples(rng, dtype, small):
    out = []
    for s in _max_pool2d_samples(rng, dtype, small):
        g = rand(rng, _max_pool2d_ref(s.args[0], **s.params).shape, dtype)
        out.append(Sample((g, s.args[0]), s.params, s.name))
    return out


def _max_pool2d_grad_ref(g, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False):
    ph, pw = padding
    res = np.zeros((x.shape[0], x.shape[1], x.shape[2] + 2 * ph, x.shape[3] + 2 * pw), g.dtype)
    for i, j, rows, cols, win in _pool_windows(x, kernel, stride, padding, ceil_mode, -np.inf):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                a, b = np.unravel_index(np.argmax(win[n, c]), win[n, c].shape)
                res[n, c, rows[0] + a, cols[0] + b] += g[n, c, i, j]
    return res[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]


_AVG_GEOMETRIES = _POOL_GEOMETRIES + [
    ({"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False}, "3x3-s2-p1-excl"),
    ({"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True, "count_include_pad": False},
     "3x3-s2-p1-ceil-excl")]


def _avg_pool2d_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 6, 5), dtype)
    return [Sample((x,), p, name) for p, name in _AVG_GEOMETRIES]


def _avg_pool2d_ref(x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, count_include_pad=True):
    """Window sums over the zero-padded input, divided by the clipped window's size (padding
    included, MXNet's default) or by the input pixels it covers."""
    (ph, pw), (h, w) = padding, x.shape[2:]
    out = {}
    for i, j, rows, cols, win in _pool_windows(x.astype(np.float64), kernel, stride, padding, ceil_mode, 0.0):
        if count_include_pad:
            count = (rows[1] - rows[0]) * (cols[1] - cols[0])
        else:
            count = (min(rows[1], ph + h) - max(rows[0], ph)) * (min(cols[1], pw + w) - max(cols[0], pw))
        out[i, j] = win.sum(axis=(2, 3)) / count
    ho, wo = max(out)[0] + 1, max(out)[1] + 1
    return np.stack([np.stack([out[i, j] for j in range(wo)], -1) for i in range(ho)], -2).astype(x.dtype)


def _avg_pool2d_grad_samples(rng, dtype, small):
    out = []
    for s in _avg_pool2d_samples(rng, dtype, small):
        g = rand(rng, _avg_pool2d_ref(s.args[0], **s.params).shape, dtype)
        out.append(Sample((g, s.args[0]), s.params, s.name))
    return out


def _avg_pool2d_grad_ref(g, like, **params):
    # avg_pool2d is linear: its gradient is the transpose of its Jacobian, column by column.
    res = np.zeros(like.shape, g.dtype)
    for k in range(like.size):
        e = np.zeros(like.shape, np.float64)
        e.reshape(-1)[k] = 1.0
        res.reshape(-1)[k] = np.sum(_avg_pool2d_ref(e, **params) * g)
    return res


def _batch_norm_samples(rng, dtype, small):
    def stats(c):
        return (rand(rng, (c,), dtype), rand(rng, (c,), dtype), rand(rng, (c,), dtype),
                rand(rng, (c,), dtype, 0.5, 1.5))
    return [Sample((rand(rng, (4, 3, 2, 2), dtype),) + stats(3), {}, "nchw"),
            Sample((rand(rng, (5, 4), dtype),) + stats(4), {"eps": 1e-3}, "nc"),
            Sample((rand(rng, (2, 3, 4), dtype),) + stats(4), {"axis": -1}, "axis-1")]


def _batch_norm_ref(x, gamma, beta, mean, var, eps=1e-5, axis=1):
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    r = [v.reshape(shape) for v in (gamma, beta, mean, var)]
    return ((x - r[2]) / np.sqrt(r[3] + eps) * r[0] + r[1]).astype(x.dtype)


def _batch_norm_relu_samples(rng, dtype, small):
    """batch_norm's samples, a batch-last view, an empty batch, and NaN / inf / -0.0 values."""
    out = _batch_norm_samples(rng, dtype, small)
    stats = tuple(rand(rng, (3,), dtype) for _ in range(3)) + (rand(rng, (3,), dtype, 0.5, 1.5),)
    x = rand(rng, (3, 4, 5, 2), dtype).transpose(3, 0, 1, 2)  # (2, 3, 4, 5) stored batch last
    special = rand(rng, (2, 3, 4, 5), dtype)
    special.reshape(-1)[:4] = (np.nan, np.inf, -np.inf, -0.0)
    return out + [Sample((x,) + stats, {}, "batch-last-view"), Sample((special,) + stats, {}, "special"),
                  Sample((rand(rng, (0, 3, 4, 5), dtype),) + stats, {}, "empty")]


def _batch_norm_relu_ref(x, gamma, beta, mean, var, eps=1e-5, axis=1):
    with np.errstate(invalid="ignore"):
        return np.maximum(_batch_norm_ref(x, gamma, beta, mean, var, eps, axis), 0)


def _bn_max_pool2d_samples(rng, dtype, small):
    """Scales all positive (pooled first), one negative (the recorded order), with and without relu."""
    out = []
    for p, name in _POOL_GEOMETRIES[:3]:
        for gamma, which in (((0.5, 1.0, 2.0), "positive"), ((0.5, -1.0, 2.0), "one-negative")):
            args = (rand(rng, (2, 3, 6, 5), dtype), np.asarray(gamma, dtype), rand(rng, (3,), dtype),
                    rand(rng, (3,), dtype), rand(rng, (3,), dtype, 0.5, 1.5))
            for relu in (False, True):
                out.append(Sample(args, dict(p, relu=relu, eps=1e-3), f"{name}-{which}-relu{relu}"))
    return out


def _bn_max_pool2d_ref(x, gamma, beta, mean, var, eps=1e-5, relu=False, **pool):
    return _max_pool2d_ref(_batch_norm_ref(np.maximum(x, 0) if relu else x, gamma, beta, mean, var, eps), **pool)


def _conv2d_act_samples(rng, dtype, small):
    """conv2d's samples under each activation (hard ones at MobileNetV3's 1/6, 0.5 and ONNX's 0.2, 0.5)."""
    acts = [{"act": "relu"}, {"act": "hardswish", "alpha": 1 / 6, "beta": 0.5}, {"act": "hardsigmoid"}]
    return [Sample(s.args, dict(s.params, **a), f"{s.name}-{a['act']}")
            for s in _conv2d_samples(rng, dtype, small) for a in acts]


def _conv2d_act_ref(x, w, b=None, act="relu", alpha=0.2, beta=0.5, **conv):
    y = _conv2d_ref(x, w, b, **conv)
    h = np.clip(y * alpha + beta, 0, 1)
    return np.maximum(y, 0) if act == "relu" else h if act == "hardsigmoid" else y * h


def _conv2d_add_relu_samples(rng, dtype, small):
    """conv2d's samples, each with a residual of its output's shape (a C-ordered one, and a view)."""
    out = []
    for k, s in enumerate(_conv2d_samples(rng, dtype, small)):
        shape = _conv2d_ref(*s.args, **s.params).shape
        r = rand(rng, shape, dtype) if k % 2 else rand(rng, shape[:-1] + (2 * shape[-1],), dtype)[..., ::2]
        out.append(Sample(s.args[:2] + (r,) + s.args[2:], s.params, s.name))
    return out


def _conv2d_add_relu_ref(x, w, r, b=None, **conv):
    return np.maximum(_conv2d_ref(x, w, b, **conv) + r, 0)


def _squeeze_excite_samples(rng, dtype, small):
    """MobileNetV3's gate (1/6, 0.5) and ONNX's default (0.2, 0.5), one and two pairwise blocks a row
    (8 x 8, 16 x 16), a non-contiguous view, an empty batch."""
    def weights(c, r):
        return (rand(rng, (r, c, 1, 1), dtype), rand(rng, (r,), dtype), rand(rng, (c, r, 1, 1), dtype),
                rand(rng, (c,), dtype))

    view = rand(rng, (2, 6, 5, 5), dtype)[:, ::2]
    return [Sample((rand(rng, (2, 8, 8, 8), dtype),) + weights(8, 2), {"alpha": 1 / 6, "beta": 0.5}, "8x8"),
            Sample((rand(rng, (1, 4, 16, 16), dtype),) + weights(4, 3), {}, "16x16"),
            Sample((view,) + weights(3, 2), {"alpha": 1 / 6, "beta": 0.5}, "view"),
            Sample((rand(rng, (0, 4, 3, 3), dtype),) + weights(4, 2), {}, "empty")]


def _squeeze_excite_ref(x, w1, b1, w2, b2, alpha=0.2, beta=0.5):
    s = x.mean(axis=(2, 3))
    h = np.maximum(s @ w1[:, :, 0, 0].T + b1, 0)
    g = np.clip((h @ w2[:, :, 0, 0].T + b2) * alpha + beta, 0, 1)
    return (x * g[:, :, None, None]).astype(x.dtype)


def _channel_shuffle_samples(rng, dtype, small):
    """ShuffleNet's two halves in two groups; one input in three groups; three inputs across group bounds;
    a strided view; (N, C, L); an empty batch."""
    def r(*shape):
        return rand(rng, shape, dtype)

    view = r(2, 8, 3, 6)[:, :, :, ::2]
    return [Sample(([r(2, 4, 3, 3), r(2, 4, 3, 3)],), {"groups": 2}, "halves"),
            Sample(([r(2, 6, 2, 2)],), {"groups": 3}, "one-input"),
            Sample(([r(1, 2, 2, 3), r(1, 4, 2, 3), r(1, 6, 2, 3)],), {"groups": 3}, "across-groups"),
            Sample(([view, r(2, 4, 3, 3)],), {"groups": 4}, "view"),
            Sample(([r(2, 4, 5), r(2, 2, 5)],), {"groups": 2}, "ncl"),
            Sample(([r(0, 4, 2, 2), r(0, 4, 2, 2)],), {"groups": 2}, "empty")]


def _channel_shuffle_ref(seq, groups=2):
    x = np.concatenate(seq, axis=1)
    n, c = x.shape[:2]
    return np.swapaxes(x.reshape((n, groups, c // groups) + x.shape[2:]), 1, 2).reshape(x.shape)


def _layer_scale_residual_samples(rng, dtype, small):
    """ConvNeXt's block end (channels-last y, per-channel gamma, NCHW residual); a strided y; other axes; empty."""
    def r(*shape):
        return rand(rng, shape, dtype)

    view = r(2, 3, 6, 4)[:, :, ::2]
    return [Sample((r(2, 3, 3, 4), r(4), r(2, 4, 3, 3)), {}, "convnext"),
            Sample((view, r(4), r(2, 4, 3, 3)), {}, "view"),
            Sample((r(2, 5, 3), r(3), r(2, 3, 5)), {"axes": (0, 2, 1)}, "ncl"),
            Sample((r(0, 3, 3, 4), r(4), r(0, 4, 3, 3)), {}, "empty")]


def _layer_scale_residual_ref(y, gamma, r, axes=(0, 3, 1, 2)):
    return r + np.transpose(gamma * y, axes)


def _flatten_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype),), {}, f"{s}") for s in [(2, 3, 4), (3, 2, 1, 2), (4, 5), (3,)]]


CASES.update({
    "conv2d": Case("conv", _conv2d_samples, _conv2d_ref, FLOATS, grad=(0, 1, 2), rtol32=1e-4),
    "conv2d_input_grad": Case("conv", _conv2d_input_grad_samples, _conv2d_input_grad_ref, FLOATS, rtol32=1e-4),
    "conv2d_weight_grad": Case("conv", _conv2d_weight_grad_samples, _conv2d_weight_grad_ref, FLOATS, rtol32=1e-4),
    "conv2d_transpose": Case("conv", _conv2d_transpose_samples, _conv2d_transpose_ref, FLOATS, grad=(0, 1, 2),
                             rtol32=1e-4),
    "max_pool2d": Case("conv", _max_pool2d_samples, _max_pool2d_ref, FLOATS, grad=(0,)),
    "max_pool2d_relu": Case("conv", _max_pool2d_samples, lambda x, **p: np.maximum(_max_pool2d_ref(x, **p), 0), FLOATS),
    "max_pool2d_grad": Case("conv", _max_pool2d_grad_samples, _max_pool2d_grad_ref, FLOATS),
    "avg_pool2d": Case("conv", _avg_pool2d_samples, _avg_pool2d_ref, FLOATS, grad=(0,)),
    "avg_pool2d_grad": Case("conv", _avg_pool2d_grad_samples, _avg_pool2d_grad_ref, FLOATS),
    "batch_norm": Case("conv", _batch_norm_samples, _batch_norm_ref, FLOATS, grad=(0, 1, 2, 3, 4), rtol32=1e-4),
    "flatten": Case("conv", _flatten_samples, lambda x: x.reshape(x.shape[0], -1), FLOATS, grad=(0,)),
    "batch_norm_max_pool2d": Case("conv", _bn_max_pool2d_samples, _bn_max_pool2d_ref, FLOATS, rtol32=1e-4),
    "conv2d_act": Case("conv", _conv2d_act_samples, _conv2d_act_ref, FLOATS, rtol32=1e-4),
    "conv2d_add_relu": Case("conv", _conv2d_add_relu_samples, _conv2d_add_relu_ref, FLOATS, rtol32=1e-4),
    "batch_norm_relu": Case("conv", _batch_norm_relu_samples, _batch_norm_relu_ref, FLOATS, rtol32=1e-4),
    "squeeze_excite": Case("conv", _squeeze_excite_samples, _squeeze_excite_ref, FLOATS, rtol32=1e-4),
    "channel_shuffle": Case("conv", _channel_shuffle_samples, _channel_shuffle_ref, FLOATS),
    "layer_scale_residual": Case("conv", _layer_scale_residual_samples, _layer_scale_residual_ref, FLOATS),
})


# -- Array API: more elementwise functions (lazyarray/ops/math.py) ------------------------------------
BOOL_INTS = ("bool", "int32", "int64")


def special(rng, shape, dtype):
    """Random values with NaN, +-inf and -0.0 sprinkled in (floats); plain random integers."""
    x = rand(rng, shape, dtype)
    if np.dtype(dtype).kind == "f" and x.size:
        flat = x.reshape(-1)
        for i, v in enumerate((np.nan, np.inf, -np.inf, -0.0)):
            flat[i::7] = v
    return x


def _in(low, high):
    return lambda r, s, d: rand(r, s, d, low, high)


def _divisor(r, s, d):
    return positive(r, s, d) * (1 if r.random() < .5 else -1)


def _shift_samples(rng, dtype, small):
    return binary(rand, lambda r, s, d: r.integers(0, 8, s).astype(d))(rng, dtype, small)


_MATH_UNARY = {  # name: (NumPy reference, input generator, dtypes, differentiable)
    "floor": (np.floor, rand, ALL, False), "ceil": (np.ceil, rand, ALL, False),
    "trunc": (np.trunc, rand, ALL, False), "round": (np.round, lambda r, s, d: rand(r, s, d) * 3, ALL, False),
    "isnan": (np.isnan, special, ALL, False), "isinf": (np.isinf, special, ALL, False),
    "isfinite": (np.isfinite, special, ALL, False), "signbit": (np.signbit, special, ALL, False),
    "expm1": (np.expm1, rand, ALL, True), "log1p": (np.log1p, positive, ALL, True),
    "log2": (np.log2, positive, ALL, True), "log10": (np.log10, positive, ALL, True),
    "reciprocal": (np.reciprocal, _divisor, FLOATS, True), "positive": (np.positive, rand, ALL, True),
    "tan": (np.tan, _in(-1.2, 1.2), FLOATS, True), "sinh": (np.sinh, rand, ALL, True),
    "cosh": (np.cosh, rand, ALL, True), "asin": (np.arcsin, _in(-0.9, 0.9), FLOATS, True),
    "acos": (np.arccos, _in(-0.9, 0.9), FLOATS, True), "atan": (np.arctan, rand, ALL, True),
    "asinh": (np.arcsinh, rand, ALL, True), "acosh": (np.arccosh, _in(1.1, 3.0), FLOATS, True),
    "atanh": (np.arctanh, _in(-0.9, 0.9), FLOATS, True),
    "logical_not": (np.logical_not, ties, BOOL_INTS + FLOATS, False),
    "bitwise_invert": (np.invert, rand, BOOL_INTS, False),
}
_MATH_BINARY = {  # name: (NumPy reference, samples, dtypes, differentiated inputs)
    "atan2": (np.arctan2, binary(), ALL, (0, 1)), "hypot": (np.hypot, binary(), ALL, (0, 1)),
    "logaddexp": (np.logaddexp, binary(), ALL, (0, 1)),
    "copysign": (np.copysign, binary(away_from_zero, away_from_zero), ALL, (0,)),
    "nextafter": (np.nextafter, binary(), FLOATS, ()),
    "floor_divide": (np.floor_divide, binary(rand, _divisor), ALL, ()),
    "remainder": (np.remainder, binary(rand, _divisor), ALL, (0, 1)),
    "logical_and": (np.logical_and, binary(ties, ties), BOOL_INTS + FLOATS, ()),
    "logical_or": (np.logical_or, binary(ties, ties), BOOL_INTS + FLOATS, ()),
    "logical_xor": (np.logical_xor, binary(ties, ties), BOOL_INTS + FLOATS, ()),
    "bitwise_and": (np.bitwise_and, binary(), BOOL_INTS, ()),
    "bitwise_or": (np.bitwise_or, binary(), BOOL_INTS, ()),
    "bitwise_xor": (np.bitwise_xor, binary(), BOOL_INTS, ()),
    "bitwise_left_shift": (np.left_shift, _shift_samples, INTS, ()),
    "bitwise_right_shift": (np.right_shift, _shift_samples, INTS, ()),
}
CASES.update({name: Case("math", unary(gen), ew(fn), dts, grad=(0,) if diff else ())
              for name, (fn, gen, dts, diff) in _MATH_UNARY.items()})
# complex numbers: conj is differentiable on real inputs (the identity), real too; imag is not
CASES.update({
    "conj": Case("math", unary(), ew(np.conj), FLOATS + COMPLEX + INTS, grad=(0,)),
    "real": Case("math", unary(), lambda x: np.real(x).copy(), FLOATS + COMPLEX, grad=(0,)),
    "imag": Case("math", unary(), lambda x: np.imag(x).copy(), FLOATS + COMPLEX),
})
CASES.update({name: Case("math", samples, ew(fn), dts, grad=grad)
              for name, (fn, samples, dts, grad) in _MATH_BINARY.items()})


# -- Array API: creation like x, reductions, sorting, manipulation ------------------------------------
def _full_like_samples(rng, dtype, small):
    x = rand(rng, (3, 4), dtype)
    return [Sample((x,), {"fill_value": 2}, "int-fill"), Sample((x,), {"fill_value": 1.5, "dtype": "float64"},
                                                                 "float-fill-dtype"),
            Sample((x,), {"fill_value": True, "dtype": "bool"}, "bool"), Sample((rand(rng, (), dtype),),
                                                                                 {"fill_value": -1}, "0d")]


def _full_like_ref(x, fill_value, dtype=None):
    return np.full_like(x, fill_value, dtype=dtype)


def _like_dtype_samples(rng, dtype, small):
    return unary(params=({}, {"dtype": "int8"}, {"dtype": "float64"}))(rng, dtype, small)


def _prod_samples(rng, dtype, small):
    out = _reduce_samples()(rng, dtype, small)
    x = rand(rng, (3, 4), dtype)
    x[0, 1] = 0  # one zero in row 0, two in column 2: the gradient is exact there too
    x[1, 2] = x[2, 2] = 0
    return out + [Sample((x,), {"axis": ax}, f"zeros-axis={ax}") for ax in (None, 0, 1)]


def _moments_samples(rng, dtype, small):
    x = rand(rng, (3, 4, 5) if not small else (2, 3, 4), dtype)
    return [Sample((x,), {"axis": ax, "keepdims": kd, "correction": c}, f"axis={ax}-kd={kd}-c={c}")
            for ax in (None, 0, -1, (0, 2)) for kd in (False, True) for c in (0.0, 1.0)]


def _moments_ref(fn):
    return lambda x, axis=None, keepdims=False, correction=0.0: np.asarray(
        fn(x, axis=axis, keepdims=keepdims, ddof=correction))


def _bool_reduce_samples(rng, dtype, small):
    return [Sample((ties(rng, (3, 4, 5), dtype),), {"axis": ax, "keepdims": kd}, f"axis={ax}-kd={kd}")
            for ax in (None, 0, -1, (0, 2)) for kd in (False, True)] + [Sample((ties(rng, (), dtype),), {}, "0d")]


def _count_nonzero_ref(x, axis=None, keepdims=False):
    return np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims), dtype=np.int64)


def _cumulative_samples(rng, dtype, small):
    x = rand(rng, (3, 4, 5) if not small else (2, 3, 4), dtype)
    out = [Sample((x,), {"axis": ax, "include_initial": ii}, f"axis={ax}-init={ii}")
           for ax in (0, -1, 1) for ii in (False, True)]
    return out + [Sample((rand(rng, (6,), dtype),), {}, "1d"),
                  Sample((rand(rng, (0, 3), dtype),), {"axis": 0, "include_initial": True}, "empty")]


def _cumulative_ref(fn):
    return lambda x, axis=None, include_initial=False: fn(x, axis=axis, include_initial=include_initial)


CASES.update({
    "full_like": Case("core", _full_like_samples, _full_like_ref, ALL),
    "prod": Case("reduce", _prod_samples, ew(np.prod), ALL, grad=(0,)),
    "any": Case("reduce", _bool_reduce_samples, ew(np.any), BOOL_INTS + FLOATS),
    "all": Case("reduce", _bool_reduce_samples, ew(np.all), BOOL_INTS + FLOATS),
    "var": Case("reduce", _moments_samples, _moments_ref(np.var), ALL, grad=(0,), rtol32=1e-4),
    "std": Case("reduce", _moments_samples, _moments_ref(np.std), ALL, grad=(0,), rtol32=1e-4),
    "argmin": Case("reduce", _reduce_samples(int_axis_only=True),
                   lambda x, axis=None, keepdims=False: np.asarray(np.argmin(x, axis=axis, keepdims=keepdims)), ALL),
    "count_nonzero": Case("reduce", _bool_reduce_samples, _count_nonzero_ref, BOOL_INTS + FLOATS),
    "cumulative_sum": Case("reduce", _cumulative_samples, _cumulative_ref(np.cumulative_sum), ALL, grad=(0,),
                           rtol32=1e-4),
    "cumulative_prod": Case("reduce", _cumulative_samples, _cumulative_ref(np.cumulative_prod), ALL,
                            rtol32=1e-4),
})
CASES["zeros_like"] = Case("core", _like_dtype_samples, ew(np.zeros_like), ALL)
CASES["ones_like"] = Case("core", _like_dtype_samples, ew(np.ones_like), ALL)


def _flip_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 4), dtype)
    return [Sample((x,), {"axis": a}, f"axis={a}") for a in (None, 0, -1, (0, 2))] + [
        Sample((rand(rng, (), dtype),), {}, "0d")]


def _roll_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 4), dtype)
    return [Sample((x,), {"shift": 1}, "flat"), Sample((x,), {"shift": (1, -2), "axis": (0, 2)}, "two-axes"),
            Sample((x,), {"shift": 5, "axis": -1}, "wrap"), Sample((x,), {"shift": -1, "axis": (0, 1)}, "one-shift")]


def _along_samples(rng, dtype, small):
    x = rand(rng, (4, 3, 2), dtype)
    return [Sample((x, rng.integers(0, 3, (4, 5, 2))), {"axis": 1}, "axis1"),
            Sample((x, rng.integers(-2, 2, (4, 3, 1))), {}, "axis-1-negative"),
            Sample((x, rng.integers(0, 4, (2, 1, 2))), {"axis": 0}, "axis0-broadcast")]


def _along_ref(x, indices, axis=-1):
    return np.take_along_axis(x, indices, axis=axis)


def _along_grad_samples(rng, dtype, small):
    out = []
    for s in _along_samples(rng, dtype, small):
        x, idx = s.args
        out.append(Sample((rand(rng, _along_ref(x, idx, **s.params).shape, dtype), x, idx), s.params, s.name))
    return out


def _along_grad_ref(g, like, indices, axis=-1):
    res = np.zeros(like.shape, g.dtype)
    ax = axis % like.ndim
    for pos in np.ndindex(*g.shape):
        at = list(pos)
        at[ax] = indices[tuple(p if indices.shape[i] > 1 else 0 for i, p in enumerate(pos))]
        res[tuple(at)] += g[pos]
    return res


def _sort_samples(gen):
    def samples(rng, dtype, small):
        x = gen(rng, (3, 5) if small else (4, 6, 5), dtype)
        return [Sample((x,), p, f"{p}") for p in ({}, {"axis": 0}, {"descending": True},
                                                    {"axis": 1, "descending": True, "stable": False})] + [
            Sample((gen(rng, (7,), dtype),), {}, "1d"), Sample((gen(rng, (0, 3), dtype),), {}, "empty")]

    return samples


def _sort_ref(x, axis=-1, descending=False, stable=True):
    return np.take_along_axis(x, _argsort_ref(x, axis, descending), axis=axis)


def _argsort_ref(x, axis=-1, descending=False, stable=True):
    # stable descending: the stable ascending order of -x (the sample values are small, no overflow)
    return np.argsort(-x if descending else x, axis=axis, kind="stable").astype(np.int64)


def _distinct(rng, shape, dtype):
    return (rng.permutation(int(np.prod(shape))).reshape(shape) - 3).astype(dtype)


def _searchsorted_samples(rng, dtype, small):
    x1 = np.sort(ties(rng, (9,), dtype))
    return [Sample((x1, ties(rng, s, dtype)), p, f"{s}-{p}") for s in ((4,), (2, 3), ())
            for p in ({}, {"side": "right"})]


CASES.update({
    "flip": Case("sorting", _flip_samples, lambda x, axis=None: np.flip(x, axis=axis), ALL, grad=(0,)),
    "roll": Case("sorting", _roll_samples, lambda x, shift, axis=None: np.roll(x, shift, axis=axis), ALL, grad=(0,)),
    "take_along_axis": Case("sorting", _along_samples, _along_ref, ALL, grad=(0,)),
    "take_along_axis_grad": Case("sorting", _along_grad_samples, _along_grad_ref, ALL),
    "sort": Case("sorting", _sort_samples(_distinct), _sort_ref, ALL, grad=(0,)),
    "argsort": Case("sorting", _sort_samples(ties), _argsort_ref, ALL),
    "searchsorted": Case("sorting", _searchsorted_samples,
                         lambda x1, x2, side="left": np.asarray(np.searchsorted(x1, x2, side=side), dtype=np.int64),
                         ALL),
    "unique_values": Case("sorting", unary(ties, shapes=((3, 4), (7,), (), (0, 3))), lambda x: np.unique(x), ALL,
                          data_dependent=True),
})


# -- Array API, second slice: clip, isin, unique_all ------------------------------------------------------
def _clip_samples(rng, dtype, small):
    x = away_from_zero(rng, (3, 4), dtype)
    out = [Sample((x, np.asarray(-0.5 if np.dtype(dtype).kind == "f" else -2, dtype),
                   np.asarray(0.7 if np.dtype(dtype).kind == "f" else 3, dtype)), {}, "scalars")]
    lo = rand(rng, (4,), dtype) - 1
    hi = lo + 1.5 if np.dtype(dtype).kind == "f" else lo + 2
    out.append(Sample((x, lo.astype(dtype), hi.astype(dtype)), {}, "broadcast-arrays"))
    return out


def _unique_all_ref(x):
    v, i, inv, c = np.unique(x.reshape(-1), return_index=True, return_inverse=True, return_counts=True)
    return v, i.astype(np.int64), inv.reshape(x.shape).astype(np.int64), c.astype(np.int64)


def _isin_samples(rng, dtype, small):
    return [Sample((ties(rng, (3, 4), dtype), ties(rng, (3,), dtype)), {"invert": inv}, f"invert={inv}")
            for inv in (False, True)] + [Sample((ties(rng, (), dtype), ties(rng, (2, 2), dtype)), {}, "0d")]


CASES.update({
    "clip": Case("math", _clip_samples, lambda x, lo, hi: np.clip(x, lo, hi).astype(x.dtype), ALL, grad=(0, 1, 2)),
    "isin": Case("sorting", _isin_samples, lambda a, b, invert=False: np.isin(a, b, invert=invert), ALL),
    "unique_all": Case("sorting", unary(ties, shapes=((3, 4), (7,), (), (0, 3))), _unique_all_ref, ALL,
                       data_dependent=True),
})


# -- linalg (lazyarray/ops/linalg.py) ---------------------------------------------------------------------------
def _well_conditioned(rng, shape, dtype):
    n = shape[-1]
    a = rand(rng, shape, dtype) * 0.3
    return (a + np.eye(n) * 2).astype(dtype)


def _spd(rng, shape, dtype):
    a = rand(rng, shape, dtype)
    return (a @ np.swapaxes(a, -1, -2) + np.eye(shape[-1]) * shape[-1]).astype(dtype)


def _mat_samples(gen, shapes=((3, 3), (2, 4, 4)), params=({},)):
    def samples(rng, dtype, small):
        return [Sample((gen(rng, s, dtype),), dict(p), f"{s}" + (f"-{p}" if p else ""))
                for s in shapes for p in params]
    return samples


def _solve_samples(rng, dtype, small):
    a = _well_conditioned(rng, (3, 3), dtype)
    return [Sample((a, rand(rng, (3,), dtype)), {}, "vector"), Sample((a, rand(rng, (3, 2), dtype)), {}, "matrix"),
            Sample((_well_conditioned(rng, (2, 3, 3), dtype), rand(rng, (2, 3, 2), dtype)), {}, "stack")]


def _rect(rng, shape, dtype):
    return rand(rng, shape, dtype)


def _np_float(x):
    return x if x.dtype.kind in "fc" else x.astype(np.float64)


def _cross_samples(rng, dtype, small):
    return [Sample((rand(rng, (4, 3), dtype), rand(rng, (4, 3), dtype)), {}, "rows"),
            Sample((rand(rng, (3, 2), dtype), rand(rng, (3, 1), dtype)), {"axis": 0}, "axis0")]


def _vector_norm_ref(x, axis=None, keepdims=False, ord=2):
    xf = _np_float(x)
    if axis is None:
        r = np.linalg.norm(xf.reshape(-1), ord=ord)
        r = np.reshape(r, (1,) * x.ndim) if keepdims else r
    elif isinstance(axis, int):
        r = np.linalg.norm(xf, ord=ord, axis=axis, keepdims=keepdims)
    else:
        r = np.sum(np.abs(xf) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    return np.asarray(r)


_LINALG_RECT = ((3, 4), (2, 4, 3))
CASES.update({
    "inv": Case("linalg", _mat_samples(_well_conditioned), lambda x: np.linalg.inv(x), FLOATS, grad=(0,),
                rtol32=1e-4),
    "det": Case("linalg", _mat_samples(_well_conditioned), lambda x: np.asarray(np.linalg.det(x)), FLOATS,
                grad=(0,), rtol32=1e-4),
    "slogdet": Case("linalg", _mat_samples(_well_conditioned), lambda x: tuple(np.linalg.slogdet(x)), FLOATS,
                    rtol32=1e-4),
    "solve": Case("linalg", _solve_samples, lambda a, b: np.linalg.solve(a, b), FLOATS, grad=(0, 1), rtol32=1e-4),
    "cholesky": Case("linalg", _mat_samples(_spd, params=({}, {"upper": True})),
                     lambda x, upper=False: np.swapaxes(np.linalg.cholesky(x), -1, -2) if upper else np.linalg.cholesky(x),
                     FLOATS, grad=(0,), rtol32=1e-4),
    "qr": Case("linalg", _mat_samples(_rect, _LINALG_RECT, ({}, {"mode": "complete"})),
               lambda x, mode="reduced": tuple(np.linalg.qr(x, mode=mode)), FLOATS, rtol32=1e-4),
    "svd": Case("linalg", _mat_samples(_rect, _LINALG_RECT, ({}, {"full_matrices": False})),
                lambda x, full_matrices=True: tuple(np.linalg.svd(x, full_matrices=full_matrices)), FLOATS, rtol32=1e-4),
    "svdvals": Case("linalg", _mat_samples(_rect, _LINALG_RECT), lambda x: np.linalg.svd(x, compute_uv=False),
                    FLOATS, rtol32=1e-4),
    "eigh": Case("linalg", _mat_samples(_spd), lambda x: tuple(np.linalg.eigh(x)), FLOATS, rtol32=1e-4),
    "eigvalsh": Case("linalg", _mat_samples(_spd), lambda x: np.linalg.eigvalsh(x), FLOATS, rtol32=1e-4),
    "pinv": Case("linalg", _mat_samples(_rect, _LINALG_RECT),
                 lambda x, rtol=-1.0: np.linalg.pinv(x, rcond=max(x.shape[-2:]) * np.finfo(x.dtype).eps), FLOATS,
                 rtol32=1e-4),
    "matrix_rank": Case("linalg", _mat_samples(_rect, _LINALG_RECT, ({}, {"rtol": 0.5})),
                        lambda x, rtol=None: np.asarray(np.linalg.matrix_rank(
                            x, rtol=rtol if rtol is not None and rtol >= 0 else None), dtype=np.int64), ALL),
    "matrix_power": Case("linalg", _mat_samples(_well_conditioned, params=({"n": 3}, {"n": 0}, {"n": -2})),
                         lambda x, n=1: np.linalg.matrix_power(_np_float(x) if n < 0 else x, n), FLOATS, rtol32=1e-4),
    "trace": Case("linalg", _mat_samples(_rect, _LINALG_RECT, ({}, {"offset": 1}, {"offset": -2})),
                  lambda x, offset=0: np.asarray(np.trace(x, offset=offset, axis1=-2, axis2=-1)), ALL),
    "diagonal": Case("linalg", _mat_samples(_rect, _LINALG_RECT, ({}, {"offset": 1}, {"offset": -1})),
                     lambda x, offset=0: np.diagonal(x, offset=offset, axis1=-2, axis2=-1), ALL),
    "cross": Case("linalg", _cross_samples, lambda a, b, axis=-1: np.cross(a, b, axis=axis), ALL),
    "vector_norm": Case("linalg", _mat_samples(_rect, ((3, 4), (2, 3, 4)), (
        {}, {"axis": 1}, {"axis": -1, "keepdims": True, "ord": 1}, {"axis": (0, 1), "ord": 3},
        {"ord": float("inf")}, {"keepdims": True, "ord": 0})), _vector_norm_ref, FLOATS),
    "matrix_norm": Case("linalg", _mat_samples(_rect, _LINALG_RECT, (
        {}, {"ord": "nuc"}, {"ord": 1, "keepdims": True}, {"ord": float("-inf")}, {"ord": 2})),
        lambda x, keepdims=False, ord="fro": np.asarray(np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)),
        FLOATS, rtol32=1e-4),
})


# -- fft (lazyarray/ops/fft.py) ------------------------------------------------------------------------------------
_FFT_1D_PARAMS = ({}, {"n": 6}, {"n": 9, "axis": 0}, {"norm": "ortho"}, {"n": 3, "norm": "forward"})
_FFT_ND_PARAMS = ({}, {"axes": (0,)}, {"s": (5, 3), "axes": (-1, 0), "norm": "ortho"},
                  {"s": (2, -1), "axes": (-2, -1), "norm": "forward"})


def _fft_samples(params, shapes=((8,), (3, 5)), small_shapes=((5,), (2, 3))):
    def samples(rng, dtype, small):
        return [Sample((rand(rng, s, dtype),), dict(p), f"{s}-{p}")
                for s in (small_shapes if small else shapes) for p in params
                if p.get("axis", -1) < len(s) and all(a < len(s) for a in p.get("axes", ()))]
    return samples


def _fft_nd_ref(fname, last_full=False):
    """numpy.fft.<fname> with the standard's -1 in s (the input's size) spelled out."""
    def ref(x, s=None, axes=None, norm="backward"):
        if s is not None:
            ax = [a % x.ndim for a in axes]
            full = [2 * (x.shape[a] - 1) if last_full and i == len(ax) - 1 else x.shape[a] for i, a in enumerate(ax)]
            s = [f if v == -1 else v for v, f in zip(s, full)]
        return getattr(np.fft, fname)(x, s=s, axes=axes, norm=norm)
    return ref


def _fft_1d_ref(fname):
    return lambda x, **params: getattr(np.fft, fname)(x, **params)


_FFT_1D = _fft_samples(_FFT_1D_PARAMS)
_FFT_ND = _fft_samples(_FFT_ND_PARAMS, ((3, 4), (2, 3, 4)), ((3, 2), (2, 2, 3)))
_SHIFT = _fft_samples(({}, {"axes": (0,)}, {"axes": (-1, 0)}), ((5,), (4, 5), (2, 3, 4)), ((5,), (2, 3)))
CASES.update({
    "fft": Case("fft", _FFT_1D, _fft_1d_ref("fft"), FLOATS + COMPLEX, grad=(0,), rtol32=1e-4),
    "ifft": Case("fft", _FFT_1D, _fft_1d_ref("ifft"), FLOATS + COMPLEX, grad=(0,), rtol32=1e-4),
    "fftn": Case("fft", _FFT_ND, _fft_nd_ref("fftn"), FLOATS + COMPLEX, grad=(0,), rtol32=1e-4),
    "ifftn": Case("fft", _FFT_ND, _fft_nd_ref("ifftn"), FLOATS + COMPLEX, grad=(0,), rtol32=1e-4),
    "rfft": Case("fft", _FFT_1D, _fft_1d_ref("rfft"), FLOATS, grad=(0,), rtol32=1e-4),
    "irfft": Case("fft", _FFT_1D, _fft_1d_ref("irfft"), COMPLEX, rtol32=1e-4),
    "rfftn": Case("fft", _FFT_ND, _fft_nd_ref("rfftn"), FLOATS, grad=(0,), rtol32=1e-4),
    "irfftn": Case("fft", _FFT_ND, _fft_nd_ref("irfftn", last_full=True), COMPLEX, rtol32=1e-4),
    "hfft": Case("fft", _FFT_1D, _fft_1d_ref("hfft"), COMPLEX, rtol32=1e-4),
    "ihfft": Case("fft", _FFT_1D, _fft_1d_ref("ihfft"), FLOATS, rtol32=1e-4),
    "fftshift": Case("fft", _SHIFT, lambda x, axes=None: np.fft.fftshift(x, axes=axes), FLOATS + COMPLEX + INTS,
                     grad=(0,)),
    "ifftshift": Case("fft", _SHIFT, lambda x, axes=None: np.fft.ifftshift(x, axes=axes), FLOATS + COMPLEX + INTS,
                      grad=(0,)),
})


# -- transformer ops (lazyarray/ops/norm.py) ----------------------------------------------------------------
def _layer_norm_samples(rng, dtype, small):
    out = [Sample((rand(rng, (3, 5), dtype), rand(rng, (5,), dtype), rand(rng, (5,), dtype)), {}, "2d"),
           Sample((rand(rng, (2, 4, 3), dtype), rand(rng, (4,), dtype), rand(rng, (4,), dtype)),
                  {"axis": 1, "eps": 1e-3}, "axis=1"),
           Sample((rand(rng, (2, 3, 6), dtype), rand(rng, (6,), dtype), rand(rng, (6,), dtype)), {}, "3d")]
    if not small:  # rows whose mean is large against their spread (a one-pass variance loses them)
        out.append(Sample(((rand(rng, (4, 8), "float64") + 300.0).astype(dtype), rand(rng, (8,), dtype),
                           rand(rng, (8,), dtype)), {}, "offset"))
    return out


def _layer_norm_ref(x, gamma, beta, axis=-1, eps=1e-5):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axis, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = -1
    y = (x64 - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)
    return y.astype(x.dtype)


def _layer_norm_grad_samples(rng, dtype, small):
    return [Sample((rand(rng, s.args[0].shape, dtype),) + s.args[:2], s.params, s.name)
            for s in _layer_norm_samples(rng, dtype, small)]


def _layer_norm_grad_ref(g, x, gamma, axis=-1, eps=1e-5):
    """The three gradients from the explicit Jacobian of each row (not the kernel's formula)."""
    g64, x64 = (np.moveaxis(a.astype(np.float64), axis, -1) for a in (g, x))
    gm = gamma.astype(np.float64)
    n = x64.shape[-1]
    xs, gs = x64.reshape(-1, n), g64.reshape(-1, n)
    dx = np.empty_like(xs)
    dgamma, dbeta = np.zeros(n), np.zeros(n)
    for r in range(xs.shape[0]):
        c = xs[r] - xs[r].mean()
        rstd = 1.0 / np.sqrt((c * c).mean() + eps)
        xhat = c * rstd
        # d xhat_i / d x_j = rstd * (delta_ij - 1/n - xhat_i xhat_j / n)
        jac = rstd * (np.eye(n) - 1.0 / n - np.outer(xhat, xhat) / n)
        dx[r] = jac.T @ (gs[r] * gm)
        dgamma += gs[r] * xhat
        dbeta += gs[r]
    dx = np.moveaxis(dx.reshape(x64.shape), -1, axis)
    return dx.astype(x.dtype), dgamma.astype(x.dtype), dbeta.astype(x.dtype)


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def gelu_ref(x, approximation="none"):
    """GELU in float64: math.erf elementwise (exact) or the tanh formula."""
    x64 = x.astype(np.float64)
    if approximation == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1.0 + _ERF(x64 / np.sqrt(2.0)))
    return np.asarray(y).astype(x.dtype)


def _gelu_grad_ref(g, x, approximation="none"):
    x64 = x.astype(np.float64)
    if approximation == "tanh":
        u = np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)
        du = np.sqrt(2.0 / np.pi) * (1.0 + 3 * 0.044715 * x64 ** 2)
        d = 0.5 * (1.0 + np.tanh(u)) + 0.5 * x64 * du / np.cosh(u) ** 2
    else:
        d = 0.5 * (1.0 + _ERF(x64 / np.sqrt(2.0))) + x64 * np.exp(-x64 ** 2 / 2) / np.sqrt(2.0 * np.pi)
    return np.asarray(g * d).astype(np.result_type(g, x))


_GELU_PARAMS = ({}, {"approximation": "tanh"})


def _gelu_grad_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype), rand(rng, s, dtype) * 3), dict(p), f"{s}-{p}")
            for s in ((3, 4), (2, 3, 5), ()) for p in _GELU_PARAMS]


def _masked_softmax_samples(rng, dtype, small):
    x = rand(rng, (2, 3, 4), dtype) * 3
    full = rng.random((2, 3, 4)) < 0.6
    full[0, 1] = False  # a fully masked row
    keys = rng.random((2, 1, 4)) < 0.7
    keys[1, 0, :] = [True, False, True, False]
    return [Sample((x, full), {}, "same-shape"), Sample((x, keys), {}, "broadcast-keys"),
            Sample((x, np.tril(np.ones((3, 4), bool))), {}, "causal"),
            Sample((x, full), {"axis": 1}, "axis=1"),
            Sample((np.array([[1000.0, 0.0, -1000.0]], dtype=dtype), np.array([True, True, False])), {}, "large")]


def _masked_softmax_ref(x, mask, axis=-1):
    mask = np.broadcast_to(mask, x.shape)
    e = np.where(mask, np.exp(x.astype(np.float64) - np.where(mask, x, -np.inf).max(axis=axis, keepdims=True)
                              .clip(min=-1e300)), 0.0)
    s = e.sum(axis=axis, keepdims=True)
    return (e / np.where(s == 0, 1.0, s)).astype(x.dtype)


CASES.update({
    "layer_norm": Case("norm", _layer_norm_samples, _layer_norm_ref, FLOATS, grad=(0, 1, 2), rtol32=1e-4),
    "layer_norm_grad": Case("norm", _layer_norm_grad_samples, _layer_norm_grad_ref, FLOATS, rtol32=1e-4),
    "gelu": Case("norm", unary(params=_GELU_PARAMS), gelu_ref, FLOATS, grad=(0,)),
    "gelu_grad": Case("norm", _gelu_grad_samples, _gelu_grad_ref, FLOATS),
    "masked_softmax": Case("norm", _masked_softmax_samples, _masked_softmax_ref, FLOATS, grad=(0,)),
})


def _gelu_with_grad_samples(rng, dtype, small):
    return [Sample((rand(rng, s, dtype) * 3,), dict(p), f"{s}-{p}")
            for s in ((3, 4), (2, 3, 5), ()) for p in _GELU_PARAMS]


def _gelu_with_grad_ref(x, approximation="none"):
    return gelu_ref(x, approximation), _gelu_grad_ref(np.ones_like(x), x, approximation)


CASES["gelu_with_grad"] = Case("norm", _gelu_with_grad_samples, _gelu_with_grad_ref, FLOATS)


# -- nn.fused_attention (lazyarray/ops/attention.py): chain codes 10 * op + position of the scores
def _fused_attention_samples(rng, dtype, small):
    q, k, v = rand(rng, (2, 3, 4, 5), dtype), rand(rng, (2, 3, 5, 6), dtype), rand(rng, (2, 3, 6, 2), dtype)
    scale, mask = np.asarray(0.4, dtype), rand(rng, (2, 1, 1, 6), dtype)
    causal, fill = np.triu(np.ones((4, 6), bool), 1), np.asarray(-np.inf, dtype)
    return [Sample((q, k, v, []), {}, "bare"),
            Sample((q, k, v, [scale, mask]), {"score_ops": (0, 20)}, "scale-mask"),
            Sample((q, k, v, [scale, scale, causal, fill]), {"q_ops": (0,), "k_ops": (1,), "score_ops": (42,)},
                   "split-scale-causal"),
            Sample((q[0, 0], k[0], v[:1], []), {}, "broadcast-batch"),
            Sample((q, k, v, []), {"out_axes": (0, 2, 1, 3), "out_shape": (2, 4, 6)}, "heads-merged")]


def _fused_attention_ref(q, k, v, extras, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=()):
    names, it = ("multiply", "divide", "add", "subtract", "where"), iter(extras)

    def chain(x, codes):
        for c in codes:
            args = [next(it) for _ in range(2 if c // 10 == 4 else 1)]
            args.insert(c % 10, x)
            x = getattr(np, names[c // 10])(*args)
        return x

    q64, k64 = chain(q.astype(np.float64), q_ops), chain(k.astype(np.float64), k_ops)
    s = chain(q64 @ k64, score_ops)
    e = np.exp(s - s.max(-1, keepdims=True))
    y = ((e / e.sum(-1, keepdims=True)) @ v).astype(q.dtype)
    return y.transpose(out_axes).reshape(out_shape) if out_axes else y


CASES["fused_attention"] = Case("norm", _fused_attention_samples, _fused_attention_ref, FLOATS, rtol32=1e-4)


def _rms_norm_samples(rng, dtype, small):
    return [Sample((rand(rng, (3, 5), dtype), rand(rng, (5,), dtype)), {}, "2d"),
            Sample((rand(rng, (2, 4, 33), dtype) + 3, rand(rng, (33,), dtype)), {"eps": 1e-3}, "3d-offset"),
            Sample((rand(rng, (7,), dtype), rand(rng, (7,), dtype)), {}, "1d")]


def _rms_norm_ref(x, gamma, eps=1e-6):
    x64 = x.astype(np.float64)
    return (gamma * x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps)).astype(x.dtype)


CASES["rms_norm"] = Case("norm", _rms_norm_samples, _rms_norm_ref, FLOATS, rtol32=1e-4)


def _ln_stats64(x, axis, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axis, keepdims=True)
    rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(axis=axis, keepdims=True) + eps)
    return (x64 - mean) * rstd, rstd


def _layer_norm_with_stats_ref(x, gamma, beta, axis=-1, eps=1e-5):
    xhat, rstd = _ln_stats64(x, axis, eps)
    return _layer_norm_ref(x, gamma, beta, axis, eps), xhat.astype(x.dtype), rstd.astype(x.dtype)


def _layer_norm_grad_saved_samples(rng, dtype, small):
    """(g, xhat, rstd, gamma) with the statistics of a random x (so the reference can rebuild one)."""
    out = []
    for s in _layer_norm_samples(rng, dtype, small):
        x, gamma, _ = s.args
        axis, eps = s.params.get("axis", -1), s.params.get("eps", 1e-5)
        xhat, rstd = _ln_stats64(x, axis, eps)
        out.append(Sample((rand(rng, x.shape, dtype), xhat.astype(dtype), rstd.astype(dtype), gamma),
                          {"axis": axis}, s.name))
    return out


def _layer_norm_grad_saved_ref(g, xhat, rstd, gamma, axis=-1):
    """The explicit Jacobian of each row from the given statistics: rstd (I - 1/n - xhat xhat^T / n)."""
    g64, xh, rs = (np.moveaxis(a.astype(np.float64), axis, -1) for a in (g, xhat, rstd))
    n = xh.shape[-1]
    gs, xs, rss = g64.reshape(-1, n), xh.reshape(-1, n), rs.reshape(-1)
    dx = np.empty_like(xs)
    for r in range(xs.shape[0]):
        jac = rss[r] * (np.eye(n) - 1.0 / n - np.outer(xs[r], xs[r]) / n)
        dx[r] = jac.T @ (gs[r] * gamma.astype(np.float64))
    dx = np.moveaxis(dx.reshape(xh.shape), -1, axis)
    return dx.astype(g.dtype), (gs * xs).sum(axis=0).astype(g.dtype), gs.sum(axis=0).astype(g.dtype)


CASES["layer_norm_with_stats"] = Case("norm", _layer_norm_samples, _layer_norm_with_stats_ref, FLOATS, rtol32=1e-4)
CASES["layer_norm_grad_saved"] = Case("norm", _layer_norm_grad_saved_samples, _layer_norm_grad_saved_ref, FLOATS,
                                      rtol32=1e-4)


# -- scatter (ops/scatter.py): loop references, one update at a time in order --------------------------
_SCATTER_FN = {"none": lambda a, b: b, "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
               "max": max, "min": min}


def _scatter_along_samples(rng, dtype, small):
    x = rand(rng, (4, 5, 3), dtype)
    out = []
    for red in ("none", "add", "mul", "max", "min"):
        # distinct indices along axis 1 for "none" (repeated ones: the last wins, which NumPy also does)
        idx = np.stack([rng.permutation(5)[:3] for _ in range(4 * 2)]).reshape(4, 2, 3).transpose(0, 2, 1)
        if red != "none":
            idx = rng.integers(-5, 5, (4, 3, 2))
        out.append(Sample((x, idx, rand(rng, idx.shape, dtype)), {"axis": 1, "reduce": red}, f"axis1-{red}"))
    idx0 = rng.integers(0, 4, (2, 5, 3))
    out.append(Sample((x, idx0, rand(rng, idx0.shape, dtype)), {"reduce": "add"}, "axis0-repeats"))
    return out


def _scatter_along_ref(x, indices, updates, axis=0, reduce="none"):
    res, fn = x.copy(), _SCATTER_FN[reduce]
    for pos in np.ndindex(*indices.shape):
        tgt = list(pos)
        tgt[axis] = int(indices[pos]) % x.shape[axis]
        res[tuple(tgt)] = fn(res[tuple(tgt)], updates[pos])
    return res


def _scatter_nd_samples(rng, dtype, small):
    x = rand(rng, (4, 3, 2), dtype)
    pts = np.array([[0, 1], [3, 2], [-1, 0], [1, -1]])
    out = [Sample((x, pts, rand(rng, (4, 2), dtype)), {}, "points-rows"),
           Sample((x, np.array([[[2], [0]]]), rand(rng, (1, 2, 3, 2), dtype)), {"reduce": "mul"}, "slabs-mul")]
    rep = rng.integers(0, 2, (6, 3))
    for red in ("add", "max", "min"):
        out.append(Sample((x, rep, rand(rng, (6,), dtype)), {"reduce": red}, f"repeats-{red}"))
    return out


def _scatter_nd_ref(x, indices, updates, reduce="none"):
    res, fn = x.copy(), _SCATTER_FN[reduce]
    for pos in np.ndindex(*indices.shape[:-1]):
        tgt = tuple(int(i) % n for i, n in zip(indices[pos], x.shape))
        res[tgt] = np.vectorize(fn)(res[tgt], updates[pos]) if np.ndim(updates[pos]) else fn(res[tgt], updates[pos])
    return res


CASES["scatter_along_axis"] = Case("scatter", _scatter_along_samples, _scatter_along_ref, ALL)
CASES["scatter_nd"] = Case("scatter", _scatter_nd_samples, _scatter_nd_ref, ALL)


# -- detection (ops/detection.py): a pair-at-a-time loop reference ----------------------------------------
def _nms_samples(rng, dtype, small):
    def boxes(b, n):
        lo = rng.random((b, n, 2)) * 4
        return np.concatenate([lo, lo + rng.random((b, n, 2)) * 3 + 0.1], axis=-1).astype(dtype)
    bx, sc = boxes(2, 9), rng.random((2, 3, 9)).astype(dtype)
    sc[0, 0, 4] = sc[0, 0, 2]  # a tie: the lower index first
    flipped = bx[..., [2, 3, 0, 1]]  # the other diagonal
    centre = np.concatenate([(bx[..., 2:] + bx[..., :2]) / 2, bx[..., 2:] - bx[..., :2]], axis=-1)[..., [1, 0, 3, 2]]
    return [Sample((bx, sc), {"max_per_class": 4, "iou_threshold": 0.3}, "corners"),
            Sample((flipped, sc), {"max_per_class": 9, "iou_threshold": 0.1, "score_threshold": 0.4}, "flipped-scored"),
            Sample((centre.astype(dtype), sc), {"max_per_class": 2, "iou_threshold": 0.5, "center_point_box": True},
                   "centre"),
            Sample((bx, sc), {}, "no-boxes")]


def _nms_ref(boxes, scores, max_per_class=0, iou_threshold=0.0, score_threshold=None,
             center_point_box=False):
    def corners(b):
        b = b.astype(np.float64)
        if center_point_box:
            return (b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2)
        return (min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3]))

    def iou(p, q):
        (y0, x0, y1, x1), (v0, u0, v1, u1) = corners(p), corners(q)
        h, w = min(y1, v1) - max(y0, v0), min(x1, u1) - max(x0, u0)
        if h <= 0 or w <= 0:
            return 0.0
        a, b = (y1 - y0) * (x1 - x0), (v1 - v0) * (u1 - u0)
        return h * w / (a + b - h * w)
    rows = []
    for bi in range(scores.shape[0]):
        for ci in range(scores.shape[1]):
            s = scores[bi, ci]
            cand = sorted((i for i in range(len(s)) if score_threshold is None or s[i] > score_threshold),
                          key=lambda i: (-float(s[i]), i))
            kept = []
            for i in cand:
                if len(kept) == max_per_class:
                    break
                if all(iou(boxes[bi, i], boxes[bi, k]) <= iou_threshold for k in kept):
                    kept.append(i)
            rows += [(bi, ci, k) for k in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


CASES["non_max_suppression"] = Case("detection", _nms_samples, _nms_ref, FLOATS, data_dependent=True)


# -- bitcast (ops/bitcast.py): the reference goes through the raw bytes --------------------------------------
_BITCAST_TO = {"float32": "int32", "float64": "uint64", "int32": "float32", "int64": "float64"}


def _bitcast_samples(rng, dtype, small):
    x = rand(rng, (3, 4), dtype)
    return [Sample((x,), {"dtype": _BITCAST_TO[dtype]}, "same-width"), Sample((x[:, ::2],), {"dtype": dtype}, "strided"),
            Sample((np.asarray(x[0, 0]),), {"dtype": _BITCAST_TO[dtype]}, "scalar")]


def _bitcast_ref(x, dtype):
    return np.frombuffer(np.ascontiguousarray(x).tobytes(), dtype=dtype).reshape(x.shape)


CASES["bitcast"] = Case("core", _bitcast_samples, _bitcast_ref, ALL)


# -- round_to_format (ops/narrow_format.py): bfloat16 and int4 by their definitions, float8 by ml_dtypes ---------
def _round_to_format_samples(rng, dtype, small):
    x = rand(rng, (3, 5), dtype) * (40 if dtype in FLOATS else 1)
    # float -> int4 rounding and out-of-range values are left open by ONNX (onnxruntime rounds, NumPy truncates)
    q = np.clip(np.round(x), -8, 7).astype(x.dtype)
    return [Sample((x,), {"format": "bfloat16"}, "bfloat16"), Sample((q,), {"format": "int4"}, "int4"),
            Sample((x,), {"format": "float8_e4m3fn"}, "float8-saturating"),
            Sample((x[:, ::2],), {"format": "float8_e5m2", "saturate": False}, "float8-strided")]


def _round_to_format_ref(x, format, saturate=True, round_mode="up"):
    if format == "bfloat16":  # round to nearest even on the top 16 bits of the float32
        b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
        return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    if format == "int4":  # truncate toward zero, wrap into [-8, 8)
        return ((np.trunc(x).astype(np.int64) + 8) % 16 - 8).astype(np.int8)
    import ml_dtypes
    dt = np.dtype(getattr(ml_dtypes, format))
    if saturate:
        top = float(ml_dtypes.finfo(dt).max)
        x = np.clip(x, -top, top)
    return x.astype(dt).astype(np.float32)


CASES["round_to_format"] = Case("core", _round_to_format_samples, _round_to_format_ref, ALL)


# -- image_decode (ops/image.py): Pillow decodes; the reference is Pillow's own decoding, as ONNX's ------------
def _encoded(pixels, fmt, mode=None):
    import io

    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(pixels, mode).save(buf, format=fmt)
    return np.frombuffer(buf.getvalue(), np.uint8).copy()


def _image_decode_samples(rng, dtype, small):
    pytest.importorskip("PIL")
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    return [Sample((_encoded(rgb, "PNG"),), {"pixel_format": f}, f"png-{f}") for f in ("RGB", "BGR", "Grayscale")] + [
        Sample((_encoded(rgb, "BMP"),), {"pixel_format": "BGR"}, "bmp-bgr"),
        Sample((_encoded(rgb, "JPEG"),), {"pixel_format": "Grayscale"}, "jpeg-grayscale")]


def _image_decode_ref(encoded, pixel_format="RGB"):
    import io

    from PIL import Image
    img = Image.open(io.BytesIO(encoded.tobytes()))
    if pixel_format == "Grayscale":
        return np.asarray(img.convert("L"))[:, :, None]
    rgb = np.asarray(img.convert("RGB"))
    return rgb[:, :, ::-1] if pixel_format == "BGR" else rgb


CASES["image_decode"] = Case("core", _image_decode_samples, _image_decode_ref, ("uint8",), data_dependent=True)


# -- loss labels and CTC (ops/loss.py class_labels, ops/ctc.py) -----------------------------------------------
def _class_labels_samples(rng, dtype, small):
    return [Sample((rng.integers(0, 5, (6,)).astype(dtype),), {"classes": 5}, "1d"),
            Sample((rng.integers(0, 3, (2, 3)).astype(dtype),), {"classes": 3, "loss": "SoftmaxCrossEntropyLoss"},
                   "2d")]


def _ctc_collapse(path, blank):
    """An alignment's labelling: repeats merged, then blanks dropped."""
    out, prev = [], None
    for p in path:
        if p != prev and p != blank:
            out.append(p)
        prev = p
    return out


def ctc_by_enumeration(logits, labels, data_lengths, label_lengths):
    """``-log p(labels | logits)`` per sample by enumerating every alignment (tiny inputs only)."""
    import itertools

    x = logits.astype(np.float64)
    T, N, C = x.shape
    out = []
    for n in range(N):
        t_n, u_n = int(data_lengths[n]), int(label_lengths[n])
        lp = x[:t_n, n] - np.log(np.exp(x[:t_n, n]).sum(-1, keepdims=True))
        want = [int(v) for v in labels[n, :u_n]]
        total = -np.inf
        for path in itertools.product(range(C), repeat=t_n):
            if _ctc_collapse(path, C - 1) == want:
                total = np.logaddexp(total, sum(lp[t, path[t]] for t in range(t_n)))
        out.append(-total)
    return np.array(out).astype(logits.dtype)


def _ctc_samples(rng, dtype, small):
    labels = np.array([[0, 1, -1], [1, 1, 0], [2, -1, -1], [0, 0, -1]])
    return [Sample((rand(rng, (4, 4, 4), dtype), labels, np.array([4, 4, 3, 4]), np.array([2, 3, 1, 2])), {},
                   "padded"),
            Sample((rand(rng, (3, 2, 3), dtype), np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([3.0, 2.0]),
                    np.array([2, 0])), {}, "float-labels"),
            Sample((rand(rng, (3, 1, 3), dtype), np.array([[0, 0]]), np.array([3]), np.array([2])), {}, "repeat")]


def ctc_grad_by_enumeration(logits, labels, data_lengths, label_lengths, g):
    """The gradient by enumeration: ``softmax - sum over the labelling's alignments of their posterior
    at (t, class)``, times ``g``; zero past a sample's length."""
    import itertools

    x = logits.astype(np.float64)
    T, N, C = x.shape
    grad = np.zeros_like(x)
    for n in range(N):
        t_n, u_n = int(data_lengths[n]), int(label_lengths[n])
        lp = x[:t_n, n] - np.log(np.exp(x[:t_n, n]).sum(-1, keepdims=True))
        want = [int(v) for v in labels[n, :u_n]]
        paths = [p for p in itertools.product(range(C), repeat=t_n) if _ctc_collapse(p, C - 1) == want]
        logps = np.array([sum(lp[t, p[t]] for t in range(t_n)) for p in paths])
        post = np.exp(logps - np.logaddexp.reduce(logps))
        occ = np.zeros((t_n, C))
        for p, w in zip(paths, post):
            occ[np.arange(t_n), list(p)] += w
        grad[:t_n, n] = (np.exp(lp) - occ) * g[n]
    return grad.astype(logits.dtype)


def _ctc_grad_samples(rng, dtype, small):
    return [Sample((*s.args, rand(rng, (s.args[0].shape[1],), dtype)), {}, s.name) for s in _ctc_samples(rng, dtype, small)]


CASES.update({
    "class_labels": Case("nn", _class_labels_samples, lambda labels, classes, loss="labels": labels.astype(np.int64),
                         ("float32", "float64", "int32", "int64")),
    "ctc_loss": Case("nn", _ctc_samples, ctc_by_enumeration, FLOATS, grad=(0,), rtol32=1e-4),
    "ctc_loss_grad": Case("nn", _ctc_grad_samples, ctc_grad_by_enumeration, FLOATS, rtol32=1e-4),
})
