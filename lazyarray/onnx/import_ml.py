"""ONNX's classical machine-learning operators (domain ``ai.onnx.ml``) on numeric tensors -> registry ops.

``Binarizer`` is a comparison cast back to the input's type; ``ArrayFeatureExtractor`` a ``take`` on
the last axis (a 1-D input gives one row, as onnxruntime and ``onnx.reference`` do; a negative index
counts from the end as in ``onnx.reference``, where onnxruntime refuses it; one past the end raises).

``TreeEnsemble`` (ml opset 5) is built at graph level, since its trees are constants: every
(sample, tree) pair carries a state, the index of the tree node it stands on, in one table of the
ensemble's interior nodes followed by its leaves (a leaf's successors are itself). One step gathers
each state's feature, threshold and mode, compares, and moves to the true or false successor; the
number of steps is the ensemble's depth, known at load time, after which every state is a leaf.
The leaves' weights are then summed (or averaged, or min/max-ed) per target. The graph holds
``depth`` small gather/compare steps, however many trees there are. Only ``post_transform`` NONE is
read (the spec and onnxruntime number the others differently; ``onnx.reference`` ignores it).
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from ..graph.symbol import Symbol
from .import_ops import Converter, OnnxNode, constant, dtype_of

ML = "ai.onnx.ml."


def binarizer(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    dt = dtype_of(x)
    if np.dtype(dt).kind not in "iuf":
        n.fail(f"Binarizer takes numbers, got {np.dtype(dt)}")
    above = S.greater(x, constant(np.array(n.attr("threshold", 0.0), dt)))
    return [S.cast(above, dtype=dt)]


def array_feature_extractor(n: OnnxNode) -> list:
    n.arity(2)
    x, idx = n.inputs
    xs, ks = n.known_shape(0, "ArrayFeatureExtractor"), n.known_shape(1, "ArrayFeatureExtractor")
    if not xs:
        n.fail("ArrayFeatureExtractor takes a tensor of rank 1 or more, got a scalar")
    k = int(np.prod(ks))
    picked = S.take(x, S.reshape(idx, shape=(k,)), axis=-1)
    return [S.reshape(picked, shape=(1, k) if len(xs) == 1 else tuple(xs[:-1]) + (k,))]


# -- TreeEnsemble -----------------------------------------------------------------------------------
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
_COMPARE = {LEQ: S.less_equal, LT: S.less, GTE: S.greater_equal, GT: S.greater, EQ: S.equal, NEQ: S.not_equal}
AVERAGE, SUM, MIN, MAX = range(4)


def _ints(n: OnnxNode, name: str, count: int | None = None, dtype=np.int64) -> np.ndarray:
    v = n.attr(name)
    if v is None:
        n.fail(f"TreeEnsemble needs the attribute {name!r}")
    arr = np.asarray(v, dtype).reshape(-1)
    if count is not None and arr.size != count:
        n.fail(f"TreeEnsemble attribute {name!r} has {arr.size} entries, expected {count} (one per node)")
    return arr


class _Tables:
    """The ensemble as flat per-state tables: interior nodes 0..K-1, then leaves K..K+L-1."""

    def __init__(self, n: OnnxNode, dtype):
        splits = _ints(n, "nodes_splits", dtype=dtype)
        k = splits.size
        feats, true_ids, false_ids = (_ints(n, a, k) for a in ("nodes_featureids", "nodes_truenodeids",
                                                               "nodes_falsenodeids"))
        true_leaf, false_leaf = (_ints(n, a, k).astype(bool) for a in ("nodes_trueleafs", "nodes_falseleafs"))
        modes = _ints(n, "nodes_modes", k)
        weights = _ints(n, "leaf_weights", dtype=dtype)
        targets = _ints(n, "leaf_targetids", weights.size)
        missing = n.attr("nodes_missing_value_tracks_true")
        missing = np.zeros(k, bool) if missing is None else _ints(n, "nodes_missing_value_tracks_true", k) != 0
        roots = _ints(n, "tree_roots")
        n_leaves = weights.size
        self.n_targets = int(n.attr("n_targets", 0) or 0)
        if self.n_targets <= 0 or targets.size and (targets.min() < 0 or targets.max() >= self.n_targets):
            n.fail(f"TreeEnsemble leaf_targetids must lie in [0, n_targets = {self.n_targets})")
        if modes.size and (modes.min() < LEQ or modes.max() > MEMBER):
            n.fail(f"TreeEnsemble nodes_modes must be 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER), got {sorted(set(modes))}")
        for name, ids, leaf in (("true", true_ids, true_leaf), ("false", false_ids, false_leaf)):
            bound = np.where(leaf, n_leaves, k)
            if ids.size and (ids.min() < 0 or np.any(ids >= bound)):
                n.fail(f"TreeEnsemble nodes_{name}nodeids point past the {k} nodes / {n_leaves} leaves")
        # successors in state numbering; a leaf stays where it is
        self.true = np.concatenate([np.where(true_leaf, k + true_ids, true_ids), k + np.arange(n_leaves)])
        self.false = np.concatenate([np.where(false_leaf, k + false_ids, false_ids), k + np.arange(n_leaves)])
        pad = np.zeros(n_leaves, np.int64)
        self.feats = np.concatenate([feats, pad])
        self.splits = np.concatenate([splits, np.zeros(n_leaves, dtype)])
        self.modes = np.concatenate([modes, pad])
        self.missing = np.concatenate([missing, np.zeros(n_leaves, bool)])
        self.members = self._members(n, modes, k + n_leaves, dtype)
        # a root whose two successors are the same leaf is that leaf (a one-leaf tree)
        if roots.size and (roots.min() < 0 or roots.max() >= max(k, 1)):
            n.fail(f"TreeEnsemble tree_roots must index the {k} nodes, got {roots.tolist()}")
        one_leaf = true_leaf[roots] & false_leaf[roots] & (true_ids[roots] == false_ids[roots]) if k else []
        self.roots = np.where(one_leaf, k + true_ids[roots], roots) if k else roots
        self.weights, self.targets, self.k = weights, targets, k
        self.depth = self._depth(n)

    def _members(self, n: OnnxNode, modes, states: int, dtype):
        """(states, widest set) of each MEMBER node's values, NaN-padded; None without MEMBER nodes."""
        member_nodes = np.flatnonzero(modes == MEMBER)
        if not member_nodes.size:
            return None
        values = n.attr("membership_values")
        if values is None:
            n.fail("TreeEnsemble has BRANCH_MEMBER nodes but no membership_values")
        values = np.asarray(values, np.float64).reshape(-1)
        # one NaN-terminated run per MEMBER node, in node order
        ends = np.flatnonzero(np.isnan(values))
        if ends.size != member_nodes.size:
            n.fail(f"TreeEnsemble membership_values holds {ends.size} NaN-ended sets for {member_nodes.size} "
                   "BRANCH_MEMBER nodes")
        sets = np.split(values, ends + 1)[:-1]
        table = np.full((states, max(len(s) for s in sets)), np.nan)
        for node, s in zip(member_nodes, sets):
            table[node, :len(s) - 1] = s[:-1]
        return table.astype(dtype)

    def _depth(self, n: OnnxNode) -> int:
        """Steps until every root reaches a leaf (the most interior nodes on a path); refuses cycles."""
        depth = np.zeros(self.true.size, np.int64)  # steps from a state to its leaf; 0 for leaves
        done = np.arange(self.true.size) >= self.k
        for _ in range(self.k + 1):
            if done.all():
                break
            ready = ~done & done[self.true] & done[self.false]
            depth[ready] = 1 + np.maximum(depth[self.true[ready]], depth[self.false[ready]])
            done |= ready
        if not done[self.roots].all():
            n.fail("TreeEnsemble's nodes do not form trees (a node is its own descendant)")
        return int(depth[self.roots].max()) if self.roots.size else 0


