"""Every implementation of the ops whose fast paths live in kernels/ (relu, relu_grad, the max pools,
the pooled batch norm, batch_norm_relu, mean, softmax, log_softmax, the softmax cross entropy, gelu and its gradients,
conv2d's gradients, conv2d_transpose): the input's shape (and whether numba runs, ``kernel_path``)
forces it, ``explain()`` names it, ``kernels.choose`` names the same, and its values equal the
op's reference kernel in float32 and float64, for a view input and an empty dim where the op allows."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.aval import Aval
from lazyarray.ops import registry

RNG = np.random.default_rng(7)


def _x(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _pool_stats(c, dtype):
    return [np.abs(_x(c, dtype=dtype)) + 0.5, _x(c, dtype=dtype), _x(c, dtype=dtype), np.abs(_x(c, dtype=dtype)) + 1]


# (op, its arrays for a dtype, params, the implementation with numba / without)
def _cases(dtype):
    big = (640, 600)  # 384,000 values: over softmax's 1 MiB and gelu's 4 chunks in float32
    g4, x4 = _x(8, 3, 4, 4, dtype=dtype), _x(8, 3, 8, 8, dtype=dtype)
    w = _x(4, 3, 3, 3, dtype=dtype)
    labels = RNG.integers(0, big[1], big[0])
    return [
        ("relu", [_x(64, 80, dtype=dtype)], {}, ("compiled", "zero_rows")),
        ("relu", [_x(3, 4, dtype=dtype)], {}, ("maximum", "maximum")),
        ("relu_grad", [_x(64, 80, dtype=dtype), _x(64, 80, dtype=dtype)], {}, ("compiled", "two_passes")),
        ("max_pool2d", [x4], {"kernel": (2, 2)}, ("compiled", "folds")),
        ("max_pool2d_grad", [g4, x4], {"kernel": (2, 2)}, ("compiled", "windows")),
        ("batch_norm_max_pool2d", [x4] + _pool_stats(3, dtype), {"relu": True}, ("compiled", "pool_first")),
        ("batch_norm_relu", [x4] + _pool_stats(3, dtype), {}, ("compiled", "ufuncs")),
        ("mean", [x4], {"axis": (2, 3), "keepdims": True}, ("compiled", "ufuncs")),
        ("mean", [_x(8, 3, 12, 12, dtype=dtype)], {"axis": (2, 3)}, ("ufuncs", "ufuncs")),
        ("softmax", [_x(*big, dtype=dtype)], {}, ("rows", "rows")),
        ("log_softmax", [_x(*big, dtype=dtype)], {}, ("rows", "rows")),
        ("softmax_cross_entropy", [_x(*big, dtype=dtype), labels], {}, ("rows", "rows")),
        # (float32: one compiled loop, kernels/gelu.py's compiled; float64 computes erf with SciPy's)
        ("gelu", [_x(*big, dtype=dtype)], {}, ("compiled" if dtype == np.float32 else "chunks", "chunks")),
        ("gelu_grad", [_x(*big, dtype=dtype), _x(*big, dtype=dtype)], {}, ("chunks", "chunks")),
        ("conv2d_input_grad", [_x(8, 4, 6, 6, dtype=dtype), w, x4], {}, ("batch_last", "batch_last")),
        ("conv2d_input_grad", [_x(8, 4, 6, 6, dtype=dtype), _x(4, 1, 3, 3, dtype=dtype), _x(8, 4, 8, 8, dtype=dtype)],
         {"groups": 4}, ("col2im", "col2im")),
        ("conv2d_weight_grad", [_x(8, 4, 6, 6, dtype=dtype), x4], {"kernel": (3, 3)}, ("batch_last", "batch_last")),
        ("conv2d_transpose", [_x(2, 4, 5, 5, dtype=dtype), _x(4, 3, 3, 3, dtype=dtype)], {"stride": (2, 2)},
         ("col2im", "col2im")),
    ]


def _ids():
    return [f"{c[0]}-{c[3][1]}-{i}" for i, c in enumerate(_cases(np.float32))]


def _explained(op, arrays, params):
    """The implementation ``explain()`` names for one step of ``op`` over these arrays."""
    names = [f"a{i}" for i in range(len(arrays))]
    syms = [la.sym.var(n, shape=a.shape, dtype=a.dtype) for n, a in zip(names, arrays)]
    prog = la.CachedOp(getattr(la.sym, op)(*syms, **params))
    exp = prog.explain(*[la.array(a) for a in arrays])
    (step,) = [s for s in exp.steps if s["op[implementation]"].split("[")[0].split(".")[-1] == op]
    return step["op[implementation]"].split("[", 1)[1].rstrip("]").split(",")[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(_cases(np.float32))), ids=_ids())
def test_each_impl_is_named_by_explain_and_equals_the_reference(kernel_path, dtype, case):
    op, arrays, params, names = _cases(dtype)[case]
    want_name = names[0] if kernel_path == "compiled" else names[1]
    opdef = registry.get(op)
    assert kernels.choose(op, np, *arrays, **params).impl.name == want_name
    assert any(impl.name == want_name for impl in kernels.IMPLS[op])
    assert _explained(op, arrays, params) == want_name
    got = opdef.bind(np)(*arrays, **params)
    want = opdef.kernel(np, *arrays, **params)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for g, r in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_with_grad_runs_in_chunks_and_equals_the_reference(dtype):
    x = _x(640, 600, dtype=dtype)
    op = registry.get("gelu_with_grad")
    assert kernels.choose(op, np, x).impl.name == "chunks"
    with la.profile() as prof:
        y, d = la.nn.gelu_with_grad(la.array(x)) if hasattr(la.nn, "gelu_with_grad") else (None, None)
    got = op.bind(np)(x)
    want = op.kernel(np, x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    if y is not None:
        assert [e.impl for e in prof.events] == ["chunks"]


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("op,make,params", [
    ("relu", lambda: _x(64, 160)[:, ::2], {}),  # a view no flat walk covers: maximum, by the fallbacks
    ("max_pool2d", lambda: _x(8, 3, 8, 16)[..., ::2], {"kernel": (2, 2)}),
    ("softmax", lambda: _x(640, 1200)[:, ::2], {}),
    ("gelu", lambda: _x(640, 1200)[:, ::2], {}),
    ("relu", lambda: np.zeros((0, 5000), np.float32), {}),  # empty dims
    ("max_pool2d", lambda: np.zeros((0, 3, 8, 8), np.float32), {"kernel": (2, 2)}),
    ("softmax", lambda: np.zeros((0, 7), np.float32), {}),
    ("gelu", lambda: np.zeros((3, 0), np.float32), {}),
])
def test_views_and_empty_dims_equal_the_reference(op, make, params):
    x = make()
    opdef = registry.get(op)
    with la.profile() as prof:
        got = opdef.bind(np)(x, **params)
        ran = prof.take_choice()
    np.testing.assert_array_equal(got, opdef.kernel(np, x.copy(), **params))
    choice = kernels.choose(op, np, x, **params)
    assert ran == "reference" if choice.impl.name == "reference" else ran.split(",")[0] in \
        {i.name for i in kernels.IMPLS[op]}


def test_the_layout_pass_asks_the_kernels_layer():
    """Batch-last layouts follow the implementations' declared layouts (``kernels.takes_batch_last``)."""
    def aval(*shape):
        return Aval(shape, np.dtype(np.float32), la.cpu())

    x, w = aval(32, 8, 6, 6), aval(8, 8, 3, 3)
    assert kernels.takes_batch_last("relu", [x], x)
    assert kernels.takes_batch_last("max_pool2d", [x], aval(32, 8, 3, 3))
    assert kernels.takes_batch_last("batch_norm", [x], x)  # (its reference walks any order)
    assert not kernels.takes_batch_last("relu_grad", [x, x], x)
    assert not kernels.takes_batch_last("add", [x, x], x)
    assert kernels.takes_batch_last("conv2d", [x, w], x)
    huge = aval(4096, 8, 6, 6)  # im2col columns over the scratch buffer
    assert not kernels.takes_batch_last("conv2d", [huge, w], huge)


def test_a_runner_inside_a_fused_group_does_not_name_the_group():
    """relu's runner notes its choice inside a fused group's kernel; the group's step still says
    what ran for it: the fused kernel (``fused[chunked]``), not relu's implementation."""
    x = la.sym.var("x", shape=(64, 800))
    with la.tuning(fuse=True):
        exp = la.CachedOp(la.sym.relu(x * 2) + 1).explain(la.ones((64, 800)))
    assert [s["op[implementation]"] for s in exp.steps] == ["fused[chunked]"]
