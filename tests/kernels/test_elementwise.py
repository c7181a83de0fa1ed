"""relu and relu_grad in the kernels layer (lazyarray/kernels/elementwise.py): the compiled loops,
the zero row and the rows over threads give ``maximum``'s and ``g * (y > 0)``'s values bit for bit,
for every layout, dtype and in-place pair."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la


# -- relu's kernel: rows of a contiguous float array against a zero row -------------------------------
@pytest.mark.usefixtures("kernel_path")  # NumPy's loop and the compiled one (elementwise_jit.py)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("size", [100, 4095, 4096, 8191, 8192, 8193, 9216, 2 * 8192 + 5, 2 * 8192 + 7, 9 * 8192])
def test_relu_kernel_equals_numpy_maximum(dtype, size):
    from lazyarray.kernels.elementwise import run_relu as relu_kernel
    x = np.random.default_rng(size).standard_normal(size).astype(dtype)
    x[:6] = [np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf]
    x[-1] = np.float32(np.frombuffer(np.uint32(0xFFC00000).tobytes(), np.float32)[0])  # x86's default NaN
    expected = np.maximum(x, 0)
    got = relu_kernel(np, x)
    assert got.dtype == x.dtype and got is not x
    np.testing.assert_array_equal(got, expected)  # NaNs (of either sign) stay NaN
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(expected[~np.isnan(expected)]))
    out = np.full_like(x, 7)
    assert relu_kernel(np, x, out=out) is out
    np.testing.assert_array_equal(out, expected)
    y = x.copy()
    assert relu_kernel(np, y, out=y) is y  # in place (the planner's inplace pair)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.usefixtures("kernel_path")  # NumPy's loop and the compiled one (elementwise_jit.py)
def test_relu_kernel_of_views_integers_and_shapes():
    from lazyarray.kernels.elementwise import run_relu as relu_kernel
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 50, 60)).astype(np.float32)
    np.testing.assert_array_equal(relu_kernel(np, x), np.maximum(x, 0))  # 3-D, size not a row multiple
    view = x[:, ::2]  # not contiguous
    np.testing.assert_array_equal(relu_kernel(np, view), np.maximum(view, 0))
    strided_out = np.empty((4, 50, 120), np.float32)[..., ::2]
    assert relu_kernel(np, x, out=strided_out) is strided_out
    np.testing.assert_array_equal(strided_out, np.maximum(x, 0))
    xi = rng.integers(-5, 5, (300,))
    np.testing.assert_array_equal(relu_kernel(np, xi), np.maximum(xi, 0))


@pytest.mark.usefixtures("kernel_path")  # NumPy's loop and the compiled one (elementwise_jit.py)
def test_relu_kernel_of_arrays_stored_in_another_axis_order():
    """Batch-last planned buffers (executor/batch_last.py): NCHW views of (C, H, W, N) memory."""
    from lazyarray.kernels.elementwise import run_relu as relu_kernel
    x = np.random.default_rng(1).standard_normal((64, 3, 5, 8)).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, -0.0, -np.inf, np.inf]
    stored = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    got = relu_kernel(np, stored)
    np.testing.assert_array_equal(got, np.maximum(x, 0))
    out = np.full((3, 5, 8, 64), np.nan, np.float32).transpose(3, 0, 1, 2)  # same order
    assert relu_kernel(np, stored, out=out) is out
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    plain = np.full(x.shape, np.nan, np.float32)  # another order: NumPy's maximum
    assert relu_kernel(np, stored, out=plain) is plain
    np.testing.assert_array_equal(plain, np.maximum(x, 0))


@pytest.mark.parametrize("size,rows", [(11 * 8192 + 17, 11), (12 * 8192, 12), (3 * 6000, 3)])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_relu_rows_spread_over_threads_equal_numpy(n_threads, size, rows, monkeypatch):
    """A large relu runs its rows in chunks over the threads (``_relu_rows``); one thread, one call."""
    import os

    import lazyarray as la
    from lazyarray import threads
    from lazyarray.kernels import elementwise

    monkeypatch.setattr(threads, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(elementwise, "_RELU_CHUNK_ROWS", 3)  # several chunks, the last one shorter
    calls = []
    real = threads.chunked
    monkeypatch.setattr(threads, "chunked", lambda *a: calls.append(a[0]) or real(*a))
    x = np.random.default_rng(2).standard_normal(size).astype(np.float32)  # (whole rows + tail, equal rows)
    la.set_num_threads(n_threads)
    try:
        got = elementwise.run_relu(np, x)
        y = x.copy()
        assert elementwise.run_relu(np, y, out=y) is y
    finally:
        la.set_num_threads(os.cpu_count() or 1)
    np.testing.assert_array_equal(got, np.maximum(x, 0))
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert calls == ([] if n_threads == 1 else [rows, rows])


@pytest.mark.usefixtures("kernel_path")  # NumPy's two passes and the compiled one (elementwise_jit.py)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_relu_gradient_is_one_relu_grad_op_equal_to_the_masked_product(dtype):
    """relu's gradient runs as ``relu_grad`` (a float mask written into the result, then one product):
    bit for bit ``g * (y > 0)``, signed zeros and NaN gradients included, eagerly and compiled."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 70)).astype(dtype)  # (a size that takes the compiled loop too)
    x[0, :2] = 0.0
    x[3, :2] = np.nan, -np.inf
    g = rng.standard_normal((64, 70)).astype(dtype)
    g[1, 0], g[2, 1], g[0, 0], g[3, 1] = np.nan, -0.0, np.inf, -5.0
    want = g * (np.maximum(x, 0) > 0)
    a = la.array(x)
    a.attach_grad()
    with la.autograd.record():
        y = la.relu(a)
    y.backward(la.array(g))
    got = a.grad.asnumpy()
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    with la.deferred(), la.autograd.record():
        b = la.array(x)
        b.attach_grad()
        y = la.relu(b)
        y.backward(la.array(g))
        ops = {n.op.name for n in la.get_symbol(b.grad).topo() if n.op is not None}
    assert "relu_grad" in ops and "greater" not in ops


