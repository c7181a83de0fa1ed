"""Write the tutorial notebooks of this folder (stored without outputs; the test suite runs them).

Edit the cells here, then run ``python notebooks/build.py``; commit the ``.ipynb`` files.
``tests/test_notebooks.py`` checks that the committed notebooks match this script.
"""
from __future__ import annotations

import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


LAZY_ARRAYS = [
    md("""
# Lazy arrays: recording instead of computing

lazyarray arrays behave like NumPy arrays: by default every operation runs at once, so you can
print values and step through your code in a debugger. Turn on **deferred compute** and the same
operations *record* a graph instead of running kernels. A recorded graph can be planned as a
whole (which buffer holds which value, what may be overwritten in place), exported to a file,
and run again and again without Python in the loop.

This notebook shows the difference, what lazy arrays know before anything runs, when they are
finally computed, and why in-place writes are refused while recording.
"""),
    code("""
import numpy as np
import lazyarray as la

x = la.array(np.arange(6, dtype=np.float32).reshape(2, 3))
x
"""),
    md("""
## Eager by default

Without deferred compute nothing is special: `x * 2 + 1` runs two kernels and gives a normal
array holding values. This is the mode to debug in.
"""),
    code("""
y = x * 2 + 1
y.is_lazy, y
"""),
    md("""
## Deferred compute records a graph

Inside `with la.deferred():` every operation returns a **lazy** array: a handle on a node of a
graph, with no value yet. The flag lives in a context variable, so it is per thread and per
asyncio task and never leaks into concurrent code.

The notebook display of a lazy array shows what is known without computing (shape, dtype,
device), how many nodes are pending behind it, and a drawing of that pending graph. Displaying
never computes anything.
"""),
    code("""
with la.deferred():
    h = la.relu(x * 2 - 3)
    s = h.sum(axis=1)

h.is_lazy, s.is_lazy
"""),
    code("""
s
"""),
    md("""
## Static shapes: known before anything runs

Each operator has a shape and a dtype rule, so lazy arrays know their shape while recording:
`static_shape` never computes. The same rules catch mistakes at the line that makes them,
not later when the graph runs: the error names the op, the shapes and a fix.
"""),
    code("""
print("static shape:", s.static_shape, "dtype:", s.dtype, "device:", s.device)

with la.deferred():
    try:
        bad = x @ la.ones((4, 3))
    except la.ShapeError as err:
        print("ShapeError:", err)
"""),
    md("""
Some shapes depend on the data: how many elements pass a boolean mask cannot be known before the
mask is computed. Such dimensions are `None` in `static_shape`. Asking for `.shape` is a request
for the real number, so it computes the array.
"""),
    code("""
with la.deferred():
    big = x[x > 2]

print("static_shape:", big.static_shape, " lazy:", big.is_lazy)
print("shape:", big.shape, " lazy:", big.is_lazy)
"""),
    md("""
## What computes a lazy array, and when

A lazy array is computed only when a value is really needed:

* `asnumpy()`, `item()`, `numpy.asarray(x)`;
* `bool(x)`, `float(x)`, `int(x)` (an `if` on an array, for example);
* `.shape` when a dimension is unknown;
* using it as an input to an operation run *outside* deferred compute.

Computing runs the whole pending sub-graph at once through the executor (planned, not op by op),
and fills in every lazy array of that sub-graph, so nothing is computed twice. Below, computing
`b` also fills `a`, which `b` depends on; `c` was not needed, so it stays lazy.
"""),
    code("""
with la.deferred():
    a = la.exp(x)
    b = a.sum()
    c = a * 2

print("before:", [t.is_lazy for t in (a, b, c)])
print("float(b) =", float(b))
print("after: ", [t.is_lazy for t in (a, b, c)])
"""),
    code("""
with la.deferred():
    d = la.tanh(x)

e = d + 1          # an eager op reading a lazy input computes it first
d.is_lazy, e.is_lazy
"""),
    md("""
## In-place writes are refused while recording

On normal arrays `x += 1` and `x[0] = 5` work as in NumPy. On a lazy array they raise
`la.DeferredComputeError`. The reason is that a recorded graph is a *pure function*: every node
makes a new value and nothing is overwritten. That is what lets the executor reorder work, reuse
memory and export the graph. Reusing memory is the planner's job, and it does it better than
hand-written in-place code, because it sees the whole graph: it writes an output over an input
exactly when that input is dead (the next notebook shows the plan).

The error says what to write instead.
"""),
    code("""
with la.deferred():
    t = x * 2
    try:
        t += 1
    except la.DeferredComputeError as err:
        print("t += 1   ->", err)
    try:
        t[0] = 5
    except la.DeferredComputeError as err:
        print("t[0] = 5 ->", err)
    t = t + 1      # the functional form records a new node

z = la.ones(3)
z += 1             # eager arrays allow it
z
"""),
    md("""
## From lazy arrays to a graph you can keep

`la.get_symbol(outputs, inputs={...})` turns what was recorded between named inputs and the
outputs into a `Symbol`: a portable graph that prints as text, draws itself, serializes to JSON
and runs through `la.CachedOp`. Blocks do this for you when you call `hybridize()`: see
`02_hybridize_and_export.ipynb`.
"""),
    code("""
sym = la.get_symbol(s, inputs={"x": x})
print(sym)
sym
"""),
    code("""
op = la.CachedOp(sym)
op(la.ones((2, 3))).asnumpy()
"""),
]

