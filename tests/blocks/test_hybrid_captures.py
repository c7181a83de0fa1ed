"""Arrays a hybridized ``forward`` reads without taking them as arguments or parameters (closures,
globals) are graph inputs read at every call (blocks/hybrid.py ``Captured``): writes to them are
seen as eager code sees them; exports carry their values at export time as constants."""
import os

import numpy as np

import lazyarray as la
from lazyarray import autograd
from lazyarray import blocks as B


def _net(w):
    class Scale(B.HybridBlock):
        def forward(self, x):
            return la.relu(x * w + 1)

    return Scale()


def test_in_place_writes_to_a_captured_array_are_seen_like_eager():
    w = la.array(np.ones(4, np.float32))
    hyb, eager = _net(w), _net(w)
    hyb.hybridize()
    x = la.array(np.arange(4, dtype=np.float32) - 1)
    for value in (1.0, 2.0, -3.0, 0.5):
        w[:] = value
        for _ in range(3):  # the first call traces, the later ones take the remembered program
            np.testing.assert_array_equal(hyb(x).asnumpy(), eager(x).asnumpy())
    assert hyb.trace_count == 1  # read live, not retraced


def test_gradients_through_a_captured_array_follow_its_writes():
    w = la.array(np.ones(3, np.float32))
    net = _net(w)
    net.hybridize()
    x = la.array(np.array([1.0, 2.0, 3.0], np.float32))
    x.attach_grad()
    for value in (2.0, 5.0):
        w[:] = value
        with autograd.record():
            y = net(x).sum()
        y.backward()
        np.testing.assert_array_equal(x.grad.asnumpy(), np.full(3, value, np.float32))


def test_exports_carry_the_captured_values_as_constants(tmp_path):
    w = la.array(np.full(3, 2.0, np.float32))
    net = _net(w)
    net.hybridize()
    x = la.array(np.ones(3, np.float32))
    net(x)
    sym, params = net.export_graph()
    assert sym.list_inputs() == ["data"] and "_captured0" in sym.list_constants() and params == {}
    net.export(os.path.join(tmp_path, "m"))
    w[:] = 7.0  # after the export: the file keeps the value it was written with
    back = B.SymbolBlock.imports(os.path.join(tmp_path, "m-symbol.json"), ["data"],
                                 os.path.join(tmp_path, "m-0000.params"))
    np.testing.assert_array_equal(back(x).asnumpy(), np.full(3, 3.0, np.float32))
    np.testing.assert_array_equal(net(x).asnumpy(), np.full(3, 8.0, np.float32))
