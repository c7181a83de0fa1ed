"""``la.mxnet``: run MXNet 1.x models without MXNet, and write models MXNet 1.9.1 loads.

``load(symbol_file, params_file)`` reads a ``prefix-symbol.json`` + ``prefix-0000.params`` pair
(``HybridBlock.export`` of MXNet 1.x) into our ``Symbol`` and its parameters;
``SymbolBlock.imports`` does the same when it sees MXNet JSON, and ``export`` writes the pair back.
Files are read without running code (no pickle, no eval) and sizes are checked before anything
is allocated; malformed files raise ``GraphFormatError`` naming the node or the byte offset.
The formats and the operator table: ``docs/mxnet.md``.

>>> import lazyarray as la, tempfile, os
>>> net = la.blocks.HybridSequential()
>>> _ = net.add(la.blocks.Dense(4, activation="relu", in_units=3), la.blocks.Dense(2, in_units=4))
>>> net.initialize()
>>> d = tempfile.mkdtemp()
>>> sym_file, param_file = la.mxnet.export(net, os.path.join(d, "net"), input_shapes=(1, 3))
>>> block = la.blocks.SymbolBlock.imports(sym_file, ["data"], param_file)
>>> x = la.ones((5, 3))
>>> bool(abs(block(x).asnumpy() - net(x).asnumpy()).max() < 1e-6)
True
"""
from __future__ import annotations

import os

import numpy as np

from ..creation import array
from ..graph.symbol import Symbol
from ..ndarray import NDArray
from .export import EXPORTABLE, export, to_mxnet
from .operators import CONVERTERS
from .params_file import load_params, params_bytes, read_params, save_params
from .symbol_file import check_params_file, is_mxnet_json, read_json, sniff, to_symbol

__all__ = ["CONVERTERS", "EXPORTABLE", "export", "is_mxnet_json", "load", "load_arrays", "load_params",
           "params_bytes", "read_params", "save_params", "sniff", "to_mxnet"]


def load_arrays(symbol_file: str, params_file: str | None, input_shapes: dict | None = None
                ) -> tuple[Symbol, dict[str, np.ndarray]]:
    """``(Symbol, name -> NumPy array)`` of an MXNet model (the arrays the graph reads)."""
    arrays = {} if params_file is None else load_params(params_file)[0]
    what = f"MXNet symbol file {os.path.basename(str(symbol_file))!r}"
    doc = read_json(symbol_file)
    check_params_file(doc, symbol_file, params_file)  # the pair la.mxnet.export wrote together, never a mix
    sym = to_symbol(doc, arrays, input_shapes, what)
    used = set(sym.list_inputs())
    return sym, {k: v for k, v in arrays.items() if k in used}


def load(symbol_file: str, params_file: str | None = None, input_shapes: dict | None = None
         ) -> tuple[Symbol, dict[str, NDArray]]:
    """``(Symbol, parameters)`` of an MXNet 1.x model; the symbol's other inputs are its data inputs.

    ``input_shapes`` (``{"data": (1, 3, 224, 224)}``, optional) fixes the data inputs' shapes; it is
    needed only by ``Reshape`` codes and ``full`` pooling, which MXNet resolves from shapes. Parameters
    the inference graph does not read (a ``SoftmaxOutput`` label's) are left out.
    """
    sym, arrays = load_arrays(symbol_file, params_file, input_shapes)
    return sym, {k: array(v) for k, v in arrays.items()}