HYBRIDIZE = [
    md("""
# Hybridize a model, read its memory plan, export it

Blocks in `la.blocks` are written imperatively: one `forward(self, x)` that you can debug line by
line. Calling `net.hybridize()` keeps that code but changes how it runs: the next call *traces*
`forward` once under deferred compute, turns the recording into a graph, and from then on runs the
compiled graph through a `CachedOp`. The outputs are the same; Python no longer runs per layer,
memory is planned for the whole model, and the graph can be exported and loaded without your
Python class.
"""),
    code("""
import json
import os
import tempfile

import numpy as np
import lazyarray as la
from lazyarray import blocks as B

la.random.seed(0)
rng = np.random.default_rng(0)

# A toy problem: three interleaved 2-D spirals.
n = 600
labels = rng.integers(0, 3, n)
r = rng.uniform(0.05, 1.0, n)
theta = labels * (2 * np.pi / 3) + 4 * r + rng.normal(0, 0.15, n)
points = np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1).astype(np.float32)
X, Y = la.array(points), la.array(labels)

net = B.HybridSequential()
net.add(B.Dense(64, activation="relu"), B.Dense(64, activation="relu"), B.Dense(3))
net.initialize()
net
"""),
    md("""
`Dense(64)` does not say how many inputs it takes: parameter shapes are learned at the first
call. Run the model imperatively once, then hybridize it and compare.
"""),
    code("""
imperative = net(X[:8]).asnumpy()
net.hybridize()
hybrid = net(X[:8]).asnumpy()
print("max |difference|:", np.abs(imperative - hybrid).max())
print("traces so far:", net.trace_count)
net(X[:8]); net(X[:8])
print("after two more calls:", net.trace_count, "(forward did not run again)")
"""),
    md("""
## The graph and its memory plan

`net.cached_op` is the compiled op that ran the last call. Its display shows the memory plan of
the signature it last compiled (input shapes, dtypes, devices) and the graph compiled for it.

How to read the plan:

* **peak_bytes**: all buffers the plan allocates, the memory one run holds at its peak;
* **lower_bound_bytes**: the largest set of values that are alive at the same moment; no plan can
  do better, so `peak / lower bound` close to 1 means little is wasted;
* **naive_bytes**: one buffer per value, what running op by op without reuse would hold;
* the timeline has one row per buffer and one column per step: a bar is a value, from the step
  that writes it to the last step that reads it. Bars that follow each other on a row reuse the
  buffer; a ⟲ marks an output written *in place* over an input that died at that step
  (`relu` over the `dense` before it); thick bars are handed to the caller.
"""),
    code("""
net.cached_op
"""),
    md("""
Plans are per signature. `memory_plan(**shapes)` plans another batch size without running
anything; printed, a plan is a table.
"""),
    code("""
plan = net.cached_op.memory_plan(data=(256, 2))
print(plan)
"""),
    md("""
## Training works through the compiled graph

Under `la.autograd.record()` a hybridized block compiles a forward program that also keeps the
values the backward pass needs, and a backward program; gradients flow back to the parameters as
usual.
"""),
    code("""
trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
loss_fn = B.SoftmaxCrossEntropyLoss()
for epoch in range(40):
    with la.autograd.record():
        loss = loss_fn(net(X), Y)
    loss.backward()
    trainer.step(n)
    if epoch % 10 == 0 or epoch == 39:
        acc = (net(X).asnumpy().argmax(axis=1) == labels).mean()
        print(f"epoch {epoch:2d}: loss {float(loss.mean()):.3f}, accuracy {acc:.2f}")
"""),
    md("""
## Export and import

`net.export(prefix)` writes two files:

* `prefix-symbol.json`: the inference graph (a versioned JSON format, `docs/graph-format.md`);
* `prefix-0000.params`: the parameters as safetensors, a format that cannot run code when loaded.

`SymbolBlock.imports` reads them back into a block that needs neither your class nor its code.
"""),
    code("""
folder = tempfile.mkdtemp(prefix="lazyarray-nb-")
sym_file, param_file = net.export(os.path.join(folder, "spirals"))
print(sorted(os.listdir(folder)))
with open(sym_file) as f:
    graph = json.load(f)
print(f'{graph["format"]} version {graph["version"]}: {len(graph["nodes"])} nodes')

back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
print("max |difference| after import:", np.abs(back(X).asnumpy() - net(X).asnumpy()).max())
"""),
    md("""
The `lazyarray` command summarizes an exported graph without any Python code of yours, and draws
it to an SVG file (pure Python, no Graphviz needed):

```
lazyarray inspect spirals-symbol.json --params spirals-0000.params --shape data=256,2 --svg graph.svg
```
"""),
    code("""
from IPython.display import SVG
from lazyarray.cli import main

svg_file = os.path.join(folder, "graph.svg")
main(["inspect", sym_file, "--params", param_file, "--shape", "data=256,2", "--svg", svg_file])
SVG(filename=svg_file)
"""),
]

