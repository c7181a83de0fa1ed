#!/usr/bin/env python3
"""The layering targets of issue #34, measured from lazyarray's source (stdlib ``ast`` only;
the package is never imported).

    python tools/arch_report.py                                   the table, then the details
    python tools/arch_report.py --function lazyarray/ops/conv.py:_conv2d   + that function's length
    python tools/arch_report.py --package path/to/lazyarray       another checkout

Metrics (one row each; current value, the issue's target, and whether it is met):

* **import cycles (module level)**: strongly connected components of more than one module in
  the graph of imports that run when a module is imported: module level and class bodies, *not*
  ``if TYPE_CHECKING:`` blocks (they never run) and not imports written inside functions.
  ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; the
  implicit edges to parent packages are left out. Target 0.
* **import cycles (+ TYPE_CHECKING)**: the same with ``TYPE_CHECKING`` imports counted (a static
  dependency a type checker follows; ``../shared/tools/arch_metrics.py`` counts these). Target 0.
* **import cycles (+ function imports)**: the same with imports inside functions counted too:
  the cycles that a function import only hides. Target 0.
* **upward imports**: (module -> module) pairs, at any place in the file, where the importing
  module sits on a lower floor of ``LAYERS`` than the imported one (DESIGN.md: "imports only point
  down"). Target 0.
* **imports inside functions**: distinct (module -> package module) pairs imported inside a
  ``def``/``lambda`` (third-party imports such as ``onnx`` or ``numba`` done lazily are not
  counted). Each statement is listed with its reason: a comment on the import's line or the line
  above it. Target: at most 5, each with a reason.
* **private imports**: ``from x import _name`` statements' names (``_stubs``-style private
  submodules too) taken from another module of the package. Target at most 20.
* **modules reading the environment**: modules using ``os.environ`` / ``os.getenv`` (or
  importing them from ``os``). Target: exactly one (the one place settings are read).
* **module-level mutable state outside the registry, tuning table and named caches**: names bound
  at module level (``if``/``try`` blocks included) to a lock, thread-local or similar
  (``MUTABLE_CALLS``), or to a dict/list/set (display, comprehension, ``dict()``, ``OrderedDict()``,
  ``WeakKeyDictionary()``, ...) that some function of the package changes (item assignment or
  deletion, ``+=`` on an item, a mutating method such as ``append`` / ``add`` / ``clear``), and
  names a function rebinds through ``global``, and module-level functions memoized without a bound
  (``functools.cache``, ``lru_cache(maxsize=None)``). Tables filled while the module is imported and only
  read afterwards are constants and not counted; neither is ``__all__``, nor a ``caches.NamedCache``
  (bounded, named, with ``clear()``). ``STATE_ALLOWED`` names the rest that may stay: the op and
  optimizer registries, the tuning table, the bounded caches with a ``clear()``, and, each with its
  reason, the weak tables of buffer versions and kept values, the first-call lock and the
  multi-device latch. Target 0.
* **files over 800 lines**. Target 0.
* **longest function**: lines from ``def`` to its last line (decorators excluded), nested
  functions and methods measured on their own. Target at most 60.
* **--function FILE:QUALNAME**: that function's length, same measure (target 60).

``analyze(package_dir)`` returns everything as a ``Report``; ``tests/test_architecture.py`` uses it.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field

LONG_FILE = 800
LONG_FUNCTION = 60

# -- the floors, bottom (0) to top ------------------------------------------------------------------
# From ../shared/DESIGN.md ("Layers (imports only point down)") and docs/internals.md ("Map" and
# "Deliberate differences"). A module's floor is that of the longest key that is a prefix of its
# dotted name (relative to the package), so a package's entry covers its modules unless one of them
# has its own. A module may import its own floor or any lower one.
GROUND, OPS, KERNELS, GRAPH, EXECUTOR, RECORDING, DISPATCH, ARRAY, FACES = range(9)
FLOOR_NAMES = ["ground", "ops", "kernels", "graph", "executor", "recording", "dispatch", "ndarray", "faces"]
LAYERS = {
    # ground floor (DESIGN: device.py, errors.py). internals.md puts avals, storage containers,
    # random state and buffer versions here too (op rules need them and ops/ sits below graph/);
    # symbolic sizes (dim.py) are values avals hold; sbp.py holds SBP values and boxing costs (no
    # graph); fileio.py is atomic file writes.
    "device": GROUND, "errors": GROUND, "dim": GROUND, "aval": GROUND, "storage": GROUND, "rng": GROUND,
    "buffer": GROUND, "sbp": GROUND, "fileio": GROUND,
    # the mode flags every layer reads (deferred, recording, profiling) and the tuning table every
    # kernel reads: values, no behaviour, so any floor may read them
    "mode": GROUND, "tuning_table": GROUND,
    # caches.py: NamedCache, the one form of module-level mutable state besides the registry and tuning table
    "caches": GROUND,
    # args.py: the shared checks of public functions' plain-Python arguments (errors only)
    "args": GROUND,
    # user_frames.py: where the package's frames end and the user's begin (warnings, tracebacks)
    "user_frames": GROUND,
    # error_context.py: the note naming the block an error happened in, added once as it leaves blocks
    "error_context": GROUND,
    # gc_scope.py: when the package pauses CPython's cyclic GC (stdlib only; graph code and jit's numba import use it)
    "gc_scope": GROUND,
    # ops/: registry, typed params, rules, reference kernels over xp
    "ops": OPS,
    # kernels/ (being created): implementations, chooser, tuning, and the thread/BLAS runtime, whose
    # modules still live at the package root today
    "kernels": KERNELS, "threads": KERNELS, "jit": KERNELS, "jit_load": KERNELS, "jit_signatures": KERNELS,
    # graph/: Node, Symbol, passes, serialization; guards.py checks traces over graph nodes
    "graph": GRAPH, "guards": GRAPH,
    # executor: plan.py and program.py and the rest of executor/ run graphs on backend arrays
    "executor": EXECUTOR,
    # recording + materialization (DESIGN: deferred.py, autograd.py); the backward cache and the
    # autograd tape are autograd's runtime
    "deferred": RECORDING, "autograd": RECORDING, "backward_cache": RECORDING, "tape": RECORDING,
    "dispatch": DISPATCH,
    # the array type; display.py is its HTML view (reads graph nodes, never imports NDArray)
    "ndarray": ARRAY, "display": ARRAY,
    # faces users touch: cli, blocks/, interchange formats (onnx/, mxnet/), executor/cached_op.py
    # (the NDArray face of a program), distributed/, and the public functions built over NDArray
    # (internals.md: "arrays and the public functions"), the package's own __init__
    "executor.cached_op": FACES, "cli": FACES, "blocks": FACES, "onnx": FACES, "mxnet": FACES,
    "distributed": FACES, "functions": FACES, "creation": FACES, "random": FACES, "nn": FACES,
    "sparse": FACES, "sym": FACES, "tracing": FACES, "interop": FACES, "numpy_functions": FACES,
    "array_api": FACES, "array_api_dtypes": FACES, "linalg": FACES, "fft": FACES, "init": FACES, "lr_scheduler": FACES,
    "metric": FACES, "control_flow": FACES, "data": FACES, "_stubs": FACES, "": FACES,
    # formats.py: model and parameter files told apart by content and opened (over blocks/, mxnet/, onnx/)
    "formats": FACES,
    # amp.py: mixed precision (policy, loss scaling), over blocks/ and the trainer
    "amp": FACES,
}


def floor_of(mod: str, pkg: str = "lazyarray") -> int:
    """The floor of dotted module ``mod`` (``lazyarray.ops.conv`` -> OPS); unknown modules: FACES."""
    rel = mod[len(pkg) + 1:] if mod.startswith(pkg + ".") else ("" if mod == pkg else mod)
    parts = rel.split(".") if rel else []
    while parts:
        key = ".".join(parts)
        if key in LAYERS:
            return LAYERS[key]
        parts.pop()
    return LAYERS.get("", FACES)


# -- the source, parsed -----------------------------------------------------------------------------
@dataclass
class Import:
    module: str          # the importing module
    line: int
    targets: list        # package modules imported
    names: list          # (target module, imported name or None)
    in_function: bool
    type_checking: bool
    reason: str = ""     # the comment on the line or the line above (function imports)


@dataclass
class Report:
    package: str
    paths: dict                                   # module -> file path
    imports: list = field(default_factory=list)   # Import
    lines: dict = field(default_factory=dict)     # module -> line count
    functions: list = field(default_factory=list)  # (length, module, qualname)
    env_modules: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    state: list = field(default_factory=list)     # (module, name, line, kind): module-level mutable state

    def short(self, mod: str) -> str:
        return mod[len(self.package) + 1:] if mod.startswith(self.package + ".") else mod

    def edges(self, *, functions: bool = False, type_checking: bool = False) -> dict:
        out = defaultdict(set)
        for imp in self.imports:
            if (imp.in_function and not functions) or (imp.type_checking and not type_checking):
                continue
            for t in imp.targets:
                if t != imp.module:
                    out[imp.module].add(t)
        return out

    def cycles(self, **kw) -> list:
        return sccs(self.paths, self.edges(**kw))

    def upward(self) -> list:
        """Sorted (module, target, module's floor, target's floor) for imports pointing up."""
        out = set()
        for imp in self.imports:
            lo = floor_of(imp.module, self.package)
            for t in imp.targets:
                if t != imp.module and floor_of(t, self.package) > lo:
                    out.add((self.short(imp.module), self.short(t), lo, floor_of(t, self.package)))
        return sorted(out)

    def function_imports(self) -> list:
        return [imp for imp in self.imports if imp.in_function]

    def function_import_pairs(self) -> list:
        return sorted({(self.short(i.module), self.short(t)) for i in self.function_imports() for t in i.targets})

    def private_imports(self) -> list:
        """(module, target, name, line) for each ``_name`` imported from another package module."""
        out = []
        for imp in self.imports:
            for tgt, name in imp.names:
                if name and name.startswith("_") and not name.startswith("__") and tgt != imp.module:
                    out.append((self.short(imp.module), self.short(tgt), name, imp.line))
        return out

    def stray_state(self) -> list:
        """Sorted (module, name, line, kind) of module-level mutable state not in ``STATE_ALLOWED``."""
        return sorted((self.short(m), n, line, kind) for m, n, line, kind in self.state
                      if (self.short(m), n) not in STATE_ALLOWED)

    def long_files(self) -> list:
        return sorted(((n, self.short(m)) for m, n in self.lines.items() if n > LONG_FILE), reverse=True)

    def longest(self) -> tuple:
        return max(self.functions, default=(0, "-", "-"))

    def function_length(self, spec: str) -> int | None:
        """Length of ``path/to/module.py:Qual.name`` (None when there is no such function)."""
        path, _, qual = spec.partition(":")
        path = os.path.abspath(path)
        for n, mod, q in self.functions:
            if q == qual and os.path.abspath(self.paths[mod]) == path:
                return n
        return None


def _modules(pkg_dir: str) -> dict:
    """Dotted module name -> file path, for every .py file under pkg_dir (``__init__`` is the package)."""
    root = os.path.dirname(pkg_dir)
    out = {}
    for dirpath, dirnames, filenames in os.walk(pkg_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, fn), root)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                out[".".join(rel)] = os.path.join(dirpath, fn)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Collect(ast.NodeVisitor):
    """Every import statement with (in a function, under ``if TYPE_CHECKING:``)."""

    def __init__(self):
        self.found, self._func, self._tc = [], 0, 0

    def _scope(self, node):
        self._func += 1
        self.generic_visit(node)
        self._func -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope

    def visit_If(self, node):
        if not _is_type_checking(node.test):
            return self.generic_visit(node)
        self._tc += 1
        for child in node.body:
            self.visit(child)
        self._tc -= 1
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node):
        self.found.append((node, self._func > 0, self._tc > 0))

    visit_ImportFrom = visit_Import


def _resolve(mod: str, node, paths: dict) -> list:
    """[(target, imported name or None)] of one import statement in ``mod`` (targets may be external)."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names]
    if node.level:
        is_pkg = paths.get(mod, "").endswith("__init__.py")
        base = mod.split(".") if is_pkg else mod.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for a in node.names:
        sub = f"{target}.{a.name}" if target else a.name
        out.append((sub, a.name) if a.name != "*" and sub in paths else (target, a.name))
    return out


