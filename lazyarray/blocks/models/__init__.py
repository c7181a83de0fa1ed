"""``la.blocks.models``: the model zoo: whole networks built from ``la.blocks`` layers.

One file per model family: ``resnet.py`` (``resnet18``), ``transformer.py``
(``transformer_encoder``), ``lstm.py`` (``lstm_lm``). Each constructor returns an
uninitialized ``HybridBlock``; call ``initialize()`` and (optionally) ``hybridize()``.
"""
from .lstm import lstm_lm
from .resnet import resnet18
from .transformer import TransformerEncoder, transformer_encoder

__all__ = ["TransformerEncoder", "lstm_lm", "resnet18", "transformer_encoder"]
