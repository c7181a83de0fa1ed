"""Errors inside compiled graphs keep the class the eager call raises, name the op and the line that
recorded it, and chain the original exception."""
import numpy as np
import pytest

import lazyarray as la


def _take_out_of_range():
    x = la.ones((3, 4))
    idx = la.array(np.array([0, 5]))
    with la.deferred():
        y = la.take(x, idx, axis=0)  # the recorded line
    return x, idx, y


def test_compiled_and_lazy_errors_have_the_eager_class():
    x, idx, y = _take_out_of_range()
    with pytest.raises(la.LazyArrayError) as eager:
        la.take(x, idx, axis=0)
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x, "i": idx}))
    with pytest.raises(la.LazyArrayError) as compiled:
        op(x, idx)
    with pytest.raises(la.LazyArrayError) as lazy:
        y.asnumpy()
    assert type(compiled.value) is type(eager.value) is type(lazy.value)
    assert isinstance(compiled.value, IndexError)  # and the builtin a NumPy user expects
    for info in (compiled, lazy):
        msg = str(info.value)
        assert "take" in msg and "float32[3,4]" in msg
        assert "y = la.take(x, idx, axis=0)" in msg  # the user's line
    assert isinstance(compiled.value.__cause__, IndexError)


def test_an_error_class_a_kernel_raises_is_not_rebuilt_from_its_message(monkeypatch):
    # NumPy's _ArrayMemoryError cannot be rebuilt as type(exc)(msg): it must not be tried.
    x = la.sym.var("x", shape=(4,))
    op = la.CachedOp(la.sym.exp(x) * 2, fuse=False)  # exp's own kernel (a fused group calls the ufunc)
    exc = np._core._exceptions._ArrayMemoryError((10**12,), np.dtype("float64"))
    from lazyarray.ops.registry import OpDef

    real = OpDef.bind

    def bind(self, xp):
        if self.name != "exp":
            return real(self, xp)

        def boom(*args, **kwargs):
            raise exc

        return boom

    monkeypatch.setattr(OpDef, "bind", bind)
    with pytest.raises(la.OutOfMemoryError) as info:
        op(la.ones(4))
    assert isinstance(info.value, MemoryError)
    assert "exp" in str(info.value)


def test_a_planned_buffer_too_large_for_memory_is_named(monkeypatch):
    import lazyarray.executor.program as program

    x = la.sym.var("x", shape=(4,))
    op = la.CachedOp(la.sym.exp(la.sym.exp(x)) * 2)

    def no_memory(device, nbytes):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(program.np, "empty", lambda *a, **k: no_memory(None, 0))
    with pytest.raises(la.OutOfMemoryError, match="planned buffer of 16 bytes"):
        op(la.ones(4))