def _internal(target: str, paths: dict) -> str | None:
    parts = target.split(".")
    while parts:
        if ".".join(parts) in paths:
            return ".".join(parts)
        parts.pop()
    return None


def _reason(src_lines: list, line: int) -> str:
    """The comment on an import's line, else a comment line just above it."""
    text = src_lines[line - 1]
    if "#" in text:
        return text.split("#", 1)[1].strip()
    above = src_lines[line - 2].strip() if line >= 2 else ""
    return above[1:].strip() if above.startswith("#") else ""


def _reads_env(tree: ast.AST) -> bool:
    names = ("environ", "getenv", "environb")
    from_os = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and n.module == "os" and not n.level for a in n.names if a.name in names}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in names and isinstance(n.value, ast.Name) and n.value.id == "os":
            return True
        if isinstance(n, ast.Name) and n.id in from_os:
            return True
    return False


# -- module-level mutable state ---------------------------------------------------------------------
# Calls whose result is state by nature (a lock guards some, a thread-local holds some).
MUTABLE_CALLS = frozenset({"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event", "local"})
# Calls that make a container: state when a function changes it afterwards.
CONTAINER_CALLS = frozenset({"dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque",
                             "ChainMap", "WeakValueDictionary", "WeakKeyDictionary", "WeakSet"})
MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "discard", "add", "update",
                      "clear", "setdefault", "move_to_end", "appendleft", "popleft", "extendleft",
                      "difference_update", "intersection_update", "symmetric_difference_update", "sort", "reverse"})
# (module, name) -> what it is: the registries (ops, optimizers), the tuning table, bounded caches whose
# module has a ``clear()`` (``tests/test_architecture.py`` checks that it does), and the few process-wide
# owners that can be none of these, each with its reason (a weak table, a lock, a latch).
STATE_ALLOWED = {
    ("ops.registry", "_REGISTRY"): "registry: the ops by name",
    ("tuning_table", "_DEFAULT"): "tuning table: the process-wide defaults (la.config)",
    ("executor.recorded", "_PROGRAMS"): "cache: materialization's compiled programs (cache_size, graph_cache_bytes)",
    ("executor.recorded", "_SEEN"): "cache: structures seen once (4 x cache_size)",
    ("executor.recorded", "_LOCK"): "cache: guards the two above",
    ("executor.recorded", "_BYTES"): "cache: bytes the programs hold",
    ("executor.recorded", "_STATS"): "cache: hit and compile counters (stats())",
    ("backward_cache", "_CACHE"): "cache: compiled backward programs (cache_size)",
    ("backward_cache", "_LAST"): "cache: the last hit of the one above",
    ("backward_cache", "_LOCK"): "cache: guards the two above",
    ("backward_cache", "_TAGS"): "cache: leaf tags, as many as the most leaves one backward had",
    ("ops.derived", "_ENTRIES"): "cache: copies derived from weights (keep_weights_budget bytes, weakly keyed)",
    ("ops.derived", "_HELD"): "cache: bytes the one above holds",
    ("ops.derived", "_lock"): "cache: guards the two above",
    ("distributed.worker", "_LOCK"): "cache: one thread compiles a region at a time (PROGRAMS, PARSED)",
    ("graph.build", "_SCALAR_NODES"): "cache: shared scalar constants (4096)",
    ("graph.build", "SCALAR_BESIDE"): "cache: the same constants by the array's dtype (cleared with the above)",
    ("graph.build", "_SCALAR_DTYPES"): "cache: a scalar's dtype beside given dtypes (one per dtype combination)",
    ("graph.node", "IN_PACKAGE"): "cache: code object -> is it the package's (IN_PACKAGE_CACHE_SIZE)",
    ("dispatch", "_AVALS_BY_ID"): "cache: output avals by input avals' identity (4096)",
    ("dispatch", "_SITES"): "cache: user call sites that recorded nodes (4096)",
    ("dispatch", "_OPERATORS"): "cache: operator methods, one pair per ufunc op",
    ("dispatch", "_SCALARS_BY_AVAL"): "cache: scalar constants by the array's aval (4096)",
    ("blocks.optimizers.base", "OPTIMIZERS"): "registry: optimizer classes by lower-case name (@register at "
                                              "import; la.blocks.optimizer.register adds a user's)",
    # Weak tables: an entry lives exactly as long as its key (the memory's root, the node). Bounded by what
    # is alive; a bound or a clear() would forget facts that correctness rests on.
    ("buffer", "_VERSIONS"): "weak table: the write count of each root of memory (forgetting one: a saved value "
                             "read after a write would pass its version check)",
    ("buffer", "_EXPOSED"): "weak table: memory handed out writable (forgetting one: a copy derived from it "
                            "would be trusted after an unseen write)",
    ("deferred", "_FIXED"): "weak table: random draws and saved values kept per node while it lives (forgetting "
                            "one: the node computed again, a different draw)",
    ("blocks.parameter", "INIT_LOCK"): "lock: first calls from several threads take turns (deferred init, shape "
                                       "inference, a new trace); a lock per parameter would stop it pickling "
                                       "(DataParallel sends parameters to its workers)",
    ("blocks.parameter", "MULTI_DEVICE"): "latch: True once any parameter lives on several devices, blocks then run "
                                          "forward under their input's device (off again would pick wrong copies)",
}
# The kinds STATE_ALLOWED may name (``tests/test_architecture.py`` checks each entry's).
STATE_KINDS = ("registry", "tuning table", "cache", "weak table", "lock", "latch")


