"""``Block.summary``'s table: the blocks a call runs, their output shapes and parameter counts."""
from __future__ import annotations

import numpy as np

from ..autograd import pause
from ..ndarray import NDArray
from .parameter import Parameter


def summary_table(net, inputs) -> str:
    """The table ``net.summary(*inputs)`` prints (Gluon's ``Block.summary``): it runs ``net`` on
    ``inputs`` imperatively with forward hooks (hybridized blocks switched off meanwhile), in
    inference mode."""
    rows: list[tuple[str, object, object]] = []
    paths = {id(net): "(top)"}

    def walk(block, prefix: str) -> None:
        for name, child in block.children():
            paths.setdefault(id(child), prefix + name)
            walk(child, f"{prefix}{name}.")

    walk(net, "")
    handles, hybrid = [], []

    def visit(block) -> None:
        handles.append(block.register_forward_hook(lambda b, args, out: rows.append((paths[id(b)], b, out))))
        if getattr(block, "_active", False):  # a hybridized block: run imperatively, so its children are seen
            hybrid.append(block)
            object.__setattr__(block, "_active", False)

    net.apply(visit)
    try:
        with pause(train_mode=False):
            net(*inputs)
    finally:
        for h in handles:
            h.detach()
        for b in hybrid:
            object.__setattr__(b, "_active", True)

    def shape_of(out) -> str:
        if isinstance(out, NDArray):
            return str(tuple(out.shape))
        if isinstance(out, (list, tuple)):
            return ", ".join(shape_of(o) for o in out)
        return type(out).__name__

    def count(p: Parameter) -> int:
        return int(np.prod(p.shape)) if p.shape is not None else 0

    line = "-" * 80
    out = [line, f"{'Layer (type)':>28}{'Output Shape':>44}{'Param #':>16}", "=" * 80]
    out.append(f"{'Input':>28}{shape_of(list(inputs) if len(inputs) > 1 else inputs[0]):>44}{0:>16}")
    for path, block, value in rows:
        n = sum(count(p) for p in block._params.values())
        out.append(f"{path + ' (' + type(block).__name__ + ')':>28}{shape_of(value):>44}{n:>16}")
    params = net.collect_params().values()
    total = sum(count(p) for p in params)
    trainable = sum(count(p) for p in params if p.grad_req != "null")
    out += ["=" * 80, f"Total params: {total}", f"Trainable params: {trainable}",
            f"Non-trainable params: {total - trainable}", line]
    return "\n".join(out)

