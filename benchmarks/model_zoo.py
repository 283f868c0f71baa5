"""The whole models of ``model.py``, built with ``onnx.helper``: ResNet-18 (opset 13),
one BERT-base encoder layer (opset 17) and MobileNetV2 (opset 13), with random
float32 weights.

The weights are normal, scaled by 1/sqrt(fan-in), and the batch norms' statistics
near (0, 1), so activations stay near 1 through every layer: a comparison at a fixed
tolerance then means the same at the first layer and the last. ``Size`` shrinks
any model (channels, image, sequence, hidden) for a quick run; the operators and
the structure stay those of the full model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Old enough for any onnxruntime of the bench extra, new enough for opset 17.
IR_VERSION = 9


@dataclass(frozen=True, kw_only=True)
class ResNetSize:
    """ResNet-18 is ``image`` 224 and ``width`` 64: the stages have width, 2, 4 and 8
    times width channels."""

    image: int = 224
    width: int = 64
    classes: int = 1000


@dataclass(frozen=True, kw_only=True)
class BertSize:
    """BERT-base is sequence 128, hidden 768, 12 heads of 64 and a 3072-wide FFN."""

    sequence: int = 128
    hidden: int = 768
    heads: int = 12
    ffn: int = 3072


@dataclass(frozen=True, kw_only=True)
class MobileNetSize:
    """MobileNetV2 1.0 is ``image`` 224 and ``width`` 1: every layer's channels are the
    paper's times width, rounded to a multiple of 8."""

    image: int = 224
    width: float = 1.0
    classes: int = 1000


@dataclass(frozen=True, kw_only=True)
class Size:
    resnet: ResNetSize = field(default_factory=ResNetSize)
    bert: BertSize = field(default_factory=BertSize)
    mobilenet: MobileNetSize = field(default_factory=MobileNetSize)


FULL = Size()
SMALL = Size(
    resnet=ResNetSize(image=56, width=16, classes=100),
    bert=BertSize(sequence=16, hidden=64, heads=4, ffn=256),
    mobilenet=MobileNetSize(image=64, width=0.25, classes=100),
)

