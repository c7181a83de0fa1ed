"""``LAZYARRAY_LOG=kernels``: each new choice logged once, on the ``lazyarray.kernels`` logger."""
from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import lazyarray as la
from lazyarray import tuning_table
from lazyarray.kernels import log


def test_each_new_choice_is_logged_once(caplog):
    log.clear()
    x, w = la.ones((2, 3, 8, 8)), la.ones((4, 3, 3, 3))
    with la.tuning(log_kernels=True), caplog.at_level(logging.INFO, logger="lazyarray.kernels"):
        for _ in range(3):
            la.nn.conv2d(x, w)
        la.nn.conv2d(la.ones((3, 3, 8, 8)), w)
    lines = [r.getMessage() for r in caplog.records if r.name == "lazyarray.kernels"]
    assert lines == ["conv2d[blocked] for [2, 3, 8, 8], [4, 3, 3, 3]",
                     "conv2d[blocked] for [3, 3, 8, 8], [4, 3, 3, 3]"]


def test_nothing_is_logged_by_default(caplog):
    log.clear()
    with caplog.at_level(logging.INFO, logger="lazyarray.kernels"):
        la.nn.conv2d(la.ones((2, 3, 8, 8)), la.ones((4, 3, 3, 3)))
    assert not [r for r in caplog.records if r.name == "lazyarray.kernels"]


def test_the_environment_turns_it_on_and_the_lines_reach_stderr():
    code = "import lazyarray as la; la.nn.conv2d(la.ones((2, 3, 8, 8)), la.ones((4, 3, 3, 3)))"
    out = subprocess.run([sys.executable, "-c", code], env={"LAZYARRAY_LOG": "kernels", "PATH": ""},
                         capture_output=True, text=True)
    assert "lazyarray.kernels: conv2d[blocked] for [2, 3, 8, 8], [4, 3, 3, 3]" in out.stderr, out.stderr
    assert tuning_table.from_environment({"LAZYARRAY_LOG": "kernels"}).log_kernels
    with pytest.raises(la.errors.ParamValueError, match="LAZYARRAY_LOG"):
        tuning_table.from_environment({"LAZYARRAY_LOG": "kernel"})
