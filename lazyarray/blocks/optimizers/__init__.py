"""Optimizers by name (``Trainer(params, "adamw", {...})``): Gluon's names, torch.optim's math.

``base`` holds the protocol, ``HyperParam`` and the registry; ``sgd`` the momentum family (SGD, NAG,
Signum, LARS), ``adam`` Adam's (Adam, AdamW, Adamax, Nadam, LAMB), ``adaptive`` the per-coordinate
rates (RMSProp, AdaGrad, AdaDelta, Ftrl).
"""
from .adam import LAMB, Adam, Adamax, AdamW, Nadam
from .adaptive import AdaDelta, AdaGrad, Ftrl, RMSProp
from .base import OPTIMIZERS, HyperParam, One, Optimizer, create, register
from .sgd import LARS, NAG, SGD, Signum

__all__ = ["LAMB", "LARS", "NAG", "OPTIMIZERS", "SGD", "AdaDelta", "AdaGrad", "Adam", "AdamW", "Adamax", "Ftrl",
           "HyperParam", "Nadam", "One", "Optimizer", "RMSProp", "Signum", "create", "register"]
