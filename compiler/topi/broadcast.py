"""Binary elementwise operators with numpy broadcasting.

Shapes align from the right; a dimension of 1 stretches to the other's size; a
missing leading dimension counts as 1. Either operand may be a Python number,
which takes the tensor's dtype. Two tensors must share a dtype: nothing is
promoted behind the caller's back.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.utils import (
    check_float,
    check_same_dtype,
    is_one,
    same_dim,
    scalar,
    shape_str,
)

Operand = Tensor | int | float


def broadcast_shape(op: str, a: Tensor, b: Tensor) -> tuple[PrimExpr, ...]:
    """The numpy broadcast of the two shapes, or an OperatorError naming the axis."""
    ndim = max(a.ndim, b.ndim)
    one = E.const(1)
    a_dims = (one,) * (ndim - a.ndim) + tuple(a.shape)
    b_dims = (one,) * (ndim - b.ndim) + tuple(b.shape)
    out = []
    for axis, (da, db) in enumerate(zip(a_dims, b_dims, strict=True)):
        if same_dim(da, db) or is_one(db):
            out.append(da)
        elif is_one(da):
            out.append(db)
        else:
            raise OperatorError(
                f"{op}: shapes {shape_str(a)} and {shape_str(b)} do not broadcast: "
                f"{da} vs {db} at axis {axis - ndim}"
            )
    return tuple(out)


def broadcast_index(
    tensor: Tensor, out_shape: tuple[PrimExpr, ...], index: tuple[PrimExpr, ...]
) -> tuple[PrimExpr, ...]:
    """The element of ``tensor`` that output element ``index`` reads."""
    offset = len(out_shape) - tensor.ndim
    return tuple(
        E.const(0) if is_one(d) and not is_one(out_shape[offset + j]) else index[offset + j]
        for j, d in enumerate(tensor.shape)
    )


def _binary(
    name: str, combine: Callable[[PrimExpr, PrimExpr], PrimExpr], needs_float: bool = False
) -> Callable[[Operand, Operand], Tensor]:
    def operator(a: Operand, b: Operand) -> Tensor:
        operands = {"a": a, "b": b}
        tensors = {arg: v for arg, v in operands.items() if isinstance(v, Tensor)}
        if not tensors:
            raise OperatorError(f"{name}: at least one of a and b must be a te.Tensor")
        dtype = check_same_dtype(name, tensors)
        if needs_float:
            for arg, tensor in tensors.items():
                check_float(name, arg, tensor)
        constants = {
            arg: scalar(name, arg, v, dtype)
            for arg, v in operands.items()
            if not isinstance(v, Tensor)
        }
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            shape = broadcast_shape(name, a, b)
        else:
            shape = next(iter(tensors.values())).shape

        def element(arg: str, index: tuple[PrimExpr, ...]) -> PrimExpr:
            value = operands[arg]
            if isinstance(value, Tensor):
                return value[broadcast_index(value, shape, index)]
            return constants[arg]

        return te.compute(shape, lambda *i: combine(element("a", i), element("b", i)), f"T_{name}")

    operator.__name__ = name
    operator.__qualname__ = name
    operator.__doc__ = f"Elementwise {name} of ``a`` and ``b`` with numpy broadcasting."
    return operator


add = _binary("add", lambda x, y: x + y)
subtract = _binary("subtract", lambda x, y: x - y)
multiply = _binary("multiply", lambda x, y: x * y)
divide = _binary("divide", lambda x, y: x / y)
maximum = _binary("maximum", lambda x, y: te.max(x, y))
minimum = _binary("minimum", lambda x, y: te.min(x, y))
power = _binary("power", te.power, needs_float=True)
