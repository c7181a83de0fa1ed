"""ONNX's nine "light" real models (``onnx/backend/test/data/light``) and the data ONNX's harness feeds them.

The installed ``onnx`` ships ``light_<name>.onnx`` (opset 9 copies of AlexNet, DenseNet-121,
Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19 and ZFNet-512 whose weights are
``ConstantOfShape`` fills) with ``light_<name>_output_0.pb``, the reference output. ONNX's backend
test runner (``onnx.backend.test.runner``, the ``Real`` kind) does not store their input: it makes
it with ``Runner.generate_dummy_data(input, seed=0, random=False)``, which is
``arange(n).reshape(shape) / n`` in float32 (unknown dimensions read as 1). ``harness_inputs``
calls that same function, so our check feeds exactly what the harness feeds.

Most reference outputs are a uniform softmax (every class 0.001: the constant weights give equal
logits), which a wrong network could match too; ``with_logits`` adds the input of the last
``Softmax`` as a second graph output, so tests compare the logits with onnxruntime as well.
``tests/onnx/test_light_models.py`` and ``benchmarks/onnx_conformance.py --models`` use this.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

NAMES = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
         "vgg19", "zfnet512")
LOGITS = "logits"  # the name ``with_logits`` gives the extra output


def light_dir() -> str:
    """Where the installed onnx keeps ``backend/test/data/light``."""
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


@dataclass
class LightModel:
    """One light model: ``name`` (``"resnet50"``), the model file and its reference output file."""

    name: str
    path: str
    output_path: str

    def load(self):
        import onnx
        return onnx.load(self.path)

    def reference(self) -> np.ndarray:
        """The shipped reference output (``light_<name>_output_0.pb``)."""
        import onnx
        from onnx import numpy_helper
        t = onnx.TensorProto()
        with open(self.output_path, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)


def light_models() -> list[LightModel]:
    """The light models the installed onnx ships (those of ``NAMES`` present), in ``NAMES`` order."""
    d = light_dir()
    out = []
    for name in NAMES:
        path, ref = os.path.join(d, f"light_{name}.onnx"), os.path.join(d, f"light_{name}_output_0.pb")
        if os.path.exists(path) and os.path.exists(ref):
            out.append(LightModel(name, path, ref))
    return out


def data_inputs(model) -> list:
    """The graph inputs that are not initializers (``ValueInfoProto``; IR 3 lists initializers as inputs too)."""
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def harness_inputs(model, name: str = "") -> dict[str, np.ndarray]:
    """Input name -> the array ONNX's backend test runner feeds ``model`` (its own generator, same arguments)."""
    from onnx.backend.test.runner import Runner
    return {vi.name: Runner.generate_dummy_data(vi, seed=0, name=name, random=False) for vi in data_inputs(model)}


def with_logits(model):
    """A copy of ``model`` whose graph also outputs the input of its last ``Softmax`` (named ``LOGITS``
    through an ``Identity``); ``model`` itself when it has no ``Softmax``."""
    import onnx
    from onnx import helper
    softmax = [nd for nd in model.graph.node if nd.op_type == "Softmax"]
    if not softmax:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.node.append(helper.make_node("Identity", [softmax[-1].input[0]], [LOGITS], name="expose_logits"))
    out.graph.output.append(helper.make_tensor_value_info(LOGITS, onnx.TensorProto.FLOAT, None))
    return out
