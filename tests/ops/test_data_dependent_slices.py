"""A slice of a data-dependent length (a mask, nonzero, a sort of masked values) has a data-dependent
length too, never a probed guess: hybridized, compiled and deferred code equal eager code
(ops/shape.py ``_getitem_unknown``). These patterns used to give ten copies of one value, or []."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

X = np.array([3.0, -1.0, 2.0, -5.0, 4.0, 1.0], np.float32)
M = np.array([[1, 0, 1], [0, 1, 1]], bool)

PATTERNS = {
    "mask then [:10]": lambda x, m: x[x > 0][:10] * 2,
    "mask then [-2:2]": lambda x, m: x[x > 0][-2:2],
    "mask then [1:]": lambda x, m: x[x > 0][1:] + 1,
    "sorted mask then [:3]": lambda x, m: la.sort(x[x > 0], descending=True)[:3],
    "nonzero then [:5]": lambda x, m: la.nonzero(m)[0][:5],
}


def _numpy(name):
    pos = X[X > 0]
    return {"mask then [:10]": pos[:10] * 2, "mask then [-2:2]": pos[-2:2], "mask then [1:]": pos[1:] + 1,
            "sorted mask then [:3]": np.sort(pos)[::-1][:3], "nonzero then [:5]": np.nonzero(M)[0][:5]}[name]


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_eager_deferred_compiled_and_hybridized_agree_with_numpy(name):
    fn, want = PATTERNS[name], _numpy(name)
    x, m = la.array(X), la.array(M)
    np.testing.assert_array_equal(fn(x, m).asnumpy(), want)
    with la.deferred():
        y = fn(x, m)
        assert y.static_shape == (None,)  # data-dependent: not known without computing
    np.testing.assert_array_equal(y.asnumpy(), want)
    with la.deferred():
        xs, ms = la.array(X), la.array(M)
        used = {"m": ms} if name.startswith("nonzero") else {"x": xs}
        sym = la.get_symbol(fn(xs, ms), inputs=used)
    op = la.CachedOp(sym)
    np.testing.assert_array_equal(op(**{k: {"x": x, "m": m}[k] for k in used}).asnumpy(), want)

    class Net(B.HybridBlock):
        def forward(self, a, b):
            return fn(a, b)

    net = Net()
    net.hybridize()
    np.testing.assert_array_equal(net(x, m).asnumpy(), want)
    other = np.array([7.0, 8.0, -1.0], np.float32)  # a second call at another length
    np.testing.assert_array_equal(net(la.array(other), m).asnumpy(),
                                  _numpy_of(name, other))


def _numpy_of(name, x):
    pos = x[x > 0]
    return {"mask then [:10]": pos[:10] * 2, "mask then [-2:2]": pos[-2:2], "mask then [1:]": pos[1:] + 1,
            "sorted mask then [:3]": np.sort(pos)[::-1][:3], "nonzero then [:5]": np.nonzero(M)[0][:5]}[name]


def test_slices_of_symbolic_sizes_are_expressions():
    b = la.Dim("b")
    x = la.sym.var("x", shape=(b, 3))

    def shape(key):
        return la.sym.getitem(x, key=key).outputs[0].aval.shape
    assert shape((slice(1, None),)) == (b - 1, 3)
    assert shape((slice(None, -1),)) == (b - 1, 3)
    assert shape((Ellipsis, None, slice(0, 2))) == (b, 1, 2)
    assert shape((0,)) == (3,)
    n = shape((slice(None, 10),))[0]
    assert n.evaluate({"b": 4}) == 4 and n.evaluate({"b": 40}) == 10
    op = la.CachedOp(la.sym.getitem(x, key=(slice(None, 10),)))
    assert op(la.zeros((4, 3))).shape == (4, 3) and op(la.zeros((40, 3))).shape == (10, 3)
