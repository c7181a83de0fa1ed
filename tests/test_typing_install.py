"""A user's script type-checks against lazyarray after the README's install command (an editable
install in ``compat`` mode: a path entry that mypy follows, where pip's default import hook hides
the package from it)."""
from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = '''import lazyarray as la

x = la.ones((2, 3))
y: la.NDArray = la.relu(x * 2)
net = la.blocks.Dense(4, in_units=3)
shape: tuple = y.shape
'''

WRONG = '''import lazyarray as la

y: int = la.relu(la.ones((2,)))
'''


def _mypy(tmp_path, text: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    script = tmp_path / "user_script.py"
    script.write_text(text, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
                           "--cache-dir", str(tmp_path / ".mypy_cache"), str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_mypy_finds_the_package_after_the_readme_install(tmp_path):
    out = _mypy(tmp_path, SCRIPT)
    assert out.returncode == 0, (
        "mypy cannot type-check a user script against lazyarray; install as the README says "
        f"(pip install -e . --config-settings editable_mode=compat):\n{out.stdout}{out.stderr}")


def test_mypy_sees_lazyarrays_types(tmp_path):
    out = _mypy(tmp_path, WRONG)
    assert out.returncode == 1 and "Incompatible types in assignment" in out.stdout, out.stdout + out.stderr
