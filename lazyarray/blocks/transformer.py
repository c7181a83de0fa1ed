"""Transformer layers: ``LayerNorm``, ``GELU``, ``MultiHeadAttention``, ``TransformerEncoderLayer``,
``PositionalEmbedding``, and the attention-mask helpers ``causal_mask`` and ``padding_mask``.

Attention runs every head at once: the projections are reshaped to ``(batch, heads, length,
head_size)`` and multiplied with batched ``matmul`` (no Python loop over heads), so a traced graph
has the same few nodes whatever the number of heads.

Masks are boolean, ``True`` = attend, and broadcast to the attention scores
``(batch, heads, q_len, k_len)``:

* ``padding_mask(valid_length, length)`` -> ``(batch, 1, 1, length)``: keys past each sequence's
  valid length are ignored;
* ``causal_mask(length)`` -> ``(length, length)``: position i attends to positions <= i;
* combine them with ``&`` (``la.logical_and``).

A 3-D mask is read as ``(batch, q_len, k_len)`` (the same for every head).
"""
from __future__ import annotations

import math

import numpy as np

from ..args import int_arg, number_arg
from ..aval import check_alloc
from ..creation import arange
from ..creation import array as _array
from ..device import Device
from ..errors import BlockError, DTypeError, ParamValueError, ShapeError
from ..ndarray import NDArray
from .block import HybridBlock
from .nn import Dense, Dropout, Embedding, F, activation_fn
from .parameter import Parameter

_GELU_APPROX = ("none", "tanh")


