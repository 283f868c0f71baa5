"""The operators a graph node may apply: each builds its tensor expression from the
operator library (``compiler.topi``) and says how it fuses.

The fusion pattern follows TVM's: an ELEMWISE or BROADCAST node joins the group of
its producer; a COMPLEX node (convolution, dense, matmul) starts a group whose
elementwise and broadcast consumers join it as its epilogue; an INJECTIVE node
(reshape, transpose, concatenate, pad) and a REDUCTION node (softmax, layer norm,
pooling) stay alone, with the elementwise nodes that follow them. A reshape or a
transpose whose one reader is another node may instead be read in place by it
(``view_of``): it moves no data of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler import te, topi
from compiler.graph.ir import GraphError, Node, TensorType
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.utils import static_shape


class Pattern(enum.IntEnum):
    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    COMPLEX = 4


Builder = Callable[[Sequence[Tensor], Mapping[str, Any]], Tensor]


@dataclass(frozen=True)
class GraphOp:
    name: str
    pattern: Pattern
    build: Builder


OPS: dict[str, GraphOp] = {}


def _op(name: str, pattern: Pattern) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        OPS[name] = GraphOp(name, pattern, build)
        return build

    return register


def tensor_of(node: Node, inputs: Sequence[Tensor]) -> Tensor:
    """The tensor expression of ``node`` on ``inputs``; GraphError for an operator
    that is not in ``OPS`` or arguments the operator refuses."""
    op = OPS.get(node.op)
    if op is None:
        raise GraphError(f"node {node.name or node}: no graph operator {node.op!r}")
    try:
        return op.build(inputs, node.attrs)
    except (ValueError, TypeError) as err:
        raise GraphError(f"node {node.name or node}: {err}") from None


# A conv2d attribute: compute it by Winograd's F(tile x tile, 3 x 3) (see
# compiler.graph.algorithms, which sets it).
WINOGRAD_TILE = "winograd_tile"

# Operators that a reader can index in place, as a view of their input.
VIEW_OPS = ("reshape", "transpose", "layout_transform")


def view_of(node: Node, source: Tensor) -> Tensor:
    """``node`` (one of VIEW_OPS) as a view of ``source`` (``te.view``): a reader
    indexes ``source`` itself, and no block copies it."""
    if node.op == "reshape":
        return topi.reshape(source, list(node.attrs["shape"]), view=True)
    if node.op == "transpose":
        return topi.transpose(source, list(node.attrs["axes"]), view=True)
    if node.op == "layout_transform":
        return topi.layout_transform(
            source, node.attrs["to"], node.attrs.get("block", 0), view=True
        )
    raise GraphError(f"node {node.name or node}: {node.op} cannot be read in place")


def output_type(node: Node, input_types: Sequence[TensorType]) -> TensorType:
    """The type of ``node``'s output on inputs of ``input_types``: its tensor
    expression built on placeholders, whose shape is what the executor will allocate."""
    placeholders = [
        te.placeholder(t.shape, t.dtype, name=f"input{k}") for k, t in enumerate(input_types)
    ]
    tensor = tensor_of(node, placeholders)
    return TensorType(static_shape(node.op, "output", tensor), tensor.dtype)


def _unary(name: str, operator: Callable[[Tensor], Tensor]) -> None:
    _op(name, Pattern.ELEMWISE)(lambda inputs, attrs: operator(inputs[0]))


def _binary(name: str, operator: Callable[[Tensor, Tensor], Tensor]) -> None:
    _op(name, Pattern.BROADCAST)(lambda inputs, attrs: operator(inputs[0], inputs[1]))


for _name, _operator in {
    "relu": topi.relu,
    "sigmoid": topi.sigmoid,
    "tanh": topi.tanh,
    "exp": topi.exp,
    "log": topi.log,
    "sqrt": topi.sqrt,
    "abs": topi.abs,
    "negative": topi.negative,
    "gelu": topi.gelu,
}.items():
    _unary(_name, _operator)

for _name, _binary_operator in {
    "add": topi.add,
    "subtract": topi.subtract,
    "multiply": topi.multiply,
    "divide": topi.divide,
    "maximum": topi.maximum,
    "minimum": topi.minimum,
    "power": topi.power,
}.items():
    _binary(_name, _binary_operator)


@_op("erf", Pattern.ELEMWISE)
def _erf(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    (x,) = inputs
    return te.compute(x.shape, lambda *i: te.erf(x[i]), name="T_erf")


@_op("clip", Pattern.ELEMWISE)
def _clip(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    """``min(max(x, low), high)``; a bound that is None is not applied."""
    (x,) = inputs
    low, high = attrs.get("low"), attrs.get("high")

    def clipped(*i: Any) -> PrimExpr:
        value: PrimExpr = x[i]
        if low is not None:
            value = te.max(value, te.const(low, x.dtype))
        if high is not None:
            value = te.min(value, te.const(high, x.dtype))
        return value

    return te.compute(x.shape, clipped, name="T_clip")


@_op("conv2d", Pattern.COMPLEX)
def _conv2d(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    data, kernel = inputs
    options = {k: attrs[k] for k in ("stride", "padding", "dilation") if k in attrs}
    groups = attrs.get("groups", 1)
    channels = static_shape("conv2d", "data", data)[1]
    filters = static_shape("conv2d", "kernel", kernel)[0]
    if groups > 1 and groups == channels == filters:
        return topi.depthwise_conv2d_nchw(data, kernel, **options)
    if attrs.get(WINOGRAD_TILE):
        return topi.conv2d_winograd_nchw(
            data, kernel, attrs.get("padding", 0), attrs[WINOGRAD_TILE]
        )
    return topi.conv2d_nchw(data, kernel, groups=groups, **options)


@_op("conv2d_nchwc", Pattern.COMPLEX)
def _conv2d_nchwc(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    data, kernel = inputs
    if attrs.get(WINOGRAD_TILE):
        return topi.conv2d_winograd_nchwc(
            data, kernel, attrs.get("padding", 0), attrs[WINOGRAD_TILE]
        )
    options = {k: attrs[k] for k in ("stride", "padding", "dilation") if k in attrs}
    return topi.conv2d_nchwc(data, kernel, **options)


@_op("depthwise_conv2d_nchwc", Pattern.COMPLEX)
def _depthwise_conv2d_nchwc(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    data, kernel = inputs
    options = {k: attrs[k] for k in ("stride", "padding", "dilation") if k in attrs}
    return topi.depthwise_conv2d_nchwc(data, kernel, **options)


@_op("dense", Pattern.COMPLEX)
def _dense(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    """``x @ weight.T``, weight (N, K) as ONNX Gemm with transB and TVM's dense have it."""
    x, weight = inputs
    return topi.dense(x, weight)


