"""A stand-in for CuPy's ``ElementwiseKernel`` on the CPU: the same params and body, compiled by
the C compiler and run over NumPy arrays (one loop iteration per output element, operands
broadcast to the output first, as CuPy does). It lets the CPU suite check the C text that
``executor/fusion_gpu.py`` generates; CUDA C++ overloads ``exp``/``tanh``/... per type where this
harness uses C's ``<tgmath.h>`` for the same generic names.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from types import ModuleType

import numpy as np

from lazyarray.executor.fusion_gpu import C_TYPES

CC = shutil.which("cc") or shutil.which("gcc")
_BUILT: dict[str, ctypes.CDLL] = {}
_DIR = tempfile.mkdtemp(prefix="lazyarray-c-kernels-")


def _params(text: str) -> list[tuple[np.dtype, str]]:
    out = []
    for part in text.split(","):
        dtype, name = part.split()
        out.append((np.dtype(dtype), name))
    return out


class ElementwiseKernel:
    def __init__(self, in_params: str, out_params: str, operation: str, name: str):
        self.ins, self.outs = _params(in_params), _params(out_params)
        assert len(self.outs) == 1
        loads = "\n".join(f"    const {C_TYPES[d]} {n} = (({C_TYPES[d]} const*)p[{i}])[i];"
                          for i, (d, n) in enumerate(self.ins))
        od, on = self.outs[0]
        src = (
            "#include <stdbool.h>\n#include <tgmath.h>\n"
            f"void {name}(long n, void **p) {{\n  for (long i = 0; i < n; ++i) {{\n{loads}\n"
            f"    {C_TYPES[od]} {on};\n{operation}\n"
            f"    (({C_TYPES[od]}*)p[{len(self.ins)}])[i] = {on};\n  }}\n}}\n")
        key = hashlib.sha1(src.encode()).hexdigest()[:16]
        lib = _BUILT.get(key)
        if lib is None:
            c, so = os.path.join(_DIR, key + ".c"), os.path.join(_DIR, key + ".so")
            with open(c, "w") as f:
                f.write(src)
            subprocess.run([CC, "-O1", "-shared", "-fPIC", "-o", so, c, "-lm"], check=True, capture_output=True)
            lib = _BUILT[key] = ctypes.CDLL(so)
        self.fn = getattr(lib, name)
        self.source = src

    def __call__(self, *arrays):
        *ins, out = arrays
        assert len(ins) == len(self.ins)
        for (d, _), a in zip(self.ins, ins):  # CuPy casts; the generator must declare the exact dtypes
            assert np.asarray(a).dtype == d, (np.asarray(a).dtype, d)
        assert out.dtype == self.outs[0][0]
        bufs = [np.ascontiguousarray(np.broadcast_to(a, out.shape)) for a in ins]
        res = np.empty(out.shape, out.dtype)
        ptrs = (ctypes.c_void_p * (len(bufs) + 1))(*[b.ctypes.data for b in bufs], res.ctypes.data)
        self.fn(ctypes.c_long(res.size), ptrs)
        out[...] = res
        return out


# the array module as ``fusion_gpu.run`` uses it (a module: kernels are bound per array module)
xp = ModuleType("c_elementwise_xp")
xp.ElementwiseKernel = ElementwiseKernel
xp.empty = np.empty
