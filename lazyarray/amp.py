"""``la.amp``: mixed-precision training, as MXNet's ``amp`` and ``torch.cuda.amp``.

>>> import lazyarray as la
>>> _ = la.amp.init("float16")
>>> net = la.blocks.Dense(2, in_units=3); net.initialize(la.init.One())  # outputs 3: gradients 3 * 2**16 overflow float16
>>> net = la.amp.convert_block(net)
>>> trainer = la.blocks.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "multi_precision": True})
>>> scaler = la.amp.init_trainer(trainer)
>>> with la.autograd.record():
...     loss = la.blocks.L2Loss()(net(la.ones((4, 3))), la.zeros((4, 2)))
...     with la.amp.scale_loss(loss, trainer) as scaled:
...         scaled.backward()
>>> trainer.step(4); scaler.scale, scaler.skipped  # 2**16 overflowed float16: skipped, scale halved
(32768.0, 1)

What runs in which dtype (the policy, ``Policy``), block by block, set up by ``convert_block``:

* the layers that multiply (``LOW_PRECISION_BLOCKS``: dense, convolutions and their transposes) run
  in the target dtype; their float inputs are converted to it on the way in;
* every other block with float parameters (``BatchNorm``, ``LayerNorm``, ``GroupNorm``,
  ``MultiHeadAttention``, embeddings ...) keeps float32 parameters and gets float32 inputs;
* blocks without parameters (activations, pooling, dropout) run in the dtype they are given;
* the network's float outputs come out float32, so losses, softmax and metrics run in float32;
  ``scale_loss`` multiplies by the loss scale in float32.

and, op by op inside the converted network's ``forward`` (``autocast``, MXNet's amp lists, read by the
dispatcher behind the mode's ``AUTOCAST`` bit, so the float32 path pays nothing):

* the ``FP32_OPS`` (softmax, log_softmax, layer_norm, batch_norm, exp, log, sum, mean, var ...) get
  float32 inputs, whichever block they are in;
* the ``LOW_PRECISION_OPS`` (matmul, dot, dense, conv2d, conv2d_transpose) get the target dtype's
  inputs (an attention block keeps float32 parameters but multiplies in float16);
* every other op runs in the dtype it is given. A hybridized network records the casts in its graph.

float16 is real storage: the low-precision layers' parameters are cast (``Block.cast``), so their
weights, activations and gradients take half the memory. bfloat16 is emulated, because the backend
arrays have no bfloat16 dtype (``net.cast("bfloat16")`` raises ``la.DTypeError``): those layers keep
float32 arrays holding bfloat16 values (the weights rounded after every update, the layer's inputs
and outputs rounded on the way through, gradients passed straight through the rounding), so the
numbers are bfloat16's but the memory is float32's. Why not ``ml_dtypes.bfloat16`` arrays: NumPy runs
them through generic per-element loops (measured here: ``exp`` about 8x and ``sum`` about 22x slower
than float32 on 128x128), and every kernel (im2col convolutions, fused loops, numba) and
``Block.cast`` would need a bfloat16 path; emulation keeps float32's kernels and bfloat16's numbers.

Loss scaling: ``init_trainer(trainer)`` gives the trainer a ``LossScaler`` (dynamic, as
``torch.cuda.amp.GradScaler``); ``scale_loss`` multiplies the loss by its scale before
``backward``, and ``Trainer.step`` divides the gradients by it (folded into ``1 / batch_size``), or,
when any gradient holds inf or NaN, skips the update (parameters, optimizer states and the update
count unchanged) and halves the scale. With ``multi_precision=True`` the optimizer keeps float32
master weights (float16 parameters: the optimizer's own; bfloat16: this module's ``TrainerAmp``).

Module state: the one mutable piece is ``_POLICY``, the policy ``init`` set for this thread / task
(a ``ContextVar``, as ``autocast``'s op policy is; None before), read by ``convert_block`` and
``init_trainer`` when they are not given a dtype.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass

import numpy as np

from .autograd import is_recording, is_training, record
from .blocks.block import Block
from .blocks.conv import ConvLayer
from .blocks.nn import Dense
from .blocks.trainer import Trainer
from .dispatch import AUTOCAST_POLICY
from .errors import ParamError, ParamValueError
from .functions import op_function
from .mode import AUTOCAST, MODE, set_mode_bit
from .ndarray import NDArray
from .ops import registry
from .storage import RowSparse

__all__ = ["FP32_OPS", "LOW_PRECISION_BLOCKS", "LOW_PRECISION_OPS", "LossScaler", "Policy", "TrainerAmp", "autocast",
           "convert_block", "init", "init_trainer", "policy", "scale_loss"]

TARGET_DTYPES = ("float16", "bfloat16")
# the layers that run in the target dtype (the matrix multiplies); everything else stays float32
LOW_PRECISION_BLOCKS = (Dense, ConvLayer)

_round_to_format = op_function(registry.get("round_to_format"))


@dataclass(frozen=True)
class Policy:
    """What ``init`` set: the target dtype of the low-precision layers."""

    target_dtype: str


# the policy init() set in this thread / task: the module's one piece of mutable state
_POLICY: contextvars.ContextVar[Policy | None] = contextvars.ContextVar("lazyarray_amp_policy", default=None)


def init(target_dtype: str = "float16") -> Policy:
    """Choose the low-precision dtype, ``"float16"`` or ``"bfloat16"``, for the ``convert_block`` and
    ``init_trainer`` calls that follow (MXNet's ``amp.init``). Returns the policy."""
    chosen = Policy(_target("amp.init", target_dtype))
    _POLICY.set(chosen)
    return chosen


def policy() -> Policy | None:
    """The policy ``init`` set (in this thread / task), or None."""
    return _POLICY.get()


def _target(where: str, target_dtype) -> str:
    if target_dtype is None:
        if _POLICY.get() is None:
            raise ParamValueError(f"{where}: no target dtype: pass target_dtype='float16' or 'bfloat16', or call "
                                  "la.amp.init(target_dtype) first")
        return _POLICY.get().target_dtype
    if not isinstance(target_dtype, str):
        raise ParamError(f"{where}: target_dtype must be a string, 'float16' or 'bfloat16', got "
                         f"{type(target_dtype).__name__} {target_dtype!r}"[:300])
    if target_dtype not in TARGET_DTYPES:
        raise ParamValueError(f"{where}: target_dtype must be 'float16' or 'bfloat16', got {target_dtype!r}"[:300])
    return target_dtype


# -- the network --------------------------------------------------------------------------------------
def convert_block(net: Block, target_dtype: str | None = None) -> Block:
    """Set ``net`` up for mixed precision (the policy in the module docstring); returns ``net``.
    Call it once, after ``initialize`` and before the first call (compiled graphs are dropped).

    >>> import lazyarray as la
    >>> net = la.blocks.HybridSequential(); _ = net.add(la.blocks.Dense(2, in_units=3)); net.initialize()
    >>> net = la.amp.convert_block(net, "float16")
    >>> net[0].weight.dtype, net(la.ones((1, 3))).dtype
    (dtype('float16'), dtype('float32'))
    """
    target = _target("amp.convert_block", target_dtype)
    if not isinstance(net, Block):
        raise ParamError(f"amp.convert_block: net must be a Block, got {type(net).__name__}")
    for block in _blocks(net):
        own = [p for p in block._params.values() if np.dtype(p.dtype).kind == "f"]
        if not own:
            continue
        if isinstance(block, LOW_PRECISION_BLOCKS):
            if target == "float16":
                block.cast("float16")
                block.register_forward_pre_hook(_inputs_to(np.dtype(np.float16)))
            else:
                block.cast("float32")  # (float32 storage; the cast also drops compiled graphs)
                for p in own:
                    if p.initialized:
                        p.set_data(_round_to_format(p.data(), format="bfloat16"))
                block.register_forward_pre_hook(_bfloat16_inputs)
                block.register_forward_hook(_bfloat16_output)
        else:
            block.cast("float32")
            block.register_forward_pre_hook(_inputs_to(np.dtype(np.float32)))
    net.register_forward_hook(_float32_output)
    cls = type(net)
    if "_amp_autocast" in vars(cls):  # converted before: wrap the original class again, for this target
        cls = cls.__bases__[0]
    object.__setattr__(net, "__class__", _autocast_class(cls, target))  # the per-op policy inside forward
    return net


def _blocks(net: Block) -> list[Block]:
    out, todo = [], [net]
    while todo:
        b = todo.pop()
        out.append(b)
        todo.extend(c for _, c in b.children())
    return out


def _inputs_to(dtype: np.dtype):
    def hook(block, args):
        return tuple(a.astype(dtype) if isinstance(a, NDArray) and a.dtype.kind == "f" and a.dtype != dtype else a
                     for a in args)
    return hook


def _to_bfloat16(a):
    """``a`` with bfloat16's values (float32 storage); the gradient passes straight through."""
    if not isinstance(a, NDArray) or a.dtype != np.float32:
        return a
    return a + (_round_to_format(a, format="bfloat16") - a).detach()


def _bfloat16_inputs(block, args):
    return tuple(_to_bfloat16(a.astype(np.float32) if isinstance(a, NDArray) and a.dtype.kind == "f" else a)
                 for a in args)


def _bfloat16_output(block, args, out):
    return tuple(_to_bfloat16(o) for o in out) if isinstance(out, (tuple, list)) else _to_bfloat16(out)


def _float32_output(block, args, out):
    def up(a):
        return a.astype(np.float32) if isinstance(a, NDArray) and a.dtype.kind == "f" and a.dtype != np.float32 else a
    return tuple(up(o) for o in out) if isinstance(out, (tuple, list)) else up(out)


# -- the per-op policy ----------------------------------------------------------------------------------
# MXNet's amp lists: ops whose float inputs are cast to float32 (accuracy: exponentials, logarithms,
# normalizations, reductions), and ops that run in the target dtype (the matrix multiplies).
FP32_OPS = frozenset({"softmax", "log_softmax", "masked_softmax", "softmax_cross_entropy",
                      "softmax_cross_entropy_rows", "softmax_cross_entropy_rows_with_probs", "layer_norm",
                      "layer_norm_with_stats", "batch_norm", "exp", "expm1", "log", "log1p", "log2", "log10",
                      "logaddexp", "sum", "mean", "var", "std", "cumulative_sum", "vector_norm", "matrix_norm"})
LOW_PRECISION_OPS = frozenset({"matmul", "dot", "dense", "conv2d", "conv2d_transpose"})


def _cast_float(a, dtype: np.dtype):
    if isinstance(a, NDArray) and a.dtype.kind == "f" and a.dtype != dtype:
        return a.astype(dtype)
    return a


def _op_policy(target: str):
    """The dispatcher's hook while ``autocast(target)`` is on: ``(op, args) -> args``, cast as the lists say."""
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)

    def cast(op, args: tuple) -> tuple:
        name = op.name
        if name in FP32_OPS:
            return tuple([_cast_float(a, f32) for a in args])
        if name in LOW_PRECISION_OPS:
            if target == "float16":
                return tuple([_cast_float(a, f16) for a in args])
            return tuple([_to_bfloat16(_cast_float(a, f32)) for a in args])  # (bfloat16 values, float32 storage)
        return args

    return cast


