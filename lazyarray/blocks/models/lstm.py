"""``lstm_lm``: a word-level LSTM language model (embedding -> LSTM -> per-position logits)."""
from __future__ import annotations

from ...errors import ParamValueError
from ..block import HybridBlock
from ..nn import Dense, Embedding
from ..rnn import LSTM

__all__ = ["LSTMLanguageModel", "lstm_lm"]


class LSTMLanguageModel(HybridBlock):
    """Token ids ``(batch, seq)`` -> next-token logits ``(batch, seq, vocab_size)``.

    ``embedding`` (``Embedding(vocab_size, units)``), ``lstm`` (``LSTM(units, num_layers,
    layout="NTC")``: batch-major, so the data and the logits keep the ``(batch, seq)`` order the
    loss and the metrics use) and ``decoder`` (``Dense(vocab_size, flatten=False)``).
    """

    def __init__(self, vocab_size: int, units: int = 256, num_layers: int = 2, dropout: float = 0.0):
        super().__init__()
        for what, v in (("vocab_size", vocab_size), ("units", units), ("num_layers", num_layers)):
            if not isinstance(v, int) or v < 1:
                raise ParamValueError(f"lstm_lm: {what} must be an int >= 1, got {v!r}")
        self.vocab_size, self.units = vocab_size, units
        self.embedding = Embedding(vocab_size, units)
        self.lstm = LSTM(units, num_layers=num_layers, layout="NTC", input_size=units, dropout=dropout)
        self.decoder = Dense(vocab_size, flatten=False, in_units=units)

    def forward(self, tokens):
        return self.decoder(self.lstm(self.embedding(tokens)))

    def __repr__(self) -> str:
        return (f"LSTMLanguageModel(vocab_size={self.vocab_size}, units={self.units}, "
                f"num_layers={self.lstm.num_layers})")


def lstm_lm(vocab_size: int, units: int = 256, num_layers: int = 2, dropout: float = 0.0) -> LSTMLanguageModel:
    """An LSTM language model: ``Embedding(vocab_size, units)`` -> ``LSTM(units, num_layers,
    layout="NTC")`` -> ``Dense(vocab_size, flatten=False)``; token ids ``(batch, seq)`` give logits
    ``(batch, seq, vocab_size)`` (uninitialized: call ``initialize()``).

    >>> import lazyarray as la
    >>> net = la.blocks.models.lstm_lm(30, units=16, num_layers=1)
    >>> net.initialize(); net.hybridize()
    >>> net(la.zeros((4, 12), dtype="int64")).shape
    (4, 12, 30)
    """
    return LSTMLanguageModel(vocab_size, units, num_layers, dropout)
