"""What a company checks before adopting the package: a licence file and its metadata, extras that
install wheels (no source builds)."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
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


def test_scipy_is_the_sparse_extra_not_a_core_dependency():
    d = _project()["project"]
    assert not [r for r in d["dependencies"] if r.startswith("scipy")]
    extras = d["optional-dependencies"]
    assert [r.split(">")[0] for r in extras["sparse"]] == ["scipy"]
    assert "scipy>=1.11" in extras["test"]  # CI installs .[test]: the sparse tests run there


def test_sparse_arrays_without_scipy_raise_a_named_error_with_the_install_command(monkeypatch):
    import lazyarray as la
    from lazyarray.errors import LazyArrayError, MissingDependencyError

    monkeypatch.setitem(sys.modules, "scipy.sparse", None)  # what an install without the extra sees
    with pytest.raises(MissingDependencyError, match=r"pip install 'lazyarray\[sparse\]'") as info:
        la.sparse.csr_matrix(np.eye(3, dtype=np.float32))
    assert isinstance(info.value, LazyArrayError) and isinstance(info.value, ImportError)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_runs_without_scipy(monkeypatch, dtype):
    """GELU (the transformer zoo's activation) needs erf; without SciPy it uses math.erf per element."""
    import lazyarray as la

    monkeypatch.setitem(sys.modules, "scipy.special", None)
    x = np.linspace(-5, 5, 41).astype(dtype)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    got = la.blocks.GELU()(la.array(x)).asnumpy()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-6)


def _tracked_tree(to: Path) -> None:
    """A copy of the working tree's files that a build reads (tracked, or new and not ignored: the
    package, its metadata and the build backend in tools/), as a checkout has them."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", "pyproject.toml", "README.md",
                            "LICENSE", "lazyarray", "tools"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for name in names:
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)


def _size_mb(site: Path) -> float:
    skip = ("pip", "setuptools", "_distutils_hack", "pkg_resources")
    total = 0
    for top in site.iterdir():
        if top.name.split("-")[0] in skip:
            continue
        files = [top] if top.is_file() else [f for f in top.rglob("*") if f.is_file()]
        total += sum(f.stat().st_size for f in files)
    return total / 2**20


@pytest.mark.slow  # builds a wheel and installs NumPy into a new venv: about 15 s
def test_a_core_only_install_imports_runs_the_readme_taste_and_stays_small(tmp_path):
    """pip install . (no extras) into a fresh venv: the checkout stays clean (no build/, no egg-info),
    the README's first example runs, and site-packages grows by at most 100 MB (SciPy is an extra).
    Run it: python -m pytest -m slow tests/test_packaging.py"""
    src, env = tmp_path / "src", tmp_path / "venv"
    _tracked_tree(src)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    py = env / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet",
                    "--disable-pip-version-check", "."], cwd=src, check=True)
    assert not [p.name for p in src.iterdir() if p.name == "build" or p.name.endswith(".egg-info")]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    taste = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    run = subprocess.run([str(py), "-c", taste], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "softmax" in run.stdout
    where = subprocess.run([str(py), "-c", "import lazyarray, sysconfig; print(lazyarray.__file__); "
                            "print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout.split()
    assert where[0].startswith(str(env))  # the installed copy, not the checkout
    site = Path(where[1])
    assert not (site / "scipy").exists()
    size = _size_mb(site)
    print(f"core-only install: {size:.1f} MB in site-packages")
    assert size <= 100, f"a core-only install adds {size:.1f} MB"
