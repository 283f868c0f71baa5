"""Constant padding, a compute of its own so schedules can inline it or keep it."""

from __future__ import annotations

from collections.abc import Sequence

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.utils import check_int, check_tensor, clamp, scalar, static_shape


def pad(
    data: Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    pad_value: float | PrimExpr = 0.0,
    name: str = "PadInput",
) -> Tensor:
    """``data`` with ``pad_before[a]`` / ``pad_after[a]`` elements of ``pad_value``
    added before / after axis ``a`` (``pad_after`` defaults to ``pad_before``).

    The element is ``te.if_then_else(inside, data[clamped index], pad_value)``; the
    clamp keeps the load in bounds when a backend evaluates both sides of the select.
    """
    check_tensor("pad", "data", data)
    in_shape = static_shape("pad", "data", data)
    before = _widths("pad_before", pad_before, data.ndim)
    after = before if pad_after is None else _widths("pad_after", pad_after, data.ndim)
    if isinstance(pad_value, PrimExpr):
        fill = pad_value if pad_value.dtype == data.dtype else E.Cast(data.dtype, pad_value)
    else:
        fill = scalar("pad", "pad_value", pad_value, data.dtype)
    shape = tuple(n + b + a for n, b, a in zip(in_shape, before, after, strict=True))

    def element(*index: PrimExpr) -> PrimExpr:
        conditions = []
        source = []
        for i, n, b, a in zip(index, in_shape, before, after, strict=True):
            if b == 0 and a == 0:
                source.append(i)
                continue
            if b > 0:
                conditions.append(i >= b)
            if a > 0:
                conditions.append(i < b + n)
            source.append(clamp(i - b if b else i, n, low=b > 0, high=a > 0))
        if not conditions:
            return data[tuple(source)]
        return te.if_then_else(te.all_of(*conditions), data[tuple(source)], fill)

    return te.compute(shape, element, name=name)


def _widths(arg: str, widths: object, ndim: int) -> tuple[int, ...]:
    if not isinstance(widths, Sequence) or len(widths) != ndim:
        raise OperatorError(f"pad: {arg} must list {ndim} widths (one per axis), got {widths!r}")
    return tuple(check_int("pad", f"{arg}[{k}]", w, minimum=0) for k, w in enumerate(widths))
