"""ONNX CenterCropPad -> registry ops: per listed axis, a centred slice where the target is smaller
and a centred zero padding where it is larger (the odd extra element goes to the end both ways)."""
from __future__ import annotations

from .. import sym as S
from .import_ops import Converter, OnnxNode


def center_crop_pad(n: OnnxNode) -> list:
    n.arity(2)
    x = n.inputs[0]
    shape = n.known_shape(0, "CenterCropPad")
    target = n.ints(1, "CenterCropPad shape")
    axes = [a % len(shape) for a in n.attr("axes", range(len(shape)))]
    if len(target) != len(axes):
        n.fail(f"CenterCropPad shape {target} has {len(target)} entries for {len(axes)} axes")
    key, pads = [slice(None)] * len(shape), [(0, 0)] * len(shape)
    for a, want in zip(axes, target):
        have = shape[a]
        if want < have:
            start = (have - want) // 2
            key[a] = slice(start, start + want)
        elif want > have:
            before = (want - have) // 2
            pads[a] = (before, want - have - before)
    y = S.getitem(x, key=tuple(key))
    return [S.pad(y, pad_width=tuple(pads)) if any(p != (0, 0) for p in pads) else y]


CROP_CONVERTERS: dict[str, Converter] = {"CenterCropPad": center_crop_pad}
