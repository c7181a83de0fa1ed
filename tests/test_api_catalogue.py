"""The API catalogue (issue #33): every public callable of ``lazyarray``, called with bad arguments.

The catalogue walks ``la.*``, its public submodules (``la.nn``, ``la.linalg``, ``la.fft``,
``la.random``, ``la.sym``, ``la.autograd``, ``la.init``, ``la.sparse``, ...), every block
constructor of ``la.blocks`` (layers, losses, optimizers, ``Trainer``, the model zoo) and every
CLI verb. For each callable it builds a call that binds (``inspect.signature``), with plausible
values for the required parameters, then replaces one parameter at a time with a bad value: a
string, a dict, ``None``, an ``object()``, NaN, inf, -1, ``2**62``, a 0-d array, an empty array,
a device string ``"gpu9"`` and a dtype string ``"float33"``.

A call may succeed (the bad value was legal there) or raise a ``LazyArrayError``; any other
exception fails the test, unless it is on the short, commented ``ALLOWED`` list. Huge sizes fail
fast: ``LAZYARRAY_MAX_ALLOC_BYTES`` is 64 MiB for the whole test. Calls that returned silently
but were wrong are in ``MARKED_WRONG``: each must now raise.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import signal
import types
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks import models
from lazyarray.cli import main as cli_main
from lazyarray.cli import parser as cli_parser
from lazyarray.errors import LazyArrayError

_ALLOC_LIMIT = str(64 * 2**20)
_CALL_SECONDS = 20  # a single callable's calls together; the whole catalogue runs in well under a minute

# -- what is walked -------------------------------------------------------------------------------


def _own_callables(module: types.ModuleType) -> list[str]:
    """A module's public callables: ``__all__`` when it has one, else what the module defines."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")
                 and getattr(getattr(module, n), "__module__", None) == module.__name__]
    return [n for n in names if callable(getattr(module, n)) and not isinstance(getattr(module, n), types.ModuleType)
            and not (isinstance(getattr(module, n), type) and issubclass(getattr(module, n), BaseException))]


_SUBMODULES = {"la.nn": la.nn, "la.linalg": la.linalg, "la.fft": la.fft, "la.random": la.random, "la.sym": la.sym,
               "la.autograd": la.autograd, "la.init": la.init, "la.lr_scheduler": la.lr_scheduler,
               "la.metric": la.metric, "la.sparse": la.sparse, "la.sbp": la.sbp, "la.onnx": la.onnx,
               "la.mxnet": la.mxnet, "la.distributed": la.distributed, "la.blocks": B, "la.blocks.models": models,
               "la.amp": la.amp}
for _extra in ("image", "contrib"):  # (not in this version; walked when they appear)
    if isinstance(getattr(la, _extra, None), types.ModuleType):
        _SUBMODULES[f"la.{_extra}"] = getattr(la, _extra)


# la.autograd has no ``__all__``: its user API is these (the rest, record_call, mark_leaf, ..., are the
# dispatcher's own hooks into it).
_AUTOGRAD_API = ("record", "pause", "train_mode", "predict_mode", "is_recording", "is_training", "backward")


def _catalogue() -> dict[str, object]:
    out = {}
    for n in dir(la):
        obj = getattr(la, n)
        if n.startswith("_") or not callable(obj) or isinstance(obj, types.ModuleType):
            continue
        if isinstance(obj, type) and (issubclass(obj, BaseException) or issubclass(obj, Warning)):
            continue
        if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)):
            continue  # la.float32 etc. are NumPy's dtype objects
        out[f"la.{n}"] = obj
    for prefix, module in _SUBMODULES.items():
        for n in _AUTOGRAD_API if module is la.autograd else _own_callables(module):
            out[f"{prefix}.{n}"] = getattr(module, n)
    return out


CATALOGUE = _catalogue()

