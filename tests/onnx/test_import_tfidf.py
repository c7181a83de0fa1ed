"""ONNX TfIdfVectorizer (``onnx/import_tfidf.py``) beyond ONNX's node cases: random pools of 1- to
3-grams, skips, every mode with and without weights, 1-D and batched tokens, against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model

import lazyarray as la

onnx = pytest.importorskip("onnx")

RNG = np.random.default_rng(16)


def random_pool(sizes: dict[int, int], vocab: int):
    """ngram_counts and pool_int64s holding ``sizes[n]`` distinct random n-grams of tokens < ``vocab``."""
    counts, pool = [], []
    for size in range(1, max(sizes) + 1):
        counts.append(len(pool))
        grams = {tuple(int(t) for t in RNG.integers(0, vocab, size)) for _ in range(sizes.get(size, 0))}
        pool += [t for g in sorted(grams) for t in g]
    return counts, pool


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape,dtype", [((30,), np.int64), ((4, 25), np.int32)])
@pytest.mark.parametrize("lo,hi,skip", [(1, 1, 0), (1, 3, 2), (2, 3, 0), (2, 2, 3)])
def test_tfidf_vectorizer_matches_onnxruntime(mode, weighted, shape, dtype, lo, hi, skip):
    counts, pool = random_pool({1: 4, 2: 8, 3: 6}, vocab=5)
    n_grams = sum(len(pool[a:b]) // (k + 1) for k, (a, b) in enumerate(zip(counts, counts[1:] + [len(pool)])))
    columns = RNG.permutation(n_grams + 2)[:n_grams].astype(np.int64)  # some columns no n-gram counts into
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, ngram_counts=counts,
                 ngram_indexes=columns.tolist(), pool_int64s=pool)
    if weighted:
        attrs["weights"] = (RNG.random(n_grams) + 0.5).astype(np.float32).tolist()  # one per n-gram
    ins = {"x": RNG.integers(0, 7, shape).astype(dtype)}  # tokens 5 and 6 are in no n-gram
    check_node(node_model("TfIdfVectorizer", ins, opset=9, **attrs), ins)


def test_tfidf_vectorizer_refuses_a_string_pool_naming_it():
    ins = {"x": np.array([[1, 2]], np.int64)}
    model = node_model("TfIdfVectorizer", ins, opset=9, infer=False, mode="TF", min_gram_length=1,
                       max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0], pool_strings=["a"])
    from lazyarray.onnx.backend import LazyArrayBackend
    with pytest.raises(la.GraphFormatError, match=r"TfIdfVectorizer with pool_strings needs string tensors"):
        LazyArrayBackend.prepare(model).run([ins["x"]])
