"""What a company checks before adopting the package: a licence file and its metadata, extras that
install wheels (no source builds)."""
from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_the_licence_is_apache_2_and_ships_with_the_package():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    d = _project()
    assert d["project"]["license"] == {"text": "Apache-2.0"}
    assert "License :: OSI Approved :: Apache Software License" in d["project"]["classifiers"]
    assert d["tool"]["setuptools"]["license-files"] == ["LICENSE"]


def test_the_gpu_extra_names_the_cuda_12_wheel():
    gpu = _project()["project"]["optional-dependencies"]["gpu"]
    assert [g.split(">")[0] for g in gpu] == ["cupy-cuda12x"]  # plain "cupy" builds from source
