"""Argument checks shared by the operators; each raises OperatorError naming the input."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.errors import OperatorError


def check_tensor(op: str, arg: str, value: Any, ndim: int | None = None) -> Tensor:
    """``value`` as a Tensor with ``ndim`` dimensions (any when None)."""
    if not isinstance(value, Tensor):
        raise OperatorError(f"{op}: {arg} must be a te.Tensor, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise OperatorError(
            f"{op}: {arg} must have {ndim} dimensions, got {value.ndim} (shape {shape_str(value)})"
        )
    return value


def check_float(op: str, arg: str, tensor: Tensor) -> None:
    """Operators built on exp/log/erf/sqrt need a float input; an int would change dtype."""
    if not E.is_float(tensor.dtype):
        raise OperatorError(
            f"{op}: {arg} has dtype {tensor.dtype}; expected one of {', '.join(E.FLOAT_DTYPES)}"
        )


def check_same_dtype(op: str, tensors: dict[str, Tensor]) -> str:
    """The common dtype of ``tensors``; operators never mix dtypes implicitly."""
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} is {dtype}" for name, dtype in dtypes.items())
        raise OperatorError(f"{op}: inputs must share one dtype ({listed}); cast with te.cast")
    return next(iter(dtypes.values()))


def shape_str(tensor: Tensor) -> str:
    dims = [str(d) for d in tensor.shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def static_shape(op: str, arg: str, tensor: Tensor) -> tuple[int, ...]:
    """The shape as ints; layout operators compute output sizes and need constants."""
    dims = []
    for d in tensor.shape:
        if not isinstance(d, E.IntImm):
            raise OperatorError(
                f"{op}: {arg} has the symbolic shape {shape_str(tensor)}; "
                "this operator needs constant dimensions"
            )
        dims.append(d.value)
    return tuple(dims)


def is_int(value: Any) -> bool:
    """A Python or numpy integer, but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A Python or numpy int or float, but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def scalar(op: str, arg: str, value: Any, dtype: str) -> PrimExpr:
    """A Python or numpy number as a constant of ``dtype``; a fraction for an integer
    dtype is an error rather than a silent truncation."""
    if not is_number(value):
        raise OperatorError(f"{op}: {arg} must be a number, got {value!r}")
    if not is_int(value) and not E.is_float(dtype):
        raise OperatorError(
            f"{op}: {arg} is the float {value} but the tensor is {dtype}; "
            "pass an int or cast the tensor"
        )
    return E.const(int(value) if is_int(value) else float(value), dtype)


def check_int(op: str, arg: str, value: Any, minimum: int) -> int:
    if not is_int(value):
        raise OperatorError(f"{op}: {arg} must be an integer, got {value!r}")
    if value < minimum:
        bound = "positive" if minimum == 1 else f"at least {minimum}"
        raise OperatorError(f"{op}: {arg} must be {bound}, got {value}")
    return int(value)


def check_bool(op: str, arg: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OperatorError(f"{op}: {arg} must be True or False, got {value!r}")
    return value


def int_tuple(op: str, arg: str, value: Any, length: int, minimum: int) -> tuple[int, ...]:
    """An int or a sequence of ``length`` ints, each at least ``minimum``."""
    if is_int(value):
        value = (value,) * length
    if not isinstance(value, Sequence) or len(value) != length:
        raise OperatorError(f"{op}: {arg} must be an int or {length} ints, got {value!r}")
    return tuple(check_int(op, f"{arg}[{i}]", v, minimum) for i, v in enumerate(value))


def normalize_axes(op: str, arg: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """Axes as sorted non-negative ints; None means all axes, negatives count from the end."""
    if axis is None:
        return tuple(range(ndim))
    items = [axis] if is_int(axis) else axis
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise OperatorError(f"{op}: {arg} must be None, an int or a list of ints, got {axis!r}")
    axes = [normalize_axis(op, arg, a, ndim) for a in items]
    if len(set(axes)) != len(axes):
        raise OperatorError(f"{op}: {arg} {list(items)} names an axis twice")
    return tuple(sorted(axes))


def normalize_axis(op: str, arg: str, axis: Any, ndim: int) -> int:
    if not is_int(axis):
        raise OperatorError(f"{op}: {arg} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise OperatorError(
            f"{op}: {arg} {axis} is out of range for {ndim} dimensions "
            f"(expected {-ndim} to {ndim - 1})"
        )
    return int(axis) % ndim


def same_dim(a: PrimExpr, b: PrimExpr) -> bool:
    """Equal constants, or the same symbolic variable."""
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return a.value == b.value
    return a is b


def is_one(d: PrimExpr) -> bool:
    return isinstance(d, E.IntImm) and d.value == 1


def clamp(index: PrimExpr, extent: int, low: bool = True, high: bool = True) -> PrimExpr:
    """``index`` limited to ``[0, extent)`` on the sides that can overflow.

    A ``Select`` may evaluate both branches, so a load in the branch that is not
    taken must still be in bounds; pad and concatenate clamp their indices.
    """
    if low:
        index = E.Max(index, E.const(0, index.dtype))
    if high:
        index = E.Min(index, E.const(extent - 1, index.dtype))
    return index
