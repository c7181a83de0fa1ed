"""Calls that used to be accepted silently or fail with a bare builtin: duplicate arguments,
complex data that would lose its imaginary part, ``out=`` that would truncate, and ``LazyArrayError``
raises without a matching builtin base."""
from __future__ import annotations

import inspect
import re
from fractions import Fraction

import numpy as np
import pytest

import lazyarray as la
from lazyarray import creation, dispatch, errors, functions, random
from lazyarray.ops import conv, core, elementwise, nn, params, reduce, registry, shape


@pytest.fixture
def x():
    return la.array([1.0, 2.0, 3.0])


# -- duplicate and missing arguments -------------------------------------------------------------
@pytest.mark.parametrize("call,name", [
    (lambda x, o: la.exp(x, x=o), "x"),
    (lambda x, o: la.add(x, a=o), "a"),
    (lambda x, o: la.add(x, o, b=o), "b"),
    (lambda x, o: la.max(x, None, axis=0), "axis"),
    (lambda x, o: la.tile(x, 2, sizes=3), "sizes"),  # used (3,) or (2,) silently
    (lambda x, o: la.expand_dims(x, 0, axis=1), "axis"),
    (lambda x, o: la.nn.dense(la.ones((1, 3)), la.ones((2, 3)), weight=la.ones((2, 3))), "weight"),
])
def test_an_argument_passed_twice_is_a_param_error(x, call, name):
    kind = "parameter" if name in ("axis", "sizes") else "input"
    with pytest.raises(la.ParamError, match=rf"got multiple values for {kind} '{name}'") as info:
        call(x, la.zeros(3))
    assert isinstance(info.value, TypeError)


_A, _B = la.sym.var("a", shape=(1, 3)), la.sym.var("b", shape=(2, 3))


@pytest.mark.parametrize("call,name", [
    (lambda: la.sym.exp(_A, x=_B), "x"),  # (was an error about la.sym.any: `any` there was the op)
    (lambda: la.sym.add(_A, _B, a=_B), "a"),
    (lambda: la.sym.nn.dense(_A, _B, weight=_B), "weight"),
])
def test_a_symbol_input_passed_twice_is_a_param_error(call, name):
    with pytest.raises(la.ParamError, match=rf"got multiple values for input '{name}'"):
        call()


def test_symbol_inputs_by_name_take_their_places():
    c = la.sym.var("c", shape=(2,))
    y = la.sym.nn.dense(_A, bias=c, weight=_B)
    got = la.CachedOp(y)(a=la.ones((1, 3)), b=la.ones((2, 3)), c=la.array([1.0, 2.0]))
    np.testing.assert_array_equal(got.asnumpy(), [[4, 5]])
    with pytest.raises(la.ParamError, match=r"dense\(\) missing input 'weight'"):
        la.sym.nn.dense(_A, bias=c)  # the bias is not taken as the weight


@pytest.mark.parametrize("call,name", [
    (lambda x: la.sum(x, None, axis=0), "axis"),  # written out with the standard's signature (array_api.py)
    (lambda x: la.reshape(x, (3,), shape=(1, 3)), "shape"),
])
def test_written_out_functions_refuse_an_argument_passed_twice(x, call, name):
    with pytest.raises(TypeError, match=rf"got multiple values for argument '{name}'"):
        call(x)


def test_a_required_input_left_out_before_one_passed_by_name_is_a_param_error(x):
    cond = la.array([True, False, True])
    with pytest.raises(la.ParamError, match=r"where\(\) missing input 'x'"):
        la.where(cond, y=la.zeros(3))  # used to take y as x
    with pytest.raises(la.ParamError, match=r"dense\(\) missing input 'weight'"):
        la.nn.dense(la.ones((1, 3)), bias=la.ones(2))  # used to take the bias as the weight