# Not called: each would block, start processes or only wrap another entry of the catalogue.
SKIPPED = {
    "la.distributed.run": "starts a Dask LocalCluster when no client is given (tests/distributed cover it)",
    "la.distributed.DataParallel": "starts a Dask LocalCluster when no client is given",
    "la.blocks.HookHandle": "internal handle returned by register_forward_hook, takes the hook table",
    "la.Device": "a NamedTuple; la.cpu / la.gpu / la.Device.parse are the checked entries",
    "la.Aval": "a NamedTuple of (shape, dtype, device, stype) built by the ops' rules",
}

# -- bad values -----------------------------------------------------------------------------------

BAD = {
    "str": lambda: "x",
    "dict": lambda: {},
    "none": lambda: None,
    "object": lambda: object(),
    "nan": lambda: math.nan,
    "inf": lambda: math.inf,
    "neg": lambda: -1,
    "huge": lambda: 2**62,
    "zero_d": lambda: la.array(1.5),
    "empty": lambda: la.zeros((0,)),
    "device": lambda: "gpu9",
    "dtype": lambda: "float33",
}


def _sym_var():
    return la.sym.var("v", shape=(2, 3))


_SEQ_NAMES = {"seq", "arrays", "xs", "arys", "tensors", "pieces", "array_list"}
_SHAPE_NAMES = {"shape", "size", "newshape", "sizes", "s", "reps"}
_INT_NAMES = {"n", "k", "num", "length", "units", "channels", "hidden_size", "num_heads", "max_length", "input_dim",
              "output_dim", "step", "max_update", "repeats", "indices_or_sections", "depth", "num_classes", "stop",
              "start", "end", "axis", "nbytes", "size"}


def _good(name: str, prefix: str, annotation: str = ""):
    """A plausible value for a required parameter, so that the bad value of another one is what is seen."""
    sym = prefix == "la.sym"
    annotation = str(annotation)
    if annotation.startswith("Symbol"):
        return _sym_var()
    if annotation in ("SBP",):
        return la.sbp.split(0)
    if annotation.startswith("Block"):
        return B.Dense(2)
    if annotation.startswith("dict"):
        return {}
    if annotation == "str" and name not in ("activation", "approximation", "stype"):
        return "v"
    if name in _SEQ_NAMES:
        return [_sym_var(), _sym_var()] if sym else [la.ones((2, 3)), la.ones((2, 3))]
    if name in _SHAPE_NAMES:
        return (2, 3)
    if name in _INT_NAMES:
        return 2 if name != "axis" else 0
    if name == "dtype":
        return "float32"
    if name in ("device", "ctx"):
        return la.cpu()
    if name == "cond_fn":
        return lambda *a: la.array(False)  # (a loop that ends)
    if name in ("fn", "f", "func", "then_fn", "else_fn", "body_fn", "hook"):
        return lambda *a, **k: a[0] if a else 0
    if name in ("activation", "approximation"):
        return "relu"
    if name in ("stype",):
        return "csr"
    if name in ("name", "text", "path", "prefix", "symbol_file", "kind"):
        return "v"
    if name in ("rate", "value", "lr", "max_norm", "base_lr"):
        return 0.5
    if name in ("body_block", "body", "net", "block"):
        return B.Dense(2)
    if sym:
        return _sym_var()
    return la.ones((2, 3))


# -- allowlist and marked-wrong table -------------------------------------------------------------

# (callable, parameter, bad value) -> reason; "*" matches any parameter or value. Keep it short.
ALLOWED: dict[tuple[str, str, str], str] = {
    # la.foreach over a 0-d (or scalar) data array: fixed on another branch (issue #33, the foreach item)
    ("la.foreach", "data", "*"): "la.foreach over 0-d: fixed on another branch",
}

# Callables whose bad calls still raise bare errors: strict xfail (the test must keep failing until
# fixed, then this entry goes). Reason: what is bare.
XFAIL: dict[str, str] = {}

