"""Graph drawing (graph/draw.py, graph/svg.py): well-formed SVG, labels, kinds, limits, files."""
import itertools
import os
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lazyarray as la
from lazyarray.deferred import known_values
from lazyarray.graph import draw, svg

SVG_NS = "{http://www.w3.org/2000/svg}"
SIZE_LIMIT = 600_000  # bytes for a 1,000-node graph, drawn in full or collapsed


def parse(text: str) -> ET.Element:
    return ET.fromstring(text)


def all_text(root: ET.Element) -> str:
    return " ".join("".join(el.itertext()) for el in root.iter(f"{SVG_NS}text"))


def boxes(root: ET.Element, kind: str) -> list[ET.Element]:
    """Node boxes of one kind (legend swatches have no tooltip, boxes do)."""
    return [g for g in root.iter(f"{SVG_NS}g") if f"la-{kind}" in (g.get("class") or "").split()
            and g.find(f"{SVG_NS}title") is not None]


def mlp_symbol():
    x = la.sym.var("data", shape=(64, 784))
    w1, b1 = la.sym.var("fc1_weight", shape=(128, 784)), la.sym.var("fc1_bias", shape=(128,))
    h = la.sym.relu(la.sym.nn.dense(x, w1, b1))
    return la.sym.nn.softmax(la.sym.nn.dense(h, la.sym.var("fc2_weight", shape=(10, 128))))


def chain(n: int):
    """A symbol of ``n`` ops (alternating add / multiply) plus its input."""
    x = la.sym.var("x", shape=(4, 4))
    y = x
    for i in range(n):
        y = (y + x) if i % 2 else la.sym.relu(y)
    return y


def ladder(n_blocks: int):
    """A residual stack with one weight per block: ~4 nodes per block, no long linear chain."""
    x = la.sym.var("x", shape=(8, 16))
    h = x
    for i in range(n_blocks):
        h = h + la.sym.relu(la.sym.nn.dense(h, la.sym.var(f"w{i}", shape=(16, 16))))
    return h


def test_svg_is_well_formed_with_labels():
    sym = mlp_symbol()
    root = parse(sym._repr_svg_())
    assert root.tag == f"{SVG_NS}svg"
    text = all_text(root)
    for label in ("data", "nn.dense", "relu", "nn.softmax", "float32[64,784]", "float32[64,10]", "cpu(0)",
                  "8 nodes"):
        assert label in text, label
    # Weights are folded into their op's box (Netron style); their names are in the tooltips.
    assert "weight (128,784)" in text and "bias (128,)" in text and "weight (10,128)" in text
    tips = " ".join(t.text for t in root.iter(f"{SVG_NS}title"))
    assert "%fc1_weight" in tips and "%fc2_weight" in tips and "%dense0 = nn.dense(" in tips
    assert len(boxes(root, "var")) == 1  # only the data input is drawn as an input box
    assert len(boxes(root, "out")) == 1
    edges = root.find(f"{SVG_NS}g[@class='la-e']")
    assert len(edges) == 4  # data -> dense -> relu -> dense -> softmax


def test_one_style_block_and_no_inline_styles():
    text = mlp_symbol()._repr_svg_()
    assert text.count("<style>") == 1
    assert " style=" not in text  # styling is by class only


def test_kinds_constants_copies_devices():
    a = la.ones((2, 3))
    b = la.array(np.arange(6.0).reshape(2, 3))
    with la.deferred():
        y = (a * 2 + b - b * b).to(la.cpu(1))  # b read three times: drawn as its own box
        z = la.relu(y).sum(axis=0)
    sym = la.get_symbol(z, inputs={"a": a})
    root = parse(sym._repr_svg_())
    (copy,) = boxes(root, "copy")
    assert "copy_to" in "".join(copy.itertext()) and "→ cpu(1)" in "".join(copy.itertext())
    assert copy.find(f"{SVG_NS}polygon") is not None  # a different shape from op boxes
    assert len(boxes(root, "const")) == 1  # b; the scalar 2 is shown inside multiply, as in print(sym)
    assert "× 2" in all_text(root) and "axis=0" in all_text(root)
    classes = {c for g in boxes(root, "op") for c in g.get("class").split()}
    assert {"la-d0", "la-d1"} <= classes  # two devices, two colours
    legend = all_text(root)
    assert "cpu(0)" in legend and "cpu(1)" in legend and "copy between devices" in legend