def test_inputs_by_name_still_work(x):
    o = la.zeros(3)
    np.testing.assert_array_equal(la.subtract(b=x, a=o).asnumpy(), -x.asnumpy())
    np.testing.assert_array_equal(la.where(x > 1, y=o, x=x).asnumpy(), [0, 2, 3])
    w, b = la.ones((2, 3)), la.array([1.0, 2.0])
    np.testing.assert_array_equal(la.nn.dense(la.ones((1, 3)), weight=w).asnumpy(), [[3, 3]])
    np.testing.assert_array_equal(la.nn.dense(la.ones((1, 3)), w, bias=b).asnumpy(), [[4, 5]])
    assert la.tile(x, sizes=2).shape == (6,) and la.tile(x, 2).shape == (6,)
    assert la.concatenate(seq=[x, x]).shape == (6,)


# -- complex data is accepted at every entry (issue #13); data that would lose its imaginary part,
# extended precision and non-NumPy numbers are refused ---------------------------------------------
_C = np.array([1j, 2j, 3j])


def _deferred(f):
    def run(x):
        with la.deferred():
            y = f(x)
        return y.asnumpy()
    return run


def _setitem(x, v):
    x[:] = v
    return x


_X = np.array([1.0, 2.0, 3.0], dtype=np.float32)  # the ``x`` fixture's values
_COMPLEX_ENTRIES = {  # entry -> (call, NumPy's value)
    "operator_numpy_array": (lambda x: x + _C, _X + _C),
    "reflected_operator_numpy_array": (lambda x: _C + x, _C + _X),
    "function_numpy_array": (lambda x: la.add(x, _C), _X + _C),
    "function_list": (lambda x: la.multiply(x, [1j, 2j, 3j]), _X * np.array([1j, 2j, 3j], np.complex64)),
    "operator_python_complex": (lambda x: x + 1j, _X + 1j),
    "reflected_operator_python_complex": (lambda x: 1j * x, 1j * _X),
    "function_numpy_complex_scalar": (lambda x: la.add(x, np.complex64(1j)), _X + np.complex64(1j)),
    "non_elementwise_op": (lambda x: la.concatenate([x, _C]), np.concatenate([_X, _C])),
    "non_elementwise_scalar": (lambda x: la.where(x > 1, x, 1j), np.where(_X > 1, _X, 1j)),
    "deferred_operator_scalar": (_deferred(lambda x: x + 1j), _X + 1j),
    "deferred_operator_numpy_array": (_deferred(lambda x: x + _C), _X + _C),
    "deferred_function_scalar": (_deferred(lambda x: la.add(x, np.complex128(1j))), _X + np.complex128(1j)),
    "array": (lambda x: la.array([1j]), np.array([1j], np.complex64)),
    "astype": (lambda x: x.astype("complex64"), _X.astype(np.complex64)),
    "full": (lambda x: la.full((2,), 1j), np.full((2,), 1j, np.complex64)),
}


@pytest.mark.parametrize("entry", sorted(_COMPLEX_ENTRIES))
def test_complex_data_is_accepted_at_every_entry(x, entry):
    fn, want = _COMPLEX_ENTRIES[entry]
    got = fn(x)
    got = got.asnumpy() if isinstance(got, la.NDArray) else got
    assert got.dtype == want.dtype, entry
    np.testing.assert_array_equal(got, want)


_REFUSED_ENTRIES = {
    "numpy_longdouble_scalar": lambda x: x * np.longdouble(2),
    "numpy_clongdouble_scalar": lambda x: x * np.clongdouble(2j),
    "numpy_clongdouble_array": lambda x: x + np.array([1j], np.clongdouble),
    "fraction_scalar": lambda x: x + Fraction(1, 2),  # used to make an object array
    "deferred_fraction_scalar": _deferred(lambda x: la.add(x, Fraction(1, 2))),
    "sym_var": lambda x: la.sym.var("v", dtype="complex256"),
    "array_with_a_real_dtype": lambda x: la.array(_C, dtype="float32"),  # would drop the imaginary part
    "arange": lambda x: la.arange(1j),
    "uniform": lambda x: la.random.uniform(0, 1j),
    "full_with_a_real_dtype": lambda x: la.full((2,), 1j, dtype="float32"),
    "setitem_numpy_array": lambda x: _setitem(x, _C),  # would drop the imaginary part
    "setitem_list": lambda x: _setitem(x, [1j, 2j, 3j]),
    "setitem_scalar": lambda x: _setitem(x, 1j),
    "inplace": lambda x: x.__iadd__(_C),
}


