"""ResNet v1 (He et al., 2015) built from ``la.blocks`` layers: ``resnet18``.

The layout follows Gluon's model zoo (``ResNetV1`` with ``BasicBlockV1``): a stem, four stages
of two basic blocks each (64, 128, 256, 512 channels; the last three halve the resolution),
global average pooling and a ``Dense`` classifier. Convolutions have no bias (a BatchNorm
follows each one).
"""
from __future__ import annotations

from collections.abc import Sequence

from ...args import int_arg, seq_arg
from ...errors import ParamValueError
from ..block import HybridBlock
from ..containers import HybridSequential
from ..conv import Conv2D, GlobalAvgPool2D, MaxPool2D
from ..nn import Activation, BatchNorm, Dense, F
from ..residual import Residual


def _conv3x3(channels: int, stride: int, in_channels: int = 0) -> Conv2D:
    return Conv2D(channels, 3, strides=stride, padding=1, use_bias=False, in_channels=in_channels)


class BasicBlock(HybridBlock):
    """ResNet v1 basic block: ``relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x))``.

    The shortcut is the identity, or a strided 1x1 convolution + BatchNorm when the block changes
    the resolution (``stride > 1``) or the channel count.

    >>> import lazyarray as la
    >>> block = la.blocks.models.resnet.BasicBlock(8, stride=2, in_channels=4)
    >>> block.initialize()
    >>> block(la.ones((1, 4, 8, 8))).shape
    (1, 8, 4, 4)
    """

    def __init__(self, channels: int, stride: int = 1, in_channels: int = 0):
        super().__init__()
        body = HybridSequential().add(_conv3x3(channels, stride, in_channels), BatchNorm(),
                                      Activation("relu"), _conv3x3(channels, 1, channels), BatchNorm())
        shortcut = None
        if stride != 1 or in_channels != channels:
            shortcut = HybridSequential().add(
                Conv2D(channels, 1, strides=stride, use_bias=False, in_channels=in_channels), BatchNorm())
        self.residual = Residual(body, shortcut)

    def forward(self, x):
        return F.relu(self.residual(x))


class ResNetV1(HybridBlock):
    """ResNet v1 of ``BasicBlock`` stages: ``features`` (stem, stages, global average pooling)
    then ``output`` (``Dense(classes)``).

    ``layers``: blocks per stage; ``channels``: the stem's and each stage's channel counts.
    ``thumbnail=True``: a CIFAR-style stem for 32x32 images (3x3 conv stride 1, BatchNorm,
    relu; no max pool); ``False``: the ImageNet stem (7x7 conv stride 2, BatchNorm, relu, 3x3
    max pool stride 2). Gluon's thumbnail stem is the bare 3x3 convolution; the BatchNorm and
    relu here are the usual CIFAR ResNet's, and train better.

    >>> import lazyarray as la
    >>> net = la.blocks.models.resnet.ResNetV1([1, 1], [8, 8, 16], classes=3)
    >>> net.initialize()
    >>> net(la.ones((2, 3, 16, 16))).shape
    (2, 3)
    """

    def __init__(self, layers: Sequence[int], channels: Sequence[int], classes: int = 10, thumbnail: bool = True):
        layers = seq_arg(layers, "ResNetV1", "layers", "a list of block counts per stage, e.g. [2, 2, 2, 2]")
        channels = seq_arg(channels, "ResNetV1", "channels",
                           "a list of channel counts (the stem's, then each stage's), e.g. (64, 64, 128, 256, 512)")
        layers = [int_arg(n, "ResNetV1", f"layers[{i}]", lo=0) for i, n in enumerate(layers)]
        super().__init__()
        if len(channels) != len(layers) + 1:
            raise ParamValueError(f"ResNetV1: channels needs one count for the stem and one per stage "
                                  f"({len(layers) + 1}), got {list(channels)}")
        self.features = HybridSequential()
        if thumbnail:
            self.features.add(_conv3x3(channels[0], 1, 3), BatchNorm(), Activation("relu"))
        else:
            self.features.add(Conv2D(channels[0], 7, strides=2, padding=3, use_bias=False, in_channels=3),
                              BatchNorm(), Activation("relu"), MaxPool2D(3, 2, 1))
        in_channels = channels[0]
        for i, (n, c) in enumerate(zip(layers, channels[1:])):
            stage = HybridSequential()
            for j in range(n):
                stage.add(BasicBlock(c, 2 if i > 0 and j == 0 else 1, in_channels))
                in_channels = c
            self.features.add(stage)
        self.features.add(GlobalAvgPool2D())
        self.output = Dense(classes, in_units=in_channels)

    def forward(self, x):
        return self.output(self.features(x))


def resnet18(classes: int = 10, thumbnail: bool = True, *,
             channels: Sequence[int] = (64, 64, 128, 256, 512)) -> ResNetV1:
    """ResNet-18 v1: ``BasicBlock`` stages of [2, 2, 2, 2] blocks with 64/128/256/512 channels.

    ``thumbnail=True`` (default) is the CIFAR-style stem for 32x32 input, ``False`` the ImageNet
    stem (see ``ResNetV1``). ``channels`` (the stem's, then each stage's) narrows the network for
    quick experiments; the default is the paper's.

    >>> import lazyarray as la
    >>> net = la.blocks.models.resnet18(classes=10)
    >>> net.initialize()
    >>> net.hybridize()
    >>> net(la.ones((1, 3, 32, 32))).shape
    (1, 10)
    >>> sum(p.data().size for p in net.collect_params().values() if p.grad_req != "null")
    11173962
    """
    return ResNetV1([2, 2, 2, 2], channels, classes=classes, thumbnail=thumbnail)
