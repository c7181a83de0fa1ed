"""Writing files safely: the one atomic-write helper (symbol, parameter and drawing files).

``write_atomic(path, data)`` writes a temporary file beside ``path``, flushes it to disk and
renames it over ``path``, so a reader sees the old file or the new one, never half of one.

* The temporary is named after its target and the writing process
  (``.<name>.tmp-<pid>-<random>``); a write that was killed leaves one behind, and the next
  write of the same file removes those whose process is gone.
* The file gets the mode ``open()`` would give it under the current umask: it is created with
  0o666 and the system applies the umask (``mkstemp`` would make it 0600, and reading the umask
  back means setting it, process-wide).
* Writers of several files (``la.onnx.export`` with external data) stage them in a temporary
  folder named the same way; ``remove_stale_temporaries`` removes those folders too.

``read_regular(path, what)`` is the reading side: it refuses what is not a regular file before
reading (``/dev/zero`` never ends, a FIFO blocks until someone writes) and reads no more than the
size the file had when it was opened.
"""
from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import stat

from .errors import GraphFormatError


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a crash never leaves a half-written file)."""
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    remove_stale_temporaries(path)
    fd, tmp = _new_temporary(directory, base)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_stale_temporaries(path: str) -> list[str]:
    """Remove temporaries of ``path`` left by writers that no longer run; returns their paths."""
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    removed = []
    for tmp in glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(base)}.tmp-*")):
        pid_text = os.path.basename(tmp)[len(base) + 6:].split("-", 1)[0]
        if pid_text.isdigit() and _alive(int(pid_text)):
            continue  # another process may be writing it right now
        with contextlib.suppress(OSError):
            if os.path.isdir(tmp) and not os.path.islink(tmp):  # a multi-file writer's staging folder
                shutil.rmtree(tmp)
            else:
                os.unlink(tmp)
            removed.append(tmp)
    return removed


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (for error messages)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path, what: str) -> os.stat_result:
    """``os.stat`` of ``path``; ``GraphFormatError`` naming ``what`` when it is not a regular file
    (reading ``/dev/zero`` never ends and a FIFO blocks, so they are refused before being opened).
    ``OSError`` (a missing file) is left to the caller."""
    if not isinstance(path, (str, bytes, os.PathLike)):  # os.stat(3) would read file descriptor 3
        raise GraphFormatError(f"cannot read {what} {path!r}: a path must be a str or os.PathLike, "
                               f"got {type(path).__name__}")
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: it is {file_kind(st.st_mode)}, "
                               "not a regular file; give the path of the file itself")
    return st


def read_regular(path, what: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``: ``GraphFormatError`` naming ``what`` for anything else
    (a device, a FIFO, a directory: checked before opening, and again on the opened file), for
    files over ``limit`` bytes, and for unreadable files. Reads at most the size the file had when
    opened, so a file that grows meanwhile cannot make it read without end."""
    try:
        check_regular(path, what)  # (a path that is no str or os.PathLike: refused there)
        # O_NONBLOCK: a FIFO swapped in after the check must not block the open (no effect on files)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except GraphFormatError:  # (check_regular's, already naming the file: a ValueError, not wrapped again)
        raise
    except OSError as exc:
        raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:  # not a path; a name with a NUL byte
        raise GraphFormatError(f"cannot read {what} {path!r}: {exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: it is {file_kind(st.st_mode)}, "
                                   "not a regular file; give the path of the file itself")
        if limit is not None and st.st_size > limit:
            raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: {st.st_size:,} bytes, more than "
                                   f"the {limit:,} such a file can hold")
        try:
            return f.read(st.st_size)
        except OSError as exc:
            raise GraphFormatError(f"cannot read {what} {os.fspath(path)!r}: {exc.strerror or exc}") from None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _new_temporary(directory: str, base: str) -> tuple[int, str]:
    """``(fd, path)`` of a new file ``.<base>.tmp-<pid>-<random>`` in ``directory``, open for writing.
    Created with mode 0o666 as ``open()`` creates files, so the system applies the umask (and a
    directory's default ACL) itself: ``mkstemp``'s 0600 would need the umask read back, which
    ``os.umask`` can only do by setting it, process-wide."""
    prefix = os.path.join(directory, f".{base}.tmp-{os.getpid()}-")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = prefix + secrets.token_hex(4)
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # (another writer drew the same name)
            continue
    raise FileExistsError(f"write_atomic: no free temporary name beside {os.path.join(directory, base)}")
