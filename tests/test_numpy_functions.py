"""Every public NumPy function on lazyarray arrays (lazyarray/numpy_functions.py, issue #38): a lazyarray
result whose graph computes NumPy's value, or a named error; never a NumPy array or scalar.

The functions are NumPy's own list: the callables of ``np.__all__``, ``np.linalg.__all__`` and
``np.fft.__all__``. Each is called with the arguments of ``ARGS`` (default: one 3x4 float32 array; a
ufunc gets ``nin`` arrays), once with lazy arrays under ``la.deferred()`` and once with eager arrays.
``NOT_ARRAY_FUNCTIONS`` take no array data (sizes, files, settings, dtypes, strings), and
``CONVERSIONS`` are NumPy's explicit conversions (``np.asarray(x)`` computes the array, as documented);
NumPy does not dispatch either kind to ``__array_function__``.
"""
from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray.numpy_functions import METADATA

X = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4) / 4  # positive, no ties
Y = np.linspace(-1.0, 2.0, 12, dtype=np.float32).reshape(3, 4)
S = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)  # symmetric positive definite
V = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
N = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], np.int32)
B = X > 1.5

# name -> arguments (NumPy arrays here; each test makes lazyarray arrays of them) and keywords
ARGS = {
    "np.moveaxis": ((X, 0, 1), {}), "np.swapaxes": ((X, 0, 1), {}), "np.rollaxis": ((X, 1), {}),
    "np.argpartition": ((V, 2), {}), "np.partition": ((V, 2), {}), "np.tile": ((X, (2, 1)), {}),
    "np.repeat": ((X, 2), {"axis": 1}), "np.roll": ((X, 1), {"axis": 0}), "np.pad": ((X, 1), {}),
    "np.take": ((X, [0, 2]), {"axis": 1}), "np.take_along_axis": ((X, np.argsort(X, axis=1)), {"axis": 1}),
    "np.put": ((X, [0], [1.0]), {}), "np.put_along_axis": ((X, np.zeros((3, 1), np.int64), 1.0, 1), {}),
    "np.place": ((X, B, [0.0]), {}), "np.putmask": ((X, B, 0.0), {}), "np.copyto": ((X, Y), {}),
    "np.fill_diagonal": ((X, 0.0), {}), "np.reshape": ((X, (4, 3)), {}), "np.resize": ((X, (2, 6)), {}),
    "np.expand_dims": ((X, 0), {}), "np.broadcast_to": ((V, (3, 4)), {}), "np.split": ((X, 2), {"axis": 1}),
    "np.array_split": ((X, 3), {"axis": 1}), "np.hsplit": ((X, 2), {}), "np.vsplit": ((X, 3), {}),
    "np.dsplit": ((X.reshape(3, 2, 2), 2), {}), "np.insert": ((V, 1, 9.0), {}), "np.delete": ((V, 1), {}),
    "np.append": ((V, V), {}), "np.full_like": ((X, 7.0), {}), "np.astype": ((X, np.float64), {}),
    "np.searchsorted": ((V, np.array([1.0, 3.0], np.float32)), {}), "np.isin": ((X, V), {}),
    "np.where": ((B, X, Y), {}), "np.select": (([B], [X]), {}), "np.choose": ((np.zeros((3, 4), np.int64), [X]), {}),
    "np.compress": (([True, False, True], X), {"axis": 0}), "np.extract": ((B, X), {}),
    "np.concatenate": (([X, Y],), {}), "np.concat": (([X, Y],), {}), "np.stack": (([X, Y],), {}),
    "np.hstack": (([X, Y],), {}), "np.vstack": (([X, Y],), {}), "np.dstack": (([X, Y],), {}),
    "np.column_stack": (([V, V],), {}), "np.row_stack": (([X, Y],), {}), "np.block": (([X, Y],), {}),
    "np.meshgrid": ((V, V), {}), "np.broadcast_arrays": ((X, V), {}), "np.unstack": ((X,), {}),
    "np.dot": ((X, X.T), {}), "np.vdot": ((X, Y), {}), "np.inner": ((X, Y), {}), "np.outer": ((V, V), {}),
    "np.tensordot": ((X, Y.T), {"axes": 1}), "np.kron": ((V, V), {}), "np.cross": ((V[:3], V[1:]), {}),
    "np.einsum": (("ij,ij->i", X, Y), {}), "np.einsum_path": (("ij,ij->i", X, Y), {}),
    "np.convolve": ((V, V), {}), "np.correlate": ((V, V), {}), "np.trace": ((S,), {}), "np.diagonal": ((S,), {}),
    "np.diag": ((S,), {}), "np.diagflat": ((V,), {}), "np.tril_indices_from": ((S,), {}),
    "np.triu_indices_from": ((S,), {}), "np.diag_indices_from": ((S,), {}), "np.clip": ((Y, 0.0, 1.0), {}),
    "np.allclose": ((X, X), {}), "np.isclose": ((X, Y), {}), "np.array_equal": ((X, X), {}),
    "np.array_equiv": ((X, V), {}), "np.shares_memory": ((X, Y), {}), "np.may_share_memory": ((X, Y), {}),
    "np.can_cast": ((X, np.float64), {}), "np.result_type": ((X, np.int8), {}),
    "np.percentile": ((X, 50), {}), "np.nanpercentile": ((X, 50), {}), "np.quantile": ((X, 0.5), {}),
    "np.nanquantile": ((X, 0.5), {}), "np.interp": ((V, V, V), {}), "np.digitize": ((V, V), {}),
    "np.histogram2d": ((V, V), {}), "np.polyfit": ((V, V, 1), {}), "np.polyval": ((V, V), {}),
    "np.polyadd": ((V, V), {}), "np.polysub": ((V, V), {}), "np.polymul": ((V, V), {}), "np.polydiv": ((V, V), {}),
    "np.polyder": ((V,), {}), "np.polyint": ((V,), {}), "np.poly": ((V,), {}), "np.roots": ((V,), {}),
    "np.vander": ((V,), {}), "np.ix_": ((V,), {}), "np.bincount": ((N.ravel(),), {}),
    "np.packbits": ((B,), {}), "np.unpackbits": ((N.astype(np.uint8),), {}), "np.unravel_index": ((N, (4, 4)), {}),
    "np.ravel_multi_index": (((N, N), (13, 13)), {}), "np.intersect1d": ((V, V), {}), "np.union1d": ((V, V), {}),
    "np.setdiff1d": ((V, V), {}), "np.setxor1d": ((V, V), {}), "np.apply_along_axis": ((np.sum, 0, X), {}),
    "np.apply_over_axes": ((np.sum, X, [0]), {}), "np.piecewise": ((X, [B], [1.0]), {}),
    "np.lexsort": (((V, V),), {}), "np.cumulative_sum": ((X,), {"axis": 1}), "np.cumulative_prod": ((X,), {"axis": 1}),
    "np.cov": ((X,), {}), "np.corrcoef": ((X,), {}), "np.histogram": ((V,), {}),
    "np.histogramdd": ((X,), {}), "np.histogram_bin_edges": ((V,), {}), "np.gradient": ((X,), {}),
    "np.unwrap": ((X,), {}), "np.trapezoid": ((X,), {}), "np.trim_zeros": ((V,), {}), "np.sort_complex": ((V,), {}),
    "np.linalg.matrix_power": ((S, 2), {}), "np.linalg.solve": ((S, S), {}), "np.linalg.lstsq": ((S, S), {}),
    "np.linalg.tensorsolve": ((S, V[:3]), {}), "np.linalg.tensorinv": ((S,), {"ind": 1}),
    "np.linalg.multi_dot": (([X, X.T, S],), {}), "np.linalg.cross": ((S, S), {}), "np.linalg.outer": ((V, V), {}),
    "np.linalg.tensordot": ((X, Y.T), {"axes": 1}), "np.linalg.matmul": ((X, X.T), {}),
    "np.linalg.vecdot": ((X, Y), {}), "np.linalg.norm": ((X,), {}), "np.matmul": ((X, X.T), {}),
    "np.vecdot": ((X, Y), {}), "np.matvec": ((X, V), {}), "np.vecmat": ((V[:3], X), {}),
    "np.fft.irfft": ((X,), {}), "np.fft.hfft": ((X,), {}),
}
for _name in ("inv", "cholesky", "eigvals", "eigvalsh", "slogdet", "det", "eig", "eigh", "cond", "pinv",
              "matrix_rank", "svd", "svdvals", "qr", "trace", "diagonal", "matrix_norm", "matrix_transpose"):
    ARGS.setdefault("np.linalg." + _name, ((S,), {}))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
              "left_shift", "right_shift", "gcd", "lcm"):
    ARGS["np." + _name] = ((N, N % 3), {})
