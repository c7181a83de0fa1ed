"""Fused elementwise groups on the GPU: one CuPy ``ElementwiseKernel`` per group.

On the CPU a ``fused`` node runs its group chunk by chunk through NumPy ufuncs (``fusion.py``).
On a GPU the same group becomes a single CUDA kernel: each thread reads its element of every
operand once, evaluates the whole group in registers and writes one output element, so memory
sees the inputs once and the output once and there is one kernel launch per group.

* **The C form of an op** (``C_FORMS``): a function from the operands' C expressions (already
  cast to the op's computation type) to the op's C expression, for the dtypes it is exact on.
  An op, or a dtype, without a form is not fusible on a GPU: the group stops there (a sound
  default: CUDA's integer division, shifts and remainders differ from NumPy's at the edges, so
  those ops have no form).
* **Computation types follow NumPy's loops**: arithmetic computes in the node's result dtype
  (``int32 + float32`` is a ``double`` sum, as in NumPy's ``dd->d`` loop), comparisons in the
  operands' common dtype; every intermediate is a typed local (``float t3 = ...;``), so each step
  rounds exactly where NumPy's step rounds. Math functions are called by their generic names
  (``exp``, ``tanh``, ``erf``), which CUDA C++ overloads per type.
* **The kernel** is compiled once per group (``kernel_of`` caches it on the group's subgraph);
  CuPy's ``ElementwiseKernel`` broadcasts the operands (a bias row, a scalar) over the output.

``kernel_source`` is plain text, so the CPU test suite checks every form against NumPy by
compiling the same body with the C compiler (``tests/executor/test_fusion_gpu.py``); the CuPy
test runs the kernels on a GPU where one is present.
"""
from __future__ import annotations

import hashlib

import numpy as np

C_TYPES = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "signed char", np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short", np.dtype(np.uint16): "unsigned short", np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int", np.dtype(np.int64): "long long",
    np.dtype(np.uint64): "unsigned long long", np.dtype(np.float32): "float", np.dtype(np.float64): "double",
}

_SQRT_HALF = 0.7071067811865476  # 1 / sqrt(2), as in ops/norm.py
_TANH_C = 0.7978845608028654  # sqrt(2 / pi)
_TANH_A = 0.044715


def _float(d) -> bool:
    return d.kind == "f"


def _num(d) -> bool:
    return d.kind in "iuf"


def _const(value: float, ctype: str) -> str:
    return f"(({ctype}){float(value)!r})"


# Each form: (accepts(in_dtypes, out_dtype) -> bool, loop(in_dtypes, out_dtype) -> dtype to cast
# operands to, expr(args, ctype, params) -> C expression). ``args`` are the cast operands.
def _out_loop(ins, out):
    return out


def _common_loop(ins, out):
    return np.result_type(*ins)


def _unary_float(fn: str):
    return (lambda ins, out: _float(out) and _float(ins[0]), _out_loop, lambda a, t, p: f"{fn}({a[0]})")


def _binary_float(fn: str):
    return (lambda ins, out: _float(out), _out_loop, lambda a, t, p: f"{fn}({a[0]}, {a[1]})")


def _arith(op: str):
    return (lambda ins, out: _num(out) and all(_num(d) for d in ins), _out_loop,
            lambda a, t, p: f"({a[0]} {op} {a[1]})")


def _compare(op: str):
    return (lambda ins, out: all(_num(d) or d.kind == "b" for d in ins), _common_loop,
            lambda a, t, p: f"({a[0]} {op} {a[1]})")


def _extreme(op: str):
    # NumPy's maximum/minimum propagate NaN from either side; ``a != a`` is true only for NaN
    def expr(a, t, p):
        x, y = a
        return f"((({x}) != ({x}) || ({x}) {op} ({y})) ? ({x}) : ({y}))"

    return (lambda ins, out: _num(out), _out_loop, expr)


def _sigmoid(a, t, p):
    # the registry kernel's formula: e = exp(-|x|); 1 / (1 + e) for x >= 0, e / (1 + e) below
    x = a[0]
    e = f"exp(-fabs({x}))"
    pos = f"({_const(1, t)} / ({_const(1, t)} + {e}))"
    return f"(({x}) >= {_const(0, t)} ? {pos} : ({e} * {pos}))"


