"""Memory-plan display (plan_view.py): the numbers, the buffer timeline, run-time values, CachedOp."""
from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

import numpy as np

import lazyarray as la
from lazyarray.executor import plan_view
from lazyarray.executor.plan import Step, Value, plan_memory

SVG = "{http://www.w3.org/2000/svg}"


def visible_text(root: ET.Element) -> str:
    """Text a reader sees: no stylesheets, no tooltips."""
    root = copy.deepcopy(root)
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in ("style", f"{SVG}style", f"{SVG}title"):
                parent.remove(child)
    return " ".join(root.itertext())


def tooltips(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}title")]


def mlp_op():
    x = la.ones((8, 16))
    w1, w2 = la.ones((32, 16)), la.ones((4, 32))
    with la.deferred():
        h = la.relu(la.nn.dense(x, w1))
        y = la.nn.dense(h, w2)
    return la.CachedOp(la.get_symbol(y, inputs={"data": x, "w1": w1, "w2": w2}))


def test_timeline_has_one_row_per_buffer_and_a_bar_per_value():
    vals = [Value(64, external=True, name="x"), Value(64, name="a"), Value(64, name="b"),
            Value(32, name="c"), Value(32, escapes=True, name="out")]
    steps = [Step((0,), (1,)), Step((1,), (2,), inplace=((0, 0),)), Step((2,), (3,)), Step((3,), (4,))]
    plan = plan_memory(vals, steps)
    root = ET.fromstring(plan_view.plan_svg(plan))
    assert root.tag == f"{SVG}svg" and root.get("class") == "la-p"
    assert len(root.findall(f"{SVG}style")) == 1
    bars = [g for g in root.iter(f"{SVG}g") if "la-v" in (g.get("class") or "") and g.find(f"{SVG}title") is not None]
    assert len(bars) == 4  # a, b, c, out; the external x has no buffer
    tips = " | ".join(tooltips(root))
    assert "b: 64 bytes in buffer #0" in tips and "in place over a" in tips
    assert "at offset 0;" in tips  # where in its buffer the value lies
    assert "out: 32 bytes" in tips and "handed to the caller" in tips
    text = visible_text(root)
    for b in range(plan.num_buffers):
        assert f"#{b} " in text
    assert "⟲" in text and "out" in text
    # in place: b's bar starts where a's ends, on the same row
    rects = {g.find(f"{SVG}title").text.split(":")[0]: g.find(f"{SVG}rect") for g in bars}
    a, b = rects["a"], rects["b"]
    assert a.get("y") == b.get("y")
    assert abs(float(a.get("x")) + float(a.get("width")) - float(b.get("x"))) < 0.11


def test_plan_html_is_well_formed_and_shows_the_numbers():
    plan = mlp_op().memory_plan(data=(64, 16))
    html = plan._repr_html_()
    root = ET.fromstring(html)
    text = visible_text(root)
    for field, value in (("peak_bytes", plan.peak_bytes), ("lower_bound_bytes", plan.lower_bound_bytes),
                         ("naive_bytes", plan.naive_bytes), ("num_buffers", plan.num_buffers)):
        assert f"{field} = {value:,}" in text
    names = {v.name for v in plan.values if not v.external}
    assert {"dense0", "relu0", "dense1"} <= names
    tips = " ".join(tooltips(root))
    for nm in names:
        assert f"{nm}:" in tips
    assert len(html) < 12_000


def test_runtime_values_are_listed_not_drawn():
    x = la.array(np.eye(6, 5, dtype=np.float32)).tostype("csr")
    w = la.ones((5, 3))
    with la.deferred():
        y = la.relu(x * 2.0)
        z = la.dot(x, w)
    plan = la.CachedOp(la.get_symbol([y, z], inputs={"x": x, "w": w})).memory_plan(x=(6, 5), w=(5, 3))
    runtime = dict(plan.runtime_values)
    assert runtime and set(runtime.values()) == {"csr"}
    root = ET.fromstring(plan._repr_html_())
    listed = [" ".join(li.itertext()) for li in root.iter("li")]
    for name in runtime:
        assert any(name in item and "csr" in item for item in listed)
    svg = root.find(f".//{SVG}svg")
    assert "allocated at run time" in svg.get("aria-label")
    drawn = " ".join(tooltips(svg))
    assert not any(f"{name}:" in drawn for name in runtime)  # no buffer: no bar


