"""Writing files safely: the one atomic-write helper (symbol, parameter and drawing files).

``write_atomic(path, data)`` writes a temporary file beside ``path``, flushes it to disk and
renames it over ``path``, so a reader sees the old file or the new one, never half of one.

* The temporary is named after its target and the writing process
  (``.<name>.tmp-<pid>-<random>``); a write that was killed leaves one behind, and the next
  write of the same file removes those whose process is gone.
* The file gets the mode ``open()`` would give it under the current umask (``mkstemp``
  alone would make it 0600).
"""
from __future__ import annotations

import contextlib
import glob
import os
import tempfile
import threading

_UMASK_LOCK = threading.Lock()


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a crash never leaves a half-written file)."""
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.tmp-{os.getpid()}-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
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
            os.unlink(tmp)
            removed.append(tmp)
    return removed


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


def _umask() -> int:
    with _UMASK_LOCK:  # os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return mask
