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
from . import models
from .block import Block, HybridBlock, HybridSequential, Sequential
from .conv import AvgPool2D, Conv2D, Conv2DTranspose, GlobalAvgPool2D, GlobalMaxPool2D, MaxPool2D
from .loss import L1Loss, L2Loss, Loss, SoftmaxCrossEntropyLoss
from .nn import Activation, BatchNorm, Dense, Dropout, Embedding, Flatten
from .parameter import DeferredInitializationError, Parameter
from .residual import Identity, Residual
from .symbol_block import SymbolBlock
from .trainer import SGD, Adam, Optimizer, StaleGradientError, Trainer

__all__ = [
    "SGD",
    "Activation",
    "Adam",
    "AvgPool2D",
    "BatchNorm",
    "Block",
    "Conv2D",
    "Conv2DTranspose",
    "DeferredInitializationError",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GlobalAvgPool2D",
    "GlobalMaxPool2D",
    "HybridBlock",
    "HybridSequential",
    "Identity",
    "L1Loss",
    "L2Loss",
    "Loss",
    "MaxPool2D",
    "models",
    "Optimizer",
    "Parameter",
    "Residual",
    "Sequential",
    "SoftmaxCrossEntropyLoss",
    "SymbolBlock",
    "StaleGradientError",
    "Trainer",
]