# Silently accepted before (returned an object that was wrong), now each raises the named error.
MARKED_WRONG = {
    "LRScheduler(base_lr=nan)": (lambda: la.lr_scheduler.LRScheduler(base_lr=math.nan), la.ParamValueError),
    "FactorScheduler(factor=nan)": (lambda: la.lr_scheduler.FactorScheduler(step=1, factor=math.nan),
                                    la.ParamValueError),
    "PolyScheduler(pwr=nan)": (lambda: la.lr_scheduler.PolyScheduler(max_update=10, pwr=math.nan),
                               la.ParamValueError),
    "CosineScheduler(final_lr=inf)": (lambda: la.lr_scheduler.CosineScheduler(max_update=10, final_lr=math.inf),
                                      la.ParamValueError),
    "linalg.pinv(rtol=nan)": (lambda: la.linalg.pinv(la.ones((2, 2)), rtol=math.nan), la.ParamValueError),
    "linalg.matrix_rank(rtol=-1)": (lambda: la.linalg.matrix_rank(la.ones((2, 2)), rtol=-1.0), la.ParamValueError),
}


def _allowed(name: str, param: str, bad: str) -> bool:
    return any(k in ALLOWED for k in ((name, param, bad), (name, param, "*"), (name, "*", bad), (name, "*", "*")))


# -- calling --------------------------------------------------------------------------------------


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _baseline(name: str, sig: inspect.Signature) -> tuple[list, dict, list]:
    """(args, kwargs, params): values for the required parameters, and the parameters to vary."""
    prefix = name.rsplit(".", 1)[0]
    args, kwargs, params = [], {}, []
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            continue
        if p.kind is p.VAR_POSITIONAL:
            params.append(p)
            continue
        params.append(p)
        if p.default is not p.empty:
            continue
        v = _good(p.name, prefix, p.annotation if p.annotation is not p.empty else "")
        if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and not kwargs):
            args.append(v)
        else:
            kwargs[p.name] = v
    return args, kwargs, params


def _calls(name: str, sig: inspect.Signature):
    """Yield (param, bad, args, kwargs) for every call that binds."""
    for p in _baseline(name, sig)[2]:
        for bad, make in BAD.items():
            args, kwargs, _ = _baseline(name, sig)  # fresh arrays for each call
            value = make()
            if p.kind is p.VAR_POSITIONAL:
                args = [*args, value]
            elif p.kind is p.POSITIONAL_ONLY:
                i = [q.name for q in sig.parameters.values() if q.kind is q.POSITIONAL_ONLY].index(p.name)
                if i > len(args):
                    continue
                args = [*args[:i], value, *args[i + 1:]] if i < len(args) else [*args, value]
            else:
                i = list(sig.parameters).index(p.name)
                if p.kind is p.POSITIONAL_OR_KEYWORD and i < len(args):
                    args = [*args[:i], value, *args[i + 1:]]
                else:
                    kwargs = {**kwargs, p.name: value}
            try:
                sig.bind(*args, **kwargs)
            except TypeError:
                continue  # Python's own binding would refuse it: not the library's concern
            yield p.name, bad, args, kwargs


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _deadline(seconds: int, what: str):
    """A hang fails the test (SIGALRM) instead of stopping the run."""
    def alarm(signum, frame):
        raise _Timeout(f"{what} ran past {seconds} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_catalogue(name: str) -> tuple[int, list[str]]:
    """(number of calls made, the bare errors) for one callable."""
    fn = CATALOGUE[name]
    sig = _signature(fn)
    if sig is None:
        return 0, []
    n, bare = 0, []
    with _deadline(_CALL_SECONDS, name), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for param, bad, args, kwargs in _calls(name, sig):
            n += 1
            try:
                fn(*args, **kwargs)
            except LazyArrayError:
                pass
            except Exception as exc:  # noqa: BLE001  (what the catalogue looks for)
                if not _allowed(name, param, bad):
                    bare.append(f"{name}({param}={bad}): {type(exc).__module__}.{type(exc).__name__}: "
                                f"{str(exc)[:200]}")
    return n, bare


@pytest.fixture
def catalogue_env(monkeypatch, tmp_path):
    monkeypatch.setattr(la.config, "max_alloc_bytes", int(_ALLOC_LIMIT))
    monkeypatch.chdir(tmp_path)  # loaders and exporters given "x" / "v" read and write here
    la.random.seed(0)
    yield


def _params():
    for n in sorted(CATALOGUE):
        if n in SKIPPED:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[n])] if n in XFAIL else []
        yield pytest.param(n, marks=marks, id=n)