# MobileNetV2's inverted residual stages: (expansion, output channels, blocks, stride).
MOBILENET_STAGES = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class _Builder:
    """Nodes and weights collected in order; each node named after its first output,
    so messages name something readable."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.weights: dict[str, np.ndarray] = {}

    def node(self, op_type: str, inputs: Sequence[str], output: str, **attrs: Any) -> str:
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=f"{output}_node", **attrs)
        )
        return output

    def weight(self, name: str, *shape: int, fan_in: int) -> str:
        scale = 1.0 / math.sqrt(fan_in)
        self.weights[name] = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return name

    def constant(self, name: str, value: np.ndarray) -> str:
        self.weights[name] = value
        return name

    def model(self, inputs: dict[str, list[int]], output: str, opset: int) -> onnx.ModelProto:
        """The model, its output typed by shape inference, accepted by the checker."""
        graph = helper.make_graph(
            self.nodes,
            "model",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
            [numpy_helper.from_array(a, n) for n, a in self.weights.items()],
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION
        )
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model)
        return model


def resnet18(rng: np.random.Generator, size: ResNetSize = FULL.resnet) -> onnx.ModelProto:
    """Input ``x`` of 1x3xSxS: conv 7x7/2 + BN + ReLU, maxpool 3x3/2, four stages of two
    basic blocks (the first of stages 2-4 strided, with a 1x1/2 conv + BN shortcut),
    global average pool, flatten, Gemm to the classes."""
    b = _Builder(rng)
    x = _conv_bn(b, "x", "stem", 3, size.width, kernel=7, stride=2)
    x = b.node("Relu", [x], "stem_relu")
    x = b.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = size.width
    for stage in range(4):
        out = size.width * 2**stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _basic_block(b, x, f"s{stage + 1}b{block + 1}", channels, out, stride)
            channels = out
    _classifier(b, x, channels, size.classes)
    return b.model({"x": [1, 3, size.image, size.image]}, "logits", opset=13)


def _classifier(b: _Builder, x: str, channels: int, classes: int) -> str:
    """Global average pool, flatten and a Gemm to ``classes`` logits."""
    x = b.node("GlobalAveragePool", [x], "gap")
    x = b.node("Flatten", [x], "flat", axis=1)
    w = b.weight("fc_w", classes, channels, fan_in=channels)
    bias = b.weight("fc_b", classes, fan_in=channels)
    return b.node("Gemm", [x, w, bias], "logits", transB=1)


def _basic_block(b: _Builder, x: str, name: str, channels: int, out: int, stride: int) -> str:
    h = _conv_bn(b, x, f"{name}_c1", channels, out, kernel=3, stride=stride)
    h = b.node("Relu", [h], f"{name}_r1")
    h = _conv_bn(b, h, f"{name}_c2", out, out, kernel=3, stride=1)
    shortcut = x
    if stride != 1 or channels != out:
        shortcut = _conv_bn(b, x, f"{name}_down", channels, out, kernel=1, stride=stride)
    h = b.node("Add", [h, shortcut], f"{name}_sum")
    return b.node("Relu", [h], f"{name}_out")


def mobilenet_v2(rng: np.random.Generator, size: MobileNetSize = FULL.mobilenet) -> onnx.ModelProto:
    """Input ``x`` of 1x3xSxS: conv 3x3/2 + BN + ReLU6, the 17 inverted residual blocks
    (1x1 expansion + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear projection, a residual
    add where the shape stays), conv 1x1 to 1280 + ReLU6, global average pool,
    flatten, Gemm to the classes."""
    b = _Builder(rng)
    channels = _round_channels(32 * size.width)
    x = _relu6(b, _conv_bn(b, "x", "stem", 3, channels, kernel=3, stride=2))
    for stage, (expansion, out, blocks, stride) in enumerate(MOBILENET_STAGES):
        out = _round_channels(out * size.width)
        for block in range(blocks):
            name = f"s{stage + 1}b{block + 1}"
            x = _inverted_residual(
                b, x, name, channels, out, expansion, stride if block == 0 else 1
            )
            channels = out
    last = max(1280, _round_channels(1280 * size.width))
    x = _relu6(b, _conv_bn(b, x, "head", channels, last, kernel=1, stride=1))
    _classifier(b, x, last, size.classes)
    return b.model({"x": [1, 3, size.image, size.image]}, "logits", opset=13)


def _inverted_residual(
    b: _Builder, x: str, name: str, channels: int, out: int, expansion: int, stride: int
) -> str:
    hidden = channels * expansion
    h = x
    if expansion != 1:
        h = _relu6(b, _conv_bn(b, h, f"{name}_expand", channels, hidden, kernel=1, stride=1))
    h = _relu6(
        b, _conv_bn(b, h, f"{name}_dw", hidden, hidden, kernel=3, stride=stride, groups=hidden)
    )
    h = _conv_bn(b, h, f"{name}_project", hidden, out, kernel=1, stride=1)
    if stride == 1 and channels == out:
        h = b.node("Add", [h, x], f"{name}_sum")
    return h


def _relu6(b: _Builder, x: str) -> str:
    low = b.constant(f"{x}_low", np.array(0.0, np.float32))
    high = b.constant(f"{x}_high", np.array(6.0, np.float32))
    return b.node("Clip", [x, low, high], f"{x}_relu6")


def _round_channels(channels: float) -> int:
    """MobileNet's rounding: to the nearest multiple of 8, never below 90 % of it."""
    rounded = max(8, int(channels + 4) // 8 * 8)
    return rounded + 8 if rounded < 0.9 * channels else rounded


def _conv_bn(
    b: _Builder,
    x: str,
    name: str,
    channels: int,
    out: int,
    *,
    kernel: int,
    stride: int,
    groups: int = 1,
) -> str:
    """A convolution without bias (the batch norm after it has one), padded to keep the
    size at stride 1, then a batch norm; ``groups`` as ONNX has it (the channels for a
    depthwise convolution)."""
    fan_in = channels // groups * kernel * kernel
    w = b.weight(f"{name}_w", out, channels // groups, kernel, kernel, fan_in=fan_in)
    pad = kernel // 2
    conv = b.node(
        "Conv",
        [x, w],
        f"{name}_conv",
        kernel_shape=[kernel, kernel],
        strides=[stride, stride],
        pads=[pad] * 4,
        group=groups,
    )
    stats = {
        "scale": b.rng.uniform(0.5, 1.5, out),
        "bias": b.rng.standard_normal(out) * 0.1,
        "mean": b.rng.standard_normal(out) * 0.1,
        "var": b.rng.uniform(0.5, 1.5, out),
    }
    names = [b.constant(f"{name}_bn_{k}", v.astype(np.float32)) for k, v in stats.items()]
    return b.node("BatchNormalization", [conv, *names], f"{name}_bn")


def bert_layer(rng: np.random.Generator, size: BertSize = FULL.bert) -> onnx.ModelProto:
    """Input ``x`` of 1 x sequence x hidden, written the way exporters write BERT: the
    heads split by Reshape/Transpose, scores divided by sqrt(head size), residual +
    LayerNormalization, and a feed-forward block whose GELU is Div/Erf/Add/Mul/Mul."""
    s, h, d = size.sequence, size.hidden, size.hidden // size.heads
    b = _Builder(rng)
    heads_shape = b.constant("heads_shape", np.array([1, s, size.heads, d], np.int64))
    merged_shape = b.constant("merged_shape", np.array([1, s, h], np.int64))
    split = {}
    for name in ("q", "k", "v"):
        projected = _dense(b, "x", name, h, h)
        reshaped = b.node("Reshape", [projected, heads_shape], f"{name}_split")
        split[name] = b.node("Transpose", [reshaped], f"{name}_heads", perm=[0, 2, 1, 3])
    keys_t = b.node("Transpose", [split["k"]], "k_t", perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [split["q"], keys_t], "scores")
    scaled = b.node("Div", [scores, _scalar(b, "sqrt_d", math.sqrt(d))], "scaled")
    probs = b.node("Softmax", [scaled], "probs", axis=-1)
    context = b.node("MatMul", [probs, split["v"]], "context")
    context = b.node("Transpose", [context], "context_t", perm=[0, 2, 1, 3])
    merged = b.node("Reshape", [context, merged_shape], "merged")
    attention = _dense(b, merged, "attn", h, h)
    first = _layer_norm(b, b.node("Add", [attention, "x"], "res1"), "ln1", h)
    ff1 = _dense(b, first, "ff1", h, size.ffn)
    gelu = b.node("Div", [ff1, _scalar(b, "sqrt_2", math.sqrt(2))], "g_div")
    gelu = b.node("Erf", [gelu], "g_erf")
    gelu = b.node("Add", [gelu, _scalar(b, "one", 1.0)], "g_add")
    gelu = b.node("Mul", [ff1, gelu], "g_mul")
    gelu = b.node("Mul", [gelu, _scalar(b, "half", 0.5)], "gelu")
    ff2 = _dense(b, gelu, "ff2", size.ffn, h)
    _layer_norm(b, b.node("Add", [ff2, first], "res2"), "out", h)
    return b.model({"x": [1, s, h]}, "out", opset=17)


def _dense(b: _Builder, x: str, name: str, k: int, n: int) -> str:
    """MatMul by a (k, n) weight, then Add of a bias: what exporters write for Linear."""
    product = b.node("MatMul", [x, b.weight(f"{name}_w", k, n, fan_in=k)], f"{name}_mm")
    return b.node("Add", [product, b.weight(f"{name}_b", n, fan_in=k)], name)


def _layer_norm(b: _Builder, x: str, name: str, hidden: int) -> str:
    gamma = b.constant(f"{name}_g", b.rng.uniform(0.5, 1.5, hidden).astype(np.float32))
    beta = b.weight(f"{name}_b", hidden, fan_in=hidden)
    return b.node("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=1e-5)


def _scalar(b: _Builder, name: str, value: float) -> str:
    return b.constant(name, np.array(value, np.float32))


# Each model by name, made with ``rng``'s weights at ``size`` (``FULL`` or ``SMALL``).
MODELS: dict[str, Callable[[np.random.Generator, Size], onnx.ModelProto]] = {
    "resnet18": lambda rng, size: resnet18(rng, size.resnet),
    "bert": lambda rng, size: bert_layer(rng, size.bert),
    "mobilenet": lambda rng, size: mobilenet_v2(rng, size.mobilenet),
}
