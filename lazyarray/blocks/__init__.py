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
from .activations import ELU, SELU, PReLU, SiLU, Swish
from .block import Block, HookHandle, HybridBlock
from .checkpoint import CheckpointHandler
from .containers import Concatenate, HybridConcatenate, HybridSequential, Sequential
from .conv import AvgPool2D, Conv2D, Conv2DTranspose, GlobalAvgPool2D, GlobalMaxPool2D, MaxPool2D
from .conv_nd import Conv1D, Conv1DTranspose, Conv3D, Conv3DTranspose
from .estimator import Estimator
from .handlers import (
    CSVLogger,
    EarlyStoppingHandler,
    EventHandler,
    LoggingHandler,
    LRScheduleHandler,
    MetricHandler,
    ValidationHandler,
)
from .hybrid_lambda import HybridLambda
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
from .norm_more import GroupNorm, InstanceNorm
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
from .parameter import Constant, DeferredInitializationError, Parameter, ReinitializeWarning
from .parameter_dict import ParameterDict
from .pool_nd import (
    AvgPool1D,
    AvgPool3D,
    GlobalAvgPool1D,
    GlobalAvgPool3D,
    GlobalMaxPool1D,
    GlobalMaxPool3D,
    MaxPool1D,
    MaxPool3D,
)
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
    "AvgPool1D",
    "AvgPool2D",
    "AvgPool3D",
    "BatchNorm",
    "Block",
    "causal_mask",
    "CheckpointHandler",
    "clip_global_norm",
    "Concatenate",
    "Constant",
    "Conv1D",
    "Conv1DTranspose",
    "Conv2D",
    "Conv2DTranspose",
    "Conv3D",
    "Conv3DTranspose",
    "CosineEmbeddingLoss",
    "CSVLogger",
    "CTCLoss",
    "DeferredInitializationError",
    "Dense",
    "Dropout",
    "EarlyStoppingHandler",
    "ELU",
    "Embedding",
    "Estimator",
    "EventHandler",
    "Flatten",
    "Ftrl",
    "GELU",
    "GlobalAvgPool1D",
    "GlobalAvgPool2D",
    "GlobalAvgPool3D",
    "GlobalMaxPool1D",
    "GlobalMaxPool2D",
    "GlobalMaxPool3D",
    "GroupNorm",
    "GRU",
    "HingeLoss",
    "HookHandle",
    "HuberLoss",
    "HybridBlock",
    "HybridConcatenate",
    "HybridLambda",
    "HybridSequential",
    "Identity",
    "InstanceNorm",
    "KLDivLoss",
    "L1Loss",
    "L2Loss",
    "LAMB",
    "LARS",
    "LayerNorm",
    "LoggingHandler",
    "LogisticLoss",
    "Loss",
    "LRScheduleHandler",
    "LSTM",
    "MaxPool1D",
    "MaxPool2D",
    "MaxPool3D",
    "MetricHandler",
    "models",
    "MultiHeadAttention",
    "Nadam",
    "NAG",
    "Optimizer",
    "padding_mask",
    "Parameter",
    "ParameterDict",
    "PoissonNLLLoss",
    "PositionalEmbedding",
    "PReLU",
    "ReinitializeWarning",
    "Residual",
    "RMSProp",
    "SELU",
    "Sequential",
    "SGD",
    "SigmoidBinaryCrossEntropyLoss",
    "Signum",
    "SiLU",
    "SoftmaxCrossEntropyLoss",
    "split_and_load",
    "SquaredHingeLoss",
    "StaleGradientError",
    "Swish",
    "SymbolBlock",
    "Trainer",
    "TransformerEncoderLayer",
    "TripletLoss",
    "ValidationHandler",
]
