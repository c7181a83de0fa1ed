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
from .loss import (
    CosineEmbeddingLoss,
    CTCLoss,
    HingeLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    L2Loss,
    LogisticLoss,
    Loss,
    PoissonNLLLoss,
    SigmoidBinaryCrossEntropyLoss,
    SoftmaxCrossEntropyLoss,
    SquaredHingeLoss,
    TripletLoss,
)
from .nn import Activation, BatchNorm, Dense, Dropout, Embedding, Flatten
from .optimizer import (
    LAMB,
    LARS,
    NAG,
    SGD,
    AdaDelta,
    AdaGrad,
    Adam,
    Adamax,
    AdamW,
    Ftrl,
    Nadam,
    Optimizer,
    RMSProp,
    Signum,
)
from .parameter import Constant, DeferredInitializationError, Parameter
from .residual import Identity, Residual
from .rnn import GRU, LSTM
from .symbol_block import SymbolBlock
from .trainer import StaleGradientError, Trainer
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
    "AdaDelta",
    "AdaGrad",
    "Adam",
    "Adamax",
    "AdamW",
    "AvgPool2D",
    "BatchNorm",
    "Block",
    "causal_mask",
    "clip_global_norm",
    "Concatenate",
    "Constant",
    "Conv2D",
    "Conv2DTranspose",
    "CosineEmbeddingLoss",
    "CTCLoss",
    "DeferredInitializationError",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "Ftrl",
    "GELU",
    "GlobalAvgPool2D",
    "GlobalMaxPool2D",
    "GRU",
    "HingeLoss",
    "HookHandle",
    "HuberLoss",
    "HybridBlock",
    "HybridConcatenate",
    "HybridSequential",
    "Identity",
    "KLDivLoss",
    "L1Loss",
    "L2Loss",
    "LAMB",
    "LARS",
    "LayerNorm",
    "LogisticLoss",
    "Loss",
    "LSTM",
    "MaxPool2D",
    "models",
    "MultiHeadAttention",
    "Nadam",
    "NAG",
    "Optimizer",
    "padding_mask",
    "Parameter",
    "PoissonNLLLoss",
    "PositionalEmbedding",
    "Residual",
    "RMSProp",
    "Sequential",
    "SGD",
    "SigmoidBinaryCrossEntropyLoss",
    "Signum",
    "SoftmaxCrossEntropyLoss",
    "split_and_load",
    "SquaredHingeLoss",
    "StaleGradientError",
    "SymbolBlock",
    "Trainer",
    "TransformerEncoderLayer",
    "TripletLoss",
]
