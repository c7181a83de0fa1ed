"""ONNX external data: tensors whose bytes live in a file beside the model, read safely.

A tensor with ``data_location = EXTERNAL`` names a file (``location``) and a byte range
(``offset``, ``length``). As onnx's own loader and onnxruntime do, lazyarray reads such data only
from files inside the model's folder: the location is resolved against that folder (never the
current directory), it must be relative, without ``..``, and must not leave the folder through a
symbolic link (checked on ``os.path.realpath``); the file must be a regular file and the range must
lie within it (checked before reading). Anything else is a ``GraphFormatError`` naming the tensor,
the location and the fix. Every tensor of the model is covered: initializers, tensor attributes
(``Constant`` values), sparse tensors, the bodies of ``If``/``Loop``/``Scan`` at any depth, and
functions.

Model bytes without a file (``parse_model`` of bytes, the ONNX backend given a ``ModelProto``)
has no folder: its external tensors are refused rather than read relative to the current directory.

**Files written together.** ``la.onnx.export`` writes the data file first and the model second; a
kill between the two leaves a new data file beside the old model. So the writer records a random
generation id in the model (metadata ``lazyarray.external_data``: ``"<location> <id>"``) and
appends the same id to the end of the data file, after every tensor (readers use offset and
length, so the trailer is invisible to them). Loading compares them and refuses a data file of
another generation by name; a data file without a trailer (written by another tool) is not checked.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

from ..errors import GraphFormatError
from ..fileio import file_kind

GENERATION_KEY = "lazyarray.external_data"  # model metadata: "<location> <generation id>"
_TAG = b"\nlazyarray-generation:"
_GENERATION = re.compile(r"[0-9a-f]{32}")
TRAILER_SIZE = len(_TAG) + 32
_RULE = ("external data must be a file inside the model's folder, named by a relative path without '..' "
         "that does not leave the folder through a symbolic link (as onnx and onnxruntime require)")


# The ``external_data`` key every external tensor needs, as its bytes: a serialized model without them
# has no tensor whose data is elsewhere that onnx.checker accepts (it refuses one without a location)
LOCATION_KEY = b"location"


def trailer(generation: str) -> bytes:
    """The bytes the writer appends to a data file of ``generation`` (32 hex digits)."""
    assert _GENERATION.fullmatch(generation), generation
    return _TAG + generation.encode("ascii")


def _tensor_proto():
    import onnx

    return onnx.TensorProto


def all_tensors(model) -> Iterator[tuple[str, object]]:
    """``(where, TensorProto)`` for every tensor of ``model``: initializers, sparse initializers,
    tensor attributes, sub-graphs at any depth and functions; ``where`` names it for messages."""
    yield from _graph_tensors(model.graph, "")
    for f in model.functions:
        for k, nd in enumerate(f.node):
            yield from _node_tensors(nd, k, f"function {f.name!r} ")


def _graph_tensors(graph, prefix: str) -> Iterator[tuple[str, object]]:
    for t in graph.initializer:
        yield f"{prefix}initializer {t.name!r}", t
    for st in graph.sparse_initializer:
        yield f"{prefix}sparse initializer {st.values.name!r} values", st.values
        yield f"{prefix}sparse initializer {st.values.name!r} indices", st.indices
    for k, nd in enumerate(graph.node):
        yield from _node_tensors(nd, k, prefix)


def _node_tensors(nd, k: int, prefix: str) -> Iterator[tuple[str, object]]:
    node = f"{prefix}node {nd.name or '#' + str(k)!r} ({nd.op_type})"
    for a in nd.attribute:
        where = f"{node} attribute {a.name!r}"
        if a.HasField("t"):
            yield f"{where} tensor {a.t.name!r}" if a.t.name else where, a.t
        for i, t in enumerate(a.tensors):
            yield f"{where}[{i}]", t
        sparse = ([a.sparse_tensor] if a.HasField("sparse_tensor") else []) + list(a.sparse_tensors)
        for st in sparse:
            yield f"{where} sparse values", st.values
            yield f"{where} sparse indices", st.indices
        graphs = ([a.g] if a.HasField("g") else []) + list(a.graphs)
        for g in graphs:
            yield from _graph_tensors(g, f"{where} body {g.name!r}: ")


def _bare_tensors(graph) -> Iterator[object]:
    """Every TensorProto of ``graph`` (as ``_graph_tensors``, sub-graphs included), without naming
    them: naming each node costs more than looking at it, and a model rarely has an external tensor."""
    yield from graph.initializer
    for st in graph.sparse_initializer:
        yield st.values
        yield st.indices
    for nd in graph.node:
        for a in nd.attribute:
            # (the fields set, in one call: a field read per kind of value cost more than the walk)
            for field, v in a.ListFields():
                kind = field.name
                if kind == "t":
                    yield v
                elif kind == "tensors":
                    yield from v
                elif kind == "sparse_tensor" or kind == "sparse_tensors":
                    for st in ([v] if kind == "sparse_tensor" else v):
                        yield st.values
                        yield st.indices
                elif kind == "g":
                    yield from _bare_tensors(v)
                elif kind == "graphs":
                    for g in v:
                        yield from _bare_tensors(g)


def has_external(model) -> bool:
    """True when a tensor of ``model`` (graph, sub-graphs, functions) keeps its data in an external file."""
    external = _tensor_proto().EXTERNAL
    graphs = [model.graph] + [_FunctionAsGraph(f) for f in model.functions]
    return any(t.data_location == external for g in graphs for t in _bare_tensors(g))


class _FunctionAsGraph:
    """A FunctionProto seen as a graph without initializers (its nodes are where its tensors are)."""

    initializer = sparse_initializer = ()

    def __init__(self, f):
        self.node = f.node


def external_tensors(model) -> list[tuple[str, object]]:
    """The tensors of ``model`` whose data is in external files."""
    if not has_external(model):
        return []
    external = _tensor_proto().EXTERNAL
    return [(where, t) for where, t in all_tensors(model) if t.data_location == external]


def refuse_external(model, what: str) -> None:
    """``GraphFormatError`` when ``model`` still has external tensors: converting it would let onnx
    read them relative to the current directory. (``read_model`` resolves them from the model's folder.)"""
    found = external_tensors(model)
    if found:
        where, t = found[0]
        location = next((e.value for e in t.external_data if e.key == "location"), "")
        raise GraphFormatError(
            f"{what}: {where} keeps its data in the external file {location!r}, and the model was given without "
            "its file, so there is no folder to read it from (lazyarray never reads it relative to the current "
            "directory); load the model from its file (la.onnx.load(path)), with the data file beside it")


def placeholder_copy(model):
    """A copy of ``model`` whose external tensors are in-memory scalars of their type instead: what
    ``onnx.checker`` can check without reading any file (it resolves external locations against the
    current directory) and without the data (a model over 2 GB)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for _, t in external_tensors(copy):
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
        del t.dims[:]  # a scalar of the tensor's type (the checker compares raw_data with dims and type,
        t.raw_data = b"\0" * (_nbytes(t) or 1)  # and an empty raw_data counts as absent)
    return copy


def resolve(model, folder: str | None, what: str, found: list | None = None) -> None:
    """Read every external tensor of ``model`` from the files in ``folder`` (the model file's folder)
    into the tensor itself (``raw_data``), checking the rules of the module docstring first.
    ``found``: ``external_tensors(model)`` when the caller has it already (the model unchanged since)."""
    found = external_tensors(model) if found is None else found
    if not found:
        return
    if folder is None:
        refuse_external(model, what)
    recorded = _recorded(model, what)
    folder_real = os.path.realpath(folder)
    opened: dict[str, tuple[int, int]] = {}  # location -> (fd, size)
    try:
        for where, t in found:
            location, offset, length = _info(t, where, what)
            if location not in opened:
                fd, size = _open(folder, folder_real, location, where, what)
                opened[location] = (fd, size)
                if recorded is not None and recorded[0] == location:
                    _check_generation(fd, size, location, recorded[1], what)
            fd, size = opened[location]
            expected = _nbytes(t)
            if length is None:
                length = expected if expected is not None else max(size - offset, 0)
            elif expected is not None and length != expected:
                raise GraphFormatError(
                    f"{what}: {where}: external data {location!r} gives length {length}, but the tensor "
                    f"(dims {list(t.dims)}) holds {expected} bytes; the model file is malformed: export it again")
            if offset + length > size:
                raise GraphFormatError(
                    f"{what}: {where}: external data {location!r} at offset {offset} with length {length} ends at "
                    f"byte {offset + length}, past the end of the file ({size} bytes); the data file is truncated "
                    "or belongs to another model: put the data file written with this model beside it")
            data = _pread(fd, length, offset)
            if len(data) != length:
                raise GraphFormatError(f"{what}: {where}: external data {location!r} changed while it was read "
                                       f"(got {len(data)} of {length} bytes); load the model again")
            t.raw_data = data
            t.data_location = _tensor_proto().DEFAULT
            del t.external_data[:]
    finally:
        for fd, _ in opened.values():
            os.close(fd)


def _info(t, where: str, what: str) -> tuple[str, int, int | None]:
    for e in t.external_data:  # (protobuf hands invalid UTF-8 in a string field over as bytes)
        if not isinstance(e.key, str) or not isinstance(e.value, str):
            raise GraphFormatError(f"{what}: {where}: an external_data entry {e.key!r}: {e.value!r} is not UTF-8 "
                                   "text; the model file is malformed: export it again"[:400])
    keys = {e.key: e.value for e in t.external_data}
    location = keys.get("location", "")
    if not location:
        raise GraphFormatError(f"{what}: {where} is marked as external data but names no 'location'; "
                               "the model file is malformed: export it again")
    numbers = []
    for key in ("offset", "length"):
        text = keys.get(key)
        if text is None or (key == "offset" and text == ""):
            numbers.append(0 if key == "offset" else None)
        elif re.fullmatch(r"[0-9]{1,19}", text):
            numbers.append(int(text))
        else:
            raise GraphFormatError(f"{what}: {where}: external data {location!r} has {key} {text[:40]!r}, not a "
                                   "non-negative integer; the model file is malformed: export it again")
    return location, numbers[0], numbers[1]


def _open(folder: str, folder_real: str, location: str, where: str, what: str) -> tuple[int, int]:
    """An open descriptor and the size of the regular file ``location`` inside ``folder``."""
    def fail(problem: str) -> GraphFormatError:
        return GraphFormatError(f"{what}: {where}: external data {location!r} {problem}; {_RULE}")

    if "\0" in location:
        raise fail("holds a NUL character")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", location):
        raise fail("is an absolute path")
    if ".." in re.split(r"[/\\]", location):
        raise fail("climbs out of the model's folder with '..'")
    path = os.path.join(folder, location)
    real = os.path.realpath(path)
    if real == folder_real or os.path.commonpath([folder_real, real]) != folder_real:
        raise fail(f"resolves to {real!r}, outside the model's folder {folder_real!r} (through a symbolic link)")
    try:
        st = os.stat(real)
    except OSError as exc:
        raise GraphFormatError(f"{what}: {where}: cannot read external data {location!r} from the model's folder "
                               f"{folder!r}: {exc.strerror or exc}; put the data file written with this model "
                               "beside it") from None
    if not stat.S_ISREG(st.st_mode):
        raise fail(f"is {file_kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise GraphFormatError(f"{what}: {where}: cannot read external data {location!r}: "
                               f"{exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # swapped after the check
        os.close(fd)
        raise fail(f"is {file_kind(st.st_mode)}, not a regular file")
    return fd, st.st_size


def _pread(fd: int, length: int, offset: int) -> bytes:
    parts, done = [], 0
    while done < length:
        chunk = os.pread(fd, min(length - done, 1 << 30), offset + done)
        if not chunk:
            break
        parts.append(chunk)
        done += len(chunk)
    return b"".join(parts)


def _nbytes(t) -> int | None:
    """The bytes the tensor's dims and element type call for (None when unknown: strings, new types)."""
    import onnx

    count = 1
    for d in t.dims:
        count *= d
    tp = onnx.TensorProto
    if t.data_type in {getattr(tp, n, -1) for n in ("INT4", "UINT4", "FLOAT4E2M1")}:
        return (count + 1) // 2
    if t.data_type in {getattr(tp, n, -1) for n in ("INT2", "UINT2")}:
        return (count + 3) // 4
    if t.data_type in (tp.STRING, tp.UNDEFINED):
        return None
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None
    return count * itemsize


def _recorded(model, what: str) -> tuple[str, str] | None:
    """``(location, generation)`` recorded by ``la.onnx.export``, or None."""
    for p in model.metadata_props:
        if p.key == GENERATION_KEY:
            location, _, generation = p.value.rpartition(" ")
            if not location or not _GENERATION.fullmatch(generation):
                raise GraphFormatError(f"{what}: metadata {GENERATION_KEY!r} must be '<data file> <32 hex digits>', "
                                       f"got {p.value[:120]!r}; export the model again")
            return location, generation
    return None


def _check_generation(fd: int, size: int, location: str, generation: str, what: str) -> None:
    """Refuse a data file that lazyarray wrote for another model file (an interrupted export)."""
    if size < TRAILER_SIZE:
        return
    tail = _pread(fd, TRAILER_SIZE, size - TRAILER_SIZE)
    if not tail.startswith(_TAG):
        return  # written by another tool: nothing to compare
    found = tail[len(_TAG):].decode("ascii", "replace")
    if found != generation:
        raise GraphFormatError(
            f"{what} and its external data file {location!r} were not written together (the model records "
            f"generation {generation[:12]}..., the data file is of {found[:12]}...): an export was interrupted "
            "or the files were mixed up; export the model again, or put the data file written with this "
            "model beside it")
