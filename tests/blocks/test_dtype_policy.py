"""The dtype policy of layers (issue #38, item 2): a layer given float inputs of another dtype than its
parameters raises la.DTypeError naming the layer, both dtypes and the fixes (PyTorch's rule), eagerly,
under deferred compute and hybridized; integer inputs (embeddings) and matching dtypes run."""
import numpy as np
import pytest

import lazyarray as la


def dense():
    net = la.blocks.Dense(2, in_units=3)
    net.initialize()
    return net


@pytest.mark.parametrize("hybridize", [False, True])
def test_float64_data_into_a_float32_layer_is_a_named_error(hybridize):
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Dense(4, in_units=3), la.blocks.Dense(2))
    net.initialize()
    if hybridize:
        net.hybridize()
    assert net(la.ones((2, 3))).dtype == np.float32
    with pytest.raises(la.DTypeError, match=r"Dense: input 0 is float64 but its parameters are float32; "
                                            r"convert the input with x\.astype\('float32'\), or cast the "
                                            r"network with net\.cast\('float64'\)"):
        net(la.array(np.ones((2, 3))))  # NumPy float64 data keeps its dtype


def test_the_two_fixes_work():
    net = dense()
    x = la.array(np.ones((1, 3)))
    assert net(x.astype("float32")).dtype == np.float32
    net.cast("float64")
    assert net(x).dtype == np.float64


def test_under_deferred_compute_too():
    net = dense()
    with la.deferred():
        with pytest.raises(la.DTypeError, match="float64"):
            net(la.array(np.ones((1, 3))))


def test_integer_inputs_and_layers_without_parameters_run():
    emb = la.blocks.Embedding(5, 2)
    emb.initialize()
    assert emb(la.array([1, 2])).dtype == np.float32
    act = la.blocks.Activation("relu")
    assert act(la.array(np.ones(3))).dtype == np.float64