for _name in ("invert", "bitwise_not", "bitwise_invert", "bitwise_count"):
    ARGS["np." + _name] = ((N,), {})
ARGS["np.ldexp"] = ((X, N), {})

# NumPy's functions that take no array data: sizes, files, settings, dtypes, strings, callables
NOT_ARRAY_FUNCTIONS = {
    "np.arange", "np.zeros", "np.ones", "np.empty", "np.full", "np.eye", "np.identity", "np.tri", "np.indices",
    "np.linspace", "np.logspace", "np.geomspace", "np.fromfunction", "np.fromiter", "np.frombuffer",
    "np.fromstring", "np.fromfile", "np.fromregex", "np.frompyfunc", "np.load", "np.save", "np.savez",
    "np.savez_compressed", "np.savetxt", "np.loadtxt", "np.genfromtxt", "np.tril_indices", "np.triu_indices",
    "np.diag_indices", "np.mask_indices", "np.bartlett", "np.blackman", "np.hamming", "np.hanning", "np.kaiser",
    "np.seterr", "np.geterr", "np.seterrcall", "np.geterrcall", "np.setbufsize", "np.getbufsize", "np.errstate",
    "np.set_printoptions", "np.get_printoptions", "np.printoptions", "np.show_config", "np.show_runtime",
    "np.test", "np.info", "np.get_include", "np.issubdtype", "np.promote_types", "np.typename", "np.mintypecode",
    "np.common_type", "np.isscalar", "np.iterable", "np.base_repr", "np.binary_repr", "np.format_float_positional",
    "np.format_float_scientific", "np.datetime_data", "np.datetime_as_string", "np.busday_count",
    "np.busday_offset", "np.is_busday", "np.broadcast_shapes", "np.nested_iters", "np.bmat", "np.isfortran",
    "np.fft.fftfreq", "np.fft.rfftfreq", "np.min_scalar_type", "np.isdtype",
}
# NumPy's explicit conversions (not dispatched): they compute the array, like np.asarray(x)
CONVERSIONS = {"np.array", "np.asarray", "np.asanyarray", "np.ascontiguousarray", "np.asfortranarray",
               "np.asarray_chkfinite", "np.require", "np.asmatrix", "np.from_dlpack"}
