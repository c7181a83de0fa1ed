"""Model and parameter files told apart by their content (never by their names), and opened.

``detect(path, what)`` reads the first bytes of a regular file and names its ``Format``:

===================  ==============================================================================
format               how its first bytes look
===================  ==============================================================================
MXNet .params        uint64 ``0x112`` (the NDArray list magic), then a reserved uint64 0
safetensors          uint64 header length *n* with *n* <= the bytes that follow, then ``{``
ONNX model           a protobuf whose first field is ``ir_version`` (byte ``0x08``), as every ONNX
                     writer emits it
lazyarray symbol     JSON holding ``"format": "lazyarray.symbol"`` (graph/serialize.py)
MXNet symbol         JSON with top-level ``nodes`` and ``heads`` and no ``format`` (``la.mxnet.sniff``)
===================  ==============================================================================

Anything else is ``Format.UNKNOWN``: whoever reads it with the loader it expects gets that loader's
error, which names what is wrong (``not valid JSON``, ``not a safetensors parameter file``).

``open_model(path, params=None, input_shapes=None)`` reads a model in any of the three model
formats into a ``Model`` (graph + parameter values); ``read_params(path)`` reads a parameter file of
either kind. A parameter file of the wrong kind for its model (MXNet ``.params`` beside a lazyarray
symbol) is a ``GraphFormatError`` naming both formats.
"""
from __future__ import annotations

import enum
import os
import struct
from dataclasses import dataclass

import numpy as np

from .blocks.param_file import load_arrays as load_safetensors
from .blocks.symbol_block import check_params
from .errors import GraphFormatError
from .fileio import check_regular
from .graph.symbol import Symbol, load_symbol
from .mxnet import load_arrays as load_mxnet_model
from .mxnet import sniff as is_mxnet_symbol
from .mxnet.params_file import LIST_MAGIC
from .mxnet.params_file import load_params as load_mxnet_params
from .onnx.load import load_arrays as load_onnx_model

HEAD = 4096  # bytes read to tell the formats apart


class Format(enum.Enum):
    """A file format lazyarray reads; the value is its name in messages."""

    LAZYARRAY_SYMBOL = "lazyarray symbol JSON"
    MXNET_SYMBOL = "MXNet symbol JSON"
    ONNX = "ONNX model"
    MXNET_PARAMS = "MXNet .params"
    SAFETENSORS = "safetensors parameters"
    UNKNOWN = "an unrecognised format"

    @property
    def is_params(self) -> bool:
        """A file of parameter arrays only (no graph)."""
        return self in (Format.MXNET_PARAMS, Format.SAFETENSORS)

    @property
    def params(self) -> Format | None:
        """The format of this model format's separate parameter file; ``None`` when the model carries
        its weights (ONNX) or is no model."""
        return {Format.LAZYARRAY_SYMBOL: Format.SAFETENSORS, Format.MXNET_SYMBOL: Format.MXNET_PARAMS}.get(self)


def detect(path, what: str) -> Format:
    """The ``Format`` of the file at ``path`` by its first bytes. ``GraphFormatError`` naming ``what``
    when it cannot be read or is not a regular file (a device or a FIFO is refused before opening)."""
    head = _head(path, what)
    if len(head) >= 16 and struct.unpack("<QQ", head[:16]) == (LIST_MAGIC, 0):
        return Format.MXNET_PARAMS
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] <= _size(path) - 8:
        return Format.SAFETENSORS
    if head[:1] == b"\x08":
        return Format.ONNX
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] == b"{" and b'"lazyarray.symbol"' in head:
        return Format.LAZYARRAY_SYMBOL
    if text[:1] == b"{" and is_mxnet_symbol(path):
        return Format.MXNET_SYMBOL
    return Format.UNKNOWN


def _head(path, what: str) -> bytes:
    """At most ``HEAD`` bytes from the start of the regular file ``path`` (errors as ``read_regular``'s)."""
    try:
        check_regular(path, what)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except GraphFormatError:
        raise
    except OSError as exc:
        raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:  # a name with a NUL byte
        raise GraphFormatError(f"cannot read {what} {path!r}: {exc}") from None
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(HEAD)
        except OSError as exc:  # (a directory swapped in after the check)
            raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: {exc.strerror or exc}") from None


def _size(path) -> int:
    return os.stat(path).st_size