@contextlib.contextmanager
def autocast(target_dtype: str | None = None):
    """Run the ops inside with MXNet's per-op policy (``torch.autocast``): the ``FP32_OPS`` (softmax,
    layer_norm, exp, log, sum, mean ...) get float32 inputs, the ``LOW_PRECISION_OPS`` (matmul, dense,
    conv2d ...) the target dtype's (bfloat16: its values in float32 storage); other ops run in the
    dtype they are given. ``convert_block`` turns it on inside the converted network's ``forward``.
    Outside it (the float32 path) the dispatcher pays nothing: the policy sits behind the mode flag.

    >>> import lazyarray as la
    >>> x = la.ones((2, 3), dtype="float16")
    >>> with la.amp.autocast("float16"):
    ...     la.nn.softmax(x).dtype, la.matmul(x.astype("float32"), la.ones((3, 2))).dtype
    (dtype('float32'), dtype('float16'))
    """
    target = _target("amp.autocast", target_dtype)
    token = AUTOCAST_POLICY.set(_op_policy(target))
    mode = set_mode_bit(AUTOCAST, True)
    try:
        yield
    finally:
        MODE.reset(mode)
        AUTOCAST_POLICY.reset(token)


def _autocast_class(cls: type, target: str) -> type:
    """``cls`` whose ``forward`` runs under ``autocast(target)`` (same name: errors and paths unchanged)."""
    def forward(self, *args):
        with autocast(target):
            return cls.forward(self, *args)

    forward.__wrapped__ = cls.forward  # (inspect.signature sees the real parameters)
    return type(cls.__name__, (cls,), {"forward": forward, "__qualname__": cls.__qualname__,
                                       "__module__": cls.__module__, "_amp_autocast": target})