# results NumPy leaves unspecified (empty_like) or fixes only up to signs (decompositions): shapes only
SHAPES_ONLY = {"np.empty_like", "np.linalg.svd", "np.linalg.qr", "np.linalg.eigh"}


def numpy_functions():
    for mod, prefix in ((np, "np"), (np.linalg, "np.linalg"), (np.fft, "np.fft")):
        for name in mod.__all__:
            f = getattr(mod, name, None)
            if callable(f) and not isinstance(f, type):
                yield f"{prefix}.{name}", f


def args_of(name, f):
    if name in ARGS:
        return ARGS[name]
    if isinstance(f, np.ufunc):
        return (X, Y)[:f.nin], {}
    return (X,), {}


def to_la(obj, make):
    if isinstance(obj, np.ndarray):
        return make(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_la(o, make) for o in obj)
    return obj


def flat_results(res):
    if hasattr(res, "_fields") or isinstance(res, (tuple, list)):
        return list(res)
    return [res]


def lazy(a):
    with la.deferred():
        return la.asarray(a) + la.zeros((), dtype=a.dtype)  # a lazy array with the same values


def outcome(name, f, make):
    """('record', results) | ('raise', error class name) | ('metadata', value) | ('bool', value) |
    ('silent', what came back)."""
    args, kwargs = args_of(name, f)
    la_args = to_la(args, make)
    try:
        res = f(*la_args, **kwargs)
    except la.LazyArrayError as e:
        return "raise", type(e).__name__
    items = flat_results(res)
    if items and all(isinstance(r, la.NDArray) for r in items):
        return "record", items
    if isinstance(res, bool) and f not in METADATA:
        return "bool", res
    if isinstance(res, (int, tuple, np.dtype)) and not isinstance(res, np.generic) and not any(
            isinstance(r, (np.ndarray, np.generic, la.NDArray)) for r in items):
        return "metadata", res
    return "silent", type(res).__name__