def test_unknown_dims_and_computed_leaves():
    x = la.array([1.0, -2.0, 3.0])
    with la.deferred():
        y = la.relu(x)
        z = y[y > 0]
    y.asnumpy()  # y is computed now; z is still pending
    root = parse(draw.to_svg([z._entry], stop=lambda n: n.op is not None and known_values(n) is not None))
    assert "float32[?]" in all_text(root)
    assert len(boxes(root, "done")) == 1  # relu, already computed, is a leaf


def test_text_is_escaped():
    x = la.sym.var("a<b&c>", shape=(2,))
    root = parse(la.sym.relu(x)._repr_svg_())
    assert "a<b&c>" in all_text(root)


def test_html_is_well_formed():
    html = mlp_symbol()._repr_html_()
    root = parse(html)
    assert "data" in "".join(root.itertext()) and root.find(f".//{SVG_NS}svg") is not None


def test_small_graphs_are_drawn_in_full():
    root = parse(chain(50)._repr_svg_())
    assert not boxes(root, "more")
    assert "51 nodes" in all_text(root)


def test_long_chain_collapses_and_says_so():
    sym = chain(1000)
    text = sym._repr_svg_()
    root = parse(text)
    (more,) = boxes(root, "more")
    assert "998 nodes" in "".join(more.itertext())
    assert "1,001 nodes" in all_text(root) and "collapsed" in all_text(root)
    assert len(text) < 20_000


@pytest.mark.parametrize("max_nodes", [draw.DEFAULT_MAX_NODES, None])
def test_thousand_nodes_size(max_nodes):  # (its time: benchmarks/draw.py)
    sym = ladder(250)  # 1,001 nodes
    assert len(sym.topo()) == 1001
    text = draw.to_svg(sym.outputs, names=sym.names(), max_nodes=max_nodes)
    assert len(text.encode()) < SIZE_LIMIT
    root = parse(text)
    (out,) = boxes(root, "out")  # the output is always drawn
    assert out.find(f"{SVG_NS}title").text.startswith("%add249 = add(")
    n_boxes = len([g for g in root.iter(f"{SVG_NS}g") if "la-n" in (g.get("class") or "")
                   and g.find(f"{SVG_NS}title") is not None])
    if max_nodes is None:
        assert n_boxes == 1001 - 250 and not boxes(root, "more")  # the 250 weights are folded into dense
    else:
        assert n_boxes <= max_nodes and "collapsed" in all_text(root)


def test_layout_is_layered_and_boxes_do_not_overlap():
    sym = ladder(6)
    root = parse(draw.to_svg(sym.outputs, max_nodes=None))
    rows: dict[float, list[tuple[float, float]]] = {}
    for g in root.iter(f"{SVG_NS}g"):
        if "la-n" not in (g.get("class") or "") or g.find(f"{SVG_NS}title") is None:
            continue
        x, y = map(float, g.get("transform")[len("translate("):-1].split(","))
        shape = g.find(f"{SVG_NS}rect")
        w = float(shape.get("width")) if shape is not None else 100.0
        rows.setdefault(y, []).append((x - w / 2, x + w / 2))
    for spans in rows.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_draw_writes_svg_atomically(tmp_path):
    sym = mlp_symbol()
    path = tmp_path / "mlp.svg"
    assert sym.draw(path) == str(path)
    text = path.read_text(encoding="utf-8")
    parse(text)
    assert os.listdir(tmp_path) == ["mlp.svg"]  # no temporary file left behind
    sym.draw(str(path))  # overwriting works
    with pytest.raises(ValueError, match=r"\.svg"):
        sym.draw(tmp_path / "mlp.png")


def test_failed_write_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "g.svg"
    path.write_text("old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        draw.write_svg(path, "<svg/>")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["g.svg"]


def test_svg_builder():
    doc = svg.SvgDoc(100, 50, css=".a{fill:red}")
    doc.add(svg.rect(1, 2, 3.25, 4, cls="a", rx=2), svg.text(5, 6, "x<y"), svg.group([svg.path("M0 0L1 1")], dx=2))
    root = parse(doc.render())
    assert root.get("width") == "100" and "x<y" in all_text(root)
    assert svg.num(3.0) == "3" and svg.num(2.25) in ("2.2", "2.3") and svg.clip("abcdef", 4) == "abc…"


# -- blocks: collapsed by default, expandable in HTML; parameters folded; attributes shown ----------
def block_model():
    from lazyarray import blocks as B

    class Res(B.HybridBlock):
        def __init__(self):
            super().__init__()
            self.body = B.HybridSequential()
            self.body.add(B.Conv2D(4, 3, padding=1, in_channels=4), B.Activation("relu"))

        def forward(self, x):
            return self.body(x) + x * 0.5

    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Conv2D(4, 3, strides=2, padding=1, in_channels=3), Res(), Res(), B.Flatten(),
            B.Dense(10, in_units=4 * 4 * 4))
    net.initialize()
    net.hybridize()
    net(la.ones((2, 3, 8, 8)))
    return net.export_graph()[0]


