"""ONNX TfIdfVectorizer on integer tokens -> registry ops (``pool_strings`` is refused: string tensors).

The pool, the sizes and the skips are attributes and the input's length is known at load time, so
every n-gram the operator counts is a fixed set of positions: for each size ``n`` in
[min_gram_length, max_gram_length] and each stride ``d`` in 1..max_skip_count + 1 (unigrams once),
the windows ``(i, i + d, ..., i + (n - 1) d)`` that fit. Each token becomes its rank in the pool's
sorted vocabulary (``searchsorted``; 0 when not in it), each window a base-(V + 1) number of its
ranks, and that number is looked up in the sorted keys of the pool's n-grams. The hits are counted
per output column by one ``scatter_along_axis`` add (misses land in a spare column that is cut off),
then weighted (TF: counts, IDF: the weight where the count is positive, TFIDF: weight times count);
``weights[i]`` is the i-th n-gram's, as the spec and onnxruntime read it (``onnx.reference`` takes it
as the i-th output column's; ONNX's node cases have no weights). As in ``onnx.reference``, an n-gram
listed twice in the pool counts toward its last output index.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of


def _pool_ngrams(n: OnnxNode, pool: np.ndarray, lo: int, hi: int) -> dict[int, dict[tuple, int]]:
    """size -> {n-gram: output column}, for the pool's n-grams of sizes in [lo, hi]."""
    counts = [int(c) for c in n.attr("ngram_counts", [])]
    columns = [int(c) for c in n.attr("ngram_indexes", [])]
    if any(b < a for a, b in zip(counts, counts[1:])) or (counts and (counts[0] != 0 or counts[-1] > pool.size)):
        n.fail(f"TfIdfVectorizer ngram_counts {counts} must start at 0 and rise within the pool of {pool.size}")
    out: dict[int, dict[tuple, int]] = {}
    gram_id = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else pool.size
        if (end - start) % size:
            n.fail(f"TfIdfVectorizer: the pool's {size}-grams span {end - start} items, not a multiple of {size}")
        grams = pool[start:end].reshape(-1, size)
        if gram_id + len(grams) > len(columns):
            n.fail(f"TfIdfVectorizer has {len(columns)} ngram_indexes for at least {gram_id + len(grams)} n-grams")
        if lo <= size <= hi:
            table = out.setdefault(size, {})
            for k, g in enumerate(grams):
                table[tuple(int(v) for v in g)] = columns[gram_id + k]
        gram_id += len(grams)
    return out


def _windows(length: int, size: int, max_skip: int) -> np.ndarray:
    """(windows, size) positions of every n-gram of ``size`` over ``length`` tokens, every stride."""
    strides = [1] if size == 1 else range(1, max_skip + 2)
    rows = [np.arange(i, i + (size - 1) * d + 1, d) for d in strides for i in range(length - (size - 1) * d)]
    return np.array(rows, np.int64).reshape(-1, size)


def _column_weights(n: OnnxNode, columns: list, width: int):
    """The weight of each output column: ``weights[i]`` is the i-th n-gram's (the spec, onnxruntime), and
    goes to its column ``ngram_indexes[i]``; None without weights."""
    weights = n.attr("weights")
    if weights is None or not len(weights):
        return None
    weights = np.asarray(weights, np.float32).reshape(-1)
    if weights.size != len(columns):
        n.fail(f"TfIdfVectorizer has {weights.size} weights for {len(columns)} n-grams (ngram_indexes)")
    per_column = np.zeros(width, np.float32)
    per_column[columns] = weights
    if np.any(per_column[columns] != weights):
        n.fail("TfIdfVectorizer: n-grams counted into the same output column have different weights")
    return constant(per_column)