def check_values(name, f, items):
    args, kwargs = args_of(name, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = flat_results(f(*args, **kwargs))
    assert len(items) == len(want), name
    for got, ref in zip(items, want):
        got = got.asnumpy()
        assert got.shape == np.shape(ref), name
        if name not in SHAPES_ONLY:
            np.testing.assert_allclose(got, ref, rtol=2e-4, atol=1e-5, err_msg=name)


DISPATCHED = [(n, f) for n, f in numpy_functions() if n not in NOT_ARRAY_FUNCTIONS | CONVERSIONS]


@pytest.mark.parametrize("name,f", DISPATCHED, ids=[n for n, _ in DISPATCHED])
def test_a_numpy_function_on_lazy_arrays_records_or_raises_a_named_error(name, f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with la.deferred():
            kind, res = outcome(name, f, lazy)
    assert kind in ("record", "raise", "metadata"), f"{name} on lazy arrays gave {kind}: {res}"
    if kind == "record":
        assert all(r.is_lazy for r in res), f"{name} computed its result under deferred compute"
        check_values(name, f, res)


@pytest.mark.parametrize("name,f", DISPATCHED, ids=[n for n, _ in DISPATCHED])
def test_a_numpy_function_on_eager_arrays_gives_lazyarray_arrays_or_a_named_error(name, f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        kind, res = outcome(name, f, la.asarray)
    assert kind in ("record", "raise", "metadata", "bool"), f"{name} on eager arrays gave {kind}: {res}"
    if kind == "record":
        check_values(name, f, res)


def test_the_counts_over_numpys_functions(capsys):
    counts = collections.Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with la.deferred():
            for name, f in DISPATCHED:
                counts[outcome(name, f, lazy)[0]] += 1
    with capsys.disabled():
        print(f"\nNumPy functions on lazy arrays: {dict(counts)}; not array functions: "
              f"{len(NOT_ARRAY_FUNCTIONS)}, explicit conversions: {len(CONVERSIONS)}")
    assert counts["silent"] == 0
    assert counts["record"] >= 150


@pytest.mark.parametrize("name", sorted(CONVERSIONS - {"np.asmatrix", "np.from_dlpack"}))
def test_the_explicit_conversions_compute_the_array(name):
    f = eval(name, {"np": np})
    y = lazy(X)
    got = f(y)
    assert isinstance(got, np.ndarray) and not y.is_lazy
    np.testing.assert_array_equal(got, X)


def test_the_error_names_the_function_and_the_fix():
    with la.deferred():
        y = lazy(X)
        with pytest.raises(la.NumPyFunctionError, match=r"np\.percentile .*no la equivalent: convert explicitly "
                                                        r"with x\.asnumpy\(\) outside deferred compute"):
            np.percentile(y, 50)
        with pytest.raises(TypeError, match=r"np\.sort .*order= is not supported \(la equivalent: la\.sort"):
            np.sort(y, order="f")
        with pytest.raises(la.NumPyFunctionError, match=r"np\.cumsum .*out= is not supported"):
            np.cumsum(y, out=np.empty(12, np.float32))
        with pytest.raises(la.NumPyFunctionError, match=r"np\.add .*out= is not supported"):
            np.add(y, y, out=np.empty((3, 4), np.float32))
        with pytest.raises(la.NumPyFunctionError, match=r"np\.allclose .*Python bool"):
            np.allclose(y, y)
    assert y.is_lazy


def test_np_sort_stays_in_the_graph():
    x = la.asarray(X[:, ::-1].copy())
    with la.deferred():
        z = np.log(np.sort(x))
    sym = la.get_symbol(z, inputs={"x": x})
    assert "sort(%x" in str(sym) and "constant" not in str(sym)
    other = np.flip(X, axis=0).copy()
    np.testing.assert_allclose(la.CachedOp(sym)(la.asarray(other)).asnumpy(), np.log(np.sort(other)), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda a: np.sort(a, axis=None), lambda a: np.argsort(a, axis=0), lambda a: np.cumsum(a),
    lambda a: np.cumsum(a, axis=1, dtype=np.float64), lambda a: np.cumprod(a, axis=0),
    lambda a: np.round(a * 3.3, 1), lambda a: np.around(a * 33.3, -1), lambda a: np.round(a * 3.3),
    lambda a: np.std(a, axis=0, ddof=1), lambda a: np.var(a, keepdims=True), lambda a: np.mean(a, dtype=np.float64),
    lambda a: np.sum(a, axis=(0, 1), keepdims=True), lambda a: np.argmax(a, axis=1, keepdims=True),
    lambda a: np.linalg.norm(a), lambda a: np.linalg.norm(a, axis=1), lambda a: np.linalg.norm(a, ord=1),
    lambda a: np.linalg.norm(a, axis=(0, 1), keepdims=True), lambda a: np.linalg.norm(a, ord="nuc"),
    lambda a: np.concatenate([a, a], axis=None), lambda a: np.take(a, [1, 5]), lambda a: np.ptp(a, axis=1),
    lambda a: np.trace(a), lambda a: np.diagonal(a, 1), lambda a: np.isclose(a, a + 1e-7),
    lambda a: np.add.reduce(a), lambda a: np.maximum.reduce(a, axis=1), lambda a: np.add.accumulate(a),
    lambda a: np.multiply.outer(a[0], a[1]), lambda a: np.add(a, a, dtype=np.float64),
    lambda a: np.fft.rfft2(a), lambda a: np.fft.fft(a, n=6, axis=0), lambda a: np.atleast_3d(a[0]),
])
def test_arguments_map_to_the_la_equivalent(call):
    want = call(X)
    got = call(la.asarray(X))
    assert isinstance(got, la.NDArray)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-5, atol=1e-6)
    with la.deferred():
        lz = call(lazy(X))
    assert lz.is_lazy
    np.testing.assert_allclose(lz.asnumpy(), want, rtol=2e-5, atol=1e-6)


def test_numpy_functions_in_a_hybridized_block():
    class Net(la.blocks.HybridBlock):
        def forward(self, x):
            return np.cumsum(np.sort(x, axis=1), axis=1) + np.linalg.norm(x, axis=1, keepdims=True)

    net = Net()
    net.initialize()
    want = net(la.asarray(X)).asnumpy()
    np.testing.assert_allclose(want, np.cumsum(np.sort(X, axis=1), axis=1) + np.linalg.norm(X, axis=1, keepdims=True),
                               rtol=1e-5)
    net.hybridize()
    other = (X[::-1] * 2).copy()
    net(la.asarray(X))
    got = net(la.asarray(other)).asnumpy()
    np.testing.assert_allclose(got, np.cumsum(np.sort(other, axis=1), axis=1)
                               + np.linalg.norm(other, axis=1, keepdims=True), rtol=1e-5)
    assert net.trace_count == 1

    class Median(la.blocks.HybridBlock):
        def forward(self, x):
            return np.median(x)

    med = Median()
    med.initialize()
    med.hybridize()
    with pytest.raises(la.NumPyFunctionError, match=r"np\.median .*no la equivalent"):
        med(la.asarray(X))