def _gelu(a, t, p):
    x = a[0]
    if p.get("approximation", "none") == "tanh":
        # u = ((x*x) * (A*C) + C) * x; 0.5 * ((tanh(u) + 1) * x), the registry kernel's order
        u = f"((({x} * {x}) * {_const(_TANH_A * _TANH_C, t)} + {_const(_TANH_C, t)}) * {x})"
        return f"(((tanh(({t}){u}) + {_const(1, t)}) * {x}) * {_const(0.5, t)})"
    return f"(((erf(({t})({x} * {_const(_SQRT_HALF, t)})) + {_const(1, t)}) * {x}) * {_const(0.5, t)})"


def _quadratic(a, t, p):
    x = a[0]
    return (f"(({_const(p.get('a', 0.0), t)} * {x} + {_const(p.get('b', 0.0), t)}) * {x}"
            f" + {_const(p.get('c', 0.0), t)})")


def _sign(a, t, p):
    x = a[0]
    return f"(({x}) != ({x}) ? ({x}) : ({t})((({x}) > 0) - (({x}) < 0)))"


def _heaviside(a, t, p):
    x, h = a
    return (f"(({x}) != ({x}) ? ({x}) : (({x}) < {_const(0, t)} ? {_const(0, t)}"
            f" : (({x}) > {_const(0, t)} ? {_const(1, t)} : ({h}))))")


def _abs(a, t, p):
    x = a[0]
    return f"fabs({x})" if t in ("float", "double") else f"(({x}) < 0 ? -({x}) : ({x}))"


def _relu(a, t, p):
    x = a[0]
    return f"((({x}) != ({x}) || ({x}) > {_const(0, t)}) ? ({x}) : {_const(0, t)})"


def _is_float_in(ins, out):
    return _float(ins[0])


def _int_or_bool(ins, out):
    return all(d.kind in "iub" for d in ins)


_ANY_NUM = (lambda ins, out: _num(out) and all(_num(d) for d in ins), _out_loop)

C_FORMS: dict[str, tuple] = {
    **{name: _unary_float(name) for name in (
        "exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "expm1", "log1p", "log2", "log10",
        "floor", "ceil", "trunc")},
    "asin": _unary_float("asin"), "acos": _unary_float("acos"), "atan": _unary_float("atan"),
    "asinh": _unary_float("asinh"), "acosh": _unary_float("acosh"), "atanh": _unary_float("atanh"),
    "round": _unary_float("rint"),  # NumPy rounds half to even, as rint does in the default mode
    "atan2": _binary_float("atan2"), "hypot": _binary_float("hypot"), "copysign": _binary_float("copysign"),
    "power": _binary_float("pow"),
    "add": _arith("+"), "subtract": _arith("-"), "multiply": _arith("*"),
    "divide": (lambda ins, out: _float(out), _out_loop, lambda a, t, p: f"({a[0]} / {a[1]})"),
    "negative": (*_ANY_NUM, lambda a, t, p: f"(-{a[0]})"),
    "positive": (*_ANY_NUM, lambda a, t, p: f"({a[0]})"),
    "square": (*_ANY_NUM, lambda a, t, p: f"({a[0]} * {a[0]})"),
    "reciprocal": (lambda ins, out: _float(out), _out_loop, lambda a, t, p: f"({_const(1, t)} / {a[0]})"),
    "abs": (*_ANY_NUM, _abs),
    "relu": (*_ANY_NUM, _relu),
    # g * (y > 0), as the registry kernel: a NaN or -0 in g stays one where y <= 0 (NaN * 0, -g * 0)
    "relu_grad": (lambda ins, out: _float(out) and ins[0] == ins[1] == out, _out_loop,
                  lambda a, t, p: f"({a[1]} * (({t})({a[0]} > {_const(0, t)})))"),
    "sign": (*_ANY_NUM, _sign),
    "maximum": _extreme(">"), "minimum": _extreme("<"),
    "sigmoid": (lambda ins, out: _float(out) and _float(ins[0]), _out_loop, _sigmoid),
    "gelu": (lambda ins, out: _float(out) and _float(ins[0]), _out_loop, _gelu),
    "quadratic": (lambda ins, out: _float(out) and _num(ins[0]), _out_loop, _quadratic),
    "heaviside": (lambda ins, out: _float(out), _out_loop, _heaviside),
    "equal": _compare("=="), "not_equal": _compare("!="), "less": _compare("<"),
    "less_equal": _compare("<="), "greater": _compare(">"), "greater_equal": _compare(">="),
    "logical_and": (lambda ins, out: True, lambda ins, out: np.dtype(bool),
                    lambda a, t, p: f"({a[0]} && {a[1]})"),
    "logical_or": (lambda ins, out: True, lambda ins, out: np.dtype(bool), lambda a, t, p: f"({a[0]} || {a[1]})"),
    "logical_xor": (lambda ins, out: True, lambda ins, out: np.dtype(bool), lambda a, t, p: f"({a[0]} != {a[1]})"),
    "logical_not": (lambda ins, out: True, lambda ins, out: np.dtype(bool), lambda a, t, p: f"(!{a[0]})"),
    "isnan": (_is_float_in, lambda ins, out: ins[0], lambda a, t, p: f"(bool)isnan({a[0]})"),
    "isinf": (_is_float_in, lambda ins, out: ins[0], lambda a, t, p: f"(bool)isinf({a[0]})"),
    "isfinite": (_is_float_in, lambda ins, out: ins[0], lambda a, t, p: f"(bool)isfinite({a[0]})"),
    "signbit": (_is_float_in, lambda ins, out: ins[0], lambda a, t, p: f"(bool)signbit({a[0]})"),
    "bitwise_and": (_int_or_bool, _out_loop, lambda a, t, p: f"({a[0]} & {a[1]})"),
    "bitwise_or": (_int_or_bool, _out_loop, lambda a, t, p: f"({a[0]} | {a[1]})"),
    "bitwise_xor": (_int_or_bool, _out_loop, lambda a, t, p: f"({a[0]} ^ {a[1]})"),
    "bitwise_invert": (lambda ins, out: ins[0].kind in "iu", _out_loop, lambda a, t, p: f"(~{a[0]})"),
    "where": (lambda ins, out: out in C_TYPES, _out_loop, None),  # the condition stays bool (below)
}


