"""Layout operators: transpose, reshape, concatenate, layout_transform (NCHW <-> NCHW[x]c).
They move elements, never change them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.utils import (
    check_int,
    check_same_dtype,
    check_tensor,
    clamp,
    is_int,
    normalize_axis,
    same_dim,
    shape_str,
    static_shape,
)


def transpose(a: Tensor, axes: Sequence[int] | None = None, *, view: bool = False) -> Tensor:
    """Permute the axes: output axis ``i`` is input axis ``axes[i]`` (None: reverse them).
    With ``view``, a view of ``a`` that its readers index in place (``te.view``)."""
    check_tensor("transpose", "a", a)
    if axes is None:
        perm = tuple(reversed(range(a.ndim)))
    else:
        if not isinstance(axes, Sequence) or len(axes) != a.ndim:
            raise OperatorError(
                f"transpose: axes must list each of the {a.ndim} axes once, got {axes!r}"
            )
        perm = tuple(normalize_axis("transpose", "axes", x, a.ndim) for x in axes)
        if sorted(perm) != list(range(a.ndim)):
            raise OperatorError(f"transpose: axes {list(axes)} is not a permutation")
    shape = tuple(a.shape[p] for p in perm)

    def source(*index: PrimExpr) -> tuple[PrimExpr, ...]:
        found: list[Any] = [None] * a.ndim
        for out_axis, in_axis in enumerate(perm):
            found[in_axis] = index[out_axis]
        return tuple(found)

    return _moved(a, shape, source, "T_transpose", view)


def reshape(a: Tensor, newshape: Sequence[int], *, view: bool = False) -> Tensor:
    """The same elements in row-major order under ``newshape``; one entry may be -1.
    With ``view``, a view of ``a`` that its readers index in place (``te.view``)."""
    check_tensor("reshape", "a", a)
    in_shape = static_shape("reshape", "a", a)
    out_shape = _resolve_newshape(in_shape, newshape)
    if out_shape == in_shape:
        return _moved(a, out_shape, lambda *i: tuple(i), "T_reshape", view)
    out_strides = _row_major_strides(out_shape)
    in_strides = _row_major_strides(in_shape)

    def source(*index: PrimExpr) -> tuple[PrimExpr, ...]:
        terms = [
            i * stride if stride != 1 else i for i, stride in zip(index, out_strides, strict=True)
        ]
        linear = terms[0]
        for term in terms[1:]:
            linear = linear + term
        found = []
        for axis, (extent, stride) in enumerate(zip(in_shape, in_strides, strict=True)):
            part = linear // stride if stride != 1 else linear
            found.append(part % extent if axis > 0 else part)
        return tuple(found)

    return _moved(a, out_shape, source, "T_reshape", view)


def _moved(
    a: Tensor,
    shape: Sequence[Any],
    source: Callable[..., tuple[PrimExpr, ...]],
    name: str,
    view: bool,
) -> Tensor:
    """The tensor whose element ``i`` is ``a[source(*i)]``: a copy, or a view."""
    if view:
        return te.view(a, tuple(shape), source, name=name)
    return te.compute(tuple(shape), lambda *i: a[source(*i)], name=name)


def layout_transform(a: Tensor, to: str, block: int = 0, *, view: bool = False) -> Tensor:
    """NCHW (N, C, H, W) to the blocked NCHW[block]c (N, C/block, H, W, block)
    (``to="NCHWc"``), or back (``to="NCHW"``, from (N, C/b, H, W, b)). With ``view``,
    a view of ``a`` that its readers index in place (``te.view``)."""
    op = "layout_transform"
    if to == "NCHWc":
        check_tensor(op, "a", a, ndim=4)
        n, channels, height, width = static_shape(op, "a", a)
        check_int(op, "block", block, minimum=1)
        if channels % block:
            raise OperatorError(f"{op}: {channels} channels do not split into blocks of {block}")
        shape = (n, channels // block, height, width, block)
        return _moved(
            a, shape, lambda n, co, h, w, ci: (n, co * block + ci, h, w), "T_blocked", view
        )
    if to == "NCHW":
        check_tensor(op, "a", a, ndim=5)
        n, blocks, height, width, size = static_shape(op, "a", a)
        plain = (n, blocks * size, height, width)
        return _moved(
            a, plain, lambda n, c, h, w: (n, c // size, h, w, c % size), "T_unblocked", view
        )
    raise OperatorError(f"{op}: to must be 'NCHWc' or 'NCHW', got {to!r}")


def _resolve_newshape(in_shape: tuple[int, ...], newshape: Any) -> tuple[int, ...]:
    if not isinstance(newshape, Sequence) or isinstance(newshape, str) or not newshape:
        raise OperatorError(f"reshape: newshape must be a non-empty list of ints, got {newshape!r}")
    for i, d in enumerate(newshape):
        if not is_int(d) or (d <= 0 and d != -1):
            raise OperatorError(f"reshape: newshape[{i}] must be a positive int or -1, got {d!r}")
    newshape = [int(d) for d in newshape]
    if newshape.count(-1) > 1:
        raise OperatorError(f"reshape: newshape {list(newshape)} has more than one -1")
    size = math.prod(in_shape)
    known = math.prod(d for d in newshape if d != -1)
    if -1 in newshape:
        if size % known:
            raise OperatorError(
                f"reshape: cannot fit {size} elements of shape {in_shape} into {list(newshape)}"
            )
        return tuple(size // known if d == -1 else d for d in newshape)
    if known != size:
        raise OperatorError(
            f"reshape: newshape {list(newshape)} has {known} elements but a has {size} "
            f"(shape {in_shape})"
        )
    return tuple(newshape)


def _row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join ``tensors`` along ``axis``; every other dimension must agree."""
    if not isinstance(tensors, Sequence) or not tensors:
        raise OperatorError("concatenate: tensors must be a non-empty list of te.Tensor")
    for k, t in enumerate(tensors):
        check_tensor("concatenate", f"tensors[{k}]", t)
    first = tensors[0]
    axis = normalize_axis("concatenate", "axis", axis, first.ndim)
    check_same_dtype("concatenate", {f"tensors[{k}]": t for k, t in enumerate(tensors)})
    sizes = []
    for k, t in enumerate(tensors):
        if t.ndim != first.ndim:
            raise OperatorError(
                f"concatenate: tensors[{k}] has {t.ndim} dimensions but tensors[0] has {first.ndim}"
            )
        others = [a for a in range(first.ndim) if a != axis]
        if not all(same_dim(t.shape[a], first.shape[a]) for a in others):
            raise OperatorError(
                f"concatenate: tensors[{k}] has shape {shape_str(t)}, which differs from "
                f"tensors[0] {shape_str(first)} outside axis {axis}"
            )
        sizes.append(static_shape("concatenate", f"tensors[{k}]", t)[axis])
    offsets = [sum(sizes[:k]) for k in range(len(sizes))]
    shape = tuple(E.const(sum(sizes)) if a == axis else first.shape[a] for a in range(first.ndim))

    def element(*index: PrimExpr) -> PrimExpr:
        i = index[axis]

        def load(k: int) -> PrimExpr:
            shifted = i - offsets[k] if offsets[k] else i
            local = clamp(shifted, sizes[k], low=k > 0, high=k < len(tensors) - 1)
            return tensors[k][(*index[:axis], local, *index[axis + 1 :])]

        value = load(len(tensors) - 1)
        for k in range(len(tensors) - 2, -1, -1):
            value = te.if_then_else(i < offsets[k] + sizes[k], load(k), value)
        return value

    return te.compute(shape, element, name="T_concat")
