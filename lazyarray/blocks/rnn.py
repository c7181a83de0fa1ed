"""Recurrent layers: ``LSTM`` and ``GRU`` (MXNet Gluon ``gluon.rnn.LSTM`` / ``GRU`` semantics).

Each layer and direction is **one** ``la.foreach`` over time, so a hybridized layer's graph has
the same size for every sequence length (and one trace serves them all). The input projection
``x @ W_i2h^T + b_i2h`` of every time step is one ``dense`` before the loop; the loop body does
only the recurrent ``h @ W_h2h^T + b_h2h`` and the gate math. The reverse direction of a
bidirectional layer scans the time-flipped sequence and flips its outputs back.

Gates are in cuDNN / Gluon order: LSTM ``i, f, g (cell candidate), o``; GRU ``r, z, n`` with the
``n`` gate's recurrent part (its bias included) inside the reset product:
``n = tanh(x W_in + b_in + r * (h W_hn + b_hn))``, ``h' = (1 - z) * n + z * h``.

Parameters per layer ``k`` and direction (``l`` forward, ``r`` reverse) are named as Gluon names
them: ``l0_i2h_weight`` ``(G*H, in)``, ``l0_h2h_weight`` ``(G*H, H)``, ``l0_i2h_bias``,
``l0_h2h_bias`` (``G`` = 4 for LSTM, 3 for GRU); ``input_size=0`` learns ``in`` at the first call.
"""
from __future__ import annotations

from .. import guards
from ..args import number_arg
from ..aval import as_dtype, check_alloc
from ..control_flow import aval_of, foreach
from ..creation import zeros
from ..dim import Dim
from ..errors import ParamValueError, ShapeError
from ..ndarray import NDArray
from .block import HybridBlock
from .nn import F
from .parameter import Parameter

__all__ = ["GRU", "LSTM"]


def _shape(a: NDArray) -> tuple:
    """``a``'s static shape without a guard: comparing two inputs' shapes ties no trace to a size."""
    return a.static_shape if guards.active() is None else aval_of(a).shape


