"""Reductions over axes: sum, max, min and mean, with numpy's ``axis`` and ``keepdims``.

``axis`` is None (every axis), an int or a list of ints; negative axes count from
the end. Reducing every axis without ``keepdims`` gives a 0-dimensional tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.utils import check_bool, check_float, check_tensor, normalize_axes

Axis = int | Sequence[int] | None


def reduce_over(
    data: Tensor,
    axes: tuple[int, ...],
    combiner: Callable[..., PrimExpr],
    source: Callable[[tuple[PrimExpr, ...]], PrimExpr],
    name: str,
    keepdims: bool = False,
) -> Tensor:
    """``combiner`` of ``source(full_index)`` over ``axes`` of ``data``'s index space.

    ``source`` receives the index of one element of ``data`` and returns what is
    reduced there, so softmax and layer_norm can reduce expressions, not just loads.
    """
    reduce_vars = [te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes]
    if keepdims:
        shape = tuple(E.const(1) if a in axes else data.shape[a] for a in range(data.ndim))
    else:
        shape = tuple(data.shape[a] for a in range(data.ndim) if a not in axes)

    reduced = {a: rv.var for a, rv in zip(axes, reduce_vars, strict=True)}

    def element(*index: PrimExpr) -> PrimExpr:
        outer = iter(index)
        full = []
        for a in range(data.ndim):
            if a not in reduced:
                full.append(next(outer))
                continue
            full.append(reduced[a])
            if keepdims:
                next(outer)
        return combiner(source(tuple(full)), axis=reduce_vars)

    return te.compute(shape, element, name=name)


def _reduction(
    name: str, combiner: Callable[..., PrimExpr]
) -> Callable[[Tensor, Axis, bool], Tensor]:
    def operator(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
        check_tensor(name, "data", data)
        axes = normalize_axes(name, "axis", axis, data.ndim)
        check_bool(name, "keepdims", keepdims)
        return reduce_over(data, axes, combiner, lambda i: data[i], f"T_{name}", keepdims)

    operator.__name__ = name
    operator.__qualname__ = name
    operator.__doc__ = f"The {name} of ``data`` over ``axis`` (None: all axes)."
    return operator


# TVM's names, shadowing the builtins inside this module.
sum = _reduction("sum", te.sum)
max = _reduction("max", te.max)
min = _reduction("min", te.min)


def mean(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """The mean of ``data`` over ``axis``: a sum, then a division by the count."""
    check_tensor("mean", "data", data)
    check_float("mean", "data", data)
    axes = normalize_axes("mean", "axis", axis, data.ndim)
    check_bool("mean", "keepdims", keepdims)
    total = reduce_over(data, axes, te.sum, lambda i: data[i], "T_mean_sum", keepdims)
    count = element_count(data, axes)
    return te.compute(total.shape, lambda *i: total[i] / count, name="T_mean")


def element_count(data: Tensor, axes: tuple[int, ...]) -> PrimExpr:
    """How many elements a reduction over ``axes`` combines, in ``data``'s dtype."""
    dims = [data.shape[a] for a in axes]
    values = [d.value for d in dims if isinstance(d, E.IntImm)]
    if len(values) == len(dims):
        return E.const(math.prod(values), data.dtype)
    count: PrimExpr = E.const(1)
    for d in dims:
        count = count * d
    return te.cast(data.dtype, count)
