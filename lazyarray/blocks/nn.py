"""Basic layers: ``Dense``, ``Activation``, ``Dropout``, ``BatchNorm``, ``Embedding``, ``Flatten``.

Each is a ``HybridBlock`` whose ``forward`` is written with lazyarray ops, so it runs
imperatively and traces into a graph unchanged. Semantics follow MXNet Gluon.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import autograd
from .. import functions as _functions
from ..args import number_arg
from ..errors import ParamError, ParamValueError
from ..ndarray import NDArray
from .block import HybridBlock
from .parameter import Parameter

# Every registered op as a function (top-level and ``nn`` ones), for the layers' forwards.
F = SimpleNamespace(**{**_functions.namespace(""), **_functions.namespace("nn")})


def _softrelu(x):
    return F.log(F.exp(x) + 1.0)


def _softsign(x):
    return x / (F.abs(x) + 1.0)


def _gelu_tanh(x):
    return F.gelu(x, approximation="tanh")


_ACTIVATIONS = {"relu": F.relu, "sigmoid": F.sigmoid, "tanh": F.tanh, "softrelu": _softrelu,
                "softsign": _softsign, "gelu": F.gelu, "gelu_tanh": _gelu_tanh}


def activation_fn(name: str | None):
    """The function of activation ``name`` (None = identity)."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise ParamError(f"activation must be a name such as 'relu' or None, got {type(name).__name__} "
                         f"{name!r}"[:200] + f"; one of {sorted(_ACTIVATIONS)}")
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ParamValueError(f"unknown activation {name!r}; one of {sorted(_ACTIVATIONS)}") from None


def _check_input(x) -> None:
    if not hasattr(x, "ndim"):
        raise ParamError(f"Dense: the input must be an array, got {type(x).__name__} {x!r}"[:200]
                         + "; call the layer with a la.array")


class Dense(HybridBlock):
    """Fully connected layer: ``activation(x @ weight.T + bias)``, weight ``(units, in_units)``.

    ``in_units=0`` learns the input size at the first call. With ``flatten=True`` (the
    default) an N-D input is flattened to ``(batch, -1)`` first; otherwise the layer applies
    to the last axis.

    >>> import lazyarray as la
    >>> layer = la.blocks.Dense(4, activation="relu")
    >>> layer.initialize()
    >>> layer(la.ones((2, 3, 5))).shape
    (2, 4)
    """

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True,
                 flatten: bool = True, dtype="float32", weight_initializer=None, bias_initializer="zeros",
                 in_units: int = 0):
        super().__init__()
        self.units, self.flatten, self.act_name = units, flatten, activation
        self._act = activation_fn(activation)
        self.weight = Parameter("weight", shape=(units, in_units), dtype=dtype,
                                init=weight_initializer)
        self.bias = Parameter("bias", shape=(units,), dtype=dtype, init=bias_initializer) if use_bias else None

    def infer_shape(self, x) -> None:
        _check_input(x)
        shape = x.shape
        n = int(np.prod(shape[1:])) if self.flatten else shape[-1]
        self.weight.shape = (self.units, n)

    def forward(self, x: NDArray) -> NDArray:
        _check_input(x)
        if self.flatten and x.ndim > 2:
            x = F.flatten(x)
        y = F.dense(x, self.weight.data(), None if self.bias is None else self.bias.data())
        return y if self._act is None else self._act(y)

    def __repr__(self) -> str:
        shape = self.weight.shape
        return f"Dense({shape[1] or None} -> {shape[0]}, {self.act_name or 'linear'})"


class Activation(HybridBlock):
    """An activation function as a layer: ``"relu"``, ``"sigmoid"``, ``"tanh"``, ``"softrelu"``,
    ``"softsign"``, ``"gelu"`` (exact, with erf) and ``"gelu_tanh"`` (the tanh approximation)."""

    def __init__(self, activation: str):
        super().__init__()
        self.act_name = activation
        self._act = activation_fn(activation)

    def forward(self, x: NDArray) -> NDArray:
        return self._act(x)

    def __repr__(self) -> str:
        return f"Activation({self.act_name})"


