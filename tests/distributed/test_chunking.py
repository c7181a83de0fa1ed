"""Never half an array: every chunking of a dask input x every declared SBP gives the single-process
result (the input is rechunked to agree with its SBP), or an ``SBPError`` naming the input, its
chunks and the SBP. Never an array whose ``.shape`` disagrees with what it computes to."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402

X = np.random.default_rng(0).standard_normal((10, 6))
CHUNKINGS = {
    "numpy": None,
    "rows": (5, 6),
    "columns": (10, 3),
    "both": (5, 3),
    "single": (10, 6),
    "uneven rows": ((3, 7), (6,)),
    "uneven both": ((1, 4, 5), (5, 1)),
    "three row chunks": ((4, 3, 3), (6,)),
}
SBPS = {
    "inferred": None,
    "split(0)": la.sbp.split(0),
    "split(1)": la.sbp.split(1),
    "broadcast": la.sbp.broadcast(),
    "partial_sum": la.sbp.partial_sum(),
    "partial_max": la.sbp.partial_max(),
}


@pytest.fixture(scope="module")
def client(threaded_client):  # (conftest.py: workers as threads of this process)
    return threaded_client


@pytest.fixture(scope="module")
def graph():
    x = la.sym.var("x", shape=X.shape)
    outs = [la.sym.exp(x), la.sym.sum(x, axis=0), la.sym.max(x, axis=1), x * 2.0]
    sym = la.Symbol([o.outputs[0] for o in outs])
    return sym, [o.asnumpy() for o in la.CachedOp(sym)(x=X)]


def _value(chunks):
    return X if chunks is None else da.from_array(X, chunks=chunks)


@pytest.mark.filterwarnings("ignore::lazyarray.ops.sbp_rules.SBPFallbackWarning")
@pytest.mark.parametrize("sbp_name", list(SBPS))
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_every_chunking_under_every_sbp_equals_one_process(client, graph, chunking, sbp_name):
    sym, want = graph
    value, sbp = _value(CHUNKINGS[chunking]), SBPS[sbp_name]
    given = {} if sbp is None else {"x": sbp}
    if sbp is None and chunking in ("both", "uneven both"):  # two chunked axes, no SBP: which split is meant?
        chunks = str(value.chunks).replace("(", r"\(").replace(")", r"\)")
        with pytest.raises(la.sbp.SBPError, match=rf"input 'x'.*chunks {chunks}.*la\.sbp\.split"):
            la.distributed.run(sym, client=client, sbp=given, x=value)
        return
    outs = la.distributed.run(sym, client=client, sbp=given, x=value)
    for out, w in zip(outs, want):
        got = out.compute()
        assert out.shape == w.shape and got.shape == w.shape  # never half an array
        assert tuple(sum(c) for c in out.chunks) == w.shape
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)


def test_the_issue_example_computes_the_whole_array(client):
    """Chunked by rows, declared split along axis 1: was (100, 8) by its shape, (50, 8) computed."""
    big = np.random.default_rng(1).standard_normal((100, 8))
    x = la.sym.var("x", shape=(100, 8))
    out = la.distributed.run(la.sym.exp(x), client=client, sbp={"x": la.sbp.split(1)},
                             x=da.from_array(big, chunks=(50, 8)))
    assert out.shape == (100, 8) and len(out.chunks[1]) == 2 and len(out.chunks[0]) == 1
    np.testing.assert_allclose(out.compute(), np.exp(big))


def test_inputs_that_cannot_agree_are_refused_naming_input_chunks_and_sbp(client):
    x = la.sym.var("x", shape=(10, 6))
    with pytest.raises(la.sbp.SBPError, match=r"input 'x' of shape \(10, 6\) \(chunks \(\(5, 5\), \(6,\)\)\) "
                                              r"is declared S\(2\).*no axis 2"):
        la.distributed.run(la.sym.exp(x), client=client, sbp={"x": la.sbp.split(2)}, x=da.from_array(X, chunks=(5, 6)))
    unknown = da.from_array(X, chunks=(5, 6))
    unknown = unknown[unknown[:, 0] > -10]  # a boolean mask: chunk sizes unknown until computed
    with pytest.raises(la.sbp.SBPError, match=r"input 'x'.*unknown chunk sizes.*nan.*S\(0\).*compute_chunk_sizes"):
        la.distributed.run(la.sym.exp(x), client=client, sbp={"x": la.sbp.split(0)}, x=unknown)
    y = la.sym.var("y", shape=(10, 6))
    with pytest.raises(la.sbp.SBPError, match=r"different numbers of pieces \(x \(S\(0\), chunks \(\(5, 5\), \(6,\)\)\)"):
        la.distributed.run(x + y, client=client, x=da.from_array(X, chunks=(5, 6)),
                           y=da.from_array(X, chunks=((3, 3, 4), (6,))))


def _mlp(seed):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=6), nn.Dense(3, in_units=4))
    net.initialize()
    return net


def test_data_parallel_batches_chunked_along_columns_are_split_by_rows_only(client):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((12, 6)).astype("float32"), rng.integers(0, 3, 12).astype("int32")
    losses = []
    for chunks, label_chunks in [((6, 6), 6), ((6, 2), 4)]:  # the second: columns chunked, labels in 3
        net = _mlp(3)
        dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                         nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}),
                                         client=client, seed=1)
        losses.append(dp.step(da.from_array(x, chunks=chunks), da.from_array(y, chunks=label_chunks)))
        losses.append(dp.step(x, y))
    assert losses[0] == pytest.approx(losses[2], rel=1e-6) and losses[1] == pytest.approx(losses[3], rel=1e-6)
