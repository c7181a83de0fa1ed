"""ONNX recurrent layers -> registry ops: RNN, GRU and LSTM, unrolled over a static sequence, or one
``foreach`` over a dynamic one (the ``seq`` axis of a torch export), the same step function either way.

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
from ..device import current_device
from ..executor.call import SubGraph
from ..graph.symbol import Symbol
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
            if not isinstance(self.batch, int):  # a dynamic batch: zeros of its size, made per call
                return [S.fill(shape=(self.batch, self.hidden), value=0.0, dtype=self.dtype,
                               device=current_device()) for _ in range(self.dirs)]
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

    def reverse(self, d: int) -> bool:
        return self.direction == "reverse" or d == 1

    def pre(self, v):
        """A gate's pre-activation, clipped when the node asks."""
        return v if self.clip is None else S.clip(v, -float(self.clip), float(self.clip))

    def split(self, v) -> list:
        h = self.hidden
        return [S.getitem(v, key=(Ellipsis, slice(k * h, (k + 1) * h))) for k in range(self.gates)]

    def run(self, d: int, states: list, weights: dict, step) -> tuple[list, list]:
        """Direction ``d`` over the sequence: ``step(x_t, states, weights, mask) -> (y_t, states)``.
        A static step count is unrolled; a dynamic one (``seq`` of a torch export) runs as one
        ``foreach`` whose body is the step, so the graph serves every length."""
        xw = weights.pop("xw")
        if isinstance(self.steps, int):
            out = [None] * self.steps
            for t in (range(self.steps - 1, -1, -1) if self.reverse(d) else range(self.steps)):
                m = None if self.lens is None else S.less(constant(np.array(t, np.int64)), self.lens)
                out[t], states = step(S.getitem(xw, key=t), states, weights, m)
            return out, states
        return self._scan(d, xw, states, weights, step)

    def _scan(self, d: int, xw, states: list, weights: dict, step) -> tuple[list, list]:
        back = (slice(None, None, -1),)
        data = [S.getitem(xw, key=back) if self.reverse(d) else xw]
        if self.lens is not None:  # the step numbers, for the sequence_lens mask
            t = S.iota(bounds=(0, self.steps, 1), dtype="int64", device=current_device())
            data.append(S.getitem(t, key=back) if self.reverse(d) else t)
            weights = {**weights, "lens": self.lens}
        captured = {k: v for k, v in weights.items() if v is not None}

        def var(name, x, drop=0):
            a = x.outputs[0].aval
            return S.var(name, shape=tuple(a.shape[drop:]), dtype=a.dtype)
        xv = var("x_t", data[0], 1)
        tv = var("t", data[1], 1) if len(data) > 1 else None
        svars = [var(f"state{i}", st) for i, st in enumerate(states)]
        wvars = {k: var(f"w_{k}", v) for k, v in captured.items()}
        m = None if tv is None else S.less(tv, wvars["lens"])
        y, new = step(xv, svars, {k: wvars.get(k) for k in weights}, m)
        names = ["x_t"] + (["t"] if tv is not None else []) + [f"state{i}" for i in range(len(svars))] + \
            [f"w_{k}" for k in captured]
        body = SubGraph(Symbol([o.outputs[0] for o in [y, *new]]), names)
        res = S.foreach([*data, *states, *captured.values()], body=body, n_data=len(data), n_states=len(states),
                        save_states=False)
        ys = S.getitem(res[0], key=back) if self.reverse(d) else res[0]
        return ys, [res[1 + i] for i in range(len(states))]

    def outputs(self, ys: list, finals: list[list]) -> list:
        """Y [steps, dirs, batch, hidden] (layout 1: [batch, steps, dirs, hidden]) and the final states;
        ``ys`` per direction: the list of steps, or the stacked steps of a scan."""
        y = S.stack([S.stack(ys_d, axis=0) if isinstance(ys_d, list) else ys_d for ys_d in ys], axis=1)
        states = [S.stack(f, axis=0) for f in finals]
        if self.layout:
            y = S.transpose(y, axes=(2, 0, 1, 3))
            states = [S.transpose(s, axes=(1, 0, 2)) for s in states]
        return ([y] + states)[:self.n.n_outputs]


def _keep(mask, new, old):
    return new if mask is None else S.where(mask, new, old)


def _emit(mask, h):
    return h if mask is None else S.where(mask, h, S.zeros_like(h))


def _lin(hv, w, b):
    v = S.matmul(hv, w)
    return v if b is None else S.add(v, b)


def rnn(n: OnnxNode) -> list:
    r = _Recurrence(n, 1, ("Tanh",), 6)
    ys, finals = [], []
    for d, h in enumerate(r.state(5)):
        xw, rt, rb = r.weights(d)
        f, = r.acts[d]

        def step(xt, states, w, m, f=f):
            h, = states
            v = S.add(xt, S.matmul(h, w["rt"]))
            hn = f(r.pre(v if w["rb"] is None else S.add(v, w["rb"])))
            return _emit(m, hn), [_keep(m, hn, h)]
        out, (h,) = r.run(d, [h], {"xw": xw, "rt": rt, "rb": rb}, step)
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

        def step(xt, states, w, m, f=f, g=g):
            h, = states
            rz, rr, rh = r.split(w["rt"])  # columns of R^T per gate
            bz, br, bh = r.split(w["rb"]) if w["rb"] is not None else (None, None, None)
            xz, xr, xh = r.split(xt)
            z = f(r.pre(S.add(xz, _lin(h, rz, bz))))
            rg = f(r.pre(S.add(xr, _lin(h, rr, br))))
            if before:
                cand = g(r.pre(S.add(xh, S.multiply(rg, _lin(h, rh, bh)))))
            else:
                cand = g(r.pre(S.add(xh, _lin(S.multiply(rg, h), rh, bh))))
            hn = S.add(S.multiply(S.subtract(1.0, z), cand), S.multiply(z, h))
            return _emit(m, hn), [_keep(m, hn, h)]
        out, (h,) = r.run(d, [h], {"xw": xw, "rt": rt, "rb": rb}, step)
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
        weights = {"xw": xw, "rt": rt, "rb": rb, "pi": None, "po": None, "pf": None}
        if peep is not None:
            pd = S.getitem(peep, key=d)
            weights.update(zip(("pi", "po", "pf"),
                               (S.getitem(pd, key=slice(k * r.hidden, (k + 1) * r.hidden)) for k in range(3))))

        def step(xt, states, w, m, f=f, g=g, hf=hf):
            h, c = states
            v = S.add(xt, S.matmul(h, w["rt"]))
            vi, vo, vf, vc = r.split(v if w["rb"] is None else S.add(v, w["rb"]))
            if w["pi"] is not None:
                vi, vf = S.add(vi, S.multiply(w["pi"], c)), S.add(vf, S.multiply(w["pf"], c))
            i = f(r.pre(vi))
            fg = S.subtract(1.0, i) if couple else f(r.pre(vf))
            cn = S.add(S.multiply(fg, c), S.multiply(i, g(r.pre(vc))))
            if w["po"] is not None:
                vo = S.add(vo, S.multiply(w["po"], cn))
            hn = S.multiply(f(r.pre(vo)), hf(cn))
            return _emit(m, hn), [_keep(m, hn, h), _keep(m, cn, c)]
        out, (h, c) = r.run(d, [h, c], weights, step)
        ys.append(out)
        hs.append(h)
        cs.append(c)
    return r.outputs(ys, [hs, cs])


RNN_CONVERTERS: dict[str, Converter] = {"RNN": rnn, "GRU": gru, "LSTM": lstm}