def test_buffers_on_two_devices_get_two_colours():
    x = la.ones((4, 4))
    with la.deferred():
        y = (x * 2).to(la.cpu(1))
        z = la.relu(y + 1)
    plan = la.CachedOp(la.get_symbol(z, inputs={"x": x})).memory_plan(x=(4, 4))
    assert {str(d) for d in plan.buffer_device} == {"cpu(0)", "cpu(1)"}
    svg = plan_view.plan_svg(plan)
    ET.fromstring(svg)
    assert "la-d0" in svg and "la-d1" in svg and "cpu(1)" in svg


def test_long_schedules_are_cut_and_stay_small():
    n = 1500
    vals = [Value(8, external=True, name="x")] + [Value(8, name=f"t{i}") for i in range(n)]
    steps = [Step((i,), (i + 1,)) for i in range(n)]
    plan = plan_memory(vals, steps)
    svg = plan_view.plan_svg(plan)
    ET.fromstring(svg)
    assert f"of {n:,} drawn" in svg and len(svg) < 150_000


def test_names_are_escaped():
    plan = plan_memory([Value(8, external=True), Value(8, escapes=True, name="a<b>&\"c")], [Step((0,), (1,))])
    root = ET.fromstring(plan._repr_html_())
    assert 'a<b>&"c' in " ".join(tooltips(root))


def test_empty_plan():
    plan = plan_memory([Value(8, external=True, escapes=True)], [])
    root = ET.fromstring(plan._repr_html_())
    assert "num_buffers = 0" in visible_text(root)


def test_cached_op_html_before_and_after_compiling():
    op = mlp_op()
    root = ET.fromstring(op._repr_html_())
    text = visible_text(root)
    assert "Nothing compiled yet" in text and "0 compiled signatures" in text
    assert root.find(f".//{SVG}svg[@class='la-g']") is not None  # the symbol drawing
    op(la.ones((8, 16)), la.ones((32, 16)), la.ones((4, 32)))
    op(la.ones((2, 16)), la.ones((32, 16)), la.ones((4, 32)))
    root = ET.fromstring(op._repr_html_())
    text = visible_text(root)
    assert "2 compiled signatures" in text and "float32[2,16]" in text  # the most recent one
    plan = op.memory_plan(data=(2, 16))
    assert f"peak_bytes = {plan.peak_bytes:,}" in text
    svgs = [s.get("class") for s in root.iter(f"{SVG}svg")]
    assert svgs == ["la-p", "la-g"]


def test_cached_op_html_shows_forward_and_backward_plans_when_training():
    op = mlp_op()
    x = la.ones((8, 16))
    w1, w2 = la.ones((32, 16)), la.ones((4, 32))
    w1.attach_grad()
    with la.autograd.record():
        y = op(x, w1, w2)
    y.backward()
    root = ET.fromstring(op._repr_html_())
    text = visible_text(root)
    assert "forward plan" in text and "backward plan" in text
    assert [s.get("class") for s in root.iter(f"{SVG}svg")] == ["la-p", "la-p", "la-g"]


def test_joint_plan_names_are_unique():
    plan = mlp_op().memory_plan(wrt=["w1"], data=(8, 16))
    names = [v.name for i, v in enumerate(plan.values) if plan.buffer_of[i] is not None and plan.base[i] == i]
    assert len(names) == len(set(names)) and {"dense0", "relu0", "dense1"} <= set(names)


def test_values_side_by_side_in_one_buffer_are_drawn_at_their_offsets():
    """Two values alive together in one buffer (different offsets) get bars at different heights,
    each as tall as its share of the buffer; the tooltips give the offsets."""
    vals = [Value(64, external=True, name="x"), Value(64, name="a"), Value(64, name="b"),
            Value(64, escapes=True, name="out")]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,))]
    plan = plan_memory(vals, steps, align=64)
    assert plan.buffer_of[1] == plan.buffer_of[2] and {plan.offset_of[1], plan.offset_of[2]} == {0, 64}
    root = ET.fromstring(plan_view.plan_svg(plan))
    rects = {}
    for g in root.iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        if "la-v" in (g.get("class") or "") and title is not None:
            rects[title.text.split(":")[0]] = g.find(f"{SVG}rect")
    ya, yb = float(rects["a"].get("y")), float(rects["b"].get("y"))
    lower, upper = (ya, yb) if plan.offset_of[1] < plan.offset_of[2] else (yb, ya)
    assert upper - lower == float(rects["a"].get("height")) == float(rects["b"].get("height"))
    assert "at offset 64;" in " | ".join(tooltips(root))