def gpu_form(node) -> bool:
    """Whether ``node`` (one output, concrete dtypes) has an exact C form."""
    form = C_FORMS.get(node.op.name)
    if form is None:
        return False
    ins = [e.aval.dtype for e in node.inputs]
    out = node.avals[0].dtype
    if out not in C_TYPES or any(d not in C_TYPES for d in ins):
        return False
    return bool(form[0](ins, out))


def _node_expr(node, args: list[str], in_dtypes: list) -> str:
    name = node.op.name
    out = node.avals[0].dtype
    ctype = C_TYPES[out]
    if name == "where":
        c, a, b = args
        return f"(({c}) ? ({ctype})({a}) : ({ctype})({b}))"
    accepts, loop, expr = C_FORMS[name]
    lt = C_TYPES[np.dtype(loop(in_dtypes, out))]
    cast = [f"(({lt})({a}))" for a in args]
    return f"({ctype})({expr(cast, lt, dict(node.params))})"


def kernel_source(sub) -> tuple[str, str, str, str]:
    """``(in_params, out_params, operation, name)`` of the ``ElementwiseKernel`` for a fused group
    (``sub``: the ``fused`` node's ``graph`` parameter, a ``SubGraph``)."""
    names: dict[int, str] = {}
    params = []
    for i, v in enumerate(sub.inputs):
        names[id(v)] = f"in{i}"
        params.append(f"{np.dtype(v.avals[0].dtype).name} in{i}")
    lines = []
    root = sub.sym.outputs[0].node
    order = [n for n in sub.sym.topo() if n.op is not None]
    for k, n in enumerate(order):
        args = [names[id(e.node)] for e in n.inputs]
        expr = _node_expr(n, args, [e.aval.dtype for e in n.inputs])
        if n is root:
            lines.append(f"out0 = {expr};")
        else:
            names[id(n)] = f"t{k}"
            lines.append(f"const {C_TYPES[n.avals[0].dtype]} t{k} = {expr};")
    out = f"{np.dtype(root.avals[0].dtype).name} out0"
    body = "\n".join(lines)
    name = "lazyarray_fused_" + hashlib.sha1((", ".join(params) + out + body).encode()).hexdigest()[:12]
    return ", ".join(params), out, body, name


def kernel_of(xp, sub):
    """The compiled ``ElementwiseKernel`` of a fused group, built once per group."""
    k = getattr(sub, "_gpu_kernel", None)
    if k is None or k[0] is not xp:
        k = sub._gpu_kernel = (xp, xp.ElementwiseKernel(*kernel_source(sub)))
    return k[1]


def run(xp, sub, arrays, out=None):
    """Evaluate the group on the GPU arrays ``arrays`` into ``out`` (fresh when ``None``)."""
    aval = sub.avals[0]
    if out is None:
        out = xp.empty(aval.shape, aval.dtype)
    kernel_of(xp, sub)(*arrays, out)
    return out
