"""Converters of ONNX's layers: convolution, Gemm and MatMul, batch and layer
normalization, pooling, softmax, mean.

Weights are rearranged here, once, into the layout the graph operator takes (Gemm's B
becomes dense's (N, K) weight, a bias a (C, 1, 1) constant); batch normalization
becomes a per-channel multiply and add, which a later pass folds into the convolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compiler.graph.onnx_convert import flattened, scalar
from compiler.graph.onnx_node import ConverterTable, NodeContext, Value

CONVERTERS = ConverterTable()
_converts = CONVERTERS.register


def _window_pads(
    ctx: NodeContext,
    size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from ``pads`` or ``auto_pad``; ONNX lists the pads as
    (x1_begin, x2_begin, x1_end, x2_end), which is that order already."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        top, left, bottom, right = ctx.ints("pads", (0, 0, 0, 0), 4)
        return top, left, bottom, right
    if auto_pad == "VALID":
        return 0, 0, 0, 0
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(
            f"auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, got {auto_pad!r}"
        )
    begin, end = [], []
    for extent, k, s, d in zip(size, kernel, strides, dilations, strict=True):
        total = max((math.ceil(extent / s) - 1) * s + (k - 1) * d + 1 - extent, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return begin[0], begin[1], end[0], end[1]


def _image(ctx: NodeContext) -> tuple[str, tuple[int, ...]]:
    x, shape = ctx.value(0), ctx.shape(0)
    if len(shape) != 4:
        raise ctx.unsupported(f"only 2-D images (4-D NCHW input) are supported, got shape {shape}")
    return x, shape


def _channel_vector(ctx: NodeContext, index: int, rank: int) -> Value:
    """Input ``index``, one value per channel, shaped to broadcast over the channel
    axis of a value of ``rank`` dimensions: (C, 1, 1) for NCHW."""
    shape = (-1, *(1,) * (rank - 2))
    array = ctx.constant(index)
    if array is not None:
        return array.reshape(shape)
    size = math.prod(ctx.shape(index))
    return ctx.reshape(ctx.value(index), (size, *shape[1:]))


@_converts("Conv")
def _conv(ctx: NodeContext) -> Value:
    x, shape = _image(ctx)
    kernel = ctx.shape(1)[2:]
    if ctx.attr("kernel_shape") not in (None, kernel):
        raise ctx.error(f"kernel_shape {ctx.attr('kernel_shape')} differs from W's {kernel}")
    strides = ctx.ints("strides", (1, 1), 2)
    dilations = ctx.ints("dilations", (1, 1), 2)
    out = ctx.emit(
        "conv2d",
        [x, ctx.value(1)],
        stride=strides,
        padding=_window_pads(ctx, shape[2:], kernel, strides, dilations),
        dilation=dilations,
        groups=int(ctx.attr("group", 1)),
    )
    if ctx.has(2):
        out = ctx.emit("add", [out, _channel_vector(ctx, 2, 4)])
    return out


@_converts("Gemm")
def _gemm(ctx: NodeContext) -> Value:
    """``alpha op(A) op(B) + beta C``; a constant B becomes dense's (N, K) weight with
    alpha folded in, a constant C the bias with beta folded in."""
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    a = ctx.constant(0)
    x: Value = ctx.value(0)
    if ctx.attr("transA", 0):
        x = ctx.emit("transpose", [x], axes=(1, 0)) if a is None else np.ascontiguousarray(a.T)
    b = ctx.constant(1)
    if b is not None and ctx.attr("transB", 0) and alpha == 1.0:
        out = ctx.emit("dense", [x, ctx.value(1)])
    elif b is not None:
        weight = b if ctx.attr("transB", 0) else b.T
        out = ctx.emit("dense", [x, np.ascontiguousarray(weight * np.float32(alpha))])
    else:
        out = ctx.emit("matmul", [x, ctx.value(1)], transpose_b=bool(ctx.attr("transB", 0)))
        if alpha != 1.0:
            out = ctx.emit("multiply", [out, scalar(alpha)])
    if not ctx.has(2) or beta == 0.0:
        return out
    c = ctx.constant(2)
    if c is not None and beta != 1.0:
        return ctx.emit("add", [out, c * np.float32(beta)])
    bias = ctx.value(2)
    if beta != 1.0:
        bias = ctx.emit("multiply", [bias, scalar(beta)])
    return ctx.emit("add", [out, bias])


def _as_batch(ctx: NodeContext, value: str, shape: tuple[int, ...], batch: tuple[int, ...]) -> str:
    """An N-D operand of MatMul as the 3-D operand of a batched matmul: its batch
    dimensions flattened into one, or a single batch of 1 that broadcasts."""
    own = shape[:-2]
    if math.prod(own) == 1:
        return ctx.reshape(value, (1, *shape[-2:]))
    if (1,) * (len(batch) - len(own)) + own != batch:
        raise ctx.unsupported(
            f"batch dimensions {own} broadcast to {batch} only in part; a batched matmul "
            "broadcasts a whole batch of 1"
        )
    return ctx.reshape(value, (math.prod(batch), *shape[-2:]))


@_converts("MatMul")
def _matmul(ctx: NodeContext) -> Value:
    """numpy's matmul: a 1-D operand gains a dimension that the result drops again,
    a 2-D B multiplies every row of A at once, and otherwise the batch dimensions
    broadcast into one batched matmul."""
    a_shape, b_shape = ctx.shape(0), ctx.shape(1)
    if not a_shape or not b_shape:
        raise ctx.error(f"MatMul needs operands of rank 1 or more, got {a_shape} and {b_shape}")
    if len(a_shape) == len(b_shape) == 1:
        raise ctx.unsupported("a MatMul of two vectors makes a 0-D value")
    a_full = a_shape if len(a_shape) > 1 else (1, *a_shape)
    b_full = b_shape if len(b_shape) > 1 else (*b_shape, 1)
    a, b = ctx.reshape(ctx.value(0), a_full), ctx.reshape(ctx.value(1), b_full)
    rows, columns = a_full[-2], b_full[-1]
    if len(b_full) == 2:
        batch = a_full[:-2]
        flat = ctx.reshape(a, (math.prod(batch) * rows, a_full[-1]))
        product = ctx.emit("matmul", [flat, b])
    else:
        try:
            batch = tuple(np.broadcast_shapes(a_full[:-2], b_full[:-2]))
        except ValueError:
            raise ctx.error(f"shapes {a_shape} and {b_shape} do not broadcast") from None
        a3, b3 = _as_batch(ctx, a, a_full, batch), _as_batch(ctx, b, b_full, batch)
        product = ctx.emit("matmul", [a3, b3])
    kept_rows = (rows,) if len(a_shape) > 1 else ()
    kept_columns = (columns,) if len(b_shape) > 1 else ()
    return ctx.reshape(product, (*batch, *kept_rows, *kept_columns))


@_converts("BatchNormalization")
def _batch_norm(ctx: NodeContext) -> Value:
    """Inference: ``x * scale / sqrt(var + eps) + (bias - mean * that)``, computed in
    float64 at import and applied per channel."""
    if ctx.attr("training_mode", 0) or ctx.attr("spatial", 1) == 0:
        raise ctx.unsupported("only inference with per-channel statistics is supported")
    rank = len(ctx.shape(0))
    if rank < 2:
        raise ctx.error(f"input {ctx.node.input[0]!r} needs a channel axis, got rank {rank}")
    scale, bias, mean, variance = (
        ctx.known(i, what).astype(np.float64)
        for i, what in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var"))
    )
    factor = scale / np.sqrt(variance + float(ctx.attr("epsilon", 1e-5)))
    shift = bias - mean * factor
    shape = (-1, *(1,) * (rank - 2))
    scaled = ctx.emit("multiply", [ctx.value(0), factor.astype(np.float32).reshape(shape)])
    return ctx.emit("add", [scaled, shift.astype(np.float32).reshape(shape)])


def _ceil_mode_changes_nothing(
    ctx: NodeContext,
    size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: tuple[int, int, int, int],
) -> None:
    """ceil_mode=1 adds a last, partial window where the windows do not fit evenly;
    accept it only where they do, so the output is what ceil_mode=0 gives."""
    if not ctx.attr("ceil_mode", 0):
        return
    for axis, (extent, k, s) in enumerate(zip(size, kernel, strides, strict=True)):
        span = extent + pads[axis] + pads[axis + 2] - k
        floor, ceil = span // s + 1, math.ceil(span / s) + 1
        if (ceil - 1) * s >= extent + pads[axis]:
            ceil -= 1  # a last window that starts in the end padding is dropped
        if ceil != floor:
            raise ctx.unsupported(
                f"ceil_mode=1 adds a partial window on spatial axis {axis} here "
                f"({floor} windows would become {ceil}); only ceil_mode=0 is supported"
            )


@_converts("MaxPool", "AveragePool")
def _pool(ctx: NodeContext) -> Value:
    x, shape = _image(ctx)
    kernel = ctx.ints("kernel_shape", None, 2)
    strides = ctx.ints("strides", (1, 1), 2)
    if ctx.ints("dilations", (1, 1), 2) != (1, 1):
        raise ctx.unsupported("pooling with dilations other than 1")
    pads = _window_pads(ctx, shape[2:], kernel, strides, (1, 1))
    _ceil_mode_changes_nothing(ctx, shape[2:], kernel, strides, pads)
    window = {"kernel": kernel, "stride": strides, "padding": pads}
    if ctx.op_type == "MaxPool":
        return ctx.emit("max_pool2d", [x], **window)
    include = bool(ctx.attr("count_include_pad", 0))
    return ctx.emit("avg_pool2d", [x], **window, count_include_pad=include)


@_converts("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: NodeContext) -> Value:
    x, shape = _image(ctx)
    if ctx.op_type == "GlobalAveragePool":
        return ctx.emit("global_avg_pool2d", [x])
    return ctx.emit("max_pool2d", [x], kernel=shape[2:], stride=(1, 1), padding=(0, 0, 0, 0))


@_converts("LRN")
def _lrn(ctx: NodeContext) -> Value:
    _image(ctx)
    return ctx.emit(
        "lrn",
        [ctx.value(0)],
        size=int(ctx.required("size")),
        alpha=float(ctx.attr("alpha", 1e-4)),
        beta=float(ctx.attr("beta", 0.75)),
        bias=float(ctx.attr("bias", 1.0)),
    )


@_converts("Softmax")
def _softmax(ctx: NodeContext) -> Value:
    """Before opset 13 Softmax flattened its input to 2-D at ``axis`` (default 1) and
    normalized each row; since, it normalizes along ``axis`` (default -1) alone."""
    shape = ctx.shape(0)
    axis = ctx.axis(ctx.attr("axis", -1 if ctx.opset >= 13 else 1), len(shape))
    if ctx.opset >= 13 or axis == len(shape) - 1:
        return ctx.emit("softmax", [ctx.value(0)], axis=axis)
    rows = ctx.reshape(ctx.value(0), flattened(ctx, shape, axis))
    return ctx.reshape(ctx.emit("softmax", [rows], axis=1), shape)


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


@_converts("LayerNormalization")
def _layer_norm(ctx: NodeContext) -> Value:
    """Normalizes over ``axis`` and every axis after it; a constant scale or bias that
    only broadcasts to those axes is expanded at import."""
    shape = ctx.shape(0)
    first = ctx.axis(ctx.attr("axis", -1), len(shape))
    normalized = shape[first:]
    operands: list[Value] = [ctx.value(0)]
    for index, what in ((1, "Scale"), (2, "B")):
        if index == 2 and not ctx.has(index):
            operands.append(np.zeros(normalized, np.float32))
        elif ctx.shape(index) == normalized:
            operands.append(ctx.value(index))
        elif ctx.constant(index) is not None and _broadcasts(ctx.shape(index), normalized):
            operands.append(
                np.ascontiguousarray(np.broadcast_to(ctx.known(index, what), normalized))
            )
        else:
            raise ctx.unsupported(
                f"{what} has shape {ctx.shape(index)}; it must be {normalized}, or a constant "
                "that broadcasts to it"
            )
    axes = tuple(range(first, len(shape)))
    return ctx.emit(
        "layer_norm",
        operands,
        axis=axes[0] if len(axes) == 1 else axes,
        epsilon=float(ctx.attr("epsilon", 1e-5)),
    )


@_converts("ReduceMean")
def _reduce_mean(ctx: NodeContext) -> Value:
    """Opset 18 moved the axes to an input; no axes means all of them, unless
    noop_with_empty_axes makes the node an identity."""
    rank = len(ctx.shape(0))
    axes = ctx.axes("axes", 1, rank)
    if not axes and ctx.attr("noop_with_empty_axes", 0):
        return ctx.value(0)
    keepdims = bool(ctx.attr("keepdims", 1))
    return ctx.emit("mean", [ctx.value(0)], axis=axes or tuple(range(rank)), keepdims=keepdims)