def test_blocks_are_collapsed_to_one_box_each_by_default():
    sym = block_model()
    root = parse(sym._repr_svg_())
    blocks = boxes(root, "block")
    assert len(blocks) == 5  # 0, 1, 2, 3, 4: one box per top-level block
    labels = ["".join(b.itertext()) for b in blocks]
    res = [t for t in labels if "Res" in t]
    assert len(res) == 2 and all("float32[batch,4,4,4]" in t for t in res)
    conv = next(t for t in labels if "Conv2D" in t)
    assert f"{4 * 3 * 3 * 3 + 4} params" in conv  # weight + bias
    dense = next(t for t in labels if "Dense" in t)
    assert f"{10 * 64 + 10:,} params" in dense and "float32[batch,10]" in dense
    assert len(boxes(root, "var")) == 1  # data; every parameter is inside its block
    assert not boxes(root, "op")  # every op is inside a block
    assert "in 5 collapsed blocks" in all_text(root) and "block (collapsed)" in all_text(root)
    tip = blocks[1].find(f"{SVG_NS}title").text
    assert tip.startswith("block 1 · Res") and "1.body.0.weight float32[4,4,3,3]" in tip


def test_expanded_drawing_shows_every_node_with_folded_params_and_attributes():
    sym = block_model()
    root = parse(draw.to_svg(sym.outputs, names=sym.names(), blocks="expanded"))
    assert not boxes(root, "block")
    text = all_text(root)
    ops = boxes(root, "op")
    assert len(ops) == len([n for n in sym.topo() if n.op is not None])
    assert "stride=(2,2) padding=(1,1)" in text  # op attributes
    assert "× 0.5" in text  # a scalar operand
    assert "weight (4,3,3,3)" in text and "bias (4,)" in text  # parameters folded, Netron style
    assert len(boxes(root, "var")) == 1
    # one label per op: no "multiply multiply0"
    for g in ops:
        first = g.find(f"{SVG_NS}text")
        assert [t.text for t in first] == [first[0].text], [t.text for t in first]
    tips = [g.find(f"{SVG_NS}title").text for g in ops]
    assert any("in block 1.body.0 · Conv2D" in t for t in tips)


def test_given_names_are_still_shown_once():
    x = la.sym.var("x", shape=(2,))
    sym = la.sym.relu(x)
    node = sym.outputs[0].node
    root = parse(draw.to_svg(sym.outputs, names={id(node): "my_relu"}))
    (op,) = boxes(root, "op")
    assert [t.text for t in op.find(f"{SVG_NS}text")] == ["relu", "my_relu"]


def test_html_has_expand_controls_per_block_and_for_every_node():
    sym = block_model()
    html = sym._repr_html_()
    root = parse(html)
    assert "<script" not in html
    details = [d for d in root.iter("details") if d.get("class") != "la-inputs"]  # the parameters' names
    summaries = [d.find("summary").text for d in details]
    assert summaries[0] == "expand blocks (5)" and summaries[-1] == "every node"
    assert "1 · Res — 4 ops, 148 parameters" in summaries  # conv (4*4*3*3+4), relu, multiply, add
    assert "1.body · HybridSequential — 2 ops, 148 parameters" in summaries  # nested, expandable in turn
    res = next(d for d in details if d.find("summary").text.startswith("1 · Res"))
    inner = res.find(f".//{SVG_NS}svg")
    ext = boxes(inner, "ext")  # the block's input, drawn as coming from outside it
    assert len(ext) == 1 and "outside this block" in ext[0].find(f"{SVG_NS}title").text
    assert len(boxes(inner, "block")) == 1 and "× 0.5" in all_text(inner)  # body collapsed, own ops shown
    full = details[-1].find(f".//{SVG_NS}svg")
    assert not boxes(full, "block") and len(boxes(full, "op")) == 11


def test_graphs_without_blocks_have_no_expand_controls():
    assert "<details" not in mlp_symbol()._repr_html_()