def tfidf_vectorizer(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    if n.attr("pool_strings") is not None:
        n.fail("TfIdfVectorizer with pool_strings needs string tensors (STRING), which lazyarray does not compute on")
    if np.dtype(dtype_of(x)).kind not in "iu":
        n.fail(f"TfIdfVectorizer takes integer tokens (pool_int64s), got {np.dtype(dtype_of(x))}")
    shape = n.known_shape(0, "TfIdfVectorizer")
    if len(shape) not in (1, 2):
        n.fail(f"TfIdfVectorizer takes tokens of shape [C] or [B, C], got {shape}")
    lo, hi, skip = (int(n.attr(a, 0)) for a in ("min_gram_length", "max_gram_length", "max_skip_count"))
    if not 1 <= lo <= hi or skip < 0:
        n.fail(f"TfIdfVectorizer needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got "
               f"{lo}, {hi}, {skip}")
    mode = n.attr("mode", "TF")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("TF", "IDF", "TFIDF"):
        n.fail(f"TfIdfVectorizer mode {mode!r} is not one of TF, IDF, TFIDF")
    pool = np.asarray(n.attr("pool_int64s", []), np.int64).reshape(-1)
    columns = [int(c) for c in n.attr("ngram_indexes", [])]
    width = max(columns) + 1 if columns else 0
    grams = _pool_ngrams(n, pool, lo, hi)
    vocab = np.unique(pool)
    base = vocab.size + 1
    if base ** max(grams, default=1) >= 2 ** 63:
        n.fail(f"TfIdfVectorizer: {base - 1} distinct tokens in {max(grams)}-grams do not fit one int64 key each")
    lead = tuple(shape[:-1])
    tokens = S.cast(x, dtype=np.int64)
    if vocab.size:
        rank = S.minimum(S.searchsorted(constant(vocab), tokens), constant(np.array(vocab.size - 1, np.int64)))
        known = S.equal(S.take(constant(vocab), rank), tokens)
        code = S.where(known, S.add(rank, constant(np.array(1, np.int64))), S.zeros_like(rank))
    slots = []
    for size, table in sorted(grams.items()):
        pos = _windows(shape[-1], size, skip)
        if not pos.size or not table:
            continue
        digits = S.take(code, constant(pos), axis=-1)  # (..., windows, size)
        key = S.sum(S.multiply(digits, constant(base ** np.arange(size - 1, -1, -1, dtype=np.int64))), axis=-1)
        gram_keys = np.array([sum((vocab.searchsorted(v) + 1) * base ** (size - 1 - k) for k, v in enumerate(g))
                              for g in table], np.int64)
        order = np.argsort(gram_keys)
        gram_keys, gram_cols = gram_keys[order], np.array(list(table.values()), np.int64)[order]
        at = S.minimum(S.searchsorted(constant(gram_keys), key), constant(np.array(len(gram_keys) - 1, np.int64)))
        hit = S.equal(S.take(constant(gram_keys), at), key)
        slots.append(S.where(hit, S.take(constant(gram_cols), at), constant(np.array(width, np.int64))))
    counts = constant(np.zeros(lead + (width,), np.float32))
    if slots:
        slot = slots[0] if len(slots) == 1 else S.concatenate(slots, axis=-1)
        spare = S.scatter_along_axis(constant(np.zeros(lead + (width + 1,), np.float32)), slot,
                                     S.ones_like(S.cast(slot, dtype=np.float32)), axis=-1, reduce="add")
        counts = S.getitem(spare, key=(Ellipsis, slice(0, width)))
    if mode == "TF":
        return [counts]
    w = _column_weights(n, columns, width)
    if mode == "IDF":
        seen = S.greater(counts, constant(np.zeros((), np.float32)))
        return [S.cast(seen, dtype=np.float32) if w is None else S.where(seen, S.broadcast_to(w, shape=lead + (width,)),
                                                                        S.zeros_like(counts))]
    return [counts if w is None else S.multiply(counts, w)]


TFIDF_CONVERTERS: dict[str, Converter] = {"TfIdfVectorizer": tfidf_vectorizer}
