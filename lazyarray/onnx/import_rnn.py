"""ONNX recurrent layers -> registry ops: RNN, GRU and LSTM unrolled over the (static) sequence.

Per direction, the input projection ``X W^T + Wb`` is one matmul over the whole sequence; each step
adds ``H R^T + Rb`` and applies the gate activations (ONNX's gate orders: GRU ``z r h``, LSTM
``i o f c``; peepholes ``P = [Pi Po Pf]``). ``sequence_lens`` masks the steps at and past a batch
entry's length: the state is carried unchanged and the output is 0 there, which is also what the
reverse direction needs (it starts at the entry's last valid step). ``layout=1`` swaps the batch and
sequence axes of X, Y and the states. Activations: the spec's list, with ``activation_alpha`` /
``activation_beta`` taken in order by the functions that use them (as onnxruntime does).
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, _softplus, constant, dtype_of


def _elu(x, a, b):
    return S.where(S.less(x, 0.0), S.multiply(S.expm1(x), a), x)


# name -> (uses alpha, uses beta, default alpha, default beta, fn(x, alpha, beta))
_ACTIVATIONS = {
    "relu": (False, False, 0.0, 0.0, lambda x, a, b: S.relu(x)),
    "tanh": (False, False, 0.0, 0.0, lambda x, a, b: S.tanh(x)),
    "sigmoid": (False, False, 0.0, 0.0, lambda x, a, b: S.sigmoid(x)),
    "affine": (True, True, 1.0, 0.0, lambda x, a, b: S.add(S.multiply(x, a), b)),
    "leakyrelu": (True, False, 0.01, 0.0, lambda x, a, b: S.where(S.less(x, 0.0), S.multiply(x, a), x)),
    "thresholdedrelu": (True, False, 1.0, 0.0, lambda x, a, b: S.where(S.greater(x, a), x, S.zeros_like(x))),
    "scaledtanh": (True, True, 1.0, 1.0, lambda x, a, b: S.multiply(S.tanh(S.multiply(x, b)), a)),
    "hardsigmoid": (True, True, 0.2, 0.5,
                    lambda x, a, b: S.maximum(S.minimum(S.add(S.multiply(x, a), b), 1.0), 0.0)),
    "elu": (True, False, 1.0, 0.0, _elu),
    "softsign": (False, False, 0.0, 0.0, lambda x, a, b: S.divide(x, S.add(S.abs(x), 1.0))),
    "softplus": (False, False, 0.0, 0.0, lambda x, a, b: _softplus(x)),
}


def _text(v, default: str) -> str:
    if v is None:
        return default
    return v.decode() if isinstance(v, bytes) else str(v)


def _activations(n: OnnxNode, defaults: tuple[str, ...], directions: int) -> list[list]:
    """Per direction, the activation functions (closures of one argument)."""
    names = [_text(a, "") for a in n.attr("activations", [])] or list(defaults) * directions
    if len(names) != len(defaults) * directions:
        n.fail(f"{n.op} takes {len(defaults)} activations per direction ({directions}), got {names}")
    alphas, betas = list(n.attr("activation_alpha", [])), list(n.attr("activation_beta", []))
    fns = []
    for name in names:
        spec = _ACTIVATIONS.get(name.lower())
        if spec is None:
            n.fail(f"{n.op} activation {name!r} is not supported; supported: {', '.join(sorted(_ACTIVATIONS))}")
        use_a, use_b, a, b, fn = spec
        if use_a and alphas:
            a = float(alphas.pop(0))
        if use_b and betas:
            b = float(betas.pop(0))
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    k = len(defaults)
    return [fns[d * k:(d + 1) * k] for d in range(directions)]


class _Recurrence:
    """What every recurrent converter reads: shapes, directions, projections, masks."""

    def __init__(self, n: OnnxNode, gates: int, defaults: tuple[str, ...], max_inputs: int):
        n.arity(3, max_inputs)
        self.n = n
        self.layout = int(n.attr("layout", 0))
        x = n.inputs[0]
        if self.layout:
            x = S.transpose(x, axes=(1, 0, 2))
        self.x = x
        xs = n.known_shape(0, n.op)
        self.steps, self.batch = (xs[1], xs[0]) if self.layout else (xs[0], xs[1])
        self.direction = _text(n.attr("direction"), "forward")
        if self.direction not in ("forward", "reverse", "bidirectional"):
            n.fail(f"{n.op} direction {self.direction!r} is not one of forward, reverse, bidirectional")
        self.dirs = 2 if self.direction == "bidirectional" else 1
        ws = n.known_shape(1, n.op)
        self.hidden = int(n.attr("hidden_size", ws[1] // gates))
        if ws[0] != self.dirs or ws[1] != gates * self.hidden:
            n.fail(f"{n.op} W of shape {ws} does not fit {self.dirs} direction(s) of {gates} gates of "
                   f"hidden_size {self.hidden}")
        self.gates = gates
        self.acts = _activations(n, defaults, self.dirs)
        self.clip = n.attr("clip")
        self.dtype = dtype_of(n.inputs[0])
        lens = n.input(4)
        self.lens = None if lens is None else S.reshape(S.cast(lens, dtype="int64"), shape=(self.batch, 1))

    def state(self, i: int):
        """Initial state input ``i`` as [directions, batch, hidden] (zeros when omitted)."""
        s = self.n.input(i)
        if s is None:
            return [constant(np.zeros((self.batch, self.hidden), self.dtype)) for _ in range(self.dirs)]
        if self.layout:
            s = S.transpose(s, axes=(1, 0, 2))
        return [S.getitem(s, key=d) for d in range(self.dirs)]

    def bias(self, d: int):
        """(Wb, Rb) of direction d, each [gates * hidden], or (None, None)."""
        b = self.n.input(3)
        if b is None:
            return None, None
        bd = S.getitem(b, key=d)
        g = self.gates * self.hidden
        return S.getitem(bd, key=slice(0, g)), S.getitem(bd, key=slice(g, 2 * g))

    def weights(self, d: int):
        """(X W^T [+ Wb]) over the whole sequence as [steps, batch, gates*hidden], R^T, Rb."""
        wb, rb = self.bias(d)
        xw = S.matmul(self.x, S.transpose(S.getitem(self.n.inputs[1], key=d)))
        if wb is not None:
            xw = S.add(xw, wb)
        return xw, S.transpose(S.getitem(self.n.inputs[2], key=d)), rb

    def order(self, d: int) -> range:
        reverse = self.direction == "reverse" or d == 1
        return range(self.steps - 1, -1, -1) if reverse else range(self.steps)

    def pre(self, v):
        """A gate's pre-activation, clipped when the node asks."""
        return v if self.clip is None else S.clip(v, -float(self.clip), float(self.clip))

    def split(self, v) -> list:
        h = self.hidden
        return [S.getitem(v, key=(Ellipsis, slice(k * h, (k + 1) * h))) for k in range(self.gates)]

    def step_mask(self, t: int):
        return None if self.lens is None else S.less(constant(np.array(t, np.int64)), self.lens)

    def outputs(self, ys: list, finals: list[list]) -> list:
        """Y [steps, dirs, batch, hidden] (layout 1: [batch, steps, dirs, hidden]) and the final states."""
        y = S.stack([S.stack(ys_d, axis=0) for ys_d in ys], axis=1)
        states = [S.stack(f, axis=0) for f in finals]
        if self.layout:
            y = S.transpose(y, axes=(2, 0, 1, 3))
            states = [S.transpose(s, axes=(1, 0, 2)) for s in states]
        return ([y] + states)[:self.n.n_outputs]


