"""Control flow as graph ops: la.cond / la.while_loop / la.foreach against plain Python references,
eagerly, under deferred compute, through CachedOp and a JSON round trip, hybridized, and their
gradients against finite differences."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.executor.control_flow import COND, FOREACH, WHILE_LOOP
from lazyarray.graph import draw
from lazyarray.ops import registry

RNG = np.random.default_rng(0)


def _arr(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _four_ways(fn, inputs: dict):
    """fn(*arrays) eagerly, under deferred compute, through CachedOp(get_symbol) and after a JSON
    round trip: the four results as lists of NumPy arrays, plus the symbol."""
    arrays = {k: la.array(v) for k, v in inputs.items()}
    eager = fn(*arrays.values())
    with la.deferred():
        lazy = fn(*arrays.values())
    flat_lazy = lazy if isinstance(lazy, (tuple, list)) else [lazy]
    sym = la.get_symbol(list(flat_lazy), inputs=arrays)
    cached = la.CachedOp(sym)(**arrays)
    loaded = la.CachedOp(la.Symbol.from_json(sym.to_json()))(**arrays)

    def vals(r):
        return [np.asarray(a.asnumpy()) for a in (r if isinstance(r, (tuple, list)) else [r])]

    return [vals(eager), vals(lazy), vals(cached), vals(loaded)], sym


def _assert_all(results, want):
    for got in results:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


# -- cond -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_matches_python_four_ways(sign):
    x, y = sign * np.abs(_arr(3, 4)), _arr(4, seed=1)

    def f(a, b):
        return la.cond(a.sum() > 0, lambda p, q: (p * q, p.sum(axis=0)), lambda p, q: (p - q, q * 3.0), a, b)

    want = (x * y, x.sum(axis=0)) if x.sum() > 0 else (x - y, y * 3.0)
    results, sym = _four_ways(f, {"a": x, "b": y})
    _assert_all(results, want)
    assert _ops(sym).count("cond") == 1 and "multiply" not in _ops(sym)  # the branches live in the node


def test_cond_single_array_and_list_structure():
    x = la.array([1.0, 2.0])
    with la.deferred():
        one = la.cond(x.sum() > 0, lambda a: a + 1, lambda a: a - 1, x)
        lst = la.cond(x.sum() < 0, lambda a: [a, a * 2], lambda a: [a * 3, a * 4], x)
    assert isinstance(one, la.NDArray) and isinstance(lst, list)
    np.testing.assert_allclose(one.asnumpy(), [2.0, 3.0])
    np.testing.assert_allclose(lst[1].asnumpy(), [4.0, 8.0])


def test_cond_closes_over_an_outer_lazy_array_and_a_captured_one():
    w_np, x_np = _arr(4, 4), _arr(2, 4, seed=2)
    w, x = la.array(w_np), la.array(x_np)
    with la.deferred():
        w2 = w * 2  # an outer lazy array
        y = la.cond(x.sum() > 0, lambda h: la.dot(h, w2), lambda h: la.dot(h, w) - 1.0, x)
    want = x_np @ (2 * w_np) if x_np.sum() > 0 else x_np @ w_np - 1.0
    np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-12)
    node = y._entry.node
    assert node.op is COND and len(node.inputs) == 1 + 1 + 2  # pred, x, then the two free entries
    assert node.params["then_graph"].names == ["arg0", "free0", "free1"]


def test_cond_static_python_predicate_picks_the_branch_now():
    x = la.array([1.0])
    with la.deferred():
        y = la.cond(True, lambda a: a + 1, lambda a: a - 1, x)
    assert y._entry.node.op.name == "add"


def test_cond_mismatched_branches_name_both_signatures_and_the_line():
    x = la.array(np.ones((2, 3), np.float32))
    with la.deferred(), pytest.raises(la.ControlFlowError) as info:
        la.cond(x.sum() > 0, lambda a: a, lambda a: a.sum(axis=0), x)
    msg = str(info.value)
    assert isinstance(info.value, la.LazyArrayError)
    assert "float32[2,3]" in msg and "float32[3]" in msg and "test_control_flow.py" in msg


def test_cond_pred_must_be_one_value():
    x = la.array([1.0, 2.0])
    with la.deferred(), pytest.raises(la.ControlFlowError, match=r"one value.*\[2\].*test_control_flow"):
        la.cond(x > 0, lambda a: a, lambda a: -a, x)
    with pytest.raises(la.ControlFlowError, match="one value"):
        la.cond(x > 0, lambda a: a, lambda a: -a, x)


def test_a_value_read_inside_a_body_raises_trace_error():
    x = la.array([1.0, 2.0])
    with la.deferred(), pytest.raises(la.TraceError, match="la.cond then_fn.*la.cond"):
        la.cond(x.sum() > 0, lambda a: a * float(a.sum()), lambda a: a, x)


# -- hybridized cond (the Branch example) ---------------------------------------------------
class Branch(nn.HybridBlock):
    def forward(self, x):
        return la.cond(x.sum() > 0, lambda a: a * 2, lambda a: a * -1, x)


def test_hybridized_branch_takes_the_right_branch_each_call():
    net = Branch()
    net.hybridize()
    pos, neg = np.array([[1.0, 2.0]], np.float32), np.array([[-1.0, -2.0]], np.float32)
    for v in (pos, neg, pos, neg):
        want = v * 2 if v.sum() > 0 else -v
        np.testing.assert_allclose(net(la.array(v)).asnumpy(), want)
    assert net.trace_count == 1


def test_trace_error_recommends_graph_control_flow():
    class Bad(nn.HybridBlock):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    net = Bad()
    net.hybridize()
    with pytest.raises(la.TraceError) as info:
        net(la.array([1.0]))
    assert "la.cond" in str(info.value) and "la.while_loop" in str(info.value)


# -- while_loop --------------------------------------------------------------------------------------
def _count_ref(i, n, s):
    while i < n:
        i, s = i + 1, s * 2
    return i, s


def test_while_loop_counting_four_ways():
    def f(i, n, s):
        return la.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 2.0), (i, s))

    results, sym = _four_ways(f, {"i": np.array(0), "n": np.array(5), "s": np.array([1.0, 3.0])})
    want = _count_ref(0, 5, np.array([1.0, 3.0]))
    _assert_all(results, want)
    assert _ops(sym) == ["while_loop"]


def test_while_loop_data_dependent_steps_eager_vs_deferred():
    def steps(n0):  # Collatz-like: subtract 10 while large, halve while small, count the steps
        def body(n, k):
            return la.where(n > 10.0, n - 10.0, n / 2.0), k + 1
        return la.while_loop(lambda n, k: n >= 1.0, body, [n0, la.array(0)])

    for start in (0.5, 6.0, 37.0, 123.0):
        n, k = start, 0
        while n >= 1.0:
            n, k = (n - 10.0 if n > 10.0 else n / 2.0), k + 1
        eager = steps(la.array(start))
        with la.deferred():
            lazy = steps(la.array(start))
        assert isinstance(lazy, list) and lazy[0].is_lazy
        assert int(eager[1].item()) == int(lazy[1].item()) == k
        assert float(lazy[0].item()) == pytest.approx(n)


def test_while_loop_max_iterations_bounds_the_loop():
    for deferred in (False, True):
        with la.deferred(deferred):
            out = la.while_loop(lambda i: i < 100, lambda i: i + 1, la.array(0), max_iterations=7)
        assert isinstance(out, la.NDArray) and int(out.item()) == 7
    with la.deferred():
        zero = la.while_loop(lambda i: i < 100, lambda i: i + 1, la.array(3), max_iterations=0)
    assert int(zero.item()) == 3


def test_while_loop_body_changing_a_shape_is_named():
    v = la.array([1.0, 2.0])
    with la.deferred(), pytest.raises(la.ControlFlowError, match=r"loop var 0 from float32\[2\] into "
                                      r"float32\[4\].*test_control_flow"):
        la.while_loop(lambda v: v.sum() < 10, lambda v: la.concatenate([v, v]), v)
    with pytest.raises(la.ControlFlowError, match="loop var 0"):
        la.while_loop(lambda v: v.sum() < 10, lambda v: la.concatenate([v, v]), v)


def test_while_loop_cond_must_be_a_scalar():
    v = la.array([1.0, 2.0])
    with la.deferred(), pytest.raises(la.ControlFlowError, match="cond_fn must return one value"):
        la.while_loop(lambda v: v < 10, lambda v: v + 1, v)


def test_while_loop_gradient_says_use_foreach():
    x = la.array(np.array([1.0, 2.0]))
    x.attach_grad()
    with la.autograd.record(), la.deferred():
        y = la.while_loop(lambda v: v.sum() < 10, lambda v: v * 2, x)
        loss = y.sum()
    with pytest.raises(la.AutogradError, match="la.foreach"):
        loss.backward()


# -- foreach -----------------------------------------------------------------------------------------
def _rnn_ref(xs, h, w, u):
    outs = []
    for x in xs:
        h = np.tanh(x @ w + h @ u)
        outs.append(h)
    return np.stack(outs), h


def _rnn(xs, h, w, u):
    return la.foreach(lambda x, h: ((hn := la.tanh(la.dot(x, w) + la.dot(h, u))), hn), xs, h)


def test_foreach_rnn_four_ways_with_closed_over_arrays():
    xs, h, w, u = _arr(5, 2, 3), _arr(2, 4, seed=1), _arr(3, 4, seed=2), _arr(4, 4, seed=3) * 0.5
    results, sym = _four_ways(lambda *a: list(_rnn(*a)), {"xs": xs, "h": h, "w": w, "u": u})
    _assert_all(results, _rnn_ref(xs, h, w, u))
    assert _ops(sym) == ["foreach"]


def test_foreach_lists_mirror_what_was_passed_and_returned():
    a, b = _arr(4, 2), _arr(4, 2, seed=1)

    def body(xs, states):
        x, y = xs
        s, c = states
        return [x + s, y * c], [s + x, c]

    for deferred in (False, True):
        with la.deferred(deferred):
            outs, final = la.foreach(body, [la.array(a), la.array(b)], [la.array(np.zeros(2)), la.array(np.ones(2))])
        assert isinstance(outs, list) and isinstance(final, list) and len(outs) == 2 and len(final) == 2
        cum = np.cumsum(a, axis=0)
        np.testing.assert_allclose(outs[0].asnumpy(), a + np.vstack([np.zeros(2), cum[:-1]]))
        np.testing.assert_allclose(outs[1].asnumpy(), b)
        np.testing.assert_allclose(final[0].asnumpy(), cum[-1])


def test_foreach_of_zero_steps_gives_empty_outputs_and_the_initial_state():
    for deferred in (False, True):
        with la.deferred(deferred):
            outs, final = la.foreach(lambda x, s: (x * s, s + 1.0), la.array(np.zeros((0, 3))),
                                     la.array(np.ones(3)))
        assert outs.shape == (0, 3)
        np.testing.assert_allclose(final.asnumpy(), np.ones(3))


def test_foreach_state_changing_shape_is_named():
    with la.deferred(), pytest.raises(la.ControlFlowError, match=r"state 0 from float64\[3\] into float64\[\]"):
        la.foreach(lambda x, s: (x, s.sum()), la.array(np.zeros((2, 3))), la.array(np.ones(3)))


def test_cond_inside_a_foreach_body():
    xs = np.array([1.0, -2.0, 3.0, -4.0])

    def f(xs):
        return la.foreach(lambda x, s: (la.cond(x > 0, lambda a, b: a + b, lambda a, b: b - a, x, s),) * 2,
                          xs, la.array(np.array(0.0)))

    s, outs = 0.0, []
    for x in xs:
        s = s + x if x > 0 else s - x
        outs.append(s)
    results, sym = _four_ways(lambda a: list(f(a)), {"xs": xs})
    _assert_all(results, [np.array(outs), np.array(s)])


# -- gradients --------------------------------------------------------------------------------------
def _numeric_grad(f, x: np.ndarray, eps=1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def _grads(loss_fn, values: list, deferred: bool) -> list:
    arrays = [la.array(v) for v in values]
    for a in arrays:
        a.attach_grad()
    with la.autograd.record(), la.deferred(deferred):
        loss = loss_fn(*arrays)
    loss.backward()
    # (eagerly, an input the taken branch does not use gets no gradient at all: zeros)
    return [np.zeros_like(v) if a.grad is None else a.grad.asnumpy() for a, v in zip(arrays, values)]


def _check_fd(loss_fn, values):
    def scalar(k):
        def f(v):
            vals = list(values)
            vals[k] = v
            return float(loss_fn(*[la.array(x) for x in vals]).item())
        return f

    want = [_numeric_grad(scalar(k), v) for k, v in enumerate(values)]
    for deferred in (False, True):
        for g, w in zip(_grads(loss_fn, values, deferred), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_gradient_matches_finite_differences(sign):
    x, w = sign * np.abs(_arr(2, 3)), _arr(3, 3, seed=1)

    def loss(x, w):
        y, z = la.cond(x.sum() > 0, lambda a: (la.tanh(la.dot(a, w)), a * a), lambda a: (a * 3.0, la.sin(a)), x)
        return (y * y).sum() + z.sum()

    _check_fd(loss, [x, w])


def test_foreach_gradient_through_time_matches_finite_differences():
    xs, h, w, u = _arr(4, 2, 3), _arr(2, 4, seed=1), _arr(3, 4, seed=2), _arr(4, 4, seed=3) * 0.5

    def loss(xs, h, w, u):
        outs, final = _rnn(xs, h, w, u)
        return (outs * outs).sum() + (final * 2.0).sum()

    _check_fd(loss, [xs, h, w, u])


# -- hybridized training ------------------------------------------------------------------------------
class RNN(nn.HybridBlock):
    def __init__(self, units=4):
        super().__init__()
        self.cell = nn.Dense(units, in_units=3, dtype="float64")
        self.u = nn.Parameter("u", shape=(units, units), dtype="float64")

    def forward(self, xs):
        u = self.u.data()
        h0 = la.zeros((xs.shape[1], self.u.shape[0]), dtype="float64")
        outs, h = la.foreach(lambda x, h: ((hn := la.tanh(self.cell(x) + la.dot(h, u))), hn), xs, h0)
        return outs.sum(axis=0) + h


def _train_step(net, x, y):
    trainer = nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with la.autograd.record():
        loss = ((net(x) - y) ** 2).sum()
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    trainer.step(1, ignore_stale_grad=True)  # (a branch not taken leaves its parameters untouched)
    return grads, float(loss.item())


def test_rnn_foreach_trained_one_step_hybridized_equals_imperative():
    x, y = la.array(_arr(5, 2, 3)), la.array(_arr(2, 4, seed=9))
    nets = []
    for hybrid in (False, True):
        la.random.seed(3)
        net = RNN()
        net.initialize()
        if hybrid:
            net.hybridize()
        nets.append(net)
    (g_imp, l_imp), (g_hyb, l_hyb) = _train_step(nets[0], x, y), _train_step(nets[1], x, y)
    assert l_imp == pytest.approx(l_hyb, rel=1e-12)
    assert set(g_imp) == set(g_hyb) and len(g_imp) == 3
    for k in g_imp:
        assert np.abs(g_imp[k]).sum() > 0
        np.testing.assert_allclose(g_hyb[k], g_imp[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(nets[1](x).asnumpy(), nets[0](x).asnumpy(), rtol=1e-9)  # after the step
    assert "foreach" in _ops(nets[1].cached_op.sym)


class GatedScale(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter("w", shape=(3, 3), dtype="float64")
        self.b = nn.Parameter("b", shape=(3,), dtype="float64", init="ones")

    def forward(self, x):
        w = self.w.data()
        return la.cond(x.sum() > 0, lambda a: la.dot(a, w), lambda a: a * 2.0, x) + self.b.data()


def test_hybridized_cond_gradient_reaches_a_closed_over_parameter_only_on_its_branch():
    for sign, reached in ((1.0, True), (-1.0, False)):
        x = la.array(sign * np.abs(_arr(2, 3)))
        grads = []
        for hybrid in (False, True):
            la.random.seed(1)
            net = GatedScale()
            net.initialize()
            if hybrid:
                net.hybridize()
            grads.append(_train_step(net, x, la.array(np.zeros((2, 3))))[0]["w"])
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)
        assert (np.abs(grads[0]).sum() > 0) == reached


# -- the graph: JSON, drawing -------------------------------------------------------------------------
def test_control_flow_nodes_round_trip_through_json_and_files(tmp_path):
    x = la.array(np.arange(6.0).reshape(3, 2))
    with la.deferred():
        outs, final = la.foreach(lambda r, s: (r * s, s + r.sum()), x, la.array(np.array(1.0)))
        y = la.while_loop(lambda v: v.sum() < 100, lambda v: v * 2, final)
    sym = la.get_symbol([outs, y], inputs={"x": x})
    path = str(tmp_path / "cf-symbol.json")
    sym.save(path)
    again = la.load_symbol(path)
    assert again.to_json() == sym.to_json()
    assert [op for op in _ops(again)] == ["foreach", "while_loop"]
    for a, b in zip(la.CachedOp(again)(x), la.CachedOp(sym)(x)):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy())


def test_drawing_frames_each_body_with_its_ops_inside():
    x = la.array(np.ones((2, 2)))
    with la.deferred():
        y = la.cond(x.sum() > 0, lambda a: la.exp(a), lambda a: la.sin(a), x)
    sym = la.get_symbol(y, inputs={"x": x})
    svg = draw.to_svg(list(sym.outputs), names=sym.names())
    start = svg.index('class="la-frame"')
    frames = svg[start:]
    then_part = frames[frames.index("then_graph"):frames.index("else_graph")]
    else_part = frames[frames.index("else_graph"):]
    box = '<tspan class="la-b">{}</tspan>'.format
    assert box("exp") in then_part and box("sin") not in then_part
    assert box("sin") in else_part and box("exp") not in else_part
    assert box("exp") not in svg[:start] and box("cond") in svg[:start]  # body ops only inside the frames


def test_the_ops_are_registered_with_sub_graph_params():
    for op in (COND, WHILE_LOOP, FOREACH):
        assert registry.get(op.name) is op
        assert any(p.type.name == "graph" for p in op.params)


class SliceShape(nn.HybridBlock):
    def forward(self, xs):  # the body reads the batch size of a slice: a guard on input dim 1
        outs, h = la.foreach(lambda x, h: (x + la.ones((x.shape[0], 1)), h + x.sum()), xs, la.zeros(()))
        return outs


def test_a_shape_read_in_a_body_guards_the_enclosing_trace():
    net = SliceShape()
    net.hybridize()
    for batch in (2, 3, 2):
        xs = np.ones((4, batch, 1), np.float32)
        np.testing.assert_allclose(net(la.array(xs)).asnumpy(), xs + 1)
    assert net.trace_count == 2
    assert "input 0 dim 1 == 2" in str(net.guards())


class Scan(nn.HybridBlock):
    def forward(self, xs, ys):  # two scanned arrays: checking their lengths agree reads no length
        outs, total = la.foreach(lambda d, s: (d[0] * d[1] + s, s + d[0]), [xs, ys], la.zeros_like(xs[0]))
        return outs


def test_one_trace_of_a_foreach_serves_every_length_and_batch():
    net = Scan()
    net.hybridize()
    for steps, batch in ((3, 2), (7, 2), (1, 2), (4, 5)):  # the body, compiled for batch 2, runs batch 5
        xs, ys = _arr(steps, batch, seed=steps), _arr(steps, batch, seed=steps + 1)
        want = xs * ys + np.concatenate([np.zeros((1, batch)), np.cumsum(xs, axis=0)[:-1]])
        np.testing.assert_allclose(net(la.array(xs), la.array(ys)).asnumpy(), want, rtol=1e-12)
    assert net.trace_count == 1
    assert "no guards" in net.guards()


class BatchFreeRNN(nn.HybridBlock):
    """An RNN whose begin state is shaped from the data: no shape is read, one trace serves all."""

    def __init__(self, units=4):
        super().__init__()
        self.w = nn.Parameter("w", shape=(3, units), dtype="float64")
        self.u = nn.Parameter("u", shape=(units, units), dtype="float64")

    def forward(self, xs):
        w, u = self.w.data(), self.u.data()
        h0 = la.zeros_like(la.dot(xs[0], w))
        outs, h = la.foreach(lambda x, h: ((hn := la.tanh(la.dot(x, w) + la.dot(h, u))), hn), xs, h0)
        return outs.sum(axis=0) + h


def test_a_hybridized_foreach_gradient_for_a_new_batch_size_equals_imperative():
    nets = []
    for hybrid in (False, True):
        la.random.seed(4)
        net = BatchFreeRNN()
        net.initialize()
        if hybrid:
            net.hybridize()
        nets.append(net)
    for steps, batch in ((5, 2), (3, 6)):  # the vjp of a body traced for batch 2, built for batch 6
        x, y = la.array(_arr(steps, batch, 3, seed=batch)), la.array(_arr(batch, 4, seed=9))
        (g_imp, l_imp), (g_hyb, l_hyb) = _train_step(nets[0], x, y), _train_step(nets[1], x, y)
        assert l_hyb == pytest.approx(l_imp, rel=1e-12)
        for k in g_imp:
            np.testing.assert_allclose(g_hyb[k], g_imp[k], rtol=1e-9, atol=1e-12)
    assert nets[1].trace_count == 1


def test_a_value_read_in_a_hybridized_body_raises_trace_error():
    class Bad(nn.HybridBlock):
        def forward(self, x):
            return la.cond(x.sum() > 0, lambda a: a * float(a.max()), lambda a: a, x)

    net = Bad()
    net.hybridize()
    with pytest.raises(la.TraceError, match="then_fn.*test_control_flow.py"):
        net(la.array([1.0, 2.0]))