DEVICES = [
    md("""
# Graphs across devices and their copy nodes

Every array lives on a device: `la.cpu(i)` or `la.gpu(i)`. lazyarray never moves data behind your
back: eager operations on arrays of two devices raise an error, and in a graph every move is an
explicit **copy node** that you can see in the printed graph, in the drawing, in the JSON and in
the memory plan.

`cpu(0)` and `cpu(1)` are distinct devices even on a machine with one processor. That is on
purpose: everything below (placement, copy nodes, per-device memory plans) runs on any laptop,
and the same code runs with `la.gpu(0)` where CuPy and a GPU are present.
"""),
    code("""
import numpy as np
import lazyarray as la

a = la.ones((256, 256), device=la.cpu(0))
w = la.full((256, 256), 0.5, device=la.cpu(1))
try:
    a @ w
except la.DeviceError as err:
    print("DeviceError:", err)
"""),
    md("""
## Moving data is a node of the graph

`x.to(device)` copies an array. Inside deferred compute it records a `copy_to` node: the graph
below computes on `cpu(0)`, moves the activations to `cpu(1)` for the matrix product, and brings
the (much smaller) result back. In the drawing the device is the colour, and copies are the
hexagons.
"""),
    code("""
with la.deferred():
    h = la.relu(a * 2 - 1)
    y = (h.to(la.cpu(1)) @ w).sum(axis=1)
    out = y.to(la.cpu(0)) + 1

sym = la.get_symbol(out, inputs={"a": a, "w": w})
print(sym)
"""),
    code("""
sym
"""),
    md("""
## Running it

`la.CachedOp` compiles the graph for the devices of the arrays it is called with. Each node runs
where its inputs live (copy nodes run on their target device), and the result lands where the
graph says.
"""),
    code("""
op = la.CachedOp(sym)
result = op(a, w)
expected = (np.maximum(a.asnumpy() * 2 - 1, 0) @ w.asnumpy()).sum(axis=1) + 1
print(result.device, np.allclose(result.asnumpy(), expected))
"""),
    md("""
## Placement adds the copies a call needs

The graph was recorded with `w` on `cpu(1)`. Call it with a `w` that lives on `cpu(0)` and the
compiled op places the graph for *that* signature: the product still runs on `cpu(1)` (where its
first input comes from), so placement inserts one more copy node, for `w`. The op's display
shows the plan and the graph compiled for the most recent signature: buffers are per device
(coloured like the drawing) and are never shared between devices.
"""),
    code("""
w0 = la.full((256, 256), 0.5)        # on cpu(0)
print(op(a, w0).device, "compiled signatures:", op.num_compiles)
op
"""),
    md("""
Copies are ordinary nodes everywhere: in the saved JSON and in the planner's table, where the
value each copy makes has a buffer on its target device.
"""),
    code("""
print("copy nodes in the JSON:", sym.to_json().count('"copy_to"'))
print(op.memory_plan(a=(256, 256), w=(256, 256)))
"""),
    md("""
## On a GPU

Nothing above is CPU-specific. With CuPy installed (`pip install -e ".[gpu]"`) and a GPU present,
put `la.gpu(0)` where this notebook says `la.cpu(1)`: the same copy nodes move data between host
and device.
"""),
    code("""
print("GPU available:", la.gpu_available())
"""),
]

NOTEBOOKS = {
    "01_lazy_arrays.ipynb": LAZY_ARRAYS,
    "02_hybridize_and_export.ipynb": HYBRIDIZE,
    "03_devices.ipynb": DEVICES,
}


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` without outputs (deterministic cell ids, so rebuilding changes nothing)."""
    nb = new_notebook(cells=NOTEBOOKS[name])
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name.split('_')[0]}-{i:02d}"
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main(argv: list[str]) -> int:
    for name in NOTEBOOKS:
        path = os.path.join(HERE, name)
        nbformat.write(build(name), path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