def _keep(mask, new, old):
    return new if mask is None else S.where(mask, new, old)


def _emit(mask, h):
    return h if mask is None else S.where(mask, h, S.zeros_like(h))


def rnn(n: OnnxNode) -> list:
    r = _Recurrence(n, 1, ("Tanh",), 6)
    ys, finals = [], []
    for d, h in enumerate(r.state(5)):
        xw, rt, rb = r.weights(d)
        f, = r.acts[d]
        out = [None] * r.steps
        for t in r.order(d):
            v = S.add(S.getitem(xw, key=t), S.matmul(h, rt))
            hn = f(r.pre(v if rb is None else S.add(v, rb)))
            m = r.step_mask(t)
            out[t], h = _emit(m, hn), _keep(m, hn, h)
        ys.append(out)
        finals.append(h)
    return r.outputs(ys, [finals])


def gru(n: OnnxNode) -> list:
    r = _Recurrence(n, 3, ("Sigmoid", "Tanh"), 6)
    before = int(n.attr("linear_before_reset", 0))
    ys, finals = [], []
    for d, h in enumerate(r.state(5)):
        xw, rt, rb = r.weights(d)
        f, g = r.acts[d]
        rz, rr, rh = r.split(rt)  # columns of R^T per gate
        bz, br, bh = r.split(rb) if rb is not None else (None, None, None)
        out = [None] * r.steps
        for t in r.order(d):
            xz, xr, xh = r.split(S.getitem(xw, key=t))

            def lin(hv, w, b):
                v = S.matmul(hv, w)
                return v if b is None else S.add(v, b)
            z = f(r.pre(S.add(xz, lin(h, rz, bz))))
            rg = f(r.pre(S.add(xr, lin(h, rr, br))))
            if before:
                cand = g(r.pre(S.add(xh, S.multiply(rg, lin(h, rh, bh)))))
            else:
                cand = g(r.pre(S.add(xh, lin(S.multiply(rg, h), rh, bh))))
            hn = S.add(S.multiply(S.subtract(1.0, z), cand), S.multiply(z, h))
            m = r.step_mask(t)
            out[t], h = _emit(m, hn), _keep(m, hn, h)
        ys.append(out)
        finals.append(h)
    return r.outputs(ys, [finals])