def test_relu_gradient_of_a_sparse_output_stays_a_product():
    from lazyarray.aval import Aval
    from lazyarray.device import Device
    from lazyarray.graph.node import Entry, var_node
    from lazyarray.graph.passes.gradient import _Emitter
    from lazyarray.ops import registry
    cpu = Device("cpu", 0)
    y = Entry(var_node("y", Aval((3, 4), np.dtype("float32"), cpu, "row_sparse")))
    g = Entry(var_node("g", Aval((3, 4), np.dtype("float32"), cpu, "default")))
    dense = Entry(var_node("d", Aval((3, 4), np.dtype("float32"), cpu, "default")))
    relu = registry.get("relu")
    assert relu.grad(_Emitter(), [y], y, g)[0].node.op.name == "multiply"
    assert relu.grad(_Emitter(), [dense], dense, g)[0].node.op.name == "relu_grad"


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("fuse", [True, False])
def test_relu_grad_inside_a_fused_group_equals_numpy(fuse):
    """In a fused group the result may be written into the register of ``g`` (read last there):
    the kernel keeps the mask apart then, and values equal NumPy's either way."""
    y = la.sym.var("y", shape=(64, 33))
    g = la.sym.var("g", shape=(64, 33))
    out = la.sym.relu_grad(y, g * 2.0) + 1.0
    op = la.CachedOp(out, fuse=fuse)
    if fuse:
        assert "fused" in str(op.compiled())
    rng = np.random.default_rng(2)
    yv = np.maximum(rng.standard_normal((64, 33)), 0).astype(np.float32)
    gv = rng.standard_normal((64, 33)).astype(np.float32)
    np.testing.assert_array_equal(op(y=la.array(yv), g=la.array(gv)).asnumpy(), (gv * 2.0) * (yv > 0) + 1.0)


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_grad_kernel_of_any_layout_and_in_place(dtype):
    """relu_grad's kernel on arrays stored batch last, into g's own buffer, and with layouts that
    differ (the NumPy passes then): bit for bit ``g * (y > 0)``."""
    from lazyarray.kernels.elementwise import run_relu_grad as _relu_grad_kernel
    rng = np.random.default_rng(9)
    y = rng.standard_normal((8, 3, 16, 12)).astype(dtype)  # 4608 values: the compiled loop's sizes
    g = rng.standard_normal((8, 3, 16, 12)).astype(dtype)
    y.flat[:3] = [np.nan, 0.0, -np.inf]
    g.flat[:4] = [np.inf, -2.0, np.nan, -0.0]
    want = g * (y > 0)

    def stored(a):
        return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)

    for yy, gg in [(y, g), (stored(y), stored(g)), (stored(y), g), (y[:, ::2], g[:, ::2])]:
        w = want if yy.shape == want.shape else want[:, ::2]
        got = _relu_grad_kernel(np, yy, gg)
        np.testing.assert_array_equal(got, w)
        assert np.array_equal(np.signbit(got), np.signbit(w))
    for into in ("g", "y"):  # into an input's own buffer (the planner's in-place pairs)
        ys, gs = stored(y), stored(g)
        target = gs if into == "g" else ys
        assert _relu_grad_kernel(np, ys, gs, out=target) is target
        np.testing.assert_array_equal(target, want)
        assert np.array_equal(np.signbit(target), np.signbit(want))