# -- loss scaling -------------------------------------------------------------------------------------
_SCALER_FIELDS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "good_steps", "skipped")


class LossScaler:
    """Dynamic loss scaling, as ``torch.cuda.amp.GradScaler`` and MXNet's ``amp``: the loss is
    multiplied by ``scale`` before ``backward``; after a step whose gradients held inf or NaN (skipped)
    the scale is multiplied by ``backoff_factor``, and after ``growth_interval`` finite steps in a
    row by ``growth_factor``.

    >>> s = LossScaler(init_scale=8.0, growth_interval=2)
    >>> s.update(overflow=True); s.scale
    4.0
    >>> s.update(overflow=False); s.update(overflow=False); s.scale
    8.0
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        _number("LossScaler", "init_scale", init_scale, lambda v: v > 0, "a finite number > 0")
        _number("LossScaler", "growth_factor", growth_factor, lambda v: v > 1, "a finite number > 1")
        _number("LossScaler", "backoff_factor", backoff_factor, lambda v: 0 < v < 1, "a number in (0, 1)")
        if not isinstance(growth_interval, int) or isinstance(growth_interval, bool):
            raise ParamError(f"LossScaler: growth_interval must be an int (finite steps before the scale grows), "
                             f"got {type(growth_interval).__name__} {growth_interval!r}"[:300])
        if growth_interval < 1:
            raise ParamValueError(f"LossScaler: growth_interval must be >= 1, got {growth_interval!r}")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = growth_interval
        self.good_steps = 0  # finite steps since the scale last changed
        self.skipped = 0  # steps skipped for inf / NaN gradients, in all

    def state_dict(self) -> dict:
        """The scaler's state (plain numbers: a checkpoint's JSON record keeps it); ``load_state_dict`` takes it."""
        return {k: getattr(self, k) for k in _SCALER_FIELDS}

    def load_state_dict(self, state: dict, where: str = "LossScaler.load_state_dict") -> None:
        """Take ``state_dict``'s state, every field checked (the same checks as the constructor's)
        before any changes: a ``ParamError`` / ``ParamValueError`` naming ``where`` and the field."""
        if not isinstance(state, dict) or set(state) != set(_SCALER_FIELDS):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ParamValueError(f"{where}: a loss scaler's state has the fields {list(_SCALER_FIELDS)}, got {got}")
        try:
            probe = LossScaler(state["scale"], state["growth_factor"], state["backoff_factor"],
                               state["growth_interval"])
        except (ParamError, ParamValueError) as exc:
            raise type(exc)(f"{where}: {str(exc).removeprefix('LossScaler: ')}") from None
        for k in ("good_steps", "skipped"):
            v = state[k]
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2 ** 63:
                raise ParamValueError(f"{where}: the loss scaler's {k} must be an int >= 0, got {v!r}"[:300])
        vars(self).update(vars(probe), good_steps=state["good_steps"], skipped=state["skipped"])

    def unscale_factor(self) -> float:
        """What the gradients are multiplied by to undo the scale."""
        return 1.0 / self.scale

    def update(self, overflow: bool) -> None:
        """The scale after a step: backed off after an overflow, grown after ``growth_interval`` good steps."""
        if overflow:
            self.scale *= self.backoff_factor
            self.good_steps = 0
            self.skipped += 1
            return
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            grown = self.scale * self.growth_factor
            if math.isfinite(grown):
                self.scale = grown
            self.good_steps = 0

    @staticmethod
    def has_overflow(grads: list) -> bool:
        """True when any of the backend gradient arrays holds inf or NaN (one float32 sum each)."""
        for g in grads:
            g = g.data if isinstance(g, RowSparse) else g  # (only the stored rows hold numbers)
            with np.errstate(over="ignore", invalid="ignore"):
                total = g.sum(dtype=np.float32)
            if not math.isfinite(float(total)):
                return True
        return False


def _number(where: str, name: str, value, ok, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParamError(f"{where}: {name} must be {what}, got {type(value).__name__} {value!r}"[:300])
    if not math.isfinite(value) or not ok(value):
        raise ParamValueError(f"{where}: {name} must be {what}, got {value!r}")


class TrainerAmp:
    """What ``init_trainer`` attaches to a ``Trainer`` (``trainer.amp``): the loss scaler, and for
    bfloat16 the float32 master weights of the emulated bfloat16 parameters (with ``multi_precision``).

    ``Trainer.step`` calls ``before_update(params, grads, rescale)`` with the trainable parameters and
    their fresh gradients: it returns the gradients' factor (``rescale`` unscaled) or None to skip the
    update; then ``after_update(params, skipped)``.
    """

    def __init__(self, scaler: LossScaler, target_dtype: str, low_params: list, masters: bool):
        if not isinstance(scaler, LossScaler):
            raise ParamError(f"TrainerAmp: scaler must be a la.amp.LossScaler, got {type(scaler).__name__}")
        if not isinstance(low_params, (list, tuple)) or not isinstance(masters, bool):
            raise ParamError("TrainerAmp: low_params must be a list of Parameters and masters a bool "
                             "(la.amp.init_trainer makes it)")
        self.scaler, self.target_dtype = scaler, _target("TrainerAmp", target_dtype)
        self._low = {id(p) for p in low_params}  # parameters holding bfloat16 values in float32 arrays
        self._masters: dict[int, np.ndarray] | None = {} if masters else None

    def portable(self, params: list) -> tuple:
        """This object's state with parameters named by their place in ``params`` (a trainer's
        ``params``), to rebuild it over copies of them (``rebuilt``: ``DataParallel``'s replicas)."""
        where = {id(p): i for i, p in enumerate(params)}
        masters = None if self._masters is None else \
            {where[k]: np.array(v) for k, v in self._masters.items() if k in where}
        return dict(vars(self.scaler)), self.target_dtype, sorted(where[k] for k in self._low if k in where), masters

    @classmethod
    def rebuilt(cls, state: tuple, params: list) -> TrainerAmp:
        """A ``TrainerAmp`` over ``params`` (in the order ``portable`` was given) with ``state``."""
        scaler, target, low, masters = state
        out = cls(LossScaler(), target, [params[i] for i in low], masters is not None)
        out.restore(state, params)
        return out

    def restore(self, state: tuple, params: list) -> None:
        """Take the scaler's state and the master weights of ``portable``'s ``state`` (same ``params`` order)."""
        scaler, _, _, masters = state
        vars(self.scaler).update(scaler)
        if masters is not None and self._masters is not None:
            self._masters = {id(params[i]): np.array(v, np.float32) for i, v in masters.items()}

    def before_update(self, params: list, grads: list, rescale: float) -> float | None:
        if self.scaler.has_overflow(grads):
            return None
        if self._masters is not None:
            for p in params:
                if id(p) in self._low:
                    m = self._masters.get(id(p))
                    if m is None:
                        m = self._masters[id(p)] = np.array(p.data().asnumpy(), np.float32)
                    p.set_data(m)  # the update runs on the float32 master
        return rescale * self.scaler.unscale_factor()

    def after_update(self, params: list, skipped: bool) -> None:
        self.scaler.update(overflow=skipped)
        if skipped:
            return
        for p in params:
            if id(p) in self._low:
                if self._masters is not None:
                    self._masters[id(p)][...] = p.data().asnumpy()
                p.set_data(_round_to_format(p.data(), format="bfloat16"))


def init_trainer(trainer: Trainer, net: Block | None = None, *, target_dtype: str | None = None,
                 scaler: LossScaler | None = None) -> LossScaler:
    """Give ``trainer`` dynamic loss scaling (a new ``LossScaler`` unless ``scaler`` is given) for
    the dtype ``init`` chose (or ``target_dtype``); returns the scaler. Float16 parameters need the
    optimizer's ``multi_precision=True`` (float32 master weights: the unscaled float16 update would
    underflow). bfloat16 needs ``net``, the network ``convert_block`` converted: the weights of its
    low-precision layers are rounded to bfloat16 after every update, from float32 masters with
    ``multi_precision=True``.
    """
    target = _target("amp.init_trainer", target_dtype)
    if not isinstance(trainer, Trainer):
        raise ParamError(f"amp.init_trainer: trainer must be a la.blocks.Trainer, got {type(trainer).__name__}")
    if net is not None and not isinstance(net, Block):
        raise ParamError(f"amp.init_trainer: net must be the Block that convert_block converted, got "
                         f"{type(net).__name__}")
    scaler = LossScaler() if scaler is None else scaler
    if not isinstance(scaler, LossScaler):
        raise ParamError(f"amp.init_trainer: scaler must be a la.amp.LossScaler, got {type(scaler).__name__}")
    params = trainer.params
    if not trainer.optimizer.multi_precision and any(np.dtype(p.dtype) == np.float16 for p in params):
        raise ParamValueError("amp.init_trainer: trainer has float16 parameters but multi_precision=False; "
                              "create it with optimizer_params={..., 'multi_precision': True}")
    low = []
    if target == "bfloat16":
        if net is None:
            raise ParamValueError("amp.init_trainer: target_dtype 'bfloat16' needs net, the network convert_block "
                                  "converted (its layers' weights are rounded after each update): "
                                  "init_trainer(trainer, net)")
        mine = {id(p) for p in params}
        low = [p for b in _blocks(net) if isinstance(b, LOW_PRECISION_BLOCKS) for p in b._params.values()
               if id(p) in mine and np.dtype(p.dtype) == np.float32]
    trainer.amp = TrainerAmp(scaler, target, low, masters=trainer.optimizer.multi_precision)
    return scaler


@contextlib.contextmanager
def scale_loss(loss, trainer: Trainer):
    """Yield ``loss`` (an array or a list of arrays) times the loss scale of ``trainer`` (float32) to
    call ``backward`` on; ``trainer.step`` then unscales the gradients (MXNet's ``amp.scale_loss``).

    >>> # with la.autograd.record():
    >>> #     loss = loss_fn(net(x), y)
    >>> #     with la.amp.scale_loss(loss, trainer) as scaled:
    >>> #         scaled.backward()
    >>> # trainer.step(batch_size)
    """
    if not isinstance(trainer, Trainer):
        raise ParamError(f"amp.scale_loss: trainer must be a la.blocks.Trainer, got {type(trainer).__name__}")
    if trainer.amp is None:
        raise ParamValueError("amp.scale_loss: trainer has no loss scaler; call la.amp.init_trainer(trainer) first")
    many = isinstance(loss, (list, tuple))
    losses = list(loss) if many else [loss]
    for i, x in enumerate(losses):
        if not isinstance(x, NDArray) or x.dtype.kind != "f":
            what = f"{type(x).__name__}" + (f" of dtype {x.dtype}" if isinstance(x, NDArray) else "")
            raise ParamError(f"amp.scale_loss: loss{f'[{i}]' if many else ''} must be a float la array, got {what}")
    scale = np.float32(trainer.amp.scaler.scale)
    with contextlib.nullcontext() if is_recording() else record(is_training()):
        scaled = [x.astype(np.float32) * scale for x in losses]
    # the backward inside may overflow float16 on purpose: the step is then skipped, without warnings
    with np.errstate(over="ignore", invalid="ignore"):
        yield scaled if many else scaled[0]
