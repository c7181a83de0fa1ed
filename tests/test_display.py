"""Notebook display of arrays (display.py): values, lazy summaries, and never computing."""
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lazyarray as la
from lazyarray import display
from lazyarray.executor import plan_view

SVG_NS = "{http://www.w3.org/2000/svg}"


def parse(html: str) -> ET.Element:
    return ET.fromstring(html)  # the fragment is one well-formed <div>


def text_of(root: ET.Element) -> str:
    """Visible text: everything but the stylesheets."""
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in ("style", f"{SVG_NS}style"):
                parent.remove(child)
    return " ".join(root.itertext())


def test_normal_array_shows_values_and_fields():
    x = la.array(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    root = parse(x._repr_html_())
    t = text_of(root)
    assert "[[0., 1., 2.]," in t and "float32" in t and "(2, 3)" in t and "cpu(0)" in t
    assert "24 B" in t  # 6 float32 values, like Dask's card
    assert "default" not in t  # the dense default storage needs no chip
    assert "lazy" not in t


def test_card_shows_bytes_with_a_tooltip():
    x = la.array(np.zeros((100, 300), np.float64))
    root = parse(x._repr_html_())
    chips = {s.text: s.get("title") for s in root.iter("span")}
    n = 100 * 300 * 8
    assert display.bytes_text(n) == f"{n / 1024:.1f} KiB" == "234.4 KiB"
    assert chips["234.4 KiB"] == f"{n:,} bytes (30,000 elements x 8 bytes)"
    assert display.bytes_text(1023) == "1023 B" and display.bytes_text(3 * 2**20) == "3.0 MiB"
    with la.deferred():
        y = x * 2
    lazy_chips = {s.text: s.get("title") for s in parse(y._repr_html_()).iter("span")}
    assert lazy_chips["234.4 KiB"].endswith("once computed") and y.is_lazy


def test_large_array_is_summarized():
    x = la.zeros((2000, 3))
    html = x._repr_html_()
    parse(html)
    assert "..." in html and len(html) < 5_000


def test_text_is_escaped():
    x = la.array([True, False])
    parse(x._repr_html_())
    assert display.shape_text((None, 3)) == "(?, 3)" and display.shape_text((5,)) == "(5,)"


def test_lazy_array_display_never_computes(kernel_calls):
    x = la.array([[1.0, -2.0], [3.0, 4.0]])
    with la.deferred():
        y = la.relu(x * 2)
        z = y[y > 1].sum()
        w = y[y > 0]
    calls_before = list(kernel_calls)
    for arr in (z, w, y):
        html = arr._repr_html_()
        root = parse(html)
        t = text_of(root)
        assert "lazy" in t and "float32" in t and "cpu(0)" in t
        assert root.find(f".//{SVG_NS}svg") is not None
    assert kernel_calls == calls_before  # nothing ran
    for arr in (z, w, y):
        assert arr.is_lazy


def test_lazy_array_fields():
    x = la.array([[1.0, -2.0], [3.0, 4.0]])
    with la.deferred():
        y = la.relu(x * 2)
        w = y[y > 0]
    t = text_of(parse(w._repr_html_()))
    assert "(?,)" in t
    assert "4 pending nodes" in t  # multiply, relu, greater, boolean_mask
    for how in ("x.asnumpy()", "x.item()", "numpy.asarray(x)", "bool(x)", "x.shape", "la.deferred()"):
        assert how in t, how
    assert "boolean_mask" in t and "relu" in t  # the drawing
    t_y = text_of(parse(y._repr_html_()))
    assert "(2, 2)" in t_y and "2 pending nodes" in t_y and "x.shape" not in t_y


def test_partly_computed_graph_counts_only_pending():
    x = la.array([1.0, -2.0, 3.0])
    with la.deferred():
        y = la.relu(x)
        z = la.exp(y) + 1
    y.asnumpy()
    html = z._repr_html_()
    t = text_of(parse(html))
    assert "2 pending nodes" in t  # exp, add; relu is computed
    assert z.is_lazy
    assert not y.is_lazy and "lazy" not in text_of(parse(y._repr_html_()))


def test_large_pending_graph_is_collapsed():
    x = la.ones((2, 2))
    with la.deferred():
        y = x
        for _ in range(500):
            y = la.relu(y) + x
    html = y._repr_html_()
    t = text_of(parse(html))
    assert "1,000 pending nodes" in t and "collapsed" in t
    assert len(html) < 60_000 and y.is_lazy


def test_sparse_array():
    x = la.array(np.eye(3, dtype=np.float32)).tostype("csr")
    root = parse(x._repr_html_())
    t = text_of(root)
    assert "csr" in t and "[[1., 0., 0.]," in t
    chips = {s.text: s.get("title") for s in root.iter("span")}
    assert "compressed sparse rows" in chips["csr"]  # a non-default storage chip explains itself
    v = x._value
    stored = v.data.nbytes + v.indices.nbytes + v.indptr.nbytes
    assert chips[display.bytes_text(stored) + " stored"] == f"{stored:,} bytes stored (36 bytes if dense)"


# -- big models in notebooks: ResNet-18's cards stay readable and small ----------------------------
@pytest.fixture(scope="module")
def resnet18():
    net = la.blocks.models.resnet18(classes=10, thumbnail=True)
    net.initialize()
    net.hybridize()
    net(la.ones((1, 3, 32, 32)))
    return net


def test_resnet_symbol_card_collapses_its_parameter_names_before_the_drawing(resnet18):
    sym, _ = resnet18.export_graph()
    html = sym._repr_html_()
    root = parse(html)
    summary = root.find(".//div[@class='la-sum']").text
    assert summary.startswith("Symbol · inputs: data (+ ") and len(summary) < 200
    (names,) = [d for d in root.iter("details") if d.get("class") == "la-inputs"]
    params = [n for n in sym.list_inputs() if n != "data"]
    assert len(params) > 90 and names.find("summary").text == f"{len(params)} more inputs (parameters)"
    assert names.find("div").text.split(", ") == params
    assert html.index('class="la-inputs"') < html.index("<svg")  # collapsed, above the drawing


def test_resnet_symbol_card_is_much_smaller_than_half_a_megabyte(resnet18):
    sym, _ = resnet18.export_graph()
    html = sym._repr_html_()
    assert len(html.encode()) < 250_000  # 491 KB with a stylesheet per drawing and one per layer
    sheets = re.findall(r"<style>.*?</style>", html, re.S)
    assert len(sheets) == len(set(sheets)) == 2  # the card's and the drawings' (one copy, shared)
    root = parse(html)
    assert sum(1 for _ in root.iter(f"{SVG_NS}svg")) < 40
    leaves = [d.text for d in root.iter("div") if d.get("class") == "la-leaf"]
    assert any(t.startswith("features.3.0.residual.body.0 · Conv2D — 1 op, 36,864 parameters") for t in leaves)
    assert "every node" in text_of(root)  # the whole graph is still one click away


def test_graph_and_plan_svgs_keep_their_size_and_scroll(resnet18):
    sym, _ = resnet18.export_graph()
    assert ".la-graph svg{max-width:none!important}" in sym._repr_html_()  # not shrunk by the front end
    plan = resnet18.cached_op.memory_plan(data=(1, 3, 32, 32))
    html = plan._repr_html_()
    assert ".la-plan svg{max-width:none!important}" in html
    root = parse(html)
    svg = root.find(f".//{SVG_NS}svg")
    assert len(plan.steps) > 60 and float(svg.get("width")) >= len(plan.steps) * plan_view.MIN_COL
    frame = next(d for d in root.iter("div") if svg in list(d))
    assert "overflow:auto" in frame.get("style")
    ticks = [t.text for t in svg.iter(f"{SVG_NS}text") if t.text and t.text.isdigit()]
    assert ticks[:3] == ["0", "1", "2"]  # every step labelled: the columns are wide enough


def test_plan_table_lines_stay_short(resnet18):
    plan = resnet18.cached_op.memory_plan(data=(1, 3, 32, 32))
    lines = str(plan).splitlines()
    assert max(len(line) for line in lines) < 200  # the demo printed a 5,000-character line
    assert "more" in lines[1]


def test_symbol_card_lists_few_inputs_in_its_summary_and_collapses_many():
    xs = [la.sym.var(f"x{i}", shape=(2,)) for i in range(10)]
    few = parse(la.sym.concatenate(xs[:3])._repr_html_())
    assert "x0, x1, x2 ·" in few.find(".//div[@class='la-sum']").text
    assert not [d for d in few.iter("details") if d.get("class") == "la-inputs"]
    many = parse(la.sym.concatenate(xs)._repr_html_())
    assert "inputs: x0, x1, x2 (+ 7 more)" in many.find(".//div[@class='la-sum']").text
    (names,) = [d for d in many.iter("details") if d.get("class") == "la-inputs"]
    assert names.find("summary").text == "7 more inputs"  # not model parameters: no data input
    assert names.find("div").text == ", ".join(f"x{i}" for i in range(3, 10))