@pytest.mark.usefixtures("kernel_path")
def test_relu_and_relu_grad_into_an_overlapping_shifted_buffer():
    """An ``out`` that overlaps an input at another offset is not an in-place pair: the NumPy path
    (which buffers overlapping operands) runs, and the values are the unshifted ones."""
    from lazyarray.kernels.elementwise import run_relu as relu_kernel
    from lazyarray.kernels.elementwise import run_relu_grad as _relu_grad_kernel
    rng = np.random.default_rng(11)
    buf = rng.standard_normal(5001).astype(np.float32)  # (a size that takes the compiled loop)
    x, out = buf[:-1], buf[1:]  # each write lands on the value read next
    want = np.maximum(x.copy(), 0)
    np.testing.assert_array_equal(relu_kernel(np, x, out=out), want)
    buf = rng.standard_normal(5001).astype(np.float32)
    y = rng.standard_normal(5000).astype(np.float32)
    g, out = buf[:-1], buf[1:]
    want = g.copy() * (y > 0)
    np.testing.assert_array_equal(_relu_grad_kernel(np, y, g, out=out), want)


@pytest.mark.usefixtures("kernel_path")
def test_the_compiled_relu_loops_run_where_they_apply(kernel_path):
    """The size and layout rules send a large float array to the compiled loops (and in place to
    the in-place loop), a small one to NumPy's ``maximum``."""
    from lazyarray.kernels import elementwise_jit
    from lazyarray.kernels.elementwise import compiled_elementwise as _compiled_elementwise
    from lazyarray.kernels.elementwise import run_relu as relu_kernel
    x = np.random.default_rng(12).standard_normal((64, 80)).astype(np.float32)
    compiled = kernel_path == "compiled"
    assert (_compiled_elementwise(elementwise_jit.RELU, (x,), None) is not None) is compiled
    calls = []
    real = elementwise_jit.relu_in_place

    def spy(*args):
        calls.append(args[0].size)
        return real(*args)

    from lazyarray import jit
    if compiled:
        jit.COMPILED.put(elementwise_jit.relu_in_place, spy)
    try:
        y = x.copy()
        assert relu_kernel(np, y, out=y) is y
        relu_kernel(np, x[:10].copy(), out=None)  # 800 values: NumPy's maximum
    finally:
        jit.COMPILED.discard(elementwise_jit.relu_in_place)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert calls == ([x.size] if compiled else [])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [0, 1, 7, 511, 512, 513, 1024, 1500, 7168])
def test_relu_in_place_through_its_scratch_block_is_maximum_bit_for_bit(dtype, size):
    """``relu_in_place`` (block by block through a scratch block, no masked stores) writes
    ``np.maximum(x, 0)``'s bits into x: signaling and negative NaNs kept as they are, -0.0 to 0.0,
    across the block boundaries; compiled and as Python."""
    from lazyarray import jit
    from lazyarray.kernels import elementwise_jit
    kind = {"float32": np.uint32, "float64": np.uint64}[dtype]
    specials = {"float32": [0x7F800001, 0xFF800001, 0x7FA00000, 0xFFC00000, 0x80000000, 0x00000001, 0x80000001],
                "float64": [0x7FF0000000000001, 0xFFF0000000000001, 0x7FF8000000000000, 0x8000000000000000, 1,
                            0x8000000000000001, 0xFFF8000000000000]}[dtype]
    x = np.random.default_rng(size).standard_normal(size).astype(dtype)
    for k, bits in enumerate(specials[:size]):
        x.view(kind)[(k * 97) % size] = bits
    want = np.maximum(x, 0)
    kernels = [elementwise_jit.relu_in_place]
    compiled = jit.compiled(elementwise_jit.relu_in_place)
    if compiled is not None:
        kernels.append(compiled)
    for kern in kernels:
        y = x.copy()
        kern(y, y.dtype.type(0), y.dtype.type(1))
        np.testing.assert_array_equal(y.view(kind), want.view(kind))


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_in_place_of_views_and_empty_dims(dtype):
    """In place over a batch-last view (the flat walk in memory order), a (8, 7, 128) activation
    (T5's) and empty dims: ``maximum``'s values."""
    from lazyarray.kernels.elementwise import run_relu as relu_kernel
    x = np.random.default_rng(3).standard_normal((8, 7, 128)).astype(dtype)
    y = x.copy()
    assert relu_kernel(np, y, out=y) is y
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    t = np.ascontiguousarray(x.transpose(2, 1, 0)).transpose(2, 1, 0)  # (not C-ordered: batch last)
    want = np.maximum(t, 0)
    assert relu_kernel(np, t, out=t) is t
    np.testing.assert_array_equal(t, want)
    e = np.zeros((0, 7, 128), dtype)
    assert relu_kernel(np, e, out=e) is e and e.shape == (0, 7, 128)
