"""The tuning table: one frozen set of every kernel switch and threshold, read from the environment
once, overridden in code for a block (this thread only) or process-wide through ``la.config``."""
from __future__ import annotations

import dataclasses
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
    t = tuning.current()
    assert t == tuning.Tuning() and dataclasses.asdict(t) == tuning.DEFAULTS
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
    with pytest.raises(error, match=words) as info, la.tuning(**settings):
        pass
    assert isinstance(info.value, LazyArrayError)
    with pytest.raises(error, match=words):
        for k, v in settings.items():
            setattr(la.config, k, v)
    assert la.config.settings() == tuning.DEFAULTS  # nothing changed


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
        assert kernels.choose("conv2d", np, x, w, padding=(1, 1)).impl.name == "im2col"


def test_an_unknown_setting_is_an_attribute_error_too():
    assert not hasattr(la.config, "winogard")  # (getattr's default and hasattr work)
    assert getattr(la.config, "nope", 5) == 5
    assert "winograd" in dir(la.config)