def causal_mask(length: int, device: Device | None = None) -> NDArray:
    """A ``(length, length)`` bool mask where query ``i`` may attend to keys ``0..i`` (lower triangle).

    >>> import lazyarray as la
    >>> la.blocks.causal_mask(3).asnumpy().astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    length = int_arg(length, "causal_mask", "length", lo=0)
    check_alloc("causal_mask", (length, length), np.dtype(bool))
    return _array(np.tril(np.ones((length, length), dtype=bool)), device=device)


def padding_mask(valid_length, length: int) -> NDArray:
    """A ``(batch, 1, 1, length)`` bool mask that keeps the first ``valid_length[b]`` keys of row ``b``.

    ``valid_length`` is an integer array ``(batch,)`` (a lazy one works: the mask is built with
    ops, so it traces into a hybridized graph).

    >>> import lazyarray as la
    >>> la.blocks.padding_mask(la.array([1, 3]), 4).asnumpy()[:, 0, 0].astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 1, 0]])
    """
    if not isinstance(valid_length, NDArray):
        valid_length = _array(np.asarray(valid_length))
    if valid_length.ndim != 1:
        raise ShapeError(f"padding_mask: valid_length must be 1-D (one length per sequence), got shape "
                         f"{tuple(valid_length.shape)}")
    positions = arange(length, dtype="int64", device=valid_length.device)
    return F.less(positions, F.reshape(valid_length, shape=(-1, 1, 1, 1)))


class LayerNorm(HybridBlock):
    """Layer normalization over ``axis``: ``(x - mean) / sqrt(var + epsilon) * gamma + beta`` with the
    mean and (biased) variance of each row along ``axis``; one fused op (``la.nn.layer_norm``).

    ``center=False`` / ``scale=False`` freeze beta at 0 / gamma at 1. ``in_channels=0`` learns the
    size of ``axis`` at the first call.

    >>> import lazyarray as la
    >>> ln = la.blocks.LayerNorm()
    >>> ln.initialize()
    >>> y = ln(la.array([[1.0, 2.0, 3.0]]))
    >>> [round(v, 3) for v in y.asnumpy()[0].tolist()]
    [-1.225, 0.0, 1.225]
    """

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels: int = 0):
        super().__init__()
        epsilon = number_arg(epsilon, "LayerNorm", "epsilon", lo=0, lo_open=True)
        self.axis, self.epsilon = axis, epsilon
        self.gamma = Parameter("gamma", shape=(in_channels,), init=gamma_initializer,
                               grad_req="write" if scale else "null")
        self.beta = Parameter("beta", shape=(in_channels,), init=beta_initializer,
                              grad_req="write" if center else "null")

    def infer_shape(self, x) -> None:
        c = x.shape[self.axis]
        self.gamma.shape = self.beta.shape = (c,)

    def forward(self, x):
        return F.layer_norm(x, self.gamma.data(), self.beta.data(), axis=self.axis, eps=self.epsilon)

    def __repr__(self) -> str:
        return f"LayerNorm(axis={self.axis}, eps={self.epsilon}, in_channels={self.gamma.shape[0] or None})"


class GELU(HybridBlock):
    """The Gaussian error linear unit ``x * Phi(x)`` (``approximation="none"``, with erf) or its tanh
    approximation (``"tanh"``); also ``Activation("gelu")`` / ``Activation("gelu_tanh")``.

    >>> import lazyarray as la
    >>> round(la.blocks.GELU()(la.array([1.0])).item(), 4)
    0.8413
    """

    def __init__(self, approximation: str = "none"):
        super().__init__()
        if approximation not in _GELU_APPROX:
            raise ParamValueError(f"GELU: approximation must be one of {_GELU_APPROX}, got {approximation!r}")
        self.approximation = approximation

    def forward(self, x):
        return F.gelu(x, approximation=self.approximation)

    def __repr__(self) -> str:
        return f"GELU(approximation={self.approximation!r})"


class MultiHeadAttention(HybridBlock):
    """Multi-head scaled dot-product attention (Vaswani et al.).

    Called ``(query, key=None, value=None, mask=None)``: ``query`` ``(batch, q_len, q_dim)``;
    ``key`` ``(batch, k_len, k_dim)`` (default: ``query``: self-attention); ``value`` (default:
    ``key``); ``mask`` bool, True = attend, broadcastable to ``(batch, num_heads, q_len, k_len)``
    (see ``padding_mask``, ``causal_mask``; a 3-D mask is ``(batch, q_len, k_len)``). Each head
    computes ``softmax(Q K^T / sqrt(head_size)) V`` on its ``units // num_heads`` slice of the
    projections; the heads are concatenated and projected to ``units``. A query whose keys are
    all masked gets a zero attention row (not NaN). Returns ``(batch, q_len, units)``.

    Parameters: ``query_proj``, ``key_proj``, ``value_proj``, ``out_proj`` (``Dense`` layers on the
    last axis; input sizes learned at the first call). ``dropout`` applies to the attention
    weights in training mode. A hybridized block takes arrays only: pass ``key`` and ``value``
    explicitly when you pass a ``mask`` (``mha(x, x, x, mask)``).

    >>> import lazyarray as la
    >>> mha = la.blocks.MultiHeadAttention(8, num_heads=2)
    >>> mha.initialize()
    >>> mha(la.ones((2, 5, 4))).shape
    (2, 5, 8)
    """

    def __init__(self, units: int, num_heads: int, use_bias: bool = True, dropout: float = 0.0):
        super().__init__()
        units = int_arg(units, "MultiHeadAttention", "units", lo=1)
        num_heads = int_arg(num_heads, "MultiHeadAttention", "num_heads", lo=1)
        dropout = number_arg(dropout, "MultiHeadAttention", "dropout", lo=0, hi=1, hi_open=True)
        if units % num_heads:
            raise ParamValueError(f"MultiHeadAttention: units ({units}) must be a positive multiple of "
                                  f"num_heads ({num_heads}); each head gets units // num_heads dims")
        self.units, self.num_heads, self.head_size = units, num_heads, units // num_heads
        self.dropout = dropout
        self.query_proj = Dense(units, use_bias=use_bias, flatten=False)
        self.key_proj = Dense(units, use_bias=use_bias, flatten=False)
        self.value_proj = Dense(units, use_bias=use_bias, flatten=False)
        self.out_proj = Dense(units, use_bias=use_bias, flatten=False)
        self.attention_dropout = Dropout(dropout)

    def _heads(self, x, first_last: bool = False):
        """(batch, length, units) -> (batch, heads, length, head_size), or (batch, heads, head_size,
        length) with ``first_last`` (the keys, ready for Q @ K^T)."""
        length = x.shape[1]
        x = F.reshape(x, shape=(-1, length, self.num_heads, self.head_size))
        return F.transpose(x, axes=(0, 2, 3, 1) if first_last else (0, 2, 1, 3))

    def _check(self, name, x):
        if x.ndim != 3:
            raise ShapeError(f"MultiHeadAttention: {name} must be (batch, length, features), got shape "
                             f"{tuple(x.shape)}")

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        for name, x in (("query", query), ("key", key), ("value", value)):
            self._check(name, x)
        q = self._heads(self.query_proj(query) * (1.0 / math.sqrt(self.head_size)))
        k = self._heads(self.key_proj(key), first_last=True)
        v = self._heads(self.value_proj(value))
        scores = F.matmul(q, k)  # (batch, heads, q_len, k_len)
        if mask is None:
            weights = F.softmax(scores, axis=-1)
        else:
            weights = F.masked_softmax(scores, self._mask(mask), axis=-1)
        weights = self.attention_dropout(weights)
        out = F.transpose(F.matmul(weights, v), axes=(0, 2, 1, 3))  # (batch, q_len, heads, head_size)
        out = F.reshape(out, shape=(-1, out.shape[1], self.units))
        return self.out_proj(out)

    def _mask(self, mask):
        if not isinstance(mask, NDArray):
            mask = _array(np.asarray(mask))
        if mask.dtype.kind != "b":
            raise DTypeError(f"MultiHeadAttention: mask must be bool (True = attend), got {mask.dtype}; build "
                             "it with la.blocks.padding_mask / causal_mask or a comparison")
        if mask.ndim == 3:  # (batch, q_len, k_len): the same for every head
            return F.expand_dims(mask, axis=1)
        if mask.ndim > 4:
            raise ShapeError(f"MultiHeadAttention: mask must broadcast to (batch, heads, q_len, k_len), got "
                             f"shape {tuple(mask.shape)}")
        return mask

    def __repr__(self) -> str:
        return f"MultiHeadAttention(units={self.units}, num_heads={self.num_heads}, dropout={self.dropout})"


class TransformerEncoderLayer(HybridBlock):
    """One post-LN encoder layer (BERT's): ``h = LN(x + Dropout(MHA(x, mask)))``, then
    ``LN(h + Dropout(Dense(units)(Dropout(act(Dense(hidden_size)(h))))))``.

    Called ``(x, mask=None)`` with ``x`` ``(batch, length, units)``; ``mask`` as in
    ``MultiHeadAttention``. ``activation`` is any ``Activation`` name (``"gelu"``, ``"gelu_tanh"``,
    ``"relu"``...).

    >>> import lazyarray as la
    >>> layer = la.blocks.TransformerEncoderLayer(8, hidden_size=16, num_heads=2)
    >>> layer.initialize()
    >>> layer(la.ones((2, 5, 8))).shape
    (2, 5, 8)
    """

    def __init__(self, units: int, hidden_size: int, num_heads: int, dropout: float = 0.0,
                 activation: str = "gelu", layer_norm_eps: float = 1e-5):
        super().__init__()
        self.units, self.hidden_size, self.act_name = units, hidden_size, activation
        self._act = activation_fn(activation)
        self.attention = MultiHeadAttention(units, num_heads, dropout=dropout)
        self.attention_norm = LayerNorm(epsilon=layer_norm_eps, in_channels=units)
        self.ffn_in = Dense(hidden_size, flatten=False, in_units=units)
        self.ffn_out = Dense(units, flatten=False, in_units=hidden_size)
        self.ffn_norm = LayerNorm(epsilon=layer_norm_eps, in_channels=units)
        self.dropout = Dropout(dropout)

    def forward(self, x, mask=None):
        if x.ndim != 3 or x.shape[-1] != self.units:
            raise ShapeError(f"TransformerEncoderLayer: input must be (batch, length, {self.units}), got shape "
                             f"{tuple(x.shape)}")
        h = self.attention_norm(x + self.dropout(self.attention(x, x, x, mask)))
        f = self.ffn_out(self.dropout(self._act(self.ffn_in(h))))
        return self.ffn_norm(h + self.dropout(f))

    def __repr__(self) -> str:
        return (f"TransformerEncoderLayer(units={self.units}, hidden_size={self.hidden_size}, "
                f"num_heads={self.attention.num_heads}, activation={self.act_name})")


class PositionalEmbedding(HybridBlock):
    """Learned absolute position embeddings: ``x + P[:length]`` for ``x`` ``(batch, length, units)``,
    ``P`` the ``(max_length, units)`` weight of an ``Embedding`` child (``embedding.weight``).

    >>> import lazyarray as la
    >>> pos = la.blocks.PositionalEmbedding(16, 4)
    >>> pos.initialize()
    >>> pos(la.zeros((2, 5, 4))).shape
    (2, 5, 4)
    """

    def __init__(self, max_length: int, units: int, weight_initializer=None):
        super().__init__()
        self.max_length, self.units = max_length, units
        self.embedding = Embedding(max_length, units, weight_initializer=weight_initializer)

    def forward(self, x):
        if x.ndim != 3 or x.shape[-1] != self.units:
            raise ShapeError(f"PositionalEmbedding: input must be (batch, length, {self.units}), got shape "
                             f"{tuple(x.shape)}")
        length = x.shape[1]
        if length > self.max_length:
            raise BlockError(f"PositionalEmbedding: sequence length {length} exceeds max_length "
                             f"{self.max_length}; build the layer with a larger max_length or cut the input")
        # a slice of the table rather than take(arange): its gradient is a slice write, not a scatter-add
        return x + self.embedding.weight.data()[:length]

    def __repr__(self) -> str:
        return f"PositionalEmbedding(max_length={self.max_length}, units={self.units})"
