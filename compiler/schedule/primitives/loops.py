"""Loop primitives: split (more to come from fuse, reorder, loop kinds, annotate)."""

from __future__ import annotations

import dataclasses
import math

from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform_pre
from compiler.ir.stmt import BlockRealize, For, ForKind, Stmt
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int, replace_node


def split(func: PrimFunc, loop: For, factors: list[int | None]) -> tuple[PrimFunc, list[Var]]:
    """Split ``loop`` into ``len(factors)`` nested loops, outermost first.

    At most one factor may be None; it is inferred as the ceiling of the extent
    over the product of the others. When the factors do not cover the extent
    exactly, every block under the loop gets the predicate ``fused < extent``.
    """
    name = loop.loop_var.name
    if len(factors) < 2:
        raise ScheduleError(f"split of loop {name!r}: give at least two factors, got {factors}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(f"split of loop {name!r}: at most one factor may be None, got {factors}")
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(f"split of loop {name!r}: only serial loops split; it is {loop.kind.value}")
    extent = const_int(loop.extent)
    known = math.prod(f for f in factors if f is not None)
    if None in factors:
        if extent is not None:
            inferred: PrimExpr = E.const(-(-extent // known), loop.loop_var.dtype)
        else:
            inferred = (loop.extent + (known - 1)) // known
        extents = [inferred if f is None else E.const(f, loop.loop_var.dtype) for f in factors]
    else:
        if extent is not None and known < extent:
            raise ScheduleError(
                f"split of loop {name!r}: factors {factors} multiply to {known}, "
                f"less than the extent {extent}"
            )
        extents = [E.const(f, loop.loop_var.dtype) for f in factors]
    new_vars = [Var(f"{name}_{k}", loop.loop_var.dtype) for k in range(len(factors))]
    fused: PrimExpr = new_vars[0]
    for var, ext in zip(new_vars[1:], extents[1:], strict=True):
        fused = fused * ext + var
    covered = const_int(extents[0]) is not None and math.prod(
        const_int(e) for e in extents  # type: ignore[misc]
    ) == extent
    replacement = fused if const_int(loop.min) == 0 else loop.min + fused
    body = substitute(loop.body, {loop.loop_var: replacement})
    if not covered:
        body = add_predicate(body, fused < loop.extent)
    stmt: Stmt = body
    for var, ext in reversed(list(zip(new_vars, extents, strict=True))):
        stmt = For(var, E.const(0, var.dtype), ext, ForKind.SERIAL, stmt)
    return replace_node(func, loop, stmt), new_vars


def add_predicate(stmt: Stmt, condition: PrimExpr) -> Stmt:
    """AND ``condition`` into the predicate of every block realized directly in ``stmt``."""

    def guard(n: Node) -> Node | None:
        if isinstance(n, BlockRealize):
            predicate = n.predicate
            is_true = isinstance(predicate, E.IntImm) and predicate.value
            new = condition if is_true else E.And(predicate, condition)
            return dataclasses.replace(n, predicate=new)
        return None

    return transform_pre(stmt, guard)


def fuse(func, loops):
    raise NotImplementedError


def reorder(func, loops):
    raise NotImplementedError


def set_loop_kind(func, loop, kind):
    raise NotImplementedError


def annotate(func, node, key, value):
    raise NotImplementedError