class _RNNLayer(HybridBlock):
    """The shared machinery of ``LSTM`` and ``GRU``: parameters, layouts, layers, directions, states."""

    _gates = 0  # gate blocks in the weights
    _n_states = 0  # states carried per layer and direction (LSTM: h and c; GRU: h)

    def __init__(self, hidden_size: int, num_layers: int = 1, bidirectional: bool = False, layout: str = "TNC",
                 input_size: int = 0, dropout: float = 0.0, dtype="float32", i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros", h2h_bias_initializer="zeros"):
        super().__init__()
        name = type(self).__name__
        if layout not in ("TNC", "NTC"):
            raise ParamValueError(f"{name}: layout must be 'TNC' (seq, batch, features) or 'NTC' (batch, seq, "
                                  f"features), got {layout!r}")
        for what, v in (("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(v, int) or v < 1:
                raise ParamValueError(f"{name}: {what} must be an int >= 1, got {v!r}")
        dropout = number_arg(dropout, name, "dropout", lo=0, hi=1, hi_open=True)
        # the h2h weights alone, before one Parameter is made (2**62 layers must not loop)
        check_alloc(name, (num_layers * (2 if bidirectional else 1), self._gates * hidden_size, hidden_size),
                    as_dtype(dtype, name), "h2h weights of all layers")
        self.hidden_size, self.num_layers, self.layout = hidden_size, num_layers, layout
        self.bidirectional, self.dropout = bool(bidirectional), float(dropout)
        self.dirs = ("l", "r") if bidirectional else ("l",)
        gh = self._gates * hidden_size
        n_in = input_size
        for k in range(num_layers):
            for d in self.dirs:
                setattr(self, f"{d}{k}_i2h_weight", Parameter(f"{d}{k}_i2h_weight", shape=(gh, n_in), dtype=dtype,
                                                              init=i2h_weight_initializer))
                setattr(self, f"{d}{k}_h2h_weight", Parameter(f"{d}{k}_h2h_weight", shape=(gh, hidden_size),
                                                              dtype=dtype, init=h2h_weight_initializer))
                setattr(self, f"{d}{k}_i2h_bias", Parameter(f"{d}{k}_i2h_bias", shape=(gh,), dtype=dtype,
                                                            init=i2h_bias_initializer))
                setattr(self, f"{d}{k}_h2h_bias", Parameter(f"{d}{k}_h2h_bias", shape=(gh,), dtype=dtype,
                                                            init=h2h_bias_initializer))
            n_in = hidden_size * len(self.dirs)

    # -- shapes and states ------------------------------------------------------------------------
    def _check_input(self, x) -> None:
        if not isinstance(x, NDArray) or x.ndim != 3:
            got = f"shape {x.static_shape}" if isinstance(x, NDArray) else type(x).__name__
            raise ShapeError(f"{type(self).__name__}: the input must be a 3-d array laid out {self.layout!r} "
                             f"({'seq, batch' if self.layout == 'TNC' else 'batch, seq'}, features), got {got}")

    def infer_shape(self, x, *states) -> None:
        self._check_input(x)
        gh = self._gates * self.hidden_size
        for d in self.dirs:
            getattr(self, f"{d}0_i2h_weight").shape = (gh, x.shape[-1])

    def state_info(self, batch_size: int = 0) -> list[dict]:
        """Shape and layout of each begin state (Gluon): ``(num_layers * directions, batch, hidden)``."""
        shape = (self.num_layers * len(self.dirs), batch_size, self.hidden_size)
        return [{"shape": shape, "__layout__": "LNC"} for _ in range(self._n_states)]

    def begin_state(self, batch_size: int, dtype="float32", device=None) -> list[NDArray]:
        """Zero begin states for ``batch_size`` sequences (a list of ``state_info()`` arrays)."""
        return [zeros(info["shape"], dtype=dtype, device=device) for info in self.state_info(batch_size)]

    def _check_states(self, x, states) -> None:
        name = type(self).__name__
        if len(states) != self._n_states:
            raise ShapeError(f"{name}: expected {self._n_states} begin state(s) "
                             f"({'[h, c]' if self._n_states == 2 else '[h]'}), got {len(states)}")
        batch = _shape(x)[0 if self.layout == "NTC" else 1]
        want = (self.num_layers * len(self.dirs), batch, self.hidden_size)
        for s in states:
            shape = _shape(s) if isinstance(s, NDArray) else None
            if shape is None or len(shape) != 3 or any(a is not None and b is not None and a != b
                                                       for a, b in zip(shape, want)):
                raise ShapeError(f"{name}: each begin state must have shape (num_layers * directions, batch, "
                                 f"hidden_size) = {want}, got {shape}; make them with layer.begin_state(batch)")

    def symbolic_shapes(self, args) -> tuple | None:
        """The sequence and batch axes as ``time`` and ``batch`` by the layout (``TNC``: axis 0 is the
        time), the begin states' batch (axis 1) too: one trace serves every length and batch, and its
        export names each axis for what it is."""
        arrays = [a for a in args if a is not None]
        if not arrays or len(arrays[0].shape) != 3:
            return None
        time, batch = Dim("time"), Dim("batch")
        x = arrays[0].shape
        first = (time, batch, x[2]) if self.layout == "TNC" else (batch, time, x[2])
        return (first,) + tuple((a.shape[0], batch) + tuple(a.shape[2:]) if len(a.shape) == 3 else tuple(a.shape)
                                for a in arrays[1:])

    # -- calling ---------------------------------------------------------------------------------
    def __call__(self, x, states=None):
        """``layer(x)`` -> output; ``layer(x, states)`` -> ``(output, new_states)`` (as Gluon)."""
        if states is None:
            return super().__call__(x)
        if isinstance(states, NDArray):
            states = [states]
        res = super().__call__(x, *states)
        return res[0], list(res[1:])

    def forward(self, x, *states):
        self._check_input(x)
        given = bool(states)
        if given:
            self._check_states(x, states)
        if self.layout == "NTC":
            x = F.transpose(x, (1, 0, 2))
        finals: list[list] = [[] for _ in range(self._n_states)]
        i = 0
        for k in range(self.num_layers):
            outs = []
            for d in self.dirs:
                begin = [s[i] for s in states] if given else None
                out, last = self._scan(x, begin, *(getattr(self, f"{d}{k}_{p}").data()
                                                   for p in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")),
                                       reverse=d == "r")
                outs.append(out)
                for j, s in enumerate(last):
                    finals[j].append(s)
                i += 1
            x = outs[0] if len(outs) == 1 else F.concatenate(outs, axis=-1)
            if self.dropout and k + 1 < self.num_layers:
                x = F.dropout(x, p=self.dropout)
        if self.layout == "NTC":
            x = F.transpose(x, (1, 0, 2))
        if not given:
            return x
        return (x,) + tuple(F.stack(f, axis=0) for f in finals)

    def _scan(self, x, begin, w_i2h, w_h2h, b_i2h, b_h2h, reverse: bool):
        """One direction of one layer: ``(outputs (T, N, H), final states)``."""
        if reverse:
            x = F.flip(x, axis=0)
        proj = F.dense(x, w_i2h, b_i2h)  # every step's input projection at once: (T, N, G*H)
        if begin is None:  # zeros (N, H), shaped from the data so the graph stays shape-generic
            zero = F.zeros_like(proj[0, :, :self.hidden_size])
            begin = [zero] * self._n_states
        step = self._step

        def body(p, states):
            new = step(p, states, w_h2h, b_h2h)
            return new[0], new

        out, last = foreach(body, proj, list(begin))
        if reverse:
            out = F.flip(out, axis=0)
        return out, last

    def _step(self, p, states, w_h2h, b_h2h) -> list:
        raise NotImplementedError

    def __repr__(self) -> str:
        n_in = self.l0_i2h_weight.shape[1] or None
        extra = (", bidirectional" if self.bidirectional else "") + (f", dropout={self.dropout}" if self.dropout else "")
        return f"{type(self).__name__}({n_in} -> {self.hidden_size}, {self.layout}, num_layers={self.num_layers}{extra})"


class LSTM(_RNNLayer):
    """A multi-layer LSTM (Gluon ``rnn.LSTM``): gates ``i, f, g, o``, ``c' = f*c + i*g``,
    ``h' = o * tanh(c')``.

    Input ``(seq, batch, features)`` for ``layout="TNC"`` or ``(batch, seq, features)`` for ``"NTC"``;
    output the last layer's ``h`` at every step (``2 * hidden_size`` features when bidirectional).
    ``layer(x)`` returns the output; ``layer(x, [h, c])`` (states shaped ``(num_layers * directions,
    batch, hidden_size)``, see ``begin_state``) returns ``(output, [h, c])``.

    >>> import lazyarray as la
    >>> lstm = la.blocks.LSTM(8, num_layers=2)
    >>> lstm.initialize()
    >>> x = la.ones((5, 3, 4))                  # (seq, batch, features)
    >>> lstm(x).shape
    (5, 3, 8)
    >>> out, (h, c) = lstm(x, lstm.begin_state(3))
    >>> h.shape, c.shape
    ((2, 3, 8), (2, 3, 8))
    """

    _gates, _n_states = 4, 2

    def _step(self, p, states, w_h2h, b_h2h) -> list:
        h, c = states
        i, f, g, o = F.split(p + F.dense(h, w_h2h, b_h2h), 4, axis=-1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        return [F.sigmoid(o) * F.tanh(c), c]


class GRU(_RNNLayer):
    """A multi-layer GRU (Gluon ``rnn.GRU``, cuDNN's variant): gates ``r, z, n``,
    ``n = tanh(x W_in + b_in + r * (h W_hn + b_hn))``, ``h' = (1 - z) * n + z * h``.

    Same layouts, states (one: ``[h]``) and call conventions as ``LSTM``.

    >>> import lazyarray as la
    >>> gru = la.blocks.GRU(8, layout="NTC", bidirectional=True)
    >>> gru.initialize()
    >>> gru(la.ones((3, 5, 4))).shape          # (batch, seq, 2 * hidden)
    (3, 5, 16)
    """

    _gates, _n_states = 3, 1

    def _step(self, p, states, w_h2h, b_h2h) -> list:
        h = states[0]
        r_i, z_i, n_i = F.split(p, 3, axis=-1)
        r_h, z_h, n_h = F.split(F.dense(h, w_h2h, b_h2h), 3, axis=-1)
        r = F.sigmoid(r_i + r_h)
        z = F.sigmoid(z_i + z_h)
        n = F.tanh(n_i + r * n_h)
        return [n + z * (h - n)]
