"""The type stubs of the generated functions: current with the registry, and read by mypy.

``la.relu`` and friends are made at import time, so type checkers read ``lazyarray/__init__.pyi``,
``nn.pyi`` and ``linalg.pyi`` instead, written by ``python -m lazyarray._stubs``. The first test
fails when a registry change was not followed by regenerating them.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import lazyarray as la
from lazyarray import _stubs

ROOT = Path(la.__file__).resolve().parent.parent


def test_committed_stubs_equal_the_generator_output():
    made = _stubs.stubs()
    assert sorted(p.name for p in made) == ["__init__.pyi", "fft.pyi", "linalg.pyi", "nn.pyi", "sym.pyi"]
    for path, text in made.items():
        assert path.read_text() == text, f"{path.name} is stale: run python -m lazyarray._stubs"
    assert _stubs.main(["--check"]) == 0


def test_stubs_define_every_public_name():
    text = (ROOT / "lazyarray" / "__init__.pyi").read_text()
    for name in ["relu", "sum", "tile", "argwhere", "concat", "array", "deferred", "CachedOp", "NDArray", "nn",
                 "linalg", "float32", "bool", "pi"]:
        assert f"def {name}(" in text or f" as {name}\n" in text or f"\n{name}: " in text, name
    assert "def relu(x: NDArray | float, *, out: NDArray | None = None) -> NDArray: ..." in text
    assert "from .array_api import sum as sum\n" in text  # written out with the standard's dtype=
    linalg = (ROOT / "lazyarray" / "linalg.pyi").read_text()
    assert "def svd(x: NDArray, /, *, full_matrices: bool = True) -> SVDResult: ..." in linalg
    assert "class SVDResult(NamedTuple):\n    U: NDArray\n" in linalg


def test_py_typed_ships_with_the_stubs():
    assert (ROOT / "lazyarray" / "py.typed").exists()
    assert 'lazyarray = ["py.typed", "*.pyi"]' in (ROOT / "pyproject.toml").read_text()


USER_CODE = """
    import numpy as np

    import lazyarray as la

    x: la.NDArray = la.array([[1.0, -2.0], [3.0, 4.0]])
    w = la.ones((3, 2))
    y: la.NDArray = la.relu(x)
    s: la.NDArray = la.sum(x, axis=0)
    s2 = la.sum(x, 0, keepdims=True)
    h: la.NDArray = la.nn.dense(x, w, la.zeros((3,)))
    h2 = la.nn.dense(x, w)
    c = la.concatenate([x, y], axis=1)
    t = la.tile(x, 2, 1)
    q, r = la.linalg.qr(x)
    z = la.add(x, 1.0) + la.maximum(y, 0)
    with la.deferred():
        lazy = la.nn.softmax(x * 2)
    op = la.CachedOp(la.get_symbol(lazy, inputs={"x": x}))
    out = op(x)
    n: np.ndarray = y.asnumpy()
    m: la.NDArray = x.sum(axis=0).reshape(1, -1)
"""

BAD_CODE = """
    import lazyarray as la

    x = la.array([1.0, 2.0])
    la.relu(x, 3)
    la.sum(x, axis="rows")
    la.nn.dense(x)
    la.not_an_op(x)
"""


def test_mypy_accepts_user_code_and_rejects_wrong_calls(tmp_path):
    api = pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install -e .[test]")
    (tmp_path / "user.py").write_text(textwrap.dedent(USER_CODE))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD_CODE))
    # mypy_path: this checkout, not an installed lazyarray; errors inside lazyarray's own modules are
    # silenced as they are for an installed package (follow_imports = silent)
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {ROOT}\nfollow_imports = silent\n"
                                       f"cache_dir = {tmp_path / 'cache'}\n")
    cfg = ["--config-file", str(tmp_path / "mypy.ini")]
    stdout, stderr, status = api.run([*cfg, str(tmp_path / "user.py")])
    assert status == 0, stdout + stderr
    stdout, stderr, status = api.run([*cfg, str(tmp_path / "bad.py")])
    assert status == 1
    for line, msg in [(5, 'Too many positional arguments for "relu"'),
                      (6, 'Argument "axis" to "sum" has incompatible type "str"'),
                      (7, 'Missing positional argument "weight" in call to "dense"'),
                      (8, 'Module has no attribute "not_an_op"')]:
        assert any(f"bad.py:{line}: error: {msg}" in ln for ln in stdout.splitlines()), (msg, stdout)
