"""Generic op checks driven by ``cases.CASES``: forward vs NumPy, deferred vs eager,
and gradients vs central finite differences (float64)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import functions
from lazyarray.ops import registry

from .cases import CASES, case_params, grad_params, rng_for


def op_function(name: str):
    """The public function of op ``name`` (``la.<name>``, ``la.nn.<name>``, ``la.linalg.<name>``, ``la.fft.<name>``)."""
    op = registry.get(name)
    # (the registry op ``nonzero`` is ``la.argwhere``; ``la.nonzero`` is the standard's tuple built from it)
    f = getattr({"nn": la.nn, "linalg": la.linalg, "fft": la.fft}.get(op.namespace, la),
                {"nonzero": "argwhere"}.get(name, name))
    if op.namespace == "fft":  # la.fft.<name> give the ops the standard's signatures
        return f
    # la.cond / la.while_loop / la.foreach trace Python functions; the raw ops take sub-graphs
    return f if getattr(f, "op", None) is op else functions.op_function(op)


def to_la(arg):
    if arg is None:
        return None
    if isinstance(arg, list):
        return [la.array(np.asarray(a)) for a in arg]
    return la.array(np.asarray(arg))  # NumPy scalars keep their dtype too


def call(name, sample, args=None):
    args = [to_la(a) for a in sample.args] if args is None else args
    while args and args[-1] is None:
        args = args[:-1]
    return op_function(name)(*args, **sample.params)


def samples(name, dtype, small=False):
    return CASES[name].samples(rng_for(name, dtype, small), dtype, small)


def tolerances(case, dtype):
    if np.dtype(dtype) in (np.float32, np.complex64):
        return dict(rtol=case.rtol32, atol=case.rtol32)
    return dict(rtol=1e-10, atol=1e-12)


def _outputs(res) -> list:
    """An op's result as a list (multi-output ops return a tuple)."""
    return list(res) if isinstance(res, (list, tuple)) else [res]


def check_forward(name: str, dtype: str) -> None:
    """Every sample of op ``name`` in ``dtype`` equals the NumPy reference (values, dtype, shape);
    multi-output ops are compared output by output with a reference that returns a tuple."""
    case = CASES[name]
    for s in samples(name, dtype):
        res = call(name, s)
        with np.errstate(all="ignore"):
            wants = case.ref(*[a for a in s.args if a is not None], **s.params)
        outs = _outputs(res)
        wants = list(wants) if isinstance(res, (list, tuple)) else [wants]
        assert len(outs) == len(wants), f"{name}[{s.name}]: {len(outs)} outputs, NumPy {len(wants)}"
        for k, (out, want) in enumerate(zip(outs, wants)):
            want = np.asarray(want)
            got = out.asnumpy()
            where = f"{name}[{s.name}] in {dtype}" + (f", output {k}" if len(outs) > 1 else "")
            assert not out.is_lazy, where
            assert got.shape == want.shape, f"{where}: shape {got.shape} != NumPy {want.shape}"
            assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != NumPy {want.dtype}"
            assert out.dtype == want.dtype and out.shape == want.shape, where
            if want.dtype.kind in "fc":
                np.testing.assert_allclose(got, want, **tolerances(case, want.dtype), err_msg=where)
            else:
                np.testing.assert_array_equal(got, want, err_msg=where)
            _check_special(name, s, out, where)


def _check_special(name, s, out, where):
    if name == "cast_storage":
        assert out.stype == s.params["stype"], where
    if name == "copy_to":
        assert out.device == s.params["device"], where


def check_deferred(name: str, dtype: str) -> None:
    """Recorded under ``la.deferred()`` the op gives lazy arrays whose static shapes and dtypes
    are the eager results' (data-dependent dims may be None) and whose values equal eager."""
    case = CASES[name]
    for s in samples(name, dtype):
        args = [to_la(a) for a in s.args]
        eagers = _outputs(call(name, s, args))
        with la.deferred():
            lazies = _outputs(call(name, s, args))
            statics = [lazy.static_shape for lazy in lazies]
            for k, (lazy, eager) in enumerate(zip(lazies, eagers)):
                assert lazy.is_lazy, f"{name}[{s.name}] output {k}"
                assert lazy.dtype == eager.dtype, f"{name}[{s.name}] output {k}: lazy dtype {lazy.dtype} != {eager.dtype}"
        assert len(lazies) == len(eagers)
        for k, (lazy, eager, static) in enumerate(zip(lazies, eagers, statics)):
            where = f"{name}[{s.name}] in {dtype}" + (f", output {k}" if len(lazies) > 1 else "")
            assert lazy.is_lazy, where  # reading avals computed nothing
            assert len(static) == len(eager.shape), f"{where}: static {static} vs eager {eager.shape}"
            for d, e in zip(static, eager.shape):
                if d is None:
                    assert case.data_dependent, f"{where}: unknown dim in static shape {static}"
                else:
                    assert d == e, f"{where}: static shape {static} != eager shape {eager.shape}"
            assert lazy.stype == eager.stype and lazy.device == eager.device, where
        for lazy, eager in zip(lazies, eagers):
            got = lazy.asnumpy()
            assert not lazy.is_lazy
            np.testing.assert_array_equal(got, eager.asnumpy(), err_msg=f"{name}[{s.name}] in {dtype}")