def _module_bindings(body: list):
    """Module-level statements, ``if`` / ``try`` blocks included (not functions or classes)."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try)):
            yield from _module_bindings(node.body)
            yield from _module_bindings(node.orelse)
            for h in getattr(node, "handlers", ()):
                yield from _module_bindings(h.body)
            yield from _module_bindings(getattr(node, "finalbody", ()))
        else:
            yield node


def _unbounded_cache(node) -> bool:
    """A module-level function memoized without a bound (``functools.cache``, ``lru_cache(maxsize=None)``)."""
    for d in getattr(node, "decorator_list", ()):
        name = d.func if isinstance(d, ast.Call) else d
        name = name.id if isinstance(name, ast.Name) else name.attr if isinstance(name, ast.Attribute) else ""
        if name == "cache" or (name == "lru_cache" and isinstance(d, ast.Call) and any(
                k.arg == "maxsize" and isinstance(k.value, ast.Constant) and k.value.value is None
                for k in d.keywords)):
            return True
    return False


def _made(value) -> str | None:
    """"state" (a lock, a thread-local), "container" (a dict/list/set made here) or None."""
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return "container"
    if isinstance(value, ast.Call):
        f = value.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return "state" if name in MUTABLE_CALLS else "container" if name in CONTAINER_CALLS else None
    return None


def _candidates(tree: ast.AST) -> dict:
    """name -> (line, what) of module-level bindings: "state", "container" or another "value"."""
    out = {}
    for node in _module_bindings(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _unbounded_cache(node):
            out[node.name] = (node.lineno, "state")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        what = (_made(node.value) or "value") if targets else None
        for t in targets:
            if isinstance(t, ast.Name) and t.id != "__all__":
                out.setdefault(t.id, (node.lineno, what))
    return out


def _changed(tree: ast.AST, mod: str, paths: dict) -> set:
    """(module, name) of module-level names that functions of this module change: ``N[k] = v``,
    ``del N[k]``, ``N[k] += v``, ``N.append(...)`` and the like (``N``: a name of this module, one
    imported ``from`` another, or ``alias.N`` of an imported module); (module, name, "global") for
    the names a ``global`` statement lets a function rebind."""
    names, modules = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for tgt, name in _resolve(mod, node, paths):
                a = next(x for x in node.names if x.name == name)
                if tgt.endswith("." + name) and tgt in paths:
                    modules[a.asname or name] = tgt
                elif tgt in paths:
                    names[a.asname or name] = (tgt, name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in paths:
                    modules[a.asname] = a.name

    def owner(expr):
        if isinstance(expr, ast.Name):
            return names.get(expr.id, (mod, expr.id))
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in modules:
            return modules[expr.value.id], expr.attr
        return None

    out = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out |= _changes_in(fn, mod, owner)
    out.discard(None)
    return out


def _changes_in(fn, mod: str, owner) -> set:
    """``_changed`` for one function; ``owner(expr)`` says whose name an expression is."""
    local = {}  # ``cache = _CACHE`` inside the function: changes to ``cache`` change ``_CACHE``
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.Name, ast.Attribute)) and owner(node.value) is not None):
            local[node.targets[0].id] = owner(node.value)

    def whose(expr):
        return local[expr.id] if isinstance(expr, ast.Name) and expr.id in local else owner(expr)

    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Global):
            out.update((mod, n, "global") for n in node.names)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(whose(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            out.add(whose(node.func.value))
    return out


def _is_state(mod: str, name: str, what: str, changed: set) -> bool:
    """A lock or thread-local; a container some function changes; any name a function rebinds."""
    return (what == "state" or (what == "container" and (mod, name) in changed)
            or (mod, name, "global") in changed)


def _functions(tree: ast.AST, mod: str) -> list:
    out, stack = [], [(tree, "")]
    while stack:
        parent, prefix = stack.pop()
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = prefix + node.name
                out.append((node.end_lineno - node.lineno + 1, mod, qual))
                stack.append((node, qual + "."))
            elif isinstance(node, ast.ClassDef):
                stack.append((node, f"{prefix}{node.name}."))
            else:
                stack.append((node, prefix))
    return out


def analyze(pkg_dir: str) -> Report:
    pkg_dir = os.path.abspath(pkg_dir)
    paths = _modules(pkg_dir)
    rep = Report(os.path.basename(pkg_dir), paths)
    candidates, changed = {}, set()
    for mod, path in sorted(paths.items()):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        rep.lines[mod] = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            rep.errors.append(f"{path}: {exc}")
            continue
        src = text.splitlines()
        collect = _Collect()
        collect.visit(tree)
        for node, in_func, in_tc in collect.found:
            names = [(t, name) for target, name in _resolve(mod, node, paths)
                     if (t := _internal(target, paths)) is not None]
            if names:
                targets = sorted({t for t, _ in names})
                rep.imports.append(Import(mod, node.lineno, targets, names, in_func, in_tc,
                                          _reason(src, node.lineno) if in_func else ""))
        if _reads_env(tree):
            rep.env_modules.append(mod)
        rep.functions.extend(_functions(tree, mod))
        candidates[mod] = _candidates(tree)
        changed |= _changed(tree, mod, paths)
    rep.state = sorted((mod, name, line, what) for mod, found in candidates.items()
                       for name, (line, what) in found.items() if _is_state(mod, name, what, changed))
    return rep


def sccs(nodes, edges) -> list:
    """Strongly connected components of more than one node (Tarjan, iterative), sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        work = [(start, iter(sorted(edges.get(start, ()))))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out, key=lambda c: (-len(c), c))


