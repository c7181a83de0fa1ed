"""``la.blocks``: Gluon-style layers with a single ``forward``, hybridized into compiled graphs.

>>> import lazyarray as la
>>> net = la.blocks.HybridSequential()
>>> net.add(la.blocks.Dense(8, activation="relu"), la.blocks.Dense(2))
HybridSequential(
  (0): Dense(None -> 8, relu)
  (1): Dense(None -> 2, linear))
>>> net.initialize(); net.hybridize()
>>> net(la.ones((4, 3))).shape
(4, 2)
>>> sorted(net.collect_params())
['0.bias', '0.weight', '1.bias', '1.weight']
"""
from . import models  # (imports the layers it needs itself)
from .block import Block, HookHandle, HybridBlock
from .containers import Concatenate, HybridConcatenate, HybridSequential, Sequential
from .conv import AvgPool2D, Conv2D, Conv2DTranspose, GlobalAvgPool2D, GlobalMaxPool2D, MaxPool2D
from .loss import L1Loss, L2Loss, Loss, SoftmaxCrossEntropyLoss
from .nn import Activation, BatchNorm, Dense, Dropout, Embedding, Flatten
from .parameter import Constant, DeferredInitializationError, Parameter
from .residual import Identity, Residual
from .rnn import GRU, LSTM
from .symbol_block import SymbolBlock
from .trainer import SGD, Adam, Optimizer, StaleGradientError, Trainer
from .transformer import (
    GELU,
    LayerNorm,
    MultiHeadAttention,
    PositionalEmbedding,
    TransformerEncoderLayer,
    causal_mask,
    padding_mask,
)
from .utils import clip_global_norm, split_and_load

__all__ = [
    "Activation",
    "Adam",
    "AvgPool2D",
    "BatchNorm",
    "Block",
    "Concatenate",
    "Constant",
    "Conv2D",
    "Conv2DTranspose",
    "DeferredInitializationError",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "GRU",
    "GlobalAvgPool2D",
    "GlobalMaxPool2D",
    "HookHandle",
    "HybridBlock",
    "HybridConcatenate",
    "HybridSequential",
    "Identity",
    "L1Loss",
    "L2Loss",
    "LSTM",
    "LayerNorm",
    "Loss",
    "MaxPool2D",
    "MultiHeadAttention",
    "Optimizer",
    "Parameter",
    "PositionalEmbedding",
    "Residual",
    "SGD",
    "Sequential",
    "SoftmaxCrossEntropyLoss",
    "StaleGradientError",
    "SymbolBlock",
    "Trainer",
    "TransformerEncoderLayer",
    "causal_mask",
    "clip_global_norm",
    "models",
    "padding_mask",
    "split_and_load",
]