@pytest.mark.parametrize("name", _params())
def test_bad_arguments_raise_named_errors(catalogue_env, name):
    _, bare = run_catalogue(name)
    assert not bare, "bare errors:\n" + "\n".join(bare)


def test_the_catalogue_covers_the_public_api():
    """The walk finds what it should (a submodule that stopped exporting would shrink it silently)."""
    assert len(CATALOGUE) > 550
    for name in ("la.exp", "la.linspace", "la.nn.conv2d", "la.linalg.svd", "la.fft.rfftfreq", "la.random.normal",
                 "la.sym.exp", "la.blocks.Dense", "la.blocks.Trainer", "la.blocks.SoftmaxCrossEntropyLoss",
                 "la.blocks.models.resnet18", "la.init.Xavier", "la.lr_scheduler.CosineScheduler"):
        assert name in CATALOGUE, name
    assert set(SKIPPED) <= set(CATALOGUE) and set(XFAIL) <= set(CATALOGUE)
    assert not set(SKIPPED) & set(XFAIL)


@pytest.mark.parametrize("name", sorted(MARKED_WRONG))
def test_calls_the_catalogue_marked_wrong_now_raise(name):
    call, error = MARKED_WRONG[name]
    with pytest.raises(error):
        call()


# -- the CLI: every verb, in process, with bad arguments ------------------------------------------------
_CLI_BAD = {
    "demo": [["--epochs", "x"], ["--epochs", "-1"], ["--samples", str(2**62)], ["--lr", "nan"], ["--lr", "inf"],
             ["--batch-size", "0"], ["--model", "gpu9"], ["--seed", "float33"], ["--bogus"]],
    "inspect": [[], ["{missing}"], ["{missing}", "--shape", "data=-1"], ["{missing}", "--params", "{missing}"],
                ["{garbage}"], ["{garbage}", "--shape", f"data={2**62},2"], ["{empty}"]],
    "convert": [[], ["{missing}"], ["{garbage}"], ["{garbage}", "--to", "float33"], ["{garbage}", "--opset", "nan"],
                ["{empty}", "--to", "x.onnx"], ["{garbage}", "--shape", "data=x"]],
}


def test_every_cli_verb_is_catalogued():
    verbs = set(cli_parser()._subparsers._group_actions[0].choices)
    assert verbs == set(_CLI_BAD)


@pytest.mark.parametrize("verb", sorted(_CLI_BAD))
def test_cli_verbs_with_bad_arguments_exit_2(catalogue_env, tmp_path, capsys, verb):
    (tmp_path / "garbage-symbol.json").write_text("{not json")
    (tmp_path / "empty-symbol.json").write_text("")
    paths = {"missing": str(tmp_path / "no-such-symbol.json"), "garbage": str(tmp_path / "garbage-symbol.json"),
             "empty": str(tmp_path / "empty-symbol.json")}
    for extra in _CLI_BAD[verb]:
        argv = [verb, *(a.format(**paths) for a in extra)]
        with _deadline(_CALL_SECONDS, " ".join(argv)):
            status = cli_main(argv)  # a bare error would propagate out of main: main catches only named ones
        err = capsys.readouterr().err
        assert status == 2, (argv, status, err)
        assert err.startswith("lazyarray: error: ") and "Traceback" not in err, (argv, err)
