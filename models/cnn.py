"""Convolutional zoo networks: ResNet-18, MobileNetV2 and VGG-16 (torchvision topologies).

Each builder takes a :class:`~dcoc_models._netbuilder.NetBuilder` and adds the whole
network for a 1x3x224x224 ``input``.  Layer and node names follow torchvision
(``layer1.0.conv1``, ``features.3.conv.1.0`` ...), so a task can be traced back to the layer.
"""
from __future__ import annotations

from ._netbuilder import NetBuilder


def resnet18(nb: NetBuilder, batch: int = 1, image: int = 224, classes: int = 1000) -> None:
    """ResNet-18 (He et al. 2016; torchvision ``resnet18``), the VTA reference network.

    7x7/2 stem conv + BN + ReLU, 3x3/2 max-pool, four stages of two BasicBlocks
    (64, 128, 256, 512 channels; 16 3x3 convs; stages 2-4 open with a stride-2 block whose
    shortcut is a 1x1/2 conv + BN), global average pool, fc 512 -> 1000.
    """
    x = nb.input("input", (batch, 3, image, image))
    x = nb.conv(x, 64, 7, stride=2, pad=3, name="conv1")
    x = nb.relu(nb.bn(x, name="bn1"), name="relu")
    x = nb.maxpool(x, 3, 2, 1, name="maxpool")
    cin = 64
    for stage, (c, s) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], start=1):
        for b in range(2):
            stride = s if b == 0 else 1
            p = f"layer{stage}.{b}"
            out = nb.conv(x, c, 3, stride=stride, name=f"{p}.conv1")
            out = nb.relu(nb.bn(out, name=f"{p}.bn1"), name=f"{p}.relu1")
            out = nb.conv(out, c, 3, name=f"{p}.conv2")
            out = nb.bn(out, name=f"{p}.bn2")
            identity = x
            if stride != 1 or cin != c:
                identity = nb.conv(x, c, 1, stride=stride, name=f"{p}.downsample.0")
                identity = nb.bn(identity, name=f"{p}.downsample.1")
            x = nb.relu(nb.add(out, identity, name=f"{p}.add"), name=f"{p}.relu2")
            cin = c
    x = nb.flatten(nb.global_avgpool(x, name="avgpool"), name="flatten")
    nb.output(nb.gemm(x, classes, name="fc"))


def mobilenetv2(nb: NetBuilder, batch: int = 1, image: int = 224, classes: int = 1000) -> None:
    """MobileNetV2 1.0 (Sandler et al. 2018; torchvision ``mobilenet_v2``).

    3x3/2 stem conv (32) + BN + ReLU6, 17 inverted-residual blocks (1x1 expand + BN + ReLU6,
    3x3 depthwise + BN + ReLU6, 1x1 project + BN, residual add when shapes match),
    1x1 conv to 1280 + BN + ReLU6, global average pool, fc 1280 -> 1000 (dropout omitted:
    identity at inference).
    """
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    x = nb.input("input", (batch, 3, image, image))
    x = nb.conv(x, 32, 3, stride=2, name="features.0.0")
    x = nb.relu6(nb.bn(x, name="features.0.1"), name="features.0.2")
    cin, idx = 32, 1
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{idx}.conv"
            hidden = cin * t
            out = x
            j = 0
            if t != 1:
                out = nb.conv(out, hidden, 1, name=f"{p}.{j}.0")
                out = nb.relu6(nb.bn(out, name=f"{p}.{j}.1"), name=f"{p}.{j}.2")
                j += 1
            out = nb.conv(out, hidden, 3, stride=stride, groups=hidden, name=f"{p}.{j}.0")
            out = nb.relu6(nb.bn(out, name=f"{p}.{j}.1"), name=f"{p}.{j}.2")
            out = nb.conv(out, c, 1, name=f"{p}.{j + 1}")
            out = nb.bn(out, name=f"{p}.{j + 2}")
            if stride == 1 and cin == c:
                out = nb.add(x, out, name=f"features.{idx}.add")
            x, cin, idx = out, c, idx + 1
    x = nb.conv(x, 1280, 1, name=f"features.{idx}.0")
    x = nb.relu6(nb.bn(x, name=f"features.{idx}.1"), name=f"features.{idx}.2")
    x = nb.flatten(nb.global_avgpool(x, name="avgpool"), name="flatten")
    nb.output(nb.gemm(x, classes, name="classifier.1"))


def vgg16(nb: NetBuilder, batch: int = 1, image: int = 224, classes: int = 1000) -> None:
    """VGG-16, configuration D (Simonyan & Zisserman 2015; torchvision ``vgg16``).

    13 3x3 convs with bias + ReLU in five blocks (64, 128, 256, 512, 512 channels) each
    closed by a 2x2/2 max-pool, then fc 25088 -> 4096 -> 4096 -> 1000 with ReLU (dropout
    omitted; torchvision's adaptive 7x7 average pool is the identity at 224x224 and is
    omitted).  138.4 M parameters, 15.5 GMACs.
    """
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M"]
    x = nb.input("input", (batch, 3, image, image))
    for i, v in enumerate(cfg):
        if v == "M":
            x = nb.maxpool(x, 2, 2, name=f"features.{i}")
        else:
            x = nb.relu(nb.conv(x, v, 3, bias=True, name=f"features.{i}"),
                        name=f"features.{i}.relu")
    x = nb.flatten(x, name="flatten")
    x = nb.relu(nb.gemm(x, 4096, name="classifier.0"), name="classifier.1")
    x = nb.relu(nb.gemm(x, 4096, name="classifier.3"), name="classifier.4")
    nb.output(nb.gemm(x, classes, name="classifier.6"))
