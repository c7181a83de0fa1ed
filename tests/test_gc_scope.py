"""``gc_scope``: the GC paused while lazyarray builds graphs, and the one collection a large import pays."""
from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lazyarray
from lazyarray import gc_scope, jit
from lazyarray.gc_scope import collected_after, gc_paused

ROOT = Path(lazyarray.__file__).resolve().parents[1]


def _full_collections(body) -> int:
    seen = []

    def hook(phase, info):
        if phase == "stop" and info["generation"] == 2:
            seen.append(info)
    gc.callbacks.append(hook)
    try:
        body()
    finally:
        gc.callbacks.remove(hook)
    return len(seen)


def test_collected_after_pauses_the_block_and_then_collects_the_heap_once():
    state = []

    def body():
        with collected_after():
            state.append(gc.isenabled())
            with gc_paused():  # (nested pauses leave it to the outermost scope)
                state.append(gc.isenabled())
    assert _full_collections(body) == 1
    assert state == [False, False]
    assert gc.isenabled()


def test_collected_after_runs_no_collection_where_the_program_turned_the_gc_off():
    gc.disable()
    try:
        def body():
            with collected_after():
                pass
        assert _full_collections(body) == 0
        assert not gc.isenabled()  # the program's gc.disable() stands
    finally:
        gc.enable()


def test_collected_after_gives_the_gc_back_when_the_block_raises():
    try:
        with collected_after():
            raise KeyError("inside")
    except KeyError:
        pass
    assert gc.isenabled()


def test_importing_numba_through_jit_pays_its_full_collection_then():
    # (a fresh interpreter: this one imported numba long ago)
    script = textwrap.dedent("""
        import gc, json, sys
        from lazyarray import jit
        seen = []
        gc.callbacks.append(lambda phase, info: seen.append(info["generation"]) if phase == "stop" else None)
        numba = jit._numba()
        print(json.dumps({"numba": numba is not None and "numba" in sys.modules, "last": seen[-1] if seen else None,
                          "on": gc.isenabled()}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True,
                         cwd=ROOT)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["on"]
    if got["numba"]:  # (where numba is installed: the import ended with one full collection)
        assert got["last"] == 2


def test_looking_numba_up_again_after_clear_collects_nothing(monkeypatch):
    """``jit.clear()`` forgets the numba lookup; the next lookup finds numba imported and must not run a
    full collection (in a large process that is a second or more, paid by whichever kernel call looks)."""
    pytest.importorskip("numba")
    jit._numba()  # (imported)
    collections = []
    monkeypatch.setattr(gc_scope.gc, "collect", lambda *a: collections.append(a) or 0)
    jit.clear()
    assert jit._numba() is not None
    assert collections == []