@dataclass(frozen=True)
class Model:
    """A model read from files: its graph, the values of its parameters (``None`` when its separate
    parameter file was not given) and the formats read."""

    symbol: Symbol
    arrays: dict[str, np.ndarray] | None
    format: Format
    params_format: Format | None = None

    @property
    def param_names(self) -> list[str]:
        """The graph inputs that are parameters: those with values, or (values not given) those not
        named like data inputs (``data``, ``data0``, ...)."""
        names = self.symbol.list_inputs()
        if self.arrays is not None:
            return [n for n in names if n in self.arrays]
        return [n for n in names if not is_data_name(n)]

    @property
    def data_names(self) -> list[str]:
        """The graph inputs a caller feeds."""
        params = set(self.param_names)
        return [n for n in self.symbol.list_inputs() if n not in params]


def is_data_name(name: str) -> bool:
    """Named like the data input of an exported block: ``data``, ``data0``, ``data1``, ..."""
    return name == "data" or (name.startswith("data") and name[4:].isdigit())


def open_model(path, params=None, input_shapes: dict | None = None, what: str = "symbol file") -> Model:
    """The ``Model`` in ``path`` (lazyarray symbol JSON, MXNet symbol JSON or ONNX, recognised by content;
    anything unrecognised is read as lazyarray JSON, whose loader says what is wrong) with the
    parameter file ``params`` (needed by MXNet symbols; optional for lazyarray symbols, whose inputs
    are then told apart by name; refused for ONNX, which carries its weights).

    ``GraphFormatError`` for a parameter file of the wrong kind, naming both formats."""
    fmt = detect(path, what)
    if fmt.is_params:
        raise GraphFormatError(f"{what} {os.fspath(path)!r} is {fmt.value} (arrays only, no graph); give the "
                               "model's symbol JSON or ONNX file, and this file as its parameters")
    if fmt is Format.UNKNOWN and not _looks_like_text(path, what):
        raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: its content is none of the formats "
                               f"lazyarray reads ({', '.join(f.value for f in Format if f is not Format.UNKNOWN)})")
    fmt = Format.LAZYARRAY_SYMBOL if fmt is Format.UNKNOWN else fmt
    pfmt = None if params is None else _check_pair(path, fmt, params)
    if fmt is Format.ONNX:
        sym, arrays = load_onnx_model(path, input_shapes or None)
        return Model(sym, arrays, fmt)
    if fmt is Format.MXNET_SYMBOL:
        sym, arrays = load_mxnet_model(path, params, input_shapes or None)
        return Model(sym, arrays, fmt, pfmt)
    sym = load_symbol(path)
    if params is None:
        return Model(sym, None, fmt)
    # Inputs the parameter file lacks and that are named like data (data, data0, ...) are the
    # model's inputs; everything else is checked exactly as SymbolBlock.imports checks it.
    arrays, meta = load_safetensors(params)
    check_params(sym, [n for n in sym.list_inputs() if n not in arrays and is_data_name(n)], arrays, meta,
                 path, params)
    return Model(sym, arrays, fmt, pfmt)


def _looks_like_text(path, what: str) -> bool:
    """JSON text in some encoding: a ``{`` or ``[`` first (after a BOM and blanks), or NUL bytes among the
    first four (UTF-16 and UTF-32)."""
    head = _head(path, what)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[") or b"\x00" in head[:4] or head[:2] in (
        b"\xff\xfe", b"\xfe\xff")


def _check_pair(path, fmt: Format, params) -> Format:
    """The format of the parameter file ``params`` of the model ``path`` (of ``fmt``); ``GraphFormatError``
    when it is of another kind than the model reads (unrecognised files are left to the loader)."""
    pfmt = detect(params, "parameter file")
    model = f"model {os.fspath(path)!r} ({fmt.value})"
    if fmt.params is None:
        raise GraphFormatError(f"{model} carries its own weights: it takes no parameter file (got "
                               f"{os.fspath(params)!r}, {pfmt.value})")
    if pfmt is not Format.UNKNOWN and pfmt is not fmt.params:
        raise GraphFormatError(f"parameter file {os.fspath(params)!r} is {pfmt.value}, but {model} reads "
                               f"{fmt.params.value}; give the parameter file exported with this model")
    return pfmt


def read_params(path, what: str = "parameter file") -> tuple[Format, dict[str, np.ndarray]]:
    """The format and the arrays (name -> NumPy array) of a parameter file: MXNet ``.params`` or
    safetensors, recognised by content."""
    fmt = detect(path, what)
    if fmt is Format.MXNET_PARAMS:
        return fmt, load_mxnet_params(path)[0]
    if fmt is Format.SAFETENSORS:
        return fmt, load_safetensors(path)[0]
    raise GraphFormatError(f"{what} {os.fspath(path)!r} is {fmt.value}, not a parameter file "
                           f"({Format.MXNET_PARAMS.value} or {Format.SAFETENSORS.value})")
