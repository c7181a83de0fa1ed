"""``HybridLambda``: a function of arrays as a layer (Gluon's ``HybridLambda``, without the ``F``
argument: the function takes and returns lazyarray arrays, so it runs eagerly and traces unchanged)."""
from __future__ import annotations

from ..args import callable_arg
from ..errors import ParamValueError
from .block import HybridBlock
from .nn import F


class HybridLambda(HybridBlock):
    """``function(*inputs)`` as a ``HybridBlock``. ``function`` is a callable over arrays, or the name
    of an op function (``"tanh"``, ``"relu"``: ``la.<name>`` / ``la.nn.<name>``). It has no parameters;
    it must be written with lazyarray operations to hybridize and export.

    >>> import lazyarray as la
    >>> double = la.blocks.HybridLambda(lambda x: x * 2)
    >>> double(la.array([1.0, 2.0])).asnumpy()
    array([2., 4.], dtype=float32)
    >>> la.blocks.HybridLambda("relu")(la.array([-1.0, 1.0])).asnumpy()
    array([0., 1.], dtype=float32)
    """

    def __init__(self, function):
        super().__init__()
        if isinstance(function, str):
            if not hasattr(F, function):
                raise ParamValueError(f"HybridLambda: no op function named {function!r}; give a function of "
                                      "arrays or an op name such as 'tanh'"[:300])
            self._name, function = function, getattr(F, function)
        else:
            callable_arg(function, "HybridLambda", "function", "a function of arrays or an op name")
            self._name = getattr(function, "__name__", type(function).__name__)
        self._function = function

    def forward(self, *args):
        return self._function(*args)

    def __repr__(self) -> str:
        return f"HybridLambda({self._name})"
