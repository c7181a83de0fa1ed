"""Every MXNet operator case against MXNet 1.9.1's recorded output, and its round trip through
our MXNet writer (lazyarray -> MXNet files -> lazyarray) giving the same values."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.cached_op import CachedOp
from lazyarray.mxnet import operators

from .mxnet_fixtures import op_cases, op_files, op_io

CASES = op_cases()


def run(sym, values):
    return CachedOp(sym)(*[la.array(values[n]) for n in sym.list_inputs()]).asnumpy()


def test_fixture_cases_are_present():
    assert len(CASES) >= 80


@pytest.mark.parametrize("case", CASES)
def test_operator_equals_mxnet(case):
    ins, want = op_io(case)
    sym, params = la.mxnet.load(*op_files(case), input_shapes={k: v.shape for k, v in ins.items()})
    values = {**ins, **{k: v.asnumpy() for k, v in params.items()}}
    got = run(sym, values)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_operator_round_trip(case, tmp_path):
    ins, want = op_io(case)
    sym, params = la.mxnet.load(*op_files(case), input_shapes={k: v.shape for k, v in ins.items()})
    files = la.mxnet.export(sym, str(tmp_path / case), params=params)
    back, back_params = la.mxnet.load(*files, input_shapes={k: v.shape for k, v in ins.items()})
    assert sorted(back_params) == sorted(params)
    got = run(back, {**ins, **{k: v.asnumpy() for k, v in back_params.items()}})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_every_mapped_operator_family_has_a_case():
    """The fixture cases exercise the operators the issue lists (by MXNet op name)."""
    import json
    used = set()
    for case in CASES:
        with open(op_files(case)[0]) as f:
            used |= {n["op"] for n in json.load(f)["nodes"]}
    wanted = {"FullyConnected", "Convolution", "BatchNorm", "Activation", "LeakyReLU", "Pooling", "Flatten",
              "Dropout", "softmax", "SoftmaxOutput", "SoftmaxActivation", "log_softmax", "elemwise_add",
              "elemwise_sub", "elemwise_mul", "elemwise_div", "broadcast_add", "broadcast_maximum", "_plus_scalar",
              "_rminus_scalar", "_rdiv_scalar", "_power_scalar", "Concat", "Reshape", "transpose", "slice_axis",
              "Embedding", "clip", "mean", "sum", "expand_dims", "_copy", "LayerNorm", "batch_dot"}
    assert wanted <= used, wanted - used
    assert used - {"null"} <= set(operators.CONVERTERS)


@pytest.mark.parametrize("shape,codes,reverse,want", [
    ((2, 3, 4), (0, -1), False, (2, 12)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 6, 5), (-4, 2, -1, -2), False, (2, 1, 6, 5)),
    ((2, 6, 5), (0, -4, -1, 3, 0), False, (2, 2, 3, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
    ((None, 3, 4), (0, -1), False, (None, 12)),
    ((None, 3, 4), (0, -3), False, (None, 12)),
])
def test_resolve_reshape(shape, codes, reverse, want):
    assert operators.resolve_reshape(shape, codes, reverse) == want


@pytest.mark.parametrize("shape,codes", [((2, 3), (5,)), ((2, 3), (-1, -1)), ((2, 3), (0, 0, 0)),
                                         ((2, 3), (-4, 4, -1, 0)), ((2, 3), (-7,))])
def test_resolve_reshape_refuses(shape, codes):
    with pytest.raises(ValueError):
        operators.resolve_reshape(shape, codes)
