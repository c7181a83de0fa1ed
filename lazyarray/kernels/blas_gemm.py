"""NumPy's own BLAS ``gemm`` as a C function compiled kernels can call (``conv_regions.py``,
``dense_regions.py``).

A compiled kernel that spreads a product over threads (one numba parallel region) needs
each thread to multiply its block of columns itself: calling back into Python for ``matmul``
would take the GIL and a thread hand-off per block, which is what the compiled region exists to
avoid. numba's own ``np.dot`` goes through SciPy's BLAS, a second OpenBLAS with its own thread
pool: from two threads at once its pool and ours fought (measured 9.4 ms for a 60 us product).
So this finds the ``cblas_sgemm`` / ``cblas_dgemm`` of the OpenBLAS NumPy loaded, through the
handle threadpoolctl already opened (the ``threads`` extra), with its symbol prefix and suffix
(``scipy_cblas_sgemm64_`` in NumPy's wheels) and its integer width (``USE64BITINT`` in
``openblas_get_config``), and declares it for ctypes, which numba calls without the GIL.

``gemm(dtype)`` is that function, or None (no threadpoolctl, a BLAS other than OpenBLAS, a
symbol missing): callers then take their NumPy path. Looked up once per process.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..caches import NamedCache

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS enum values

# the one look-up: None -> {dtype: function} (clear(): looked up again on the next call)
FOUND = NamedCache("NumPy's BLAS gemm functions", 1)


def gemm(dtype):
    """``cblas_?gemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)`` of
    NumPy's OpenBLAS for float32 / float64 (pointers as integers), or None."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        return None
    return FOUND.get_or_make(None, _lookup).get(dtype)


def _lookup() -> dict:
    found: dict = {}
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return found
    libs = [c for c in ThreadpoolController().lib_controllers if c.internal_api == "openblas"]
    numpys = [c for c in libs if "numpy" in (c.filepath or "").lower()]  # (NumPy's wheels: numpy.libs/)
    if len(numpys) == 1:
        lib = numpys[0]
    elif len(libs) == 1:  # one OpenBLAS loaded, numpy is loaded: NumPy's (a conda or system build)
        lib = libs[0]
    else:
        return found
    prefix, suffix = getattr(lib, "_symbol_prefix", ""), getattr(lib, "_symbol_suffix", "")
    try:
        config = getattr(lib.dynlib, f"{prefix}openblas_get_config{suffix}")
    except AttributeError:
        return found
    config.restype = ctypes.c_char_p
    index = ctypes.c_int64 if b"USE64BITINT" in (config() or b"") else ctypes.c_int32
    for dtype, name, real in ((np.dtype(np.float32), "cblas_sgemm", ctypes.c_float),
                              (np.dtype(np.float64), "cblas_dgemm", ctypes.c_double)):
        try:
            fn = getattr(lib.dynlib, f"{prefix}{name}{suffix}")
        except AttributeError:
            continue
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, index, index, index, real,
                       ctypes.c_void_p, index, ctypes.c_void_p, index, real, ctypes.c_void_p, index]
        fn.restype = None
        found[dtype] = fn
    return found
