"""Compatibility: files written by every earlier schema version load and compute what they computed.

``tests/graph/golden/v<N>-*`` were written by the lazyarray release that wrote schema version N
(v1: commit 4ee9f23), together with ``v<N>-expected.json`` (inputs and the outputs that release
computed). They are never regenerated: a new schema version adds its own set. See
docs/graph-format.md, "Compatibility".
"""
import json
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
VERSIONS = sorted({f.split("-")[0] for f in os.listdir(GOLDEN)})


def test_every_schema_version_up_to_the_current_one_has_golden_files():
    from lazyarray.graph.serialize import VERSION

    assert VERSIONS == [f"v{n}" for n in range(1, VERSION + 1)]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_golden_model_imports_and_gives_the_outputs_it_gave(version):
    expected = json.load(open(os.path.join(GOLDEN, f"{version}-expected.json")))["cnn"]
    net = B.SymbolBlock.imports(os.path.join(GOLDEN, f"{version}-cnn-symbol.json"), ["data"],
                                os.path.join(GOLDEN, f"{version}-cnn-0000.params"))
    y = net(la.array(np.asarray(expected["x"], np.float32)))
    np.testing.assert_allclose(y.asnumpy(), np.asarray(expected["y"], np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_golden_symbol_loads_and_gives_the_outputs_it_gave(version):
    expected = json.load(open(os.path.join(GOLDEN, f"{version}-expected.json")))["ops"]
    sym = la.load_symbol(os.path.join(GOLDEN, f"{version}-ops-symbol.json"))
    outs = la.CachedOp(sym)(a=la.array(np.asarray(expected["a"], np.float32)),
                            b=la.array(np.asarray(expected["b"], np.float32)))
    for got, want in zip(outs, expected["outputs"]):
        np.testing.assert_allclose(got.asnumpy(), np.asarray(want, np.float32), rtol=1e-5, atol=1e-6)
    assert la.Symbol.from_json(sym.to_json()).to_json() == sym.to_json()  # and re-saves in today's form