def _branch(t: _Tables, state, x, dtype) -> Symbol:
    """Whether each state's comparison sends it to the true successor."""
    xv = S.take_along_axis(x, S.take(constant(t.feats), state), axis=1)
    split = S.take(constant(t.splits), state)
    present = sorted(set(t.modes[:t.k].tolist()))
    mode = S.take(constant(t.modes), state) if len(present) > 1 else None
    goes = None
    for m in present:
        if m == MEMBER:
            rows = S.take(constant(t.members), state)  # (N, T, widest set)
            c = S.any(S.equal(S.expand_dims(xv, axis=-1), rows), axis=-1)
        else:
            c = _COMPARE[m](xv, split)
        goes = c if goes is None else S.where(S.equal(mode, constant(np.array(m, np.int64))), c, goes)
    if t.missing.any():
        goes = S.logical_or(goes, S.logical_and(S.isnan(xv), S.take(constant(t.missing), state)))
    return goes


def tree_ensemble(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    dt = np.dtype(dtype_of(x))
    if dt.kind != "f":
        n.fail(f"TreeEnsemble takes floating-point X, got {dt}")
    shape = n.known_shape(0, "TreeEnsemble")
    if len(shape) != 2:
        n.fail(f"TreeEnsemble takes X of shape [N, features], got {shape}")
    post = int(n.attr("post_transform", 0))
    if post != 0:
        # the spec numbers SOFTMAX 1 and LOGISTIC 2; onnxruntime applies 1 as LOGISTIC and 2 as SOFTMAX, and
        # onnx.reference ignores the attribute: with no runtime to agree with, refuse rather than pick one
        n.fail(f"TreeEnsemble post_transform {post} is not supported (only 0, NONE): onnxruntime and the ONNX spec "
               "disagree on what 1 and 2 mean; apply Softmax/Sigmoid after the node instead")
    t = _Tables(n, dt)
    if t.k and t.feats[:t.k].max(initial=0) >= shape[1]:
        n.fail(f"TreeEnsemble reads feature {int(t.feats[:t.k].max())} of X with {shape[1]} features")
    batch, trees = shape[0], t.roots.size
    state = S.broadcast_to(constant(t.roots.reshape(1, -1)), shape=(batch, trees))
    for _ in range(t.depth):
        goes = _branch(t, state, x, dt)
        state = S.where(goes, S.take(constant(t.true), state), S.take(constant(t.false), state))
    leaf = S.subtract(state, constant(np.array(t.k, np.int64)))
    w = S.take(constant(t.weights), leaf)  # (N, T)
    hit = S.cast(S.one_hot(S.take(constant(t.targets), leaf), depth=t.n_targets, dtype=np.float32), dtype=bool)
    w = S.expand_dims(w, axis=-1)  # (N, T, 1) against the targets' (N, T, n_targets)
    agg = int(n.attr("aggregate_function", SUM))
    if agg in (SUM, AVERAGE):
        out = S.sum(S.where(hit, w, constant(np.zeros((), dt))), axis=1)
        if agg == AVERAGE:
            out = S.divide(out, constant(np.array(trees, dt)))
    elif agg in (MIN, MAX):
        # a target no tree scores is 0 (onnxruntime's base value; onnx.reference leaves the dtype's extreme)
        far = np.finfo(dt).max if agg == MIN else np.finfo(dt).min
        pick = S.min if agg == MIN else S.max
        out = pick(S.where(hit, w, constant(np.array(far, dt))), axis=1)
        out = S.where(S.any(hit, axis=1), out, constant(np.zeros((), dt)))
    else:
        n.fail(f"TreeEnsemble aggregate_function {agg} is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)")
    return [out]


ML_CONVERTERS: dict[str, Converter] = {ML + "Binarizer": binarizer,
                                       ML + "ArrayFeatureExtractor": array_feature_extractor,
                                       ML + "TreeEnsemble": tree_ensemble}