@_op("matmul", Pattern.COMPLEX)
def _matmul(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    a, b = inputs
    transpose_b = bool(attrs.get("transpose_b", False))
    if a.ndim == 3:
        return topi.batch_matmul(a, b, transpose_b=transpose_b)
    return topi.matmul(a, b, transpose_b=transpose_b)


@_op("max_pool2d", Pattern.REDUCTION)
def _max_pool2d(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.max_pool2d(inputs[0], attrs["kernel"], attrs["stride"], attrs["padding"])


@_op("avg_pool2d", Pattern.REDUCTION)
def _avg_pool2d(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.avg_pool2d(
        inputs[0],
        attrs["kernel"],
        attrs["stride"],
        attrs["padding"],
        count_include_pad=bool(attrs.get("count_include_pad", False)),
    )


@_op("global_avg_pool2d", Pattern.REDUCTION)
def _global_avg_pool2d(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.global_avg_pool2d(inputs[0])


@_op("softmax", Pattern.REDUCTION)
def _softmax(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.softmax(inputs[0], axis=attrs.get("axis", -1))


@_op("layer_norm", Pattern.REDUCTION)
def _layer_norm(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    data, gamma, beta = inputs
    return topi.layer_norm(
        data, gamma, beta, axis=attrs.get("axis", -1), epsilon=attrs.get("epsilon", 1e-5)
    )


@_op("mean", Pattern.REDUCTION)
def _mean(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.mean(inputs[0], attrs.get("axis"), keepdims=bool(attrs.get("keepdims", False)))


@_op("reshape", Pattern.INJECTIVE)
def _reshape(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.reshape(inputs[0], list(attrs["shape"]))


@_op("transpose", Pattern.INJECTIVE)
def _transpose(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.transpose(inputs[0], list(attrs["axes"]))


@_op("layout_transform", Pattern.INJECTIVE)
def _layout_transform(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.layout_transform(inputs[0], attrs["to"], attrs.get("block", 0))


@_op("concatenate", Pattern.INJECTIVE)
def _concatenate(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.concatenate(list(inputs), axis=attrs["axis"])


@_op("pad", Pattern.INJECTIVE)
def _pad(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    return topi.nn.pad(
        inputs[0],
        list(attrs["before"]),
        list(attrs["after"]),
        pad_value=float(attrs.get("value", 0.0)),
    )


@_op("lrn", Pattern.REDUCTION)
def _lrn(inputs: Sequence[Tensor], attrs: Mapping[str, Any]) -> Tensor:
    """Local response normalization across channels, as ONNX (and AlexNet) define it:
    ``x / (bias + alpha / size * s) ** beta``, where s sums the squares over the
    ``size`` channels around x's, cut at the edges: zero padding of the channel axis
    gives the cut windows one loop."""
    (x,) = inputs
    if x.ndim != 4:
        raise ValueError(f"lrn: x must be NCHW (4 dimensions), got {x.ndim}")
    size = int(attrs["size"])
    if size < 1:
        raise ValueError(f"lrn: size must be positive, got {size}")
    alpha, beta, bias = (float(attrs[k]) for k in ("alpha", "beta", "bias"))
    widths = [0, (size - 1) // 2, 0, 0], [0, size // 2, 0, 0]
    padded = topi.nn.pad(x, *widths, name="T_lrn_pad")
    rc = te.reduce_axis((0, size), name="rc")

    def square_sum(n: Any, c: Any, h: Any, w: Any) -> Any:
        value = padded[n, c + rc.var, h, w]
        return te.sum(value * value, axis=rc)

    squares = te.compute(x.shape, square_sum, name="T_lrn_square_sum")
    scale = alpha / size

    def normalized(n: Any, c: Any, h: Any, w: Any) -> Any:
        return x[n, c, h, w] / te.power(bias + scale * squares[n, c, h, w], beta)

    return te.compute(x.shape, normalized, name="T_lrn")
