"""The per-signature caches are bounded in bytes as well as in entries (issue #33).

A hybridized block fed ever-larger batches compiles one program per batch size; each holds the
buffers of its memory plan. Before the byte bound, 64 such programs stayed whatever their size
(a hybridized MLP fed 10,000 ever-larger batches grew by ~89 MiB). Now the cache evicts the least
recently used programs while what they hold together exceeds ``cache_bytes``.
"""
from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.errors import ParamValueError
from lazyarray.executor.cached_op import held_bytes
from lazyarray.executor.signature_cache import DEFAULT_BYTES, SignatureCache, default_bytes
from lazyarray.tuning_table import from_environment

_BUDGET = 4 * 2**20


def _mlp(cache_bytes=None):
    net = B.HybridSequential()
    net.add(B.Dense(64, activation="relu", in_units=32), B.Dense(10, in_units=64))
    net.initialize()
    net.hybridize(cache_bytes=cache_bytes)
    return net


def _batches():
    rng = np.random.default_rng(0)
    for n in range(256, 256 * 41, 256):  # 40 ever-larger batches, 256 .. 10240 rows
        yield la.array(rng.standard_normal((n, 32)).astype(np.float32))


def _run(net, xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", la.RecompileWarning)
        for x in xs:
            net(x)
            yield net.cached_op._signatures


def test_a_hybridized_mlp_fed_ever_larger_batches_stays_under_the_byte_budget():
    net = _mlp(cache_bytes=_BUDGET)
    first = next(_batches())
    want_first = net(first).asnumpy()
    sizes = []
    for cache in _run(net, _batches()):
        assert cache.max_bytes == _BUDGET
        assert cache.nbytes == sum(held_bytes(c) for c in cache.items.values())  # its own accounting is exact
        assert cache.nbytes <= _BUDGET or len(cache) == 1, (cache.nbytes, len(cache))
        sizes.append(len(cache))
    assert cache.evictions > 0 and max(sizes) < 40  # the count bound (64) alone would have kept all 40
    # an evicted signature compiles again when it comes back, and computes the same
    op = net.cached_op
    compiles = op.num_compiles
    np.testing.assert_allclose(net(first).asnumpy(), want_first, rtol=1e-6)
    assert net.cached_op.num_compiles == compiles + 1
    assert net.cached_op._signatures.nbytes <= _BUDGET


def test_the_memory_held_stays_near_the_budget_under_tracemalloc():
    """What the process holds after the batches (NumPy reports its buffers to tracemalloc): near the
    budget when bounded, near the sum of all plans when the budget is effectively off."""
    def grown(cache_bytes):
        net = _mlp(cache_bytes)
        xs = list(_batches())
        net(xs[0])  # traced before measuring
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in _run(net, xs):
                pass
            del xs
            return tracemalloc.get_traced_memory()[0] - before, net.cached_op._signatures.nbytes
        finally:
            tracemalloc.stop()

    bounded, held = grown(_BUDGET)
    unbounded, held_all = grown(2**40)
    assert held <= _BUDGET < held_all
    assert bounded < _BUDGET + 4 * 2**20, bounded  # (the budget, plus the last outputs and bookkeeping)
    assert unbounded > bounded + (held_all - _BUDGET) // 2, (unbounded, bounded)


def test_the_newest_entry_stays_even_when_alone_over_budget():
    x = la.sym.var("x")
    op = la.CachedOp(la.sym.tanh(x) * 2, cache_bytes=1024)
    small = op(la.ones((4,))).asnumpy()
    big = op(la.ones((4096,)))  # 16 KiB of plan: over the budget, kept (it is the one that runs)
    assert len(op._signatures) == 1 and op._signatures.nbytes > 1024
    np.testing.assert_allclose(big.asnumpy(), np.tanh(np.ones(4096, np.float32)) * 2, rtol=1e-6)
    np.testing.assert_allclose(op(la.ones((4,))).asnumpy(), small)  # the evicted one, compiled again


def test_a_hit_changes_no_accounting():
    op = la.CachedOp(la.sym.exp(la.sym.var("x")), cache_bytes=_BUDGET)
    op(la.ones((8,)))
    state = (op._signatures.nbytes, op._signatures.evictions, len(op._signatures))
    for _ in range(5):
        op(la.ones((8,)))
    assert (op._signatures.nbytes, op._signatures.evictions, len(op._signatures)) == state


def test_the_byte_budget_comes_from_the_tuning_table():
    assert default_bytes() == DEFAULT_BYTES == 256 * 2**20 == la.config.cache_bytes
    assert from_environment({"LAZYARRAY_CACHE_BYTES": "5e6"}).cache_bytes == 5_000_000  # (read at import)
    with la.tuning(cache_bytes=5_000_000):
        assert la.CachedOp(la.sym.var("x") * 2)._signatures.max_bytes == 5_000_000
    with la.tuning(cache_bytes=12345):
        net = _mlp()
        net(la.ones((2, 32)))
    assert net.cached_op._signatures.max_bytes == 12345
    with pytest.raises(ParamValueError, match="LAZYARRAY_CACHE_BYTES.*'lots'"):  # unreadable: named
        from_environment({"LAZYARRAY_CACHE_BYTES": "lots"})


@pytest.mark.parametrize("value,error", [
    (-1, la.ParamValueError), (1.5, la.ParamError), ("1e6", la.ParamError), (True, la.ParamError),
])
def test_a_bad_cache_bytes_is_a_named_error(value, error):
    with pytest.raises(error, match="cache_bytes must be an int >= 0"):
        SignatureCache("CachedOp", max_bytes=value)
    with pytest.raises(error, match="cache_bytes"):
        la.CachedOp(la.sym.var("x") * 2, cache_bytes=value)
