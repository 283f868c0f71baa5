"""softmax and log_softmax over one axis, max-subtracted so exp never overflows."""

from __future__ import annotations

from compiler import te
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.reduction import reduce_over
from compiler.topi.utils import check_float, check_tensor, normalize_axis


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``.

    Four computes, with TVM's names: the max, the shifted exponentials, their sum,
    and the normalized output.
    """
    axis = _check("softmax", x, axis)
    max_elem = reduce_over(x, (axis,), te.max, lambda i: x[i], "T_softmax_maxelem")
    shifted = te.compute(
        x.shape, lambda *i: te.exp(x[i] - max_elem[_drop(i, axis)]), "T_softmax_exp"
    )
    total = reduce_over(x, (axis,), te.sum, lambda i: shifted[i], "T_softmax_expsum")
    return te.compute(x.shape, lambda *i: shifted[i] / total[_drop(i, axis)], "T_softmax_norm")


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``: no exp of a large value,
    and no log of a tiny probability."""
    axis = _check("log_softmax", x, axis)
    max_elem = reduce_over(x, (axis,), te.max, lambda i: x[i], "T_log_softmax_maxelem")

    def shifted_exp(i: tuple[PrimExpr, ...]) -> PrimExpr:
        return te.exp(x[i] - max_elem[_drop(i, axis)])

    total = reduce_over(x, (axis,), te.sum, shifted_exp, "T_log_softmax_expsum")

    def element(*i: PrimExpr) -> PrimExpr:
        reduced = _drop(i, axis)
        return x[i] - max_elem[reduced] - te.log(total[reduced])

    return te.compute(x.shape, element, "T_log_softmax")


def _check(op: str, x: Tensor, axis: int) -> int:
    check_tensor(op, "x", x)
    check_float(op, "x", x)
    return normalize_axis(op, "axis", axis, x.ndim)


def _drop(index: tuple[PrimExpr, ...], axis: int) -> tuple[PrimExpr, ...]:
    """The index into a reduction over ``axis`` (which keeps no unit dimension)."""
    return index[:axis] + index[axis + 1 :]
