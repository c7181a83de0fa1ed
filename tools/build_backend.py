"""The build backend of ``pip install .``: setuptools, run on a copy of the package in a temporary
folder, so that building a wheel leaves no ``build/`` or ``*.egg-info`` in the checkout.

Editable installs and sdists use setuptools on the checkout itself (they need its files in place).
pyproject.toml names this module (``build-backend``, ``backend-path = ["tools"]``);
tests/test_packaging.py installs the package from a copy of the working tree and checks the copy
stays clean.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the hooks setuptools answers unchanged)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
)

_COPIED = ("pyproject.toml", "README.md", "LICENSE", "lazyarray")


def _copy_of_the_package(to: str) -> None:
    for name in _COPIED:
        if os.path.isdir(name):
            shutil.copytree(name, os.path.join(to, name), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(name, to)


def _in_a_copy(hook, *args):
    """``hook(*args)`` run in a temporary copy of the package (the folders in ``args`` made absolute
    first: they are pip's, relative to the checkout)."""
    args = tuple(os.path.abspath(a) if isinstance(a, str) else a for a in args)
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="lazyarray-build-") as tmp:
        _copy_of_the_package(tmp)
        os.chdir(tmp)
        try:
            return hook(*args)
        finally:
            os.chdir(here)


def get_requires_for_build_wheel(config_settings=None):
    return _in_a_copy(_setuptools.get_requires_for_build_wheel, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _in_a_copy(_setuptools.build_wheel, wheel_directory, config_settings, metadata_directory)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _in_a_copy(_setuptools.prepare_metadata_for_build_wheel, metadata_directory, config_settings)
