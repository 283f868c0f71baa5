"""Layer normalization over one or more axes, with gamma, beta and epsilon."""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.reduction import element_count, reduce_over
from compiler.topi.utils import (
    check_float,
    check_same_dtype,
    check_tensor,
    is_number,
    normalize_axes,
    same_dim,
    shape_str,
)


def layer_norm(
    data: Tensor,
    gamma: Tensor,
    beta: Tensor,
    axis: int | Sequence[int] = -1,
    epsilon: float = 1e-5,
) -> Tensor:
    """``(data - mean) / sqrt(var + epsilon) * gamma + beta`` over ``axis``.

    ``gamma`` and ``beta`` have the shape of the normalized axes, in order. The
    variance is the mean of squared deviations from the mean (two passes), which
    stays accurate when the mean is large compared with the spread.
    """
    op = "layer_norm"
    check_tensor(op, "data", data)
    check_float(op, "data", data)
    check_tensor(op, "gamma", gamma)
    check_tensor(op, "beta", beta)
    check_same_dtype(op, {"data": data, "gamma": gamma, "beta": beta})
    axes = normalize_axes(op, "axis", axis, data.ndim)
    if not axes:
        raise OperatorError(f"{op}: axis must name at least one axis")
    normalized = tuple(data.shape[a] for a in axes)
    for arg, t in (("gamma", gamma), ("beta", beta)):
        if t.ndim != len(axes) or not all(map(same_dim, t.shape, normalized)):
            dims = ", ".join(str(d) for d in normalized)
            raise OperatorError(
                f"{op}: {arg} has shape {shape_str(t)} but the normalized axes {list(axes)} "
                f"of data have shape ({dims})"
            )
    if not is_number(epsilon) or not 0 <= epsilon < math.inf:
        raise OperatorError(f"{op}: epsilon must be a non-negative number, got {epsilon!r}")
    count = element_count(data, axes)

    def reduced(i: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return tuple(v for a, v in enumerate(i) if a not in axes)

    total = reduce_over(data, axes, te.sum, lambda i: data[i], "T_layer_norm_sum")

    def squared_deviation(i: tuple[PrimExpr, ...]) -> PrimExpr:
        deviation = data[i] - total[reduced(i)] / count
        return deviation * deviation

    squares = reduce_over(data, axes, te.sum, squared_deviation, "T_layer_norm_squares")
    eps = E.const(float(epsilon), data.dtype)

    def element(*i: PrimExpr) -> PrimExpr:
        r = reduced(i)
        scale = tuple(i[a] for a in axes)
        normalized_value = (data[i] - total[r] / count) / te.sqrt(squares[r] / count + eps)
        return normalized_value * gamma[scale] + beta[scale]

    return te.compute(data.shape, element, "T_layer_norm")