def lstm(n: OnnxNode) -> list:
    r = _Recurrence(n, 4, ("Sigmoid", "Tanh", "Tanh"), 8)
    couple = int(n.attr("input_forget", 0))
    peep = n.input(7)
    ys, hs, cs = [], [], []
    for d, (h, c) in enumerate(zip(r.state(5), r.state(6))):
        xw, rt, rb = r.weights(d)
        f, g, hf = r.acts[d]
        if peep is not None:
            pd = S.getitem(peep, key=d)
            pi, po, pf = (S.getitem(pd, key=slice(k * r.hidden, (k + 1) * r.hidden)) for k in range(3))
        out = [None] * r.steps
        for t in r.order(d):
            v = S.add(S.getitem(xw, key=t), S.matmul(h, rt))
            vi, vo, vf, vc = r.split(v if rb is None else S.add(v, rb))
            if peep is not None:
                vi, vf = S.add(vi, S.multiply(pi, c)), S.add(vf, S.multiply(pf, c))
            i = f(r.pre(vi))
            fg = S.subtract(1.0, i) if couple else f(r.pre(vf))
            cn = S.add(S.multiply(fg, c), S.multiply(i, g(r.pre(vc))))
            if peep is not None:
                vo = S.add(vo, S.multiply(po, cn))
            hn = S.multiply(f(r.pre(vo)), hf(cn))
            m = r.step_mask(t)
            out[t], h, c = _emit(m, hn), _keep(m, hn, h), _keep(m, cn, c)
        ys.append(out)
        hs.append(h)
        cs.append(c)
    return r.outputs(ys, [hs, cs])


RNN_CONVERTERS: dict[str, Converter] = {"RNN": rnn, "GRU": gru, "LSTM": lstm}