def _grad_targets(case, args):
    """(position, sub-index or None, array) for every float input to differentiate."""
    out = []
    for i in case.grad:
        a = args[i] if i < len(args) else None
        if a is None:
            continue
        if isinstance(a, list):
            out.extend((i, j, x) for j, x in enumerate(a))
        else:
            out.append((i, None, a))
    return out


def _replace(np_args, i, j, value):
    args = list(np_args)
    if j is None:
        args[i] = value
    else:
        seq = list(args[i])
        seq[j] = value
        args[i] = seq
    return args


def numeric_vjp(name, sample, np_args, i, j, og, eps):
    """d<f(x), og>/dx by central differences on each element of input (i, j)."""
    x = np.array(np_args[i] if j is None else np_args[i][j], dtype=np.float64)
    grad = np.zeros(x.shape, np.float64)
    for k in range(x.size):
        vals = []
        for sign in (1, -1):
            xp_ = x.copy()
            xp_.reshape(-1)[k] += sign * eps
            y = call(name, sample, [to_la(a) for a in _replace(np_args, i, j, xp_)]).asnumpy()
            vals.append(float(np.sum(np.real(y).astype(np.float64) * og)))  # complex y: <Re y, og>
        grad.reshape(-1)[k] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def check_gradient(name: str) -> None:
    """backward(out_grad=random) equals the numerical vector-Jacobian product in float64."""
    case = CASES[name]
    rng = rng_for(name, "grad")
    for s in samples(name, "float64", small=True):
        where = f"{name}[{s.name}]"
        args = [to_la(a) for a in s.args]
        targets = _grad_targets(case, args)
        assert targets, where
        for _, _, a in targets:
            a.attach_grad()
        with la.autograd.record():
            out = call(name, s, args)
        og = rng.standard_normal(out.shape)
        out.backward(out_grad=la.array(og.astype(out.dtype), device=out.device))
        for i, j, a in targets:
            assert a.grad is not None, where
            got = a.grad.asnumpy()
            want = numeric_vjp(name, s, list(s.args), i, j, og, case.fd_eps)
            assert got.shape == want.shape, f"{where} input {i}: grad shape {got.shape} != {want.shape}"
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{where}: gradient of input {i}{'' if j is None else f'[{j}]'}")


def family_tests(family: tuple[str, ...]):
    """The three registry-driven tests of an op family, for a test module to bind at top level:

        test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \\
            family_tests(("elementwise",))
    """
    @pytest.mark.parametrize("name,dtype", case_params(family))
    def test_forward_matches_numpy(name, dtype):
        check_forward(name, dtype)

    @pytest.mark.parametrize("name,dtype", case_params(family))
    def test_deferred_matches_eager(name, dtype):
        check_deferred(name, dtype)

    @pytest.mark.parametrize("name", grad_params(family))
    def test_gradient_matches_finite_differences(name):
        check_gradient(name)

    return test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences


def named_arrays(args) -> tuple[dict, list]:
    """A sample's NumPy args as lazyarray arrays: ``(by input name a0, a1_0, ..., args as passed)``,
    a list arg (a ``*seq`` input) as a list; missing optional inputs stay ``None``."""
    named, arrays = {}, []
    for i, a in enumerate(args):
        if a is None:
            arrays.append(None)
        elif isinstance(a, list):
            group = [la.array(np.asarray(x)) for x in a]
            named.update({f"a{i}_{j}": g for j, g in enumerate(group)})
            arrays.append(group)
        else:
            arr = la.array(np.asarray(a))
            named[f"a{i}"] = arr
            arrays.append(arr)
    return named, arrays
