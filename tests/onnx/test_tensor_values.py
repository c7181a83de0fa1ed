"""``tensor_values.tensor_array`` gives ``onnx.numpy_helper.to_array``'s array for every tensor."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lazyarray.onnx.tensor_values import attribute_value, tensor_array  # noqa: E402

DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 0, 4)])
def test_raw_tensors_read_as_to_array_reads_them(dtype, shape):
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(shape) * 50).astype(dtype)
    t = numpy_helper.from_array(v, "t")
    got, want = tensor_array(t, numpy_helper), numpy_helper.to_array(t)
    assert got.dtype == want.dtype and got.shape == want.shape == v.shape
    np.testing.assert_array_equal(got, want)
    assert got.tobytes() == want.tobytes()


def test_typed_fields_and_strings_go_to_to_array():
    t = helper.make_tensor("t", TensorProto.FLOAT, [3], [1.5, -2.0, 3.25])  # float_data, no raw_data
    np.testing.assert_array_equal(tensor_array(t, numpy_helper), np.array([1.5, -2.0, 3.25], np.float32))
    s = helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"bc"])
    assert list(tensor_array(s, numpy_helper)) == list(numpy_helper.to_array(s))


def test_a_raw_size_that_does_not_match_the_dims_fails_as_to_array_does():
    t = numpy_helper.from_array(np.arange(6, dtype=np.float32), "t")
    t.dims[:] = [7]
    with pytest.raises(ValueError):
        numpy_helper.to_array(t)
    with pytest.raises(ValueError):
        tensor_array(t, numpy_helper)


def test_attribute_value_is_get_attribute_value():
    # (every kind the plain path reads, and the others through onnx's own reader)
    h = helper
    attrs = [h.make_attribute("f", 1.5), h.make_attribute("i", -3), h.make_attribute("s", b"text"),
             h.make_attribute("fs", [1.0, -2.5]), h.make_attribute("is", [1, 2, 3]), h.make_attribute("ss", [b"a", b"b"]),
             h.make_attribute("e", [], attr_type=onnx.AttributeProto.INTS),
             h.make_attribute("t", numpy_helper.from_array(np.arange(3, dtype=np.float32))),
             h.make_attribute("g", h.make_graph([], "g", [], []))]
    for a in attrs:
        got, want = attribute_value(a, h), h.get_attribute_value(a)
        assert type(got) is type(want) and got == want, a.name
