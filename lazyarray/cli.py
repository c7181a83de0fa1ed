"""The ``lazyarray`` command.

* ``lazyarray demo [--model cnn|mlp|resnet18|transformer|lstm] [--out DIR]``: train a small
  hybridized model briefly on a synthetic, learnable data set made in code (a progress bar on a
  terminal, one line per epoch otherwise), export it with a symbolic batch to ``./lazyarray-demo/``
  (or ``--out DIR``; the files are kept for ``inspect``), import it back, check the outputs match
  and show the memory plan. The default (the CNN) runs in a few seconds.
* ``lazyarray --version``: the package version.
* ``lazyarray inspect FILE [--params FILE] [--shape data=1,784] [--svg OUT.svg]``: summarize a model
  (inputs with their shapes, symbolic dims by name; parameters with count and bytes; ops; outputs;
  the memory plan) and draw it (pure-Python SVG, no Graphviz needed), or list a parameter file's
  arrays. Formats are recognised by content (``formats.py``): lazyarray symbol JSON (``--params``
  optional), MXNet 1.x symbol JSON (``--params`` required: it gives the shapes), ONNX (carries its
  weights), MXNet ``.params`` and safetensors parameter files.
* ``lazyarray convert MODEL [--params FILE] --out PREFIX [--to lazyarray|mxnet]``: convert a model
  in any of the three model formats to lazyarray's format (``PREFIX-symbol.json`` +
  ``PREFIX-0000.params``) or MXNet 1.x files; ``--to model.onnx`` (or ``--to onnx --out
  model.onnx``) writes an ONNX model (``la.onnx.export``, batch axis dynamic).

Problems with files or arguments print one line (``lazyarray: error: ...``) and exit with
status 2.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import time
from collections import Counter

import numpy as np

from . import __version__, autograd
from . import blocks as B
from .creation import array
from .dim import has_symbols
from .errors import LazyArrayError, fmt_shape
from .executor.cached_op import CachedOp
from .formats import Format, Model, detect, open_model, read_params
from .graph.draw import DEFAULT_MAX_NODES as DRAW_MAX_NODES
from .graph.symbol import load_symbol
from .mxnet import export as export_mxnet
from .onnx import DEFAULT_OPSET
from .onnx import export as onnx_export
from .rng import seed as seed_rng


class CLIError(Exception):
    """A problem to report in one line, exit status 2."""


# -- data ------------------------------------------------------------------------------------------
IMAGE = 12
LINES = ("horizontal", "vertical", "diagonal", "anti-diagonal")


def line_images(n: int, rng: np.random.Generator, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy 1 x 12 x 12 images, each showing one line: horizontal, vertical, diagonal or
    anti-diagonal, at a random offset. A CNN learns this; chance is 25%."""
    y = rng.integers(0, len(LINES), n)
    x = rng.normal(0.0, noise, (n, 1, IMAGE, IMAGE)).astype(np.float32)
    offset = rng.integers(-IMAGE // 2 + 2, IMAGE // 2 - 1, n)
    idx = np.arange(IMAGE)
    for i in range(n):
        o, img = offset[i], x[i, 0]
        if y[i] == 0:
            img[IMAGE // 2 + o, :] += 1.2
        elif y[i] == 1:
            img[:, IMAGE // 2 + o] += 1.2
        else:
            cols = idx + o if y[i] == 2 else IMAGE - 1 - idx + o
            keep = (cols >= 0) & (cols < IMAGE)
            img[idx[keep], cols[keep]] += 1.2
    return x, y.astype(np.int64)


def spirals(n: int, rng: np.random.Generator, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of ``classes`` interleaved 2-D spirals (the classic MLP toy problem)."""
    y = rng.integers(0, classes, n)
    r = rng.uniform(0.05, 1.0, n)
    theta = y * (2 * np.pi / classes) + r * 4.0 + rng.normal(0, 0.15, n)
    x = np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1).astype(np.float32)
    return x, y.astype(np.int64)


def color_patterns(n: int, rng: np.random.Generator, classes: int = 10,
                   size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy 3 x ``size`` x ``size`` images: class ``c`` adds a fixed random pattern (the same for
    every seed of the data, drawn from ``rng``'s first numbers) to Gaussian noise."""
    templates = rng.normal(0.0, 1.0, (classes, 3, size, size)).astype(np.float32)
    y = rng.integers(0, classes, n)
    x = rng.normal(0.0, 1.0, (n, 3, size, size)).astype(np.float32) + 0.8 * templates[y]
    return x, y.astype(np.int64)


def token_classes(n: int, rng: np.random.Generator, vocab: int = 64, classes: int = 4,
                  length: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sequences of ``length`` token ids: class ``c`` draws most tokens from its own quarter of
    the vocabulary, the rest anywhere (a bag of tokens decides the class)."""
    y = rng.integers(0, classes, n)
    band = vocab // classes
    own = rng.integers(0, band, (n, length)) + (y * band)[:, None]
    noise = rng.integers(0, vocab, (n, length))
    x = np.where(rng.random((n, length)) < 0.7, own, noise)
    return x.astype(np.int64), y.astype(np.int64)


def counting_sequences(n: int, rng: np.random.Generator, vocab: int = 32,
                       length: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Language modelling: ``n`` sequences that count up by a step of 1, 2 or 3 (mod ``vocab``) from a
    random start; inputs are tokens 0..length-1, targets the next tokens 1..length."""
    start = rng.integers(0, vocab, n)
    step = rng.integers(1, 4, n)
    seq = (start[:, None] + step[:, None] * np.arange(length + 1)) % vocab
    return seq[:, :-1].astype(np.int64), seq[:, 1:].astype(np.int64)


# Per model: the data set, its description, and the defaults of the run (epochs, samples, batch, lr).
MODELS = {
    "cnn": (line_images, "12x12 line images, 4 classes", dict(epochs=3, samples=1500, batch_size=64, lr=0.005)),
    "mlp": (spirals, "2-D spirals, 3 classes", dict(epochs=6, samples=2000, batch_size=64, lr=0.005)),
    "resnet18": (color_patterns, "3x32x32 colour-pattern images, 10 classes",
                 dict(epochs=3, samples=160, batch_size=16, lr=0.003)),
    "transformer": (token_classes, "16-token sequences over 64 ids, 4 classes",
                    dict(epochs=3, samples=512, batch_size=32, lr=0.003)),
    "lstm": (counting_sequences, "16-token counting sequences over 32 ids (next-token prediction)",
             dict(epochs=3, samples=512, batch_size=32, lr=0.01)),
}


def build_model(kind: str):
    """The demo models: a small CNN for the line images, an MLP for the spirals, and small
    configurations of the model zoo (``la.blocks.models``) for the others."""
    if kind in ("cnn", "mlp"):
        net = B.HybridSequential()
        if kind == "cnn":
            net.add(B.Conv2D(8, 3, padding=1, activation="relu"), B.BatchNorm(), B.MaxPool2D(),
                    B.Conv2D(16, 3, padding=1, activation="relu"), B.MaxPool2D(), B.Flatten(),
                    B.Dense(32, activation="relu"), B.Dropout(0.1), B.Dense(len(LINES)))
        else:
            net.add(B.Dense(64, activation="relu"), B.Dense(64, activation="relu"), B.Dense(3))
        return net
    models = importlib.import_module("lazyarray.blocks.models")
    name = {"resnet18": "resnet18", "transformer": "transformer_encoder", "lstm": "lstm_lm"}[kind]
    if not hasattr(models, name):
        raise CLIError(f"--model {kind}: la.blocks.models.{name} is not available in this version of lazyarray")
    if kind == "resnet18":
        return models.resnet18(classes=10, thumbnail=True, channels=(8, 8, 16, 32, 64))  # narrow: a brief run
    if kind == "transformer":
        return models.transformer_encoder(64, 4, units=32, num_layers=1, num_heads=2, max_length=16)
    return models.lstm_lm(32, units=32, num_layers=1)


# -- demo ------------------------------------------------------------------------------------------
DEMO_DIR = "lazyarray-demo"  # where the demo keeps its exported files (in the current directory) without --out
def demo(args) -> int:
    make, what, defaults = MODELS[args.model]
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    rng = np.random.default_rng(args.seed)
    seed_rng(args.seed)
    x, y = make(args.samples, rng)
    n_test = max(args.samples // 5, 1)
    x_tr, y_tr, x_te, y_te = x[n_test:], y[n_test:], x[:n_test], y[:n_test]
    lm = args.model == "lstm"  # next-token prediction: labels are sequences
    classes = int(y.max()) + 1
    print(f"lazyarray demo: {args.model} on synthetic {what}; "
          f"{len(x_tr)} training / {len(x_te)} test samples")
    net = build_model(args.model)
    net.initialize()
    net.hybridize()
    print(net)
    epoch_losses = _demo_train(args, net, x_tr, y_tr, rng)
    test_out = net(array(x_te)).asnumpy()
    acc = _correct(test_out, y_te) / len(y_te)
    chance = 1.0 / classes
    print(f"test accuracy: {acc:.1%} (chance: {chance:.1%})" + (" per token" if lm else ""))
    match = _demo_export(args, net, x.shape[1:], x_te, test_out)
    if args.model in ("cnn", "mlp"):  # trained long enough to learn: accuracy must show it
        learned, how = acc > chance + 0.25, f"accuracy {acc:.1%} is not clearly above chance"
    else:  # a brief run of a big model: the loss must at least fall
        learned = len(epoch_losses) < 2 or epoch_losses[-1] < epoch_losses[0]
        how = f"the loss did not fall ({epoch_losses[0]:.3f} -> {epoch_losses[-1]:.3f})"
    ok = match and learned
    if not ok:
        print("demo FAILED: " + ("outputs differ after re-import" if not match else how))
    return 0 if ok else 1


def _demo_train(args, net, x_tr, y_tr, rng) -> list:
    """Train ``net`` for ``args.epochs`` (a bar per epoch on a terminal, else a line); prints the
    median step time; returns the mean loss of each epoch."""
    trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": args.lr})
    loss_fn = B.SoftmaxCrossEntropyLoss()
    bs = args.batch_size
    bars = not args.quiet and sys.stdout.isatty()  # a log gets one line per epoch, not bar refreshes
    first_call = None
    step_times, epoch_losses = [], []
    for epoch in range(args.epochs):
        perm = rng.permutation(len(x_tr))
        starts = range(0, len(x_tr), bs)
        if bars:
            starts = progress_bar(starts, f"epoch {epoch + 1}/{args.epochs}")
        seen = correct = 0
        total = 0.0
        for start in starts:
            idx = perm[start:start + bs]
            xb, yb = array(x_tr[idx]), array(y_tr[idx])
            t0 = time.perf_counter()
            out, loss = _demo_step(net, trainer, loss_fn, xb, yb, len(idx))
            dt = time.perf_counter() - t0
            if first_call is None:
                first_call = dt
            elif len(idx) == bs:
                step_times.append(dt)
            seen += len(idx)
            total += float(loss.asnumpy().sum())
            correct += _correct(out.asnumpy(), y_tr[idx])
            if bars:
                starts.set_postfix(loss=f"{total / seen:.3f}", acc=f"{correct / seen:.3f}")
        if bars:
            starts.close()
        else:
            print(f"epoch {epoch + 1}/{args.epochs}: loss {total / seen:.3f}, train accuracy {correct / seen:.3f}",
                  flush=True)
        epoch_losses.append(total / seen)
    if step_times:
        print(f"hybridized training step: {np.median(step_times) * 1e3:.2f} ms (batch {bs}); "
              f"first call (trace + compile + run): {first_call * 1e3:.1f} ms")
    return epoch_losses


def _demo_step(net, trainer, loss_fn, xb, yb, n: int) -> tuple:
    """One training step on a batch of ``n``: ``(output, loss)``."""
    with autograd.record():
        out = net(xb)
        loss = loss_fn(out, _labels_for(out, yb))
    loss.backward()
    trainer.step(n)
    return out, loss


def _demo_export(args, net, sample_dims: tuple, x_te, test_out) -> bool:
    """Export ``net``, import it back and compare its test outputs; print the exported graph's
    memory plan. True when the outputs match."""
    out_dir = args.out or DEMO_DIR
    os.makedirs(out_dir, exist_ok=True)
    # the graph keeps its traced batch symbolic (export_graph(specialize=False)): it serves every batch size
    sym_file, param_file = net.export(os.path.join(out_dir, "demo"))
    print(f"exported: {sym_file}, {param_file} (kept; next: lazyarray inspect {sym_file})")
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    diff = float(np.abs(back(array(x_te)).asnumpy() - test_out).max())
    match = diff <= 1e-5
    print(f"re-imported: outputs {'match' if match else 'DIFFER'} (max |difference| = {diff:.3g})")
    sample_shape = (args.batch_size,) + tuple(sample_dims)
    plan = CachedOp(load_symbol(sym_file)).memory_plan(data=sample_shape)
    print(f"memory plan of the exported graph (inference, data={fmt_shape(sample_shape)}):")
    print(plan)
    return match


def progress_bar(iterable, desc: str):
    """A tqdm bar on stdout (tqdm is imported here, when a bar is first drawn, not with the CLI)."""
    tqdm = importlib.import_module("tqdm").tqdm
    return tqdm(iterable, desc=desc, unit="batch", leave=True, file=sys.stdout, mininterval=0.25)


def _labels_for(out, labels):
    """Labels laid out like the model's output: a language model may answer time-major (T, N, V)."""
    if labels.ndim == 2 and out.ndim == 3 and tuple(out.shape[:2]) != tuple(labels.shape):
        return labels.T
    return labels


def _correct(out: np.ndarray, labels: np.ndarray) -> float:
    """Correct predictions per sample (for sequences: the fraction of tokens right, per sample)."""
    pred = out.argmax(axis=-1)
    if pred.shape != labels.shape and pred.T.shape == labels.shape:
        pred = pred.T
    hits = pred == labels
    return float(hits.reshape(len(labels), -1).mean(axis=1).sum())


# -- inspect ---------------------------------------------------------------------------------------
def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``"data=1,784"`` -> ``("data", (1, 784))``."""
    name, sep, dims = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
        if any(d < 0 for d in shape):
            raise ValueError
    except ValueError:
        raise CLIError(f"--shape {text!r}: write NAME=D1,D2,... e.g. --shape data=1,784") from None
    return name, shape


def inspect(args) -> int:
    """Summarize a model (any format ``formats.detect`` knows) or list a parameter file's arrays."""
    if args.svg and not args.svg.lower().endswith(".svg"):
        raise CLIError(f"--svg {args.svg!r}: the drawing is SVG; name the file *.svg")
    if args.svg and "\0" in args.svg:
        raise CLIError(f"--svg {args.svg!r}: a file name cannot hold a NUL character")
    shapes = dict(parse_shape(s) for s in args.shape or [])
    fmt = detect(args.symbol, "symbol file")
    if fmt.is_params:
        return _inspect_params(args, fmt)
    model = _open(args, fmt, shapes)
    sym, arrays = model.symbol, model.arrays
    avals = {n.name: n.avals[0] for n in sym.input_nodes()}
    unknown = [n for n in shapes if n not in avals]
    if unknown:
        raise CLIError(f"--shape names {unknown}, which are not inputs of the graph; inputs: {list(avals)}")
    params, data = model.param_names, model.data_names
    _say(f"graph: {args.symbol} ({len(sym.topo())} nodes){CONVERTED.get(model.format, '')}")
    _say("inputs:")
    for n in data:
        a = avals[n]
        _say(f"  {n:<24} {_typed(a.dtype, shapes.get(n, a.shape))}")
    where = " (from " + args.params + ")" if args.params else " (in the model)" if model.format is Format.ONNX else ""
    _say(f"parameters{where}:")
    _param_table((n, avals[n].dtype, tuple(arrays[n].shape) if arrays is not None else avals[n].shape)
                 for n in params)
    ops = Counter(n.op.qualname for n in sym.topo() if n.op is not None)
    _say("ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))))
    _, out_shapes = sym.infer_shape(**shapes)
    _, out_types = sym.infer_type()
    _say("outputs:")
    for name, shape, dtype in zip(sym.list_outputs(), out_shapes, out_types):
        _say(f"  {name:<24} {_typed(dtype, shape)}")
    _memory_plan(sym, data, avals, shapes)
    if args.svg:
        try:
            sym.draw(args.svg, max_nodes=None if args.all_nodes else DRAW_MAX_NODES,
                     blocks="expanded" if args.all_nodes else "collapsed")
        except OSError as exc:
            raise CLIError(f"--svg: cannot write {args.svg!r}: {exc.strerror or exc}") from None
        _say(f"drawing: {args.svg} ({len(sym.topo())} nodes)")
    return 0


# How ``inspect`` names models read through a converter.
CONVERTED = {Format.MXNET_SYMBOL: " (MXNet 1.x files, converted)", Format.ONNX: " (ONNX model, converted)"}


def _inspect_params(args, fmt: Format) -> int:
    """``inspect`` of a parameter file: each array's name, dtype and shape, and the total."""
    used = [flag for flag, given in (("--params", args.params), ("--shape", args.shape), ("--svg", args.svg))
            if given]
    if used:
        raise CLIError(f"{used[0]}: {args.symbol!r} is {fmt.value} (arrays only, no graph); {used[0]} applies "
                       "to a model (symbol JSON or ONNX)")
    _, arrays = read_params(args.symbol)
    _say(f"parameters: {args.symbol} ({fmt.value}, {len(arrays)} arrays)")
    _param_table((n, a.dtype, tuple(a.shape)) for n, a in arrays.items())
    return 0


def _param_table(rows) -> None:
    """One line per ``(name, dtype, shape)``, then the element count and bytes of them all."""
    total = total_bytes = 0
    for name, dtype, shape in rows:
        count = math.prod(shape) if shape is not None and all(isinstance(d, int) for d in shape) else 0
        total += count
        total_bytes += count * (dtype.itemsize if dtype is not None else 0)
        _say(f"  {name:<24} {_typed(dtype, shape):<22} {count:>12,}")
    _say(f"  {'total':<24} {'':<22} {total:>12,}  ({total_bytes:,} bytes)")


def _typed(dtype, shape) -> str:
    """``float32[batch,784]``; ``?`` for what the file does not record (MXNet symbols: input shapes)."""
    return f"{'?' if dtype is None else dtype}{fmt_shape(shape)}"


def _memory_plan(sym, data: list[str], avals: dict, shapes: dict) -> None:
    symbolic = [n for n in data if n not in shapes and avals[n].shape is not None and has_symbols(avals[n].shape)]
    try:
        if symbolic:  # a graph for every batch size: plan one
            raise CLIError(f"the graph serves every size of its symbolic dims; plan one with --shape, e.g. "
                           f"--shape {symbolic[0]}=" + ",".join("64" if not isinstance(d, int) else str(d)
                                                                for d in avals[symbolic[0]].shape))
        plan = CachedOp(sym).memory_plan(**shapes)
    except (LazyArrayError, CLIError) as exc:
        _say(f"memory plan: not available ({exc})")
    else:
        _say(f"planned peak memory: {plan.peak_bytes:,} bytes (lower bound {plan.lower_bound_bytes:,}, "
             f"without reuse {plan.naive_bytes:,}; {plan.num_buffers} buffers)")


def _open(args, fmt: Format, shapes: dict) -> Model:
    """The model ``args.symbol`` (of ``fmt``) with ``args.params``; an MXNet symbol needs its parameters."""
    if fmt is Format.MXNET_SYMBOL and not args.params:
        raise CLIError(f"{args.symbol} is an MXNet 1.x symbol file: pass its parameter file with --params "
                       "(the conversion reads the parameters' shapes)")
    try:
        return open_model(args.symbol, args.params, shapes)
    except ImportError as exc:  # (reading ONNX without the onnx package)
        raise CLIError(str(exc)) from None


# -- convert ---------------------------------------------------------------------------------------
def convert(args) -> int:
    """Any model format ``formats.detect`` knows -> lazyarray's format (default), MXNet 1.x files or ONNX."""
    shapes = dict(parse_shape(s) for s in args.shape or [])
    to_onnx = args.to == "onnx" or args.to.lower().endswith(".onnx")
    if not to_onnx and args.to not in ("lazyarray", "mxnet"):
        raise CLIError(f"--to: expected lazyarray, mxnet, onnx or a file name ending in .onnx, got {args.to!r}")
    fmt = detect(args.symbol, "symbol file")
    model = _open(args, fmt, shapes)
    if model.arrays is None and model.param_names:
        raise CLIError(f"--params: {args.symbol!r} is {model.format.value}, whose weights ({', '.join(model.param_names[:3])}"
                       f"{', ...' if len(model.param_names) > 3 else ''}) are in a separate safetensors file: pass it "
                       "with --params (the PREFIX-0000.params written beside PREFIX-symbol.json)")
    params = {k: array(v) for k, v in (model.arrays or {}).items()}
    if to_onnx:
        unknown = [n for n in model.data_names if model.symbol.infer_shape()[0].get(n) is None]
        if unknown:  # (MXNet symbol files record no input shapes; ONNX declares every input's rank)
            raise CLIError(f"--shape: {args.symbol!r} ({model.format.value}) records no shape for the input "
                           f"{unknown[0]!r}, which ONNX needs: give it, e.g. --shape {unknown[0]}=1,... "
                           "(the batch axis stays dynamic)")
        path = args.to if args.to != "onnx" else _onnx_path(args.out)
        block = _block_of(model.symbol, params)
        try:
            onnx_export(block, path, opset=args.opset)
        except ImportError as exc:
            raise CLIError(str(exc)) from None
        _say(f"wrote {path} (ONNX opset {args.opset or DEFAULT_OPSET}; inputs: {', '.join(model.data_names)})")
        return 0
    if not args.out:
        raise CLIError("--out PREFIX is required when converting to the lazyarray or MXNet format")
    if args.to == "mxnet":
        files = export_mxnet(model.symbol, args.out, params=params)
    else:
        files = _block_of(model.symbol, params).export(args.out)
    _say(f"wrote {files[0]} and {files[1]} ({args.to} format; inputs: {', '.join(model.data_names)})")
    return 0


def _onnx_path(out: str | None) -> str:
    """``--to onnx --out PATH``: PATH, with ``.onnx`` added when it has no such ending."""
    if not out:
        raise CLIError("--to onnx: give the file with --out FILE.onnx (or write --to FILE.onnx)")
    return out if out.lower().endswith(".onnx") else out + ".onnx"


def _block_of(sym, params: dict):
    """A SymbolBlock running ``sym`` with ``params`` (name -> array); the other inputs are its data."""
    block = B.SymbolBlock(sym, [n for n in sym.list_inputs() if n not in params])
    for name, value in params.items():
        block.collect_params()[name].set_data(value)
    return block


def _say(line: str, file=None) -> None:
    """Print one line, escaping what the stream's encoding cannot show (instead of raising)."""
    stream = sys.stdout if file is None else file
    try:
        print(line, file=stream)
    except UnicodeEncodeError:
        enc = getattr(stream, "encoding", None) or "ascii"
        print(line.encode(enc, "backslashreplace").decode(enc), file=stream)


# -- entry point -----------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """Bad arguments raise ``CLIError`` (one line, status 2) instead of printing the usage and exiting."""

    def error(self, message: str):
        raise CLIError(f"{message} (see {self.prog} --help)")


def _int_in(lo: int, hi: int):
    """An argparse type: an int in ``[lo, hi]``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is not in [{lo:,}, {hi:,}]")
        return value

    parse.__name__ = "integer"
    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number")
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="lazyarray", description="lazyarray: deferred-compute arrays, "
                                "compiled graphs and Gluon-style blocks.")
    p.add_argument("--version", action="version", version=f"lazyarray {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="train, export, re-import and inspect a small hybridized model")
    d.add_argument("--model", choices=tuple(MODELS), default="cnn",
                   help="cnn: a CNN on line images (default, a few seconds); mlp: an MLP on spirals; resnet18, "
                        "transformer, lstm: small models of la.blocks.models on synthetic data")
    d.add_argument("--epochs", type=_int_in(1, 10_000), help="default: per model (cnn: 3)")
    d.add_argument("--samples", type=_int_in(10, 1_000_000), help="data set size (a fifth is held out; "
                   "default per model, cnn: 1500)")
    d.add_argument("--batch-size", type=_int_in(1, 1_000_000))
    d.add_argument("--lr", type=_positive_float, help="Adam learning rate")
    d.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0)
    d.add_argument("--out", metavar="DIR", help=f"directory for the exported files (default: ./{DEMO_DIR})")
    d.add_argument("--quiet", action="store_true", help="one line per epoch even on a terminal (it is always "
                   "so when the output is not a terminal)")
    d.set_defaults(run=demo)
    i = sub.add_parser("inspect", help="summarize a model or list a parameter file's arrays")
    i.add_argument("symbol", metavar="FILE", help="a model (lazyarray or MXNet symbol JSON, ONNX) or a parameter "
                   "file (safetensors, MXNet .params), recognised by content")
    i.add_argument("--params", help="the model's parameter file (FILE-0000.params; not for ONNX)")
    i.add_argument("--shape", action="append", metavar="NAME=D1,D2,...", help="input shape, e.g. data=1,784")
    i.add_argument("--svg", metavar="OUT", help="also draw the graph to an SVG file (OUT.svg)")
    i.add_argument("--all-nodes", action="store_true",
                   help=f"with --svg: draw every node (default: one box per top-level block, and long "
                        f"chains collapse past {DRAW_MAX_NODES} boxes)")
    i.set_defaults(run=inspect)
    c = sub.add_parser("convert", help="convert a model between MXNet 1.x files, lazyarray's format and ONNX")
    c.add_argument("symbol", metavar="MODEL", help="FILE-symbol.json (lazyarray or MXNet 1.x) or an ONNX model, "
                   "recognised by content")
    c.add_argument("--params", help="its parameter file (FILE-0000.params; required beside a symbol JSON "
                   "file, not taken by ONNX)")
    c.add_argument("--out", metavar="PREFIX", help="write PREFIX-symbol.json and PREFIX-0000.params (with --to "
                   "onnx: the ONNX file)")
    c.add_argument("--to", default="lazyarray", metavar="{lazyarray,mxnet,onnx,FILE.onnx}",
                   help="the format to write: lazyarray, mxnet, or onnx (--out FILE.onnx) / an ONNX file name")
    c.add_argument("--opset", type=_int_in(DEFAULT_OPSET, 100), help=f"with --to FILE.onnx: the ONNX opset "
                   f"(default {DEFAULT_OPSET})")
    c.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                   help="input shape (MXNet models, which record none: for Reshape codes and for --to onnx), "
                        "e.g. data=1,3,224,224")
    c.set_defaults(run=convert)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0 ok, 1 demo failed, 2 bad input).

    A bad argument or file never shows a traceback: one line ``lazyarray: error: ...`` on stderr,
    status 2. (Loaders raise only ``LazyArrayError`` for any file, see docs/graph-format.md.)
    """
    try:
        args = parser().parse_args(argv)
        return args.run(args)
    except SystemExit as exc:  # --help (status 0)
        return exc.code if isinstance(exc.code, int) else 0
    except (CLIError, LazyArrayError, OSError) as exc:
        msg = " ".join(str(exc).split())  # one line
        _say(f"lazyarray: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _say("lazyarray: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
