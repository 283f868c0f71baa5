"""Converters of ONNX's elementwise and data-movement operators: each reads a node
through its ``NodeContext`` and returns what its first output is, a graph value (after
emitting the graph nodes that make it) or an array known at import.

The data-movement converters reshape a constant at import rather than emit a node
(``NodeContext.reshape``), so Reshape, Flatten, Squeeze and Unsqueeze of weights and
of shape tensors fold without a folder of their own. The layers (convolution,
products, pooling, normalization) are in ``onnx_convert_nn``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx

from compiler.graph.onnx_node import ConverterTable, NodeContext, Value

CONVERTERS = ConverterTable()
_converts = CONVERTERS.register


def scalar(value: float) -> np.ndarray:
    """A float32 constant of shape (), which broadcasts against anything."""
    return np.array(value, dtype=np.float32)


# ---- elementwise --------------------------------------------------------------------------

_UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Abs": "abs",
    "Neg": "negative",
    "Erf": "erf",
}
_BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Div": "divide",
    "Pow": "power",
    "Max": "maximum",
    "Min": "minimum",
    "Sum": "add",
}


@_converts(*_UNARY)
def _unary(ctx: NodeContext) -> Value:
    return ctx.emit(_UNARY[ctx.op_type], [ctx.value(0)])


@_converts(*_BINARY)
def _binary(ctx: NodeContext) -> Value:
    """Numpy broadcasting, as ONNX has had since opset 7; Sum, Max and Min take any
    number of inputs and become a chain."""
    if ctx.opset < 7 and ctx.attr("axis") is not None:
        raise ctx.unsupported("the legacy broadcast with an axis; export at opset 7 or later")
    first, *rest = ctx.values()
    result = first
    for operand in rest:
        result = ctx.emit(_BINARY[ctx.op_type], [result, operand])
    return result


@_converts("Mean")
def _mean(ctx: NodeContext) -> Value:
    operands = ctx.values()
    total = operands[0]
    for operand in operands[1:]:
        total = ctx.emit("add", [total, operand])
    return ctx.emit("multiply", [total, scalar(1.0 / len(operands))])


@_converts("Clip")
def _clip(ctx: NodeContext) -> Value:
    """Opset 11 moved the bounds from attributes to optional inputs."""
    if ctx.opset < 11:
        low, high = ctx.attr("min"), ctx.attr("max")
    else:
        low, high = (
            float(ctx.known(i, bound).item()) if ctx.has(i) else None
            for i, bound in ((1, "min"), (2, "max"))
        )
    return ctx.emit("clip", [ctx.value(0)], low=low, high=high)


@_converts("LeakyRelu")
def _leaky_relu(ctx: NodeContext) -> Value:
    """``max(x, alpha x)`` for alpha up to 1, ``min`` above: one compare either way."""
    x = ctx.value(0)
    alpha = float(ctx.attr("alpha", 0.01))
    scaled = ctx.emit("multiply", [x, scalar(alpha)])
    return ctx.emit("maximum" if alpha <= 1 else "minimum", [x, scaled])


@_converts("HardSigmoid", "HardSwish")
def _hard_sigmoid(ctx: NodeContext) -> Value:
    """``clip(alpha x + beta, 0, 1)``, times x for HardSwish (alpha 1/6, beta 1/2)."""
    x = ctx.value(0)
    swish = ctx.op_type == "HardSwish"
    alpha = 1.0 / 6.0 if swish else float(ctx.attr("alpha", 0.2))
    beta = 0.5 if swish else float(ctx.attr("beta", 0.5))
    line = ctx.emit("add", [ctx.emit("multiply", [x, scalar(alpha)]), scalar(beta)])
    gate = ctx.emit("clip", [line], low=0.0, high=1.0)
    return ctx.emit("multiply", [x, gate]) if swish else gate


@_converts("Gelu")
def _gelu(ctx: NodeContext) -> Value:
    """The exact GELU is one graph op; the tanh form is written out."""
    x = ctx.value(0)
    approximate = ctx.attr("approximate", "none")
    if approximate == "none":
        return ctx.emit("gelu", [x])
    if approximate != "tanh":
        raise ctx.error(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    cube = ctx.emit("multiply", [ctx.emit("multiply", [x, x]), x])
    inner = ctx.emit("add", [x, ctx.emit("multiply", [cube, scalar(0.044715)])])
    curve = ctx.emit("tanh", [ctx.emit("multiply", [inner, scalar(math.sqrt(2 / math.pi))])])
    half = ctx.emit("multiply", [x, scalar(0.5)])
    return ctx.emit("multiply", [half, ctx.emit("add", [curve, scalar(1.0)])])


@_converts("Identity", "Dropout")
def _identity(ctx: NodeContext) -> Value:
    """Dropout is the identity at inference; its mask output must be unused."""
    if ctx.op_type == "Dropout" and ctx.has(2) and bool(ctx.known(2, "training_mode")):
        raise ctx.unsupported("training_mode is true; only inference is supported")
    return ctx.value(0)


@_converts("Cast")
def _cast(ctx: NodeContext) -> Value:
    """A float32 value cast to float32 is itself; others are folded or refused."""
    if ctx.type(0).dtype == "float32" and ctx.required("to") == onnx.TensorProto.FLOAT:
        return ctx.value(0)
    raise ctx.unsupported("a Cast of a run-time value to a type other than float32")


@_converts("Shape")
def _shape(ctx: NodeContext) -> Value:
    """Known at import whatever the input, since every shape is static."""
    shape = ctx.shape(0)
    start, end = ctx.attr("start", 0), ctx.attr("end", len(shape))
    return np.array(shape[start:end], dtype=np.int64)


@_converts("Size")
def _size(ctx: NodeContext) -> Value:
    return np.array(math.prod(ctx.shape(0)), dtype=np.int64)


# ---- data movement ------------------------------------------------------------------------


@_converts("Flatten")
def _flatten(ctx: NodeContext) -> Value:
    return ctx.reshape(ctx.value(0), flattened(ctx, ctx.shape(0), ctx.attr("axis", 1)))


@_converts("Reshape")
def _reshape(ctx: NodeContext) -> Value:
    """Opset 5 moved the target shape from an attribute to an input."""
    target = ctx.known(1, "shape").tolist() if ctx.opset >= 5 else ctx.attr("shape")
    allowzero = bool(ctx.attr("allowzero", 0))
    return ctx.reshape(ctx.value(0), reshape_target(ctx, ctx.shape(0), target, allowzero))


@_converts("Squeeze")
def _squeeze(ctx: NodeContext) -> Value:
    shape = ctx.shape(0)
    return ctx.reshape(ctx.value(0), squeezed(ctx, shape, ctx.axes("axes", 1, len(shape))))


@_converts("Unsqueeze")
def _unsqueeze(ctx: NodeContext) -> Value:
    shape = ctx.shape(0)
    count = len(ctx.raw_axes("axes", 1) or ())
    axes = ctx.axes("axes", 1, len(shape) + count) or ()
    return ctx.reshape(ctx.value(0), unsqueezed(shape, axes))


@_converts("Transpose")
def _transpose(ctx: NodeContext) -> Value:
    rank = len(ctx.shape(0))
    perm = tuple(int(p) for p in ctx.attr("perm", tuple(reversed(range(rank)))))
    if perm == tuple(range(rank)):
        return ctx.value(0)
    return ctx.emit("transpose", [ctx.value(0)], axes=perm)


@_converts("Concat")
def _concat(ctx: NodeContext) -> Value:
    values = ctx.values()
    axis = ctx.axis(ctx.required("axis"), len(ctx.shape(0)))
    return values[0] if len(values) == 1 else ctx.emit("concatenate", values, axis=axis)


@_converts("Pad")
def _pad(ctx: NodeContext) -> Value:
    """Constant mode only. Opset 11 moved pads and the value to inputs; opset 18 added
    axes, naming the axes the pads are for."""
    mode = ctx.attr("mode", "constant")
    if mode != "constant":
        raise ctx.unsupported(f"mode {mode!r}; only 'constant' padding is supported")
    rank = len(ctx.shape(0))
    if ctx.opset < 11:
        pads, value = list(ctx.ints("pads", None, 2 * rank)), float(ctx.attr("value", 0.0))
    else:
        pads = ctx.known(1, "pads").tolist()
        value = float(ctx.known(2, "constant_value").item()) if ctx.has(2) else 0.0
    given = ctx.known(3, "axes").tolist() if ctx.has(3) else range(rank)
    axes = [ctx.axis(int(a), rank, "axes entry") for a in given]
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must list a begin and an end for each of {len(axes)} axes")
    if min(pads) < 0:
        raise ctx.unsupported(f"negative pads {pads} (cropping)")
    before, after = [0] * rank, [0] * rank
    for k, axis in enumerate(axes):
        before[axis], after[axis] = int(pads[k]), int(pads[k + len(axes)])
    return ctx.emit("pad", [ctx.value(0)], before=tuple(before), after=tuple(after), value=value)


# ---- shape arithmetic shared with the layers -------------------------------------------------


def reshape_target(
    where: NodeContext, shape: Sequence[int], target: Sequence[int], allowzero: bool = False
) -> tuple[int, ...]:
    """ONNX Reshape's output shape: a 0 copies the input's dimension at its place
    (unless ``allowzero``), one -1 takes what is left."""
    dims = [int(d) for d in target]
    if allowzero and 0 in dims:
        raise where.unsupported(f"allowzero with a 0 in shape {dims} makes an empty tensor")
    dims = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(dims)]
    size = math.prod(shape)
    if dims.count(-1) > 1 or any(d < -1 or d == 0 for d in dims):
        raise where.error(f"shape {list(target)} is not a valid Reshape target")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if size % known:
            raise where.error(f"cannot reshape {tuple(shape)} into {list(target)}")
        dims = [size // known if d == -1 else d for d in dims]
    if math.prod(dims) != size:
        raise where.error(f"cannot reshape {tuple(shape)} ({size} elements) into {list(target)}")
    return tuple(dims)


def flattened(where: NodeContext, shape: Sequence[int], axis: int) -> tuple[int, int]:
    """ONNX Flatten's 2-D shape: the dimensions before ``axis`` (which may be the rank,
    or negative to count from the end) times those from it."""
    if not -len(shape) <= axis <= len(shape):
        raise where.error(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    return math.prod(shape[:axis]), math.prod(shape[axis:])


def squeezed(
    where: NodeContext, shape: Sequence[int], axes: Sequence[int] | None
) -> tuple[int, ...]:
    """``shape`` without ``axes`` (every 1 when None); each must be a 1."""
    if axes is None:
        return tuple(d for d in shape if d != 1)
    for a in axes:
        if shape[a] != 1:
            raise where.error(f"cannot squeeze axis {a} of size {shape[a]} (shape {tuple(shape)})")
    return tuple(d for a, d in enumerate(shape) if a not in axes)


def unsqueezed(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with a 1 inserted at each of ``axes``, counted in the output."""
    dims = iter(shape)
    return tuple(1 if a in axes else next(dims) for a in range(len(shape) + len(axes)))
