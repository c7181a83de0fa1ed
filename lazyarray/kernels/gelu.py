"""gelu, gelu_grad and gelu_with_grad: the chunked implementation and its chooser.

``ops/norm.py`` holds the reference kernels (every pass over the whole array). Elementwise kernels
of many passes run here chunk by chunk (``chunks``): each chunk's temporaries stay in cache, chunks
over ``la.set_num_threads`` threads. Each value is the same operations either way: the same bits.
"""
from __future__ import annotations

import numpy as np

from ..ops import registry
from ..ops.norm import gelu_grad_values, gelu_slope, gelu_values
from ..threads import chunked
from .impl import Choice, Impl
from .runner import keyword_binder, noted

# Measured (GELU on 1M float32, one thread): 16K-element chunks 3.8 ms, 64K 2.9 ms, 128K 2.75 ms
# (the per-call overhead of a few dozen ufunc calls per chunk dominates small chunks).
CHUNK_ELEMENTS = 1 << 16


def _fits(xp, arrays, out) -> bool:
    """Equally shaped NumPy operands of at least 4 chunks (not 0-d), ``out`` C-contiguous."""
    shape = arrays[-1].shape
    return bool(shape) and xp is np and arrays[-1].size >= 4 * CHUNK_ELEMENTS \
        and all(a.shape == shape for a in arrays) and (out is None or out.flags.c_contiguous)


def in_chunks(kernel, xp, *arrays, approximation="none", out=None):
    """``kernel(xp, *arrays, approximation, out)`` over contiguous chunks of the operands (``_fits``)."""
    n, shape = arrays[-1].size, arrays[-1].shape
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    res = np.empty(shape, np.result_type(*arrays)) if out is None else out
    dest = res.reshape(-1)

    def work(bounds):
        for lo, hi in bounds:
            kernel(xp, *[f[lo:hi] for f in flat], approximation=approximation, out=dest[lo:hi])

    chunked(n, CHUNK_ELEMENTS, res.nbytes, work)
    return res


def with_grad_in_chunks(xp, x, approximation="none", out=None):
    """``(gelu(x), d gelu(x) / dx)`` chunk by chunk (``gelu_slope`` of each chunk)."""
    y, d = (np.empty(x.shape, x.dtype), np.empty(x.shape, x.dtype)) if out is None else out
    flat, fy, fd = np.ascontiguousarray(x).reshape(-1), y.reshape(-1), d.reshape(-1)

    def work(bounds):
        for lo, hi in bounds:
            gelu_slope(np, flat[lo:hi], approximation, fy[lo:hi], fd[lo:hi])

    chunked(flat.size, CHUNK_ELEMENTS, 2 * y.nbytes, work)
    return y, d


GELU = Impl("gelu", "chunks", lambda xp, *a, **p: in_chunks(gelu_values, xp, *a, **p),
            "NumPy, 4 x CHUNK_ELEMENTS values or more: every pass per chunk while in cache, over the threads",
            threads=True)
GELU_GRAD = Impl("gelu_grad", "chunks", lambda xp, *a, **p: in_chunks(gelu_grad_values, xp, *a, **p),
                 "as gelu's chunks, operands of one shape", threads=True)
WITH_GRAD = Impl("gelu_with_grad", "chunks", with_grad_in_chunks, "as gelu's chunks", threads=True)
_CHOICES = {impl.op: Choice(impl) for impl in (GELU, GELU_GRAD, WITH_GRAD)}
_REFERENCE = {name: registry.get(name).kernel for name in _CHOICES}


def _with_grad_fits(xp, x) -> bool:
    return xp is np and x.ndim > 0 and x.size >= 4 * CHUNK_ELEMENTS and x.dtype.kind == "f"


def _runner(name, fits, impl):
    choice = _CHOICES[name]
    reference = _REFERENCE[name]

    def run(xp, *arrays, approximation="none", out=None):
        if not fits(xp, arrays, out):
            return reference(xp, *arrays, approximation=approximation, out=out)
        y = impl.run(xp, *arrays, approximation=approximation, out=out)
        noted(choice, *arrays)
        return y

    def choose(xp, *arrays, approximation="none", out=None) -> Choice | None:
        return choice if fits(xp, arrays, out) else None

    run.__doc__ = f"{name} in chunks where they apply (``{impl.when}``), else the reference kernel."
    return run, choose


run_gelu, choose_gelu = _runner("gelu", _fits, GELU)
run_gelu_grad, choose_gelu_grad = _runner("gelu_grad", _fits, GELU_GRAD)
run_with_grad, choose_with_grad = _runner("gelu_with_grad", lambda xp, arrays, out: _with_grad_fits(xp, arrays[0]),
                                          WITH_GRAD)

# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"gelu": (GELU,), "gelu_grad": (GELU_GRAD,), "gelu_with_grad": (WITH_GRAD,)}
RUNNERS = {"gelu": run_gelu, "gelu_grad": run_gelu_grad, "gelu_with_grad": run_with_grad}
CHOOSERS = {"gelu": choose_gelu, "gelu_grad": choose_gelu_grad, "gelu_with_grad": choose_with_grad}
# (their choices are fixed by a compiled step's avals and planned output: the reference bound where none applies)
BINDERS = {name: keyword_binder(CHOOSERS[name], {}, name, _REFERENCE[name]) for name in CHOOSERS}
