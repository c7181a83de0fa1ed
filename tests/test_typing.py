"""What a type checker infers for a user's script: the results of arrays' operators, ``shape``, the
creation functions, calling a block (``Block.__call__`` gives what ``forward`` returns and takes what it
takes), losses, ``Trainer.step`` and ``DataLoader`` iteration; and the wrong calls it must reject.
Runs mypy's API on snippets (skipped when mypy is absent)."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import lazyarray as la

ROOT = Path(la.__file__).resolve().parent.parent
NDARRAY = "lazyarray.ndarray.NDArray"
SYMBOL = "lazyarray.graph.symbol.Symbol"

# (expression, the type mypy must reveal for it)
REVEALS = [
    ("la.array(np.ones((4, 3), dtype='float32'))", NDARRAY),
    ("la.ones((2, 3))", NDARRAY),
    ("la.zeros((2, 3))", NDARRAY),
    ("la.full((2,), 1.0)", NDARRAY),
    ("la.arange(5)", NDARRAY),
    ("x.shape", "tuple[int, ...]"),
    ("x + 1", NDARRAY),
    ("2.5 * x", NDARRAY),
    ("x - x", NDARRAY),
    ("x / np.float32(2)", NDARRAY),
    ("x @ x.T", NDARRAY),
    ("-x", NDARRAY),
    ("abs(x)", NDARRAY),
    ("x > 0", NDARRAY),
    ("x[0]", NDARRAY),
    ("x ** 2", NDARRAY),
    ("x.sum()", NDARRAY),
    ("dense(x)", NDARRAY),
    ("dense.forward(x)", NDARRAY),
    ("conv(la.ones((1, 1, 4, 4)))", NDARRAY),
    ("loss_fn(dense(x), la.zeros((4, 2)))", NDARRAY),
    ("mine(x)", f"tuple[{NDARRAY}, {NDARRAY}]"),
    ("trainer.step(4)", "None"),
    ("iter(loader)", "typing.Iterator[Any]"),
    ("la.blocks.SymbolBlock.imports", None),  # only that it resolves
    ("op(x)", "Any"),  # one array or a list of them: the symbol decides at run time
    ("la.sym.relu(la.sym.var('x'))", SYMBOL),  # la.sym's functions are made at import: sym.pyi
    ("la.sym.nn.softmax(la.sym.var('x'), axis=1)", SYMBOL),
    ("la.sym.linalg.inv(la.sym.var('x'))", SYMBOL),
]

PRELUDE = """
    import numpy as np

    import lazyarray as la
    from lazyarray.blocks import Conv2D, Dense, HybridBlock, L2Loss, Trainer
    from lazyarray.data import ArrayDataset, DataLoader


    class Two(HybridBlock):
        def forward(self, x: la.NDArray) -> tuple[la.NDArray, la.NDArray]:
            return x, x * 2


    x = la.ones((4, 3))
    dense = Dense(2, in_units=3)
    conv = Conv2D(2, 3, in_channels=1)
    loss_fn = L2Loss()
    mine = Two()
    trainer = Trainer(dense.collect_params(), "sgd", {"learning_rate": 0.1})
    loader = DataLoader(ArrayDataset(np.ones((8, 3)), np.ones((8,))), batch_size=4)
    with la.deferred():
        lazy = la.relu(x)
    op = la.CachedOp(la.get_symbol(lazy, inputs={"x": x}))
"""

# (line of the snippet, the error mypy must report there)
WRONG = [
    ("dense(x, x)", 'Too many arguments for "__call__" of "HybridBlock"'),
    ("dense('x')", 'Argument 1 to "__call__" of "HybridBlock" has incompatible type "str"; expected "NDArray"'),
    ("n: int = x + 1", 'Incompatible types in assignment (expression has type "NDArray", variable has type "int")'),
    ("s: tuple[str, ...] = x.shape", 'Incompatible types in assignment (expression has type "tuple[int, ...]"'),
    ("x + 'a'", 'Argument 1 has incompatible type "str"; expected "NDArray | complex'),
    ("y: la.NDArray = mine(x)", "Incompatible types in assignment"),
    ("op('x')", 'Argument 1 to "__call__" of "CachedOp" has incompatible type "str"'),
    ("la.sym.relu(la.sym.var('x'), 3)", 'Too many arguments for "relu"'),
    ("la.sym.nn.not_an_op", '"_NnNamespace" has no attribute "not_an_op"'),
    ("trainer.step('4')", 'Argument 1 to "step" of "Trainer" has incompatible type "str"; expected "int"'),
]


def _run(tmp_path, body: str, prelude: str | None = PRELUDE) -> tuple[str, int]:
    api = pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install -e .[test]")
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {ROOT}\nfollow_imports = silent\n"
                                       f"cache_dir = {tmp_path / 'cache'}\n")
    script = tmp_path / "user.py"
    script.write_text(body if prelude is None else textwrap.dedent(prelude) + body)
    stdout, stderr, status = api.run(["--strict", "--config-file", str(tmp_path / "mypy.ini"), str(script)])
    return stdout + stderr, status


def test_the_readmes_training_example_type_checks_strictly(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    example = next(b for b in blocks if "nn.Trainer(" in b and "SymbolBlock.imports" in b)
    out, status = _run(tmp_path, example, prelude=None)
    assert status == 0, out


def test_mypy_reveals_precise_types_for_a_users_script(tmp_path):
    start = len(textwrap.dedent(PRELUDE).splitlines()) + 1
    out, _ = _run(tmp_path, "".join(f"reveal_type({e})\n" for e, _ in REVEALS))
    revealed = {int(m[1]): m[2] for m in re.finditer(r'user\.py:(\d+): note: Revealed type is "(.*)"', out)}
    for i, (expr, want) in enumerate(REVEALS):
        got = revealed.get(start + i)
        assert got is not None, (expr, out)
        if want is not None:
            assert got == want, (expr, got)
    errors = [ln for ln in out.splitlines() if ": error:" in ln]
    assert not errors, out  # the prelude itself type-checks under --strict


@pytest.mark.parametrize("line,message", WRONG, ids=[w[0] for w in WRONG])
def test_mypy_rejects_wrong_calls(tmp_path, line, message):
    out, status = _run(tmp_path, line + "\n")
    assert status == 1, out
    n = len(textwrap.dedent(PRELUDE).splitlines()) + 1
    assert any(f"user.py:{n}: error: {message}" in ln for ln in out.splitlines()), (message, out)
