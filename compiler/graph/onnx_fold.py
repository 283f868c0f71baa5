"""Constant folding at import: an ONNX node whose inputs are all known is evaluated
with numpy, and its output becomes a constant of the graph.

Exporters compute shapes at run time (``Shape -> Gather -> Unsqueeze -> Concat ->
Reshape``) and rearrange weights with Transpose, Cast or Unsqueeze nodes. With static
shapes all of that is known at import; folding it leaves the graph only the float32
computation, and gives every Reshape a constant target. Integer values (shapes,
indices) exist only here: none reaches a graph node. (Shape, Size, and the reshapes
of constants, need no folder: their converters give constants already.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import helper

from compiler.graph.onnx_node import ConverterTable, NodeContext

FOLDERS = ConverterTable()
_folds = FOLDERS.register


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX Div truncates integers towards zero, as C does; numpy's ``//`` floors."""
    if np.issubdtype(a.dtype, np.integer):
        return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
    return np.divide(a, b)


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative,
    "Abs": np.abs,
    "Sqrt": np.sqrt,
    "Exp": np.exp,
    "Log": np.log,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Relu": lambda a: np.maximum(a, 0),
    "Not": np.logical_not,
}

# Arithmetic keeps the first input's dtype (ONNX's rule); comparisons make bools.
_ARITHMETIC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": _divide,
    "Pow": np.power,
    "Max": np.maximum,
    "Min": np.minimum,
    "Sum": np.add,
}
_COMPARISON: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "And": np.logical_and,
    "Or": np.logical_or,
}


def _arrays(ctx: NodeContext) -> list[np.ndarray]:
    return [ctx.known(i, "operand") for i in range(len(ctx.node.input)) if ctx.has(i)]


@_folds(*_UNARY)
def _unary(ctx: NodeContext) -> np.ndarray:
    (a,) = _arrays(ctx)
    return np.asarray(_UNARY[ctx.op_type](a)).astype(a.dtype, copy=False)


@_folds(*_ARITHMETIC)
def _arithmetic(ctx: NodeContext) -> np.ndarray:
    """Binary, or variadic for Sum, Max and Min: folded left to right."""
    first, *rest = _arrays(ctx)
    result = first
    for operand in rest:
        result = _ARITHMETIC[ctx.op_type](result, operand)
    return np.asarray(result).astype(first.dtype, copy=False)


@_folds(*_COMPARISON)
def _comparison(ctx: NodeContext) -> np.ndarray:
    a, b = _arrays(ctx)
    return np.asarray(_COMPARISON[ctx.op_type](a, b))


@_folds("Where")
def _where(ctx: NodeContext) -> np.ndarray:
    condition, a, b = _arrays(ctx)
    return np.where(condition, a, b)


@_folds("Constant")
def _constant(ctx: NodeContext) -> np.ndarray:
    for name, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if ctx.attr(name) is not None:
            return np.array(ctx.attr(name), dtype=dtype)
    for name, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if ctx.attr(name) is not None:
            return np.array(ctx.attr(name), dtype=dtype).reshape(-1)
    value = ctx.attr("value")
    if isinstance(value, np.ndarray):
        return value
    raise ctx.unsupported(
        "only value, value_float(s) and value_int(s) constants are supported, not strings "
        "or sparse tensors"
    )


@_folds("ConstantOfShape")
def _constant_of_shape(ctx: NodeContext) -> np.ndarray:
    shape = ctx.known(0, "shape")
    value = ctx.attr("value")
    fill = value.reshape(-1) if isinstance(value, np.ndarray) else np.zeros(1, np.float32)
    return np.full([int(d) for d in shape], fill[0], dtype=fill.dtype)


@_folds("Cast")
def _cast(ctx: NodeContext) -> np.ndarray:
    (a,) = _arrays(ctx)
    return a.astype(helper.tensor_dtype_to_np_dtype(ctx.required("to")))


@_folds("Range")
def _range(ctx: NodeContext) -> np.ndarray:
    start, limit, delta = _arrays(ctx)
    return np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)


@_folds("Gather")
def _gather(ctx: NodeContext) -> np.ndarray:
    data, indices = _arrays(ctx)
    return np.take(data, indices, axis=ctx.axis(ctx.attr("axis", 0), data.ndim))


@_folds("Concat")
def _concat(ctx: NodeContext) -> np.ndarray:
    arrays = _arrays(ctx)
    return np.concatenate(arrays, axis=ctx.axis(ctx.required("axis"), arrays[0].ndim))


@_folds("Transpose")
def _transpose(ctx: NodeContext) -> np.ndarray:
    (a,) = _arrays(ctx)
    return np.ascontiguousarray(np.transpose(a, ctx.attr("perm")))


@_folds("Expand")
def _expand(ctx: NodeContext) -> np.ndarray:
    a, shape = _arrays(ctx)
    return np.broadcast_to(a, np.broadcast_shapes(a.shape, tuple(shape.tolist()))).copy()


@_folds("Slice")
def _slice(ctx: NodeContext) -> np.ndarray:
    """Opset 10 moved starts, ends, axes and steps from attributes to inputs."""
    a = ctx.known(0, "data")
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", tuple(range(len(starts))))
        steps: tuple[int, ...] = (1,) * len(starts)
    else:
        starts, ends = ctx.known(1, "starts").tolist(), ctx.known(2, "ends").tolist()
        axes = ctx.known(3, "axes").tolist() if ctx.has(3) else tuple(range(len(starts)))
        steps = ctx.known(4, "steps").tolist() if ctx.has(4) else (1,) * len(starts)
    index = [slice(None)] * a.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        index[ctx.axis(int(axis), a.ndim)] = slice(int(start), int(end), int(step))
    return a[tuple(index)].copy()
