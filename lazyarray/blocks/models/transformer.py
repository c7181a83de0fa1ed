"""``transformer_encoder``: a BERT-style Transformer encoder classifier over token ids."""
from __future__ import annotations

from ...args import choice_arg, int_arg
from ...errors import ShapeError
from ..block import HybridBlock
from ..containers import HybridSequential
from ..nn import Dense, Dropout, Embedding, F
from ..transformer import LayerNorm, PositionalEmbedding, TransformerEncoderLayer, padding_mask

_POOLING = ("first", "mean")


class TransformerEncoder(HybridBlock):
    """Token embedding + learned positions, LayerNorm, ``num_layers`` post-LN encoder layers
    (hidden size ``4 * units``, GELU), pooling, and a ``Dense(classes)`` head.

    Called ``(tokens)`` or ``(tokens, valid_length)``: ``tokens`` integer ids ``(batch, length)``;
    ``valid_length`` integer ``(batch,)``: positions at or past it are padding (masked out of
    attention, and of the mean with ``pooling="mean"``). ``pooling="first"`` classifies from the
    first token's output (BERT's [CLS]); ``"mean"`` from the mean over the (valid) positions.
    Returns logits ``(batch, classes)``. Build it with ``la.blocks.models.transformer_encoder``.
    """

    def __init__(self, vocab_size: int, classes: int, units: int = 128, num_layers: int = 2, num_heads: int = 2,
                 max_length: int = 128, hidden_size: int | None = None, dropout: float = 0.0,
                 activation: str = "gelu", pooling: str = "first"):
        super().__init__()
        choice_arg(pooling, "transformer_encoder", "pooling", _POOLING)
        num_layers = int_arg(num_layers, "transformer_encoder", "num_layers", lo=0)
        units = int_arg(units, "transformer_encoder", "units", lo=1)
        self.units, self.pooling = units, pooling
        hidden_size = 4 * units if hidden_size is None else int_arg(hidden_size, "transformer_encoder", "hidden_size",
                                                                    lo=1)
        self.embedding = Embedding(vocab_size, units)
        self.position = PositionalEmbedding(max_length, units)
        self.embedding_norm = LayerNorm(in_channels=units)
        self.embedding_dropout = Dropout(dropout)
        self.layers = HybridSequential()
        for _ in range(num_layers):
            self.layers.add(TransformerEncoderLayer(units, hidden_size, num_heads, dropout=dropout,
                                                    activation=activation))
        self.output = Dense(classes, in_units=units)

    def forward(self, tokens, valid_length=None):
        if tokens.ndim != 2:
            raise ShapeError(f"transformer_encoder: tokens must be (batch, length) integer ids, got shape "
                             f"{tuple(tokens.shape)}")
        length = tokens.shape[1]
        h = self.embedding_dropout(self.embedding_norm(self.position(self.embedding(tokens))))
        mask = None if valid_length is None else padding_mask(valid_length, length)
        for i in range(len(self.layers)):
            h = self.layers[i](h, mask)
        if self.pooling == "first":
            pooled = h[:, 0]
        elif mask is None:
            pooled = F.mean(h, axis=1)
        else:
            keep = F.reshape(mask, shape=(-1, length, 1)).astype(h.dtype)  # (batch, length, 1)
            pooled = F.sum(h * keep, axis=1) / F.maximum(F.sum(keep, axis=1), 1.0)
        return self.output(pooled)


def transformer_encoder(vocab_size: int, classes: int, units: int = 128, num_layers: int = 2, num_heads: int = 2,
                        max_length: int = 128, **kwargs) -> TransformerEncoder:
    """A Transformer encoder classifier (BERT-style, post-LN) over integer token ids.

    Token embedding plus learned positional embedding, LayerNorm, ``num_layers``
    ``TransformerEncoderLayer`` (``hidden_size = 4 * units``, GELU, ``num_heads`` heads), first-token
    pooling (``pooling="mean"``: the mean over valid positions) and ``Dense(classes)``. More keyword
    arguments: ``hidden_size``, ``dropout`` (0.0), ``activation`` ("gelu"), ``pooling`` ("first").
    Call it with ``tokens`` ``(batch, length)`` (``length <= max_length``), optionally
    ``valid_length`` ``(batch,)`` to mask padding.

    >>> import lazyarray as la
    >>> net = la.blocks.models.transformer_encoder(vocab_size=50, classes=3, units=16, num_layers=1)
    >>> net.initialize(); net.hybridize()
    >>> net(la.array([[1, 2, 3, 4], [5, 6, 7, 8]])).shape
    (2, 3)
    """
    return TransformerEncoder(vocab_size, classes, units=units, num_layers=num_layers, num_heads=num_heads,
                              max_length=max_length, **kwargs)
