"""The tensor-expression language: placeholders, computes, reductions, intrinsics."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr, Range, Var, check_dtype, convert
from compiler.ir.node import visit
from compiler.ir.stmt import IterKind, IterVar
from compiler.te.tensor import ComputeOp, PlaceholderOp, Reduce, Tensor, TensorError, ViewOp


def var(name: str = "v", dtype: str = "int32") -> Var:
    return Var(name, check_dtype(dtype))


size_var = var


def const(value: Any, dtype: str | None = None) -> PrimExpr:
    return E.const(value, dtype)


def _shape(shape: Any, what: str) -> tuple[PrimExpr, ...]:
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    dims = tuple(convert(s) for s in shape)
    for d in dims:
        if isinstance(d, E.IntImm) and d.value <= 0:
            raise TensorError(f"{what}: dimension {d.value} must be positive")
        if not E.is_int(d.dtype):
            raise TensorError(f"{what}: dimension {d} has dtype {d.dtype}, not an integer type")
    return dims


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor. ``te.placeholder((n,), name="A")``."""
    return PlaceholderOp(name, _shape(shape, f"placeholder {name!r}"), check_dtype(dtype)).output(0)


def view(
    source: Tensor,
    shape: Any,
    element: Callable[..., tuple[PrimExpr, ...]],
    name: str = "view",
) -> Tensor:
    """``source`` read in another shape or order without a copy: ``view[i]`` is
    ``source[element(*i)]``, substituted into every computation that reads the view
    (a transpose folded into the matmul after it). A view is never an argument of
    ``create_prim_func``."""
    return ViewOp(name, _shape(shape, "view"), source, element).output()


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom`` = (lo, hi) or a Range."""
    if isinstance(dom, Range):
        rng = dom
    else:
        lo, hi = dom
        if isinstance(lo, int) and isinstance(hi, int):
            extent = E.const(hi - lo)
        else:
            extent = convert(hi) if isinstance(lo, int) and lo == 0 else convert(hi) - convert(lo)
        rng = Range(convert(lo), extent)
    return IterVar(Var(name), rng, IterKind.REDUCE)


def _axis_names(fcompute: Callable[..., Any], ndim: int) -> list[str]:
    params = inspect.signature(fcompute).parameters.values()
    named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return [f"i{k}" for k in range(ndim)]
    if len(named) != ndim:
        raise TensorError(
            f"compute function takes {len(named)} arguments but the shape has {ndim} dimensions"
        )
    return named


def compute(
    shape: Any,
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Tensor:
    """``output[i, ...] = fcompute(i, ...)`` over ``shape``."""
    dims = _shape(shape, f"compute {name!r}")
    axis = tuple(
        IterVar(Var(n), Range(E.const(0), d), IterKind.SPATIAL)
        for n, d in zip(_axis_names(fcompute, len(dims)), dims, strict=True)
    )
    body = fcompute(*(iv.var for iv in axis))
    if isinstance(body, (list, tuple)):
        raise TensorError(f"compute {name!r}: multiple outputs are not supported; return one value")
    body = convert(body)
    _check_reduce_placement(body, name)
    return ComputeOp(name, axis, body, tag, attrs).output(0)


def _check_reduce_placement(body: PrimExpr, name: str) -> None:
    def check(n: Any) -> None:
        if isinstance(n, Reduce) and n is not body:
            raise TensorError(
                f"compute {name!r}: a reduction (te.sum/te.max/te.min) must be the whole "
                "body; compute it in its own te.compute and use that tensor"
            )

    visit(body, check)


def _axes(axis: Any) -> tuple[IterVar, ...]:
    items = axis if isinstance(axis, (list, tuple)) else [axis]
    for a in items:
        if not isinstance(a, IterVar) or a.kind is not IterKind.REDUCE:
            raise TensorError(f"reduction axis {a!r} is not a te.reduce_axis")
    return tuple(items)


def _reducer(combiner: str, elementwise: type[E.BinaryOp]) -> Callable[..., PrimExpr]:
    def reduce(
        expr: Any, axis: Any = None, where: Any = None, init: Any = None, *rest: Any
    ) -> PrimExpr:
        is_reduction = isinstance(axis, IterVar) or (
            isinstance(axis, (list, tuple)) and all(isinstance(a, IterVar) for a in axis)
        )
        if axis is not None and not is_reduction:
            return E._binary(elementwise, expr, axis)
        if axis is None:
            raise TensorError(f"te.{combiner} needs axis= (a reduce_axis) or a second operand")
        source = convert(expr)
        condition = convert(where) if where is not None else None
        start = convert(init, like=source.dtype) if init is not None else None
        return Reduce(combiner, source, _axes(axis), condition, start)

    reduce.__name__ = combiner
    return reduce


# TVM's names, shadowing the builtins inside this module.
sum = _reducer("sum", E.Add)
max = _reducer("max", E.Max)
min = _reducer("min", E.Min)


def reduce_identity(combiner: str, dtype: str) -> PrimExpr:
    if combiner == "sum":
        return E.const(0, dtype)
    if combiner == "max":
        return min_value(dtype)
    return max_value(dtype)


def min_value(dtype: str) -> PrimExpr:
    if E.is_float(dtype):
        return E.const(-math.inf, dtype)
    bits = int(dtype.removeprefix("uint").removeprefix("int"))
    return E.const(0 if dtype.startswith("uint") else -(2 ** (bits - 1)), dtype)


def max_value(dtype: str) -> PrimExpr:
    if E.is_float(dtype):
        return E.const(math.inf, dtype)
    bits = int(dtype.removeprefix("uint").removeprefix("int"))
    return E.const(2**bits - 1 if dtype.startswith("uint") else 2 ** (bits - 1) - 1, dtype)


def if_then_else(condition: Any, true_value: Any, false_value: Any) -> PrimExpr:
    cond = convert(condition)
    if isinstance(true_value, PrimExpr) or not isinstance(false_value, PrimExpr):
        t = convert(true_value)
        f = convert(false_value, like=t.dtype)
    else:
        f = convert(false_value)
        t = convert(true_value, like=f.dtype)
    common = E.promote(t.dtype, f.dtype)
    t = t if t.dtype == common else E.Cast(common, t)
    f = f if f.dtype == common else E.Cast(common, f)
    return E.Select(cond, t, f)


def _float_intrinsic(op: str) -> Callable[[Any], PrimExpr]:
    def call(x: Any) -> PrimExpr:
        value = convert(x)
        if not E.is_float(value.dtype):
            value = E.Cast("float32", value)
        return E.Call(op, (value,), value.dtype)

    call.__name__ = op
    return call


exp = _float_intrinsic("exp")
log = _float_intrinsic("log")
sqrt = _float_intrinsic("sqrt")
tanh = _float_intrinsic("tanh")
sigmoid = _float_intrinsic("sigmoid")
erf = _float_intrinsic("erf")
floor = _float_intrinsic("floor")
ceil = _float_intrinsic("ceil")


def power(x: Any, y: Any) -> PrimExpr:
    base = convert(x)
    if not E.is_float(base.dtype):
        base = E.Cast("float32", base)
    exponent = convert(y, like=base.dtype)
    if exponent.dtype != base.dtype:
        exponent = E.Cast(base.dtype, exponent)
    return E.Call("pow", (base, exponent), base.dtype)


pow = power  # TVM's name


def abs(x: Any) -> PrimExpr:  # TVM's name
    value = convert(x)
    if E.is_float(value.dtype):
        return E.Call("fabs", (value,), value.dtype)
    return E.Select(value < 0, -value, value)


def cast(dtype: str, value: Any) -> PrimExpr:
    return E.Cast(check_dtype(dtype), convert(value))


def all_of(*conditions: Any) -> PrimExpr:
    result = convert(conditions[0])
    for c in conditions[1:]:
        result = E.And(result, convert(c))
    return result
