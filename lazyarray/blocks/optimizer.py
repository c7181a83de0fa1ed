"""``la.blocks.optimizer``: the optimizers (``optimizers/``) under the name Gluon users import.

>>> import lazyarray as la
>>> sorted(la.blocks.optimizer.OPTIMIZERS)[:4]
['adadelta', 'adagrad', 'adam', 'adamax']
"""
from .optimizers import (
    LAMB,
    LARS,
    NAG,
    OPTIMIZERS,
    SGD,
    AdaDelta,
    AdaGrad,
    Adam,
    Adamax,
    AdamW,
    Ftrl,
    HyperParam,
    Nadam,
    One,
    Optimizer,
    RMSProp,
    Signum,
    create,
    register,
)

__all__ = ["LAMB", "LARS", "NAG", "OPTIMIZERS", "SGD", "AdaDelta", "AdaGrad", "Adam", "AdamW", "Adamax", "Ftrl",
           "HyperParam", "Nadam", "One", "Optimizer", "RMSProp", "Signum", "create", "register"]
