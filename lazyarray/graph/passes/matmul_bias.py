"""Inference rewrite: a product by a matrix and the bias added to it -> one ``nn.dense`` with its bias.

ONNX's ``MatMul`` then ``Add`` (torch exports every ``nn.Linear`` of a 3-D input this way: a
transformer's projections and feed-forward layers) imports as ``add(matmul(x, w), b)``: two steps,
the second one more pass over the layer's values and one more call. When

* ``w`` is a matrix (K, N), ``x`` has K as its last dim, ``b`` is a vector (N,), all of one float dtype
  (and the two ops' results too), the add's operands in either order (IEEE addition is
  commutative: equal values);
* nothing else reads the product (not a graph output either),

the pair becomes ``dense(x, w.T, b)``: ``kernels/dense.py`` computes the same product (``x @ w``, the
transpose undone: ``weight.T`` of ``w.T`` is ``w``) and adds the bias in place, in one step that
binds its kernel at the first run. ``w.T`` is the source of ``w`` where ``w`` is a transpose
itself (an imported ``Transpose`` of a (N, K) weight, as torch exports some), a frozen constant's
transposed literal, else a ``transpose`` node (a parameter's is computed once, ``param_cache.py``).
The values equal the recorded pair's within the product's rounding (the same multiply-adds; a
BLAS may order a transposed operand's differently).

``CachedOp`` runs this on inference graphs after ``fuse_attention`` (a product that pass takes is
no longer a ``matmul``); graphs that train keep the recorded ops. ``la.config.matmul_bias = False``
turns it off.
"""
from __future__ import annotations

from ...aval import Aval
from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node, const_node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _float_like(e: Entry, dtype) -> bool:
    a = e.aval
    return a.dtype == dtype and a.shape is not None and a.stype == "default"


def _match(node: Node, uses: dict) -> int | None:
    """The position of the product among the add's operands when ``node`` is ``add(matmul(x, w), b)``
    (either order) that ``matmul_bias`` rewrites, else None."""
    if node.op is None or node.op.name != "add" or len(node.inputs) != 2 or node.params:
        return None
    dtype = node.avals[0].dtype
    if dtype is None or dtype.kind != "f":
        return None
    for i in (0, 1):
        m, b = node.inputs[i], node.inputs[1 - i]
        p = m.node
        if p.op is None or p.op.name != "matmul" or p.params or len(p.inputs) != 2 or uses.get(id(p), 0) != 1:
            continue
        x, w = p.inputs
        if not (_float_like(x, dtype) and _float_like(w, dtype) and _float_like(b, dtype)
                and _float_like(m, dtype)) or len(w.aval.shape) != 2 or len(b.aval.shape) != 1 \
                or not x.aval.shape:
            continue
        k, n = w.aval.shape
        if x.aval.shape[-1] != k or b.aval.shape[0] != n or m.aval.shape != node.avals[0].shape:
            continue
        return i
    return None


def _transposed(w: Entry, source) -> Entry:
    """``w.T`` as an entry: the source of a transpose of a matrix, a frozen constant's transposed
    literal, or a new ``transpose`` node."""
    n = w.node
    if n.op is not None and n.op.name == "transpose" and len(n.inputs[0].aval.shape or ()) == 2 \
            and tuple(n.params.get("axes") or (1, 0)) == (1, 0):
        return n.inputs[0]
    if n.op is None and n.kind == "const" and n.version is None and n.value is not None:
        a = w.aval
        return Entry(const_node(n.value.T, Aval(a.shape[::-1], a.dtype, a.device)))
    op = registry.get("transpose")
    return record_node(op, [w], op.make_params({"axes": (1, 0)}), source=source)


def matmul_bias(sym: Symbol) -> Symbol:
    """``sym`` with each ``add(matmul(x, w), b)`` of a matrix ``w`` and a vector ``b`` made one
    ``nn.dense(x, w.T, b)`` (the conditions in the module's text).

    >>> import lazyarray as la
    >>> x, w, b = la.sym.var("x", shape=(2, 5, 3)), la.sym.var("w", shape=(3, 4)), la.sym.var("b", shape=(4,))
    >>> [n.op.name for n in matmul_bias(la.sym.matmul(x, w) + b).topo() if n.op is not None]
    ['transpose', 'dense']
    """
    if not current().matmul_bias or not has_op(sym, "matmul"):
        return sym
    uses = use_counts(sym)
    dense = registry.get("dense")

    def visit(node: Node, ins):
        i = _match(node, uses)
        if i is None:
            return None
        product = ins[i].node  # (the product as rewritten: its inputs are the new graph's)
        x, w = product.inputs
        return (record_node(dense, [x, _transposed(w, product.source), ins[1 - i]], {}, source=product.source),)

    return rewrite(sym, visit, share=True)