@pytest.mark.parametrize("entry", sorted(_REFUSED_ENTRIES))
def test_data_that_cannot_be_kept_is_refused_with_dtype_error(x, entry):
    with pytest.raises(la.DTypeError, match="complex|float128|longdouble|Fraction|imaginary|real number") as info:
        _REFUSED_ENTRIES[entry](x)
    assert isinstance(info.value, TypeError)


def test_supported_numpy_operands_still_work(x):
    np.testing.assert_array_equal((x + np.array([1, 2, 3], dtype=np.int8)).asnumpy(), [2, 4, 6])
    assert (x + np.float64(1.5)).dtype == (x.asnumpy() + np.float64(1.5)).dtype  # as NumPy does
    assert la.add(x, [1.0, 2.0, 3.0]).dtype == np.float32  # lists follow la.array
    x[:] = [4, 5, 6]
    x[0] = np.float64(7)
    np.testing.assert_array_equal(x.asnumpy(), [7, 5, 6])


# -- out= follows NumPy's same_kind casting --------------------------------------------------
def test_out_refuses_a_cast_numpy_ufuncs_refuse():
    out = la.zeros(3, dtype="int32")
    with pytest.raises(la.DTypeError, match=r"add: cannot write the float32 result into out= of dtype int32 "
                                            r"with casting rule 'same_kind'"):
        la.add(la.ones(3, dtype="float32"), 0.75, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [0, 0, 0])  # untouched
    with pytest.raises(la.DTypeError, match="same_kind"):
        la.negative(la.array([1, 2, 3], dtype="int64"), out=la.zeros(3, dtype="bool"))


@pytest.mark.parametrize("res_dtype,out_dtype", [
    ("float32", "float64"), ("float64", "float32"), ("int64", "int32"), ("bool", "float32"), ("int32", "float32"),
])
def test_out_allows_same_kind_casts(res_dtype, out_dtype):
    out = la.zeros(3, dtype=out_dtype)
    r = la.copy(la.ones(3, dtype=res_dtype), out=out)
    assert r is out and out.dtype == np.dtype(out_dtype)
    np.testing.assert_array_equal(out.asnumpy(), [1, 1, 1])


# -- every LazyArrayError has a builtin base -------------------------------------------------------
def test_every_error_class_derives_from_a_builtin_besides_exception():
    for name, cls in vars(errors).items():
        if isinstance(cls, type) and issubclass(cls, la.LazyArrayError) and cls is not la.LazyArrayError:
            builtin = [b for b in cls.__mro__ if b.__module__ == "builtins" and b not in (Exception, BaseException,
                                                                                            object)]
            assert builtin, f"{name} has no builtin base"


_RAISE_BARE = re.compile(r"raise\s+LazyArrayError\s*\(")


@pytest.mark.parametrize("module", [creation, random, functions, dispatch, registry, params, core, elementwise,
                                    nn, reduce, shape, conv, la.aval, errors], ids=lambda m: m.__name__)
def test_no_bare_lazyarray_error_is_raised(module):
    assert not _RAISE_BARE.search(inspect.getsource(module)), f"{module.__name__} raises a bare LazyArrayError"


def test_former_bare_errors_now_have_builtin_bases():
    with pytest.raises(la.ParamError) as info:  # a *seq input given one array
        la.concatenate(la.ones(3))
    assert isinstance(info.value, TypeError)
    with pytest.raises(errors.NoKernelError) as info:  # a composite op has no kernel to bind
        registry.get("dropout").bind(np)
    assert isinstance(info.value, NotImplementedError)