# -- the table --------------------------------------------------------------------------------------
def rows(rep: Report, function: str | None = None) -> list:
    """(metric, current, target text, met) per row."""
    func = rep.function_imports()
    pairs = rep.function_import_pairs()
    unexplained = sum(1 for i in func if not i.reason)
    longest = rep.longest()
    out = [
        ("import cycles (module level)", len(rep.cycles()), "0", not rep.cycles()),
        ("import cycles (+ TYPE_CHECKING)", len(rep.cycles(type_checking=True)), "0",
         not rep.cycles(type_checking=True)),
        ("import cycles (+ function imports)", len(rep.cycles(functions=True)), "0",
         not rep.cycles(functions=True)),
        ("upward imports", len(rep.upward()), "0", not rep.upward()),
        ("imports inside functions (pairs)", len(pairs), "<= 5, each with a reason",
         len(pairs) <= 5 and not unexplained),
        ("  of their statements, without a reason", unexplained, "0", not unexplained),
        ("private imports across modules", len(rep.private_imports()), "<= 20", len(rep.private_imports()) <= 20),
        ("modules reading the environment", len(rep.env_modules), "1", len(rep.env_modules) == 1),
        ("module-level mutable state outside the registry, tuning table and named caches",
         len(rep.stray_state()), "0", not rep.stray_state()),
        (f"files over {LONG_FILE} lines", len(rep.long_files()), "0", not rep.long_files()),
        (f"longest function ({rep.short(longest[1])}:{longest[2]})", longest[0], f"<= {LONG_FUNCTION}",
         longest[0] <= LONG_FUNCTION),
    ]
    if function:
        n = rep.function_length(function)
        out.append((f"length of {function}", "absent" if n is None else n, f"<= {LONG_FUNCTION}",
                    n is not None and n <= LONG_FUNCTION))
    return out