class Dropout(HybridBlock):
    """Zero elements with probability ``rate`` in training mode (scaling the rest by
    ``1/(1-rate)``); the identity in inference mode."""

    def __init__(self, rate: float):
        super().__init__()
        rate = number_arg(rate, "Dropout", "rate", lo=0, hi=1, hi_open=True)
        self.rate = rate

    def forward(self, x: NDArray) -> NDArray:
        return F.dropout(x, p=self.rate)

    def __repr__(self) -> str:
        return f"Dropout(p={self.rate})"


class BatchNorm(HybridBlock):
    """Batch normalization over ``axis`` (the channel axis, 1 for NCHW and (N, C) inputs).

    Training mode normalizes with the batch statistics and updates the running statistics:
    ``running = momentum * running + (1 - momentum) * batch`` (biased batch variance, as
    MXNet). Inference mode normalizes with the running statistics. The running statistics
    are parameters with ``grad_req="null"``; they are saved and exported with the others.
    Under hybridize the updated statistics are extra outputs of the graph, written back
    after each call (``Parameter.update``), so the graph itself never mutates state.
    """

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones", in_channels: int = 0):
        super().__init__()
        self.axis, self.momentum, self.epsilon = axis, momentum, epsilon
        c = in_channels
        self.gamma = Parameter("gamma", shape=(c,), init=gamma_initializer, grad_req="write" if scale else "null")
        self.beta = Parameter("beta", shape=(c,), init=beta_initializer, grad_req="write" if center else "null")
        self.running_mean = Parameter("running_mean", shape=(c,), init=running_mean_initializer, grad_req="null")
        self.running_var = Parameter("running_var", shape=(c,), init=running_variance_initializer, grad_req="null")

    def infer_shape(self, x) -> None:
        c = x.shape[self.axis]
        for p in (self.gamma, self.beta, self.running_mean, self.running_var):
            p.shape = (c,)

    def forward(self, x: NDArray) -> NDArray:
        gamma, beta = self.gamma.data(), self.beta.data()
        if not autograd.is_training():
            return F.batch_norm(x, gamma, beta, self.running_mean.data(), self.running_var.data(),
                                eps=self.epsilon, axis=self.axis)
        axis = self.axis % x.ndim
        others = tuple(i for i in range(x.ndim) if i != axis)
        mean_k = x.mean(axis=others, keepdims=True)
        var = F.square(x - mean_k).mean(axis=others)
        mean = F.squeeze(mean_k, axis=others)
        y = F.batch_norm(x, gamma, beta, mean, var, eps=self.epsilon, axis=self.axis)
        m = self.momentum
        self.running_mean.update(self.running_mean.data() * m + mean.detach() * (1.0 - m))
        self.running_var.update(self.running_var.data() * m + var.detach() * (1.0 - m))
        return y

    def __repr__(self) -> str:
        return f"BatchNorm(axis={self.axis}, momentum={self.momentum}, eps={self.epsilon}, " \
               f"in_channels={self.gamma.shape[0] or None})"


class Embedding(HybridBlock):
    """Rows of a ``(input_dim, output_dim)`` table picked by integer indices (``take`` on axis 0).

    ``sparse_grad=True``: the weight's gradient is row_sparse (only the rows looked up), and the
    Trainer updates only those rows (MXNet's lazy update).
    """

    def __init__(self, input_dim: int, output_dim: int, dtype="float32", weight_initializer=None,
                 sparse_grad: bool = False):
        super().__init__()
        self.input_dim, self.output_dim = input_dim, output_dim
        self.sparse_grad = bool(sparse_grad)
        self.weight = Parameter("weight", shape=(input_dim, output_dim), dtype=dtype,
                                init=weight_initializer, grad_stype="row_sparse" if sparse_grad else "default")

    def forward(self, x: NDArray) -> NDArray:
        if x.dtype.kind not in "iu":
            x = x.astype("int64")  # Gluon feeds float indices; take needs integers
        return F.take(self.weight.data(), x, axis=0, sparse_grad=self.sparse_grad)

    def __repr__(self) -> str:
        return f"Embedding({self.input_dim} -> {self.output_dim})"


class Flatten(HybridBlock):
    """``(batch, d1, d2, ...)`` -> ``(batch, d1 * d2 * ...)``, generic over the batch size."""

    def forward(self, x: NDArray) -> NDArray:
        return F.flatten(x)

    def __repr__(self) -> str:
        return "Flatten()"
