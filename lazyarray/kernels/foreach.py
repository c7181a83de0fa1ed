"""foreach (a scan over axis 0) as one written-out loop where its body is a small recurrent cell.

The reference kernel (``executor/control_flow.py``: the ``steps`` implementation) runs the
body's compiled program once per time step: for an imported LSTM or GRU that is some twenty
kernel calls plus a program's bookkeeping per step, and the weight slices taken again every
step. The ``inline_loop`` implementation writes the body out once as the source of one Python
function holding the whole time loop: each node a direct call of its op's kernel (the same
kernels, so the same values), the nodes that depend only on the free inputs and constants (the
weights' slices) hoisted out of the loop, step outputs and final states written into the planned
buffers. It takes bodies made only of the ops in ``OPS`` (elementwise arithmetic and
activations, ``matmul``, ``getitem``) and constants; anything else keeps ``steps``. A compiled
(numba) loop per body was tried first: it ran the GRU fixture about as fast but took 20 s to compile on
this machine, longer than all the rest of the model's first call.

``compiled_cell`` (``rnn_cell.py``) is the compiled loop that pays: the body is data (a table of
ops over registers) for one function compiled once per dtype (about 6 s of CPU cold, 30 ms from
the disk cache), so no body compiles; it runs a cell's calls after its first ``foreach_jit_after``
(``inline_loop`` runs those), 0.34-0.52x of ``inline_loop``'s call time on the LSTM / GRU fixtures
(``benchmarks/rnn_conv_ab.py``).
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..caches import NamedCache
from ..mode import MODE, PROFILING
from ..ops import registry
from ..tuning_table import current as tuning
from . import rnn_cell
from .impl import Choice, Impl
from .profile import current as current_profile
from .runner import Bound, counted_until, direct

# ops whose kernels the loop calls as they are: elementwise arithmetic and activations, products,
# static indexing (each has one output and no state, so calling it per step is what the body means)
OPS = frozenset({"add", "subtract", "multiply", "divide", "negative", "maximum", "minimum", "where", "exp",
                 "sigmoid", "tanh", "relu", "matmul", "getitem"})
_MAX = 64  # bodies kept
BODIES = NamedCache("foreach loops", _MAX)  # id(body) -> (body, its signature, its loop or None)


def sigmoid_small(x):
    """The ``sigmoid`` op's values (``1 / (1 + e^-|x|)``, times ``e^-|x|`` where x < 0) in fewer, cheaper
    NumPy calls for the small arrays of a recurrent cell: no Python-scalar operands, no ``where``
    allocation (the op's kernel costs about 14 us on a (1, 16) array, this about a quarter)."""
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    pos = np.add(e, e.dtype.type(1))
    np.reciprocal(pos, out=pos)
    np.multiply(e, pos, out=e)
    np.copyto(e, pos, where=np.greater_equal(x, 0))
    return e


# ops the loop calls another way: the same values, cheaper on small arrays (floating inputs only)
_SMALL = {"sigmoid": sigmoid_small}


def _kernel(node):
    """What the loop calls for ``node``: its op's kernel, or a cheaper call with the same values (a
    2-D product with an inner size above 1 as a plain ``np.matmul``: the kernel's checks for
    packed weights and outer products cost more than the product of a recurrent cell)."""
    if node.avals[0].dtype.kind == "f":
        if node.op.name in _SMALL:
            return _SMALL[node.op.name]
        if node.op.name == "matmul" and all(e.aval.ndim == 2 for e in node.inputs) \
                and isinstance(node.inputs[0].aval.shape[1], int) and node.inputs[0].aval.shape[1] > 1:
            return np.matmul
    return node.op.bind(np)


def c_ordered(a):
    """``a`` C-ordered (copied only where it is not; a 0-d value keeps its shape)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


class _Writer:
    """Names for a body's values while its loop is written: inputs ``a0..``, nodes ``v0..``, and the
    objects the source refers to (kernels, params, constants) in ``scope``."""

    def __init__(self, body):
        self.names = {id(n): f"a{k}" for k, n in enumerate(body.inputs)}
        self.scope = {"np": np, "c_ordered": c_ordered}
        self.hoisted, self.steps = [], []

    def ref(self, obj, prefix: str) -> str:
        name = f"{prefix}{len(self.scope)}"
        self.scope[name] = obj
        return name


def _call(w: _Writer, node) -> str | None:
    """The node's kernel called on its inputs' names, or None where the loop does not take the op."""
    if node.op.name not in OPS or len(node.avals) != 1:
        return None
    kern = w.ref(_kernel(node), "K")
    args = ", ".join(w.names[id(e.node)] for e in node.inputs)
    if not node.params:
        return f"{kern}({args})"
    return f"{kern}({args}, **{w.ref(dict(node.params), 'P')})"


def _write_body(body, n_varying: int):
    """The body's nodes as lines of source, split into those that depend only on the free inputs and
    constants (``hoisted``: run once per call) and the rest (``steps``: run every step); None where an
    op is not one the loop takes."""
    w = _Writer(body)
    fixed = {id(n) for n in body.inputs[n_varying:]}
    for n in body.sym.topo():
        if id(n) in w.names:
            continue
        if n.kind == "const":
            w.names[id(n)] = w.ref(np.asarray(n.value, n.avals[0].dtype), "C")
            fixed.add(id(n))
            continue
        expr = _call(w, n) if n.kind == "op" else None
        if expr is None:
            return None
        name = w.names[id(n)] = f"v{len(w.hoisted) + len(w.steps)}"
        if all(id(e.node) in fixed for e in n.inputs):
            fixed.add(id(n))
            w.hoisted.append(f"{name} = c_ordered({expr})")  # (read every step)
        else:
            w.steps.append(f"{name} = {expr}")
    return w


def loop_source(body, n_data: int, n_states: int, save_states: bool):
    """(source of ``scan(data..., states..., free..., ys..., finals..., saved...)``, the names it
    refers to), or None where the body has an op the loop does not take."""
    w = _write_body(body, n_data + n_states)
    if w is None:
        return None
    outs = [w.names[id(e.node)] for e in body.sym.outputs]
    n_in, n_out = len(body.inputs), len(outs) - n_states
    states = [f"a{k}" for k in range(n_data, n_data + n_states)]
    params = [f"d{k}" for k in range(n_data)] + states + [f"a{k}" for k in range(n_data + n_states, n_in)] + \
        [f"y{k}" for k in range(n_out)] + [f"f{k}" for k in range(n_states)] + \
        ([f"h{k}" for k in range(n_states)] if save_states else [])
    src = [f"def scan({', '.join(params)}):"] + [f"    {ln}" for ln in w.hoisted]
    src.append("    for t in range(d0.shape[0]):")
    src += [f"        h{k}[t] = {s}" for k, s in enumerate(states) if save_states]
    src += [f"        a{k} = d{k}[t]" for k in range(n_data)]
    src += [f"        {ln}" for ln in w.steps] or ["        pass"]
    src += [f"        y{k}[t] = {outs[k]}" for k in range(n_out)]
    if states:  # (at once: a body may hand one state's value to another)
        src.append(f"        {', '.join(states)}, = {', '.join(outs[n_out:])},")
    src += [f"    f{k}[...] = {s}" for k, s in enumerate(states)]
    return "\n".join(src) + "\n", w.scope


def plan(body, n_data: int, n_states: int, save_states: bool):
    """The compiled ``scan`` function of this body, made once per body; None: ``steps`` runs it."""
    hit = BODIES.get(id(body))
    if hit is not None and hit[0] is body and hit[1] == (n_data, n_states, save_states):
        return hit[2]
    got = loop_source(body, n_data, n_states, save_states) if n_data > 0 else None
    fn = None
    if got is not None:
        src, scope = got
        exec(compile(src, "<lazyarray foreach loop>", "exec"), scope)  # noqa: S102  (written above from the body)
        fn = scope["scan"]
    BODIES.put(id(body), (body, (n_data, n_states, save_states), fn))
    return fn


def clear() -> None:
    """Forget every body's loop and compiled cell table."""
    BODIES.clear()
    rnn_cell.TABLES.clear()


def choose_foreach(xp, *arrays, body, n_data, n_states, save_states, out=None) -> Choice:
    """``compiled_cell`` where the body is a cell its table takes and this is not one of the body's
    first calls (``rnn_cell.takes``), else ``inline_loop`` where the body's ops allow it (NumPy
    arrays), else ``steps``."""
    if xp is not np or plan(body, n_data, n_states, save_states) is None:
        return _CHOICES[STEPS]
    if rnn_cell.takes(rnn_cell.entry(body, n_data, n_states, save_states), arrays):
        return _CHOICES[CELL]
    return _CHOICES[LOOP]


def _out_avals(e, sig: tuple, arrays):
    """The op's output (shapes, dtypes) for input signature ``sig``: its shape and dtype rules
    (inferring the body) run once per body and input signature (``e.out_avals``)."""
    got = e.out_avals.get(sig)
    if got is None:
        op = registry.get("foreach")
        params = {"body": e.body, "n_data": e.key[0], "n_states": e.key[1], "save_states": e.key[2]}
        shapes = op.shape([a.shape for a in arrays], **params)
        dtypes = op.dtype([a.dtype for a in arrays], **params)
        got = (shapes, dtypes) if isinstance(shapes, list) else ([shapes], [dtypes])
        if len(e.out_avals) >= 8:  # (a few signatures per body; bounded)
            e.out_avals.clear()
        e.out_avals[sig] = got
    return got


def _buffers(got, out) -> tuple[list, list]:
    """(the arrays the loop writes: step outputs, final states, saved states; the planned ones) with
    each planned buffer used where it has the shape and dtype and is C-ordered."""
    shapes, dtypes = got
    given = list(out) if isinstance(out, tuple) else [out] if out is not None else [None] * len(shapes)
    bufs = [o if o is not None and o.flags.c_contiguous and o.dtype == d and o.shape == tuple(s)
            else np.empty(tuple(s), d) for o, s, d in zip(given, shapes, dtypes)]
    return bufs, given


def _outputs(arrays, e, out) -> tuple[list, list]:
    """``_buffers`` of this call's output avals."""
    return _buffers(_out_avals(e, tuple((a.shape, a.dtype) for a in arrays), arrays), out)


def run_inline_loop(xp, *arrays, body, n_data, n_states, save_states, out=None):
    """foreach by the body's written-out loop (None where it cannot run: ``steps`` runs)."""
    fn = plan(body, n_data, n_states, save_states) if xp is np else None
    if fn is None:
        return None
    bufs, given = _outputs(arrays, rnn_cell.entry(body, n_data, n_states, save_states), out)
    fn(*arrays, *bufs)
    return _handed(bufs, given)


def run_compiled_cell(xp, *arrays, body, n_data, n_states, save_states, out=None):
    """foreach by the cell's compiled time loop (None where this call does not fit: ``inline_loop`` runs)."""
    e = rnn_cell.entry(body, n_data, n_states, save_states) if xp is np else None
    if e is None or not rnn_cell.takes(e, arrays):
        return None
    return _cell(e, arrays, out)


def _cell(e, arrays, out):
    """The compiled loop's call for an entry ``rnn_cell.takes`` accepted (None where the call's sizes
    do not fit its table): what is fixed per input signature (output avals, the ``rnn_cell.Frame``)
    looked up once."""
    got, fr = _at(e, arrays)
    if fr is None:
        return None
    bufs, given = _buffers(got, out)
    n_y = len(bufs) - e.key[1]
    if not rnn_cell.run(e.table, fr, arrays, bufs[:n_y], bufs[n_y:]):
        return None
    return _handed(bufs, given)


def _at(e, arrays) -> tuple:
    """(the op's output (shapes, dtypes), the ``rnn_cell.Frame`` or None) of a call on ``arrays``, worked
    out once per input signature."""
    sig = tuple([(a.shape, a.dtype) for a in arrays])
    hit = e.at.get(sig)
    if hit is None:
        got = _out_avals(e, sig, arrays)
        hit = e.at[sig] = (got, rnn_cell.frame(e, sig, got[0]))
    return hit


def _handed(bufs, given):
    """The outputs written, each into its planned buffer where one was given."""
    res = []
    for b, o in zip(bufs, given):
        if o is not None and o is not b:
            o[...] = b
            b = o
        res.append(b)
    return res[0] if len(res) == 1 else tuple(res)


def run_foreach(xp, *arrays, body, n_data, n_states, save_states, out=None):
    """foreach by the implementation ``choose_foreach`` picks (the op's runner); a cell's call counts
    toward its compiled tier. A call ``compiled_cell`` takes (the common one of a model's recurrent
    layer) goes straight to it: the body's entry looked up once."""
    choice = None
    if xp is np:
        e = rnn_cell.entry(body, n_data, n_states, save_states)
        if rnn_cell.takes(e, arrays):  # (what choose_foreach answers CELL for)
            e.calls += 1
            y = _cell(e, arrays, out)
            if y is not None:
                if MODE.get() & PROFILING:
                    current_profile().chose(_CHOICES[CELL])
                return y
            choice = _CHOICES[CELL.fallback]
    if choice is None:
        choice = choose_foreach(xp, *arrays, body=body, n_data=n_data, n_states=n_states, save_states=save_states)
        if xp is np and choice.impl is not STEPS:
            rnn_cell.entry(body, n_data, n_states, save_states).calls += 1
    params = {"body": body, "n_data": n_data, "n_states": n_states, "save_states": save_states, "out": out}
    y = choice.impl.run(xp, *arrays, **params)
    while y is None and choice.impl.fallback is not None:
        choice = _CHOICES[choice.impl.fallback]
        y = choice.impl.run(xp, *arrays, **params)
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    return y


def bind_foreach(xp, *arrays, body, n_data, n_states, save_states, out=None) -> Bound | None:
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_foreach``'s choice run directly. The
    choice is fixed by the body, the step's avals, the tuning table and numba but for the tier: while
    the body's cell has run fewer than ``foreach_jit_after`` calls, the bound function counts each (as
    ``run_foreach``) and binds again when the count passes; where the call will be a ``compiled_cell``
    one into the step's planned buffers once it does, the one bound function counts the first calls
    (``inline_loop``) and then goes straight to the compiled loop (``rnn_cell.caller``: the body's
    entry, its ``Frame`` and the loop looked up once; no rebinding). None for a GPU step (the runner
    runs ``steps``)."""
    if xp is not np:
        return None
    e = rnn_cell.entry(body, n_data, n_states, save_states)
    after = tuning().foreach_jit_after
    tiered = e.table is not None and e.calls < after and jit.enabled()
    params = {"body": body, "n_data": n_data, "n_states": n_states, "save_states": save_states}

    def make(arrays, out) -> Bound:
        choice = choose_foreach(xp, *arrays, **params)
        run = direct(choice, _CHOICES, xp, keywords=params)
        if choice.impl is CELL:
            run = _bound_cell(e, arrays, out, run) or run
        return Bound(choice, run)

    if tiered:
        early = _early_cell(e, after, arrays, out, params)
        if early is not None:
            return early
    return counted_until(e, after, tiered, make, arrays, out)


def _early_cell(e, after: int, arrays, out, params) -> Bound | None:
    """A tiered step's ``Bound`` (``inline_loop`` named, as the first calls run) whose function runs
    ``inline_loop`` for the body's calls before ``after`` and the compiled loop from then on, where
    the call will be ``compiled_cell``'s (``rnn_cell.fits``) into planned buffers ``_bound_cell`` takes;
    else None (``by_facts`` binds again when the count passes)."""
    if plan(e.body, *e.key) is None or not rnn_cell.fits(e, arrays):
        return None
    loop, held = direct(_CHOICES[LOOP], _CHOICES, np, keywords=params), Bound(_CHOICES[LOOP], None)

    def first(*arrays, out=None):  # (an early call: it names itself; the ``Bound`` names the next call's tier)
        if MODE.get() & PROFILING:
            current_profile().chose(_CHOICES[LOOP])
        y = loop(*arrays, out=out)
        held.choice = _CHOICES[CELL if e.calls >= after else LOOP]
        return y

    held.fn = _bound_cell(e, arrays, out, direct(_CHOICES[CELL], _CHOICES, np, keywords=params), (e, after, first))
    return None if held.fn is None else held


def _bound_cell(e, arrays, out, fallback, early=None):
    """The compiled loop's call for this step (None where its arrays or planned buffers do not fit
    it as they are: the runner's path, ``fallback``, is bound): ``rnn_cell.caller`` where it writes,
    else ``fallback``'s (``compiled_cell`` and the implementations after it); ``early``: see ``caller``."""
    (shapes, dtypes), fr = _at(e, arrays)
    if fr is None or not isinstance(out, tuple):
        return None
    if len(out) != len(shapes) or not all(o.flags.c_contiguous and o.dtype == d and o.shape == tuple(s)
                                          for o, s, d in zip(out, shapes, dtypes)):
        return None
    return rnn_cell.caller(e.table, fr, len(shapes) - e.key[1], len(arrays), fallback, early)


def _reference(xp, *arrays, **params):
    return registry.get("foreach").kernel(xp, *arrays, **params)


STEPS = Impl("foreach", "steps", _reference, "the body's compiled program, once per step (the reference)")
LOOP = Impl("foreach", "inline_loop", run_inline_loop,
            "a body of elementwise arithmetic and activations, matmul and getitem (NumPy): the whole scan as "
            "one written-out function calling the op kernels, loop-invariant work (weight slices) once per call",
            fallback=STEPS)
CELL = Impl("foreach", "compiled_cell", run_compiled_cell,
            "a recurrent cell (one data input; column slices, products by loop-invariant matrices, elementwise "
            "arithmetic, sigmoid, tanh; at most 2-D values; no saved states) after its first foreach_jit_after "
            "calls, numba installed: every step in one compiled call (kernels/rnn_cell.py)", fallback=LOOP)
IMPLS = (CELL, LOOP, STEPS)
_CHOICES = {impl: Choice(impl) for impl in IMPLS}
BINDERS = {"foreach": bind_foreach}