def print_report(rep: Report, function: str | None = None, details: bool = True) -> None:
    table = rows(rep, function)
    w = max(len(r[0]) for r in table)
    print(f"{'metric':<{w}}  {'now':>5}  {'target':<26} met")
    print("-" * (w + 40))
    for name, now, target, met in table:
        print(f"{name:<{w}}  {now!s:>5}  {target:<26} {'yes' if met else 'NO'}")
    if not details:
        return
    for e in rep.errors:
        print(f"syntax error: {e}")
    for title, kw in (("module level", {}), ("+ TYPE_CHECKING", {"type_checking": True}),
                      ("+ function imports", {"functions": True})):
        comps = rep.cycles(**kw)
        if comps:
            print(f"\nimport cycles ({title}):")
            for c in comps:
                print(f"  [{len(c)}] " + ", ".join(rep.short(m) for m in c))
    up = rep.upward()
    if up:
        print("\nupward imports (module [floor] -> module [floor]):")
        for m, t, lo, hi in up:
            print(f"  {m} [{FLOOR_NAMES[lo]}] -> {t} [{FLOOR_NAMES[hi]}]")
    func = rep.function_imports()
    if func:
        print("\nimports inside functions (statement -> modules: reason):")
        for i in func:
            print(f"  {rep.short(i.module)}:{i.line} -> {', '.join(rep.short(t) for t in i.targets)}: "
                  f"{i.reason or '(no reason given)'}")
    by_name = defaultdict(int)
    for m, t, name, line in rep.private_imports():
        by_name[(t, name)] += 1
    if by_name:
        print("\nprivate names imported across modules:")
        for (t, name), k in sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {t}.{name}" + (f" x{k}" if k > 1 else ""))
    print("\nmodules reading the environment: " + ", ".join(rep.short(m) for m in rep.env_modules))
    stray = rep.stray_state()
    if stray:
        print(f"\nmodule-level mutable state outside the registry, tuning table and named caches ({len(stray)}):")
        for m, n, line, what in stray:
            print(f"  {m}:{line} {n}" + {"state": " (lock / thread-local)", "value": " (rebound: global)"}.get(what, ""))
    for n, m in rep.long_files():
        print(f"file over {LONG_FILE} lines: {m} ({n})")
    longer = sorted((f for f in rep.functions if f[0] > LONG_FUNCTION), reverse=True)
    print(f"\nfunctions over {LONG_FUNCTION} lines: {len(longer)}")
    for n, m, q in longer[:10]:
        print(f"  {n:5d} {rep.short(m)}:{q}")


def main(argv=None) -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", default=os.path.join(here, "lazyarray"), help="the package directory")
    ap.add_argument("--function", help="FILE:QUALNAME, e.g. lazyarray/ops/conv.py:_conv2d")
    ap.add_argument("--table", action="store_true", help="the table only")
    args = ap.parse_args(argv)
    rep = analyze(args.package)
    print_report(rep, args.function, details=not args.table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
