"""The tuning table: one frozen set of every kernel switch and threshold, read from the environment
once, overridden in code for a block (this thread only) or process-wide through ``la.config``."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray import tuning_table as tuning
from lazyarray.errors import LazyArrayError, ParamError, ParamValueError


def test_defaults_are_the_measured_values_and_are_printed_with_their_meaning():
    # (the table in force is these, changed only by variables set before the import: a fresh process shows it)
    assert tuning.from_environment({}) == tuning.Tuning() and dataclasses.asdict(tuning.Tuning()) == tuning.DEFAULTS
    assert set(la.config.settings()) == set(tuning.DEFAULTS)
    text = repr(la.config)
    for name in tuning.DEFAULTS:
        assert name in text
    assert "LAZYARRAY_WINOGRAD" in text


def test_a_block_overrides_for_this_thread_only_and_restores():
    seen = []
    with la.tuning(winograd=False, per_image_min_pixels=7) as t:
        assert t.winograd is False and la.config.per_image_min_pixels == 7
        worker = threading.Thread(target=lambda: seen.append(la.config.winograd))
        worker.start()
        worker.join()
        with la.tuning(winograd=True):
            assert la.config.winograd is True and la.config.per_image_min_pixels == 7
    assert seen == [True]
    assert la.config.winograd is True and la.config.per_image_min_pixels == tuning.DEFAULTS["per_image_min_pixels"]


def test_config_assignment_sets_the_process_default_and_reset_restores_it():
    try:
        la.config.conv_region = False
        seen = []
        worker = threading.Thread(target=lambda: seen.append(la.config.conv_region))
        worker.start()
        worker.join()
        assert seen == [False] and la.config.settings()["conv_region"] is False
    finally:
        la.config.reset()
    assert la.config.conv_region is True


@pytest.mark.parametrize("settings,error,words", [
    ({"winogard": False}, ParamError, "did you mean winograd"),
    ({"winograd": "no"}, ParamError, "True or False"),
    ({"min_split_macs": 1.5}, ParamError, "takes an int"),
    ({"min_split_macs": True}, ParamError, "takes an int"),
    ({"per_image_min_pixels": -1}, ParamValueError, ">= 0"),
    ({"winograd_max_tile": 3}, ParamValueError, "2 or 4"),
])
def test_bad_settings_are_named_errors(settings, error, words):
    before = la.config.settings()
    with pytest.raises(error, match=words) as info, la.tuning(**settings):
        pass
    assert isinstance(info.value, LazyArrayError)
    with pytest.raises(error, match=words):
        for k, v in settings.items():
            setattr(la.config, k, v)
    assert la.config.settings() == before  # nothing changed


@pytest.mark.parametrize("value,field,expected", [("2", "winograd_max_tile", 2), ("4", "winograd_max_tile", 4),
                                                  ("0", "winograd", False), ("off", "winograd", False),
                                                  ("", "winograd_max_tile", 4)])
def test_the_environment_sets_the_defaults(value, field, expected):
    assert getattr(tuning.from_environment({"LAZYARRAY_WINOGRAD": value}), field) == expected


def test_a_bad_environment_value_is_refused_naming_the_variable():
    with pytest.raises(ParamValueError, match="LAZYARRAY_WINOGRAD"):
        tuning.from_environment({"LAZYARRAY_WINOGRAD": "9"})
    out = subprocess.run([sys.executable, "-c", "import lazyarray as la; print(la.config.winograd_max_tile)"],
                         env={"LAZYARRAY_WINOGRAD": "2", "PATH": ""}, capture_output=True, text=True)
    assert out.stdout.strip() == "2", out.stderr


def test_settings_steer_the_chooser():
    x = np.ones((8, 64, 16, 16), np.float32)
    w = np.ones((64, 64, 3, 3), np.float32)
    assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).impl.name == "winograd4"
    with la.tuning(winograd_max_tile=2):
        assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).impl.name == "winograd2"
    with la.tuning(winograd_min_channels=65, min_split_macs=1 << 62):
        assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).impl.name == "im2col_compiled"
        with la.tuning(conv_im2col_compiled=False):
            assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).impl.name == "im2col"


def test_an_unknown_setting_is_an_attribute_error_too():
    assert not hasattr(la.config, "winogard")  # (getattr's default and hasattr work)
    assert getattr(la.config, "nope", 5) == 5
    assert "winograd" in dir(la.config)


# -- every environment variable: read once, at import, into its field ------------------------------------
SET = {  # variable -> (text, field, value it gives)
    "LAZYARRAY_WINOGRAD": ("2", "winograd_max_tile", 2),
    "LAZYARRAY_PACK_WEIGHTS": ("0", "keep_weights", False),
    "LAZYARRAY_PACK_BUDGET_MB": ("1.5", "keep_weights_budget", 3 * 2**19),
    "LAZYARRAY_FUSE": ("off", "fuse", False),
    "LAZYARRAY_LOG": ("kernels", "log_kernels", True),
    "LAZYARRAY_FULL_TRACEBACK": ("yes", "full_tracebacks", True),
    "LAZYARRAY_JIT": ("0", "jit", False),
    "LAZYARRAY_JIT_CACHE_DIR": ("off", "jit_cache_dir", ""),
    "OMP_NUM_THREADS": ("3,1", "default_threads", 3),
    "LAZYARRAY_MAX_ALLOC_BYTES": ("8e9", "max_alloc_bytes", 8 * 10**9),
    "LAZYARRAY_CACHE_SIZE": ("3", "cache_size", 3),
    "LAZYARRAY_CACHE_BYTES": ("0x1000", "cache_bytes", 4096),
    "LAZYARRAY_GRAPH_CACHE": ("false", "graph_cache", False),
    "LAZYARRAY_STORAGE_FALLBACK_WARN": ("0", "storage_fallback_warn", False),
    "LAZYARRAY_SBP_FALLBACK_WARN": ("no", "sbp_fallback_warn", False),
}
BAD = {  # variable -> (text, words the error says: the accepted values)
    "LAZYARRAY_WINOGRAD": ("3", "2 .*, 4 .* or 0"),
    "LAZYARRAY_PACK_WEIGHTS": ("maybe", "0 or 1"),
    "LAZYARRAY_PACK_BUDGET_MB": ("lots", "a number >= 0"),
    "LAZYARRAY_FUSE": ("2", "0 or 1"),
    "LAZYARRAY_LOG": ("everything", "comma-separated list of: kernels"),
    "LAZYARRAY_FULL_TRACEBACK": ("all", "0 or 1"),
    "LAZYARRAY_JIT": ("numba", "0 or 1"),
    "LAZYARRAY_JIT_CACHE_DIR": ("cache/here", "an absolute path"),
    "LAZYARRAY_MAX_ALLOC_BYTES": ("-5", "a number >= 0"),
    "LAZYARRAY_CACHE_SIZE": ("0", "cache_size must be >= 1"),
    "LAZYARRAY_CACHE_BYTES": ("1 GB", "a number >= 0"),
    "LAZYARRAY_GRAPH_CACHE": ("nope", "0 or 1"),
    "LAZYARRAY_STORAGE_FALLBACK_WARN": ("silent", "0 or 1"),
    "LAZYARRAY_SBP_FALLBACK_WARN": ("-1", "0 or 1"),
}


def _fresh(env: dict, code: str) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this checkout's lazyarray)
    clean = {k: v for k, v in os.environ.items() if k not in SET}
    clean["PYTHONPATH"] = root + os.pathsep + clean.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120, cwd=root)


def test_every_variable_is_one_field_and_listed():
    assert set(SET) == set(tuning.ENVIRONMENT) | {"LAZYARRAY_LOG"} == set(BAD) | {"OMP_NUM_THREADS"}
    readme = open(os.path.join(os.path.dirname(__file__), os.pardir, "README.md"), encoding="utf-8").read()
    table = readme[readme.index("### Configuration"):]
    for name, (_, field_name, _) in SET.items():
        assert f"| `{name}` | `{field_name}`" in table, f"README's configuration table lacks {name}"


def test_a_fresh_process_without_the_variables_has_the_defaults():
    out = _fresh({}, "import json, lazyarray as la; print(json.dumps(la.config.settings()))")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == tuning.DEFAULTS


def test_each_variable_sets_its_field_in_a_fresh_process():
    code = "import json, lazyarray as la; print(json.dumps(la.config.settings()))"
    out = _fresh({name: text for name, (text, _, _) in SET.items()}, code)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert {f: got[f] for _, f, _ in SET.values()} == {f: v for _, f, v in SET.values()}
    for name, (text, field_name, value) in SET.items():  # and one at a time, the others unset
        assert getattr(tuning.from_environment({name: text}), field_name) == value, name


def test_the_settings_the_variables_give_are_what_the_modules_read():
    from lazyarray import aval, jit, threads
    from lazyarray.executor import recorded, signature_cache
    with la.tuning(max_alloc_bytes=12345, cache_size=5, cache_bytes=77, graph_cache=False, jit=False,
                   default_threads=3):
        assert aval.max_alloc_bytes() == 12345
        assert signature_cache.default_size() == 5 and signature_cache.default_bytes() == 77
        assert signature_cache.SignatureCache("t").size == 5
        assert not recorded.enabled() and not jit.enabled() and threads.default_threads() == 3


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_invalid_value_is_a_named_error_naming_the_variable_and_what_it_takes(name):
    text, words = BAD[name]
    with pytest.raises(ParamValueError, match=f"{name}.*{words}|{name}={text!r}.*{words}") as info:
        tuning.from_environment({name: text})
    assert name in str(info.value) and repr(text) in str(info.value) and "fix or unset it" in str(info.value)


def test_an_invalid_value_stops_the_import_with_the_named_error():
    out = _fresh({"LAZYARRAY_CACHE_SIZE": "many"}, "import lazyarray")
    assert out.returncode != 0 and "ParamValueError: LAZYARRAY_CACHE_SIZE must be a number >= 0" in out.stderr


def test_omp_num_threads_is_not_ours_so_forms_we_do_not_read_mean_unset():
    for text in ("", "abc", "0", "-2"):
        assert tuning.from_environment({"OMP_NUM_THREADS": text}).default_threads == 0


def test_reset_reads_the_environment_again(monkeypatch):
    monkeypatch.setenv("LAZYARRAY_GRAPH_CACHE", "0")
    assert la.config.graph_cache is True  # read once, at import
    try:
        la.config.reset()
        assert la.config.graph_cache is False
    finally:
        monkeypatch.delenv("LAZYARRAY_GRAPH_CACHE")
        la.config.reset()
    assert la.config.graph_cache is True
