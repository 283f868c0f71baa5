"""Loop primitives: split, fuse, reorder, loop kinds and annotations.

Each function takes a PrimFunc and the IR nodes to change and returns a new
PrimFunc, or raises ScheduleError naming the loop or block and the reason. Block
variables keep their meaning: a primitive only rewrites the loops above a block
and the expressions that bind the block's variables to those loops, so a block
still computes the same instances, in an order the primitive shows to be legal.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

from compiler.arith.const_interval import fits
from compiler.ir import expr as E
from compiler.ir.analysis import substitute, uses_var, visit_statements
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform_pre, visit
from compiler.ir.stmt import Block, BlockRealize, For, ForKind, Stmt
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int, replace_node
from compiler.schedule.primitives.concurrency import check_concurrent


def split(func: PrimFunc, loop: For, factors: list[int | None]) -> tuple[PrimFunc, list[Var]]:
    """Split ``loop`` into ``len(factors)`` nested loops, outermost first.

    At most one factor may be None; it is inferred as the ceiling of the extent
    over the product of the others. When the factors do not cover the extent
    exactly, every block under the loop gets the predicate ``fused < extent``.
    A symbolic extent needs a None factor: no constant product can be known to
    cover it.
    """
    name = loop.loop_var.name
    _check_factors(name, factors)
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(
            f"split of loop {name!r}: only serial loops split; it is {loop.kind.value}"
        )
    extent = const_int(loop.extent)
    _check_factors_fit(loop, factors)
    known = math.prod(f for f in factors if f is not None)
    if None in factors:
        if extent is not None:
            inferred: PrimExpr = E.const(-(-extent // known), loop.loop_var.dtype)
        else:
            inferred = (loop.extent + (known - 1)) // known
        extents = [inferred if f is None else E.const(f, loop.loop_var.dtype) for f in factors]
    elif extent is None:
        raise ScheduleError(
            f"split of loop {name!r}: its extent {loop.extent} is symbolic, so the factors "
            f"{factors} may not cover it; give one factor as None to have it inferred"
        )
    else:
        if known < extent:
            raise ScheduleError(
                f"split of loop {name!r}: factors {factors} multiply to {known}, "
                f"less than the extent {extent}"
            )
        extents = [E.const(f, loop.loop_var.dtype) for f in factors]
    new_vars = [Var(f"{name}_{k}", loop.loop_var.dtype) for k in range(len(factors))]
    fused: PrimExpr = new_vars[0]
    for var, ext in zip(new_vars[1:], extents[1:], strict=True):
        fused = fused * ext + var
    constant_extents = [c for c in map(const_int, extents) if c is not None]
    covered = len(constant_extents) == len(extents) and math.prod(constant_extents) == extent
    replacement = fused if const_int(loop.min) == 0 else loop.min + fused
    body = substitute(loop.body, {loop.loop_var: replacement})
    if not covered:
        body = add_predicate(body, fused < loop.extent)
    stmt: Stmt = body
    for var, ext in reversed(list(zip(new_vars, extents, strict=True))):
        stmt = For(var, E.const(0, var.dtype), ext, ForKind.SERIAL, stmt)
    return replace_node(func, loop, stmt), new_vars


def _check_factors(name: str, factors: list[int | None]) -> None:
    if len(factors) < 2:
        raise ScheduleError(f"split of loop {name!r}: give at least two factors, got {factors}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(
            f"split of loop {name!r}: at most one factor may be None, got {factors}"
        )
    for f in factors:
        if f is not None and (isinstance(f, bool) or not isinstance(f, int) or f < 1):
            raise ScheduleError(
                f"split of loop {name!r}: factor {f!r} must be a positive int or None"
            )


def _check_factors_fit(loop: For, factors: list[int | None]) -> None:
    """The split loops count up to the product of the factors: a product the loop
    variable's type cannot hold wraps around (2**63 ran no iteration at all) or runs
    for hours (2**40), so it is refused, as TVM refuses factors that do not fit."""
    name = loop.loop_var.name
    dtype = loop.loop_var.dtype
    product = math.prod(f for f in factors if f is not None)
    if not fits(product, dtype):
        raise ScheduleError(
            f"split of loop {name!r} (extent {loop.extent}): factors {factors} multiply to "
            f"{product}, more than its type {dtype} holds; give factors of at most the extent"
        )


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


def fuse(func: PrimFunc, loops: list[For]) -> tuple[PrimFunc, Var]:
    """Replace the directly nested serial ``loops`` (outermost first) by one loop.

    The fused variable ``f`` runs over the product of the extents; loop ``k`` becomes
    ``min_k + (f // stride_k) % extent_k`` where ``stride_k`` is the product of the
    extents inside it. A single loop is returned unchanged.
    """
    if not loops:
        raise ScheduleError("fuse needs at least one loop")
    names = [loop.loop_var.name for loop in loops]
    _check_distinct("fuse", loops)
    for outer, inner in itertools.pairwise(loops):
        if outer.body is not inner:
            raise ScheduleError(
                f"cannot fuse loops {names}: loop {inner.loop_var.name!r} is not the whole body "
                f"of loop {outer.loop_var.name!r}; list directly nested loops, outermost first"
            )
    for k, loop in enumerate(loops):
        if loop.kind is not ForKind.SERIAL or loop.thread_binding is not None:
            raise ScheduleError(
                f"cannot fuse loops {names}: loop {loop.loop_var.name!r} is {loop.kind.value}; "
                "only serial loops fuse (fuse first, then set the kind)"
            )
        for outer in loops[:k]:
            if uses_var(loop.min, outer.loop_var) or uses_var(loop.extent, outer.loop_var):
                raise ScheduleError(
                    f"cannot fuse loops {names}: the range of loop {loop.loop_var.name!r} "
                    f"depends on loop {outer.loop_var.name!r}"
                )
    if len(loops) == 1:
        return func, loops[0].loop_var
    dtype = loops[0].loop_var.dtype
    for loop in loops[1:]:
        dtype = E.promote(dtype, loop.loop_var.dtype)
    fused = Var("_".join(names) + "_fused", dtype)
    mapping: dict[Var, PrimExpr] = {}
    stride: PrimExpr = E.const(1, dtype)
    for k in reversed(range(len(loops))):
        loop = loops[k]
        extent = _as_dtype(loop.extent, dtype)
        value = _floordiv(fused, stride)
        if k > 0:
            value = _floormod(value, extent)
        if const_int(loop.min) != 0:
            value = _as_dtype(loop.min, dtype) + value
        mapping[loop.loop_var] = _as_dtype(value, loop.loop_var.dtype)
        stride = _mul(stride, extent)
    total = const_int(stride)
    if total is not None and not fits(total, dtype):
        raise ScheduleError(
            f"cannot fuse loops {names}: together they run {total} iterations, more than "
            f"the loop variable's type {dtype} holds; fuse fewer loops"
        )
    body = substitute(loops[-1].body, mapping)
    new_loop = For(fused, E.const(0, dtype), stride, ForKind.SERIAL, body)
    return replace_node(func, loops[0], new_loop), fused


def _as_dtype(e: PrimExpr, dtype: str) -> PrimExpr:
    if e.dtype == dtype:
        return e
    if isinstance(e, E.IntImm):
        return E.const(e.value, dtype)
    return E.Cast(dtype, e)


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return E.const(ca * cb, a.dtype)
    if ca == 1:
        return b
    if cb == 1:
        return a
    return a * b


def _floordiv(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return a if const_int(b) == 1 else a // b


def _floormod(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return E.const(0, a.dtype) if const_int(b) == 1 else a % b


def reorder(func: PrimFunc, loops: list[For]) -> PrimFunc:
    """Permute ``loops`` among the positions they occupy, so that they nest in the
    given order, outermost first.

    The loops must lie on one chain of loops each of which is the whole body of the
    one above it; loops of the chain that are not listed keep their place. A loop
    whose range depends on another loop's variable cannot move outside it.
    """
    if not loops:
        raise ScheduleError("reorder needs at least one loop")
    _check_distinct("reorder", loops)
    for loop in loops:
        _check_single_iter_kind(loop)
    chain = _chain_through(loops)
    positions = sorted(chain.index(loop) for loop in loops)
    new_chain = list(chain)
    for position, loop in zip(positions, loops, strict=True):
        new_chain[position] = loop
    for p, loop in enumerate(new_chain):
        for inner in new_chain[p + 1 :]:
            if uses_var(loop.min, inner.loop_var) or uses_var(loop.extent, inner.loop_var):
                raise ScheduleError(
                    f"cannot reorder loops {[x.loop_var.name for x in loops]}: the range of loop "
                    f"{loop.loop_var.name!r} depends on loop {inner.loop_var.name!r}, which would "
                    "end up inside it"
                )
    stmt: Stmt = chain[-1].body
    for loop in reversed(new_chain):
        stmt = dataclasses.replace(loop, body=stmt)
    return replace_node(func, chain[0], stmt)


def _check_single_iter_kind(loop: For) -> None:
    """Refuse a loop that binds spatial and reduce variables of one block (a fuse of
    a spatial and a reduction loop). Permuting the pieces of such a loop can visit
    an output element first at a reduction step other than the first, where the
    block's init would then wipe the partial sum."""

    def check(n: Node) -> None:
        if not isinstance(n, BlockRealize):
            return
        kinds = {
            iv.kind
            for iv, value in zip(n.block.iter_vars, n.iter_values, strict=True)
            if uses_var(value, loop.loop_var)
        }
        if len(kinds) > 1:
            raise ScheduleError(
                f"cannot reorder loop {loop.loop_var.name!r}: it binds both spatial and "
                f"reduce variables of block {n.block.name!r} (it fuses a spatial and a "
                "reduction loop); reorder the loops before fusing them"
            )

    visit_statements(loop.body, check)


def _chain_through(loops: list[For]) -> list[For]:
    """The single-child chain from the outermost listed loop to the innermost one."""
    wanted = {id(loop) for loop in loops}
    for top in loops:
        chain = [top]
        while len(wanted.intersection(id(x) for x in chain)) < len(wanted):
            if not isinstance(chain[-1].body, For):
                break
            chain.append(chain[-1].body)
        else:
            return chain
    names = [loop.loop_var.name for loop in loops]
    raise ScheduleError(
        f"cannot reorder loops {names}: they are not nested in one chain in which each loop "
        "is the whole body of the loop above it (a block or a sequence of statements "
        "separates them, or they are in different nests)"
    )


def _check_distinct(primitive: str, loops: list[For]) -> None:
    seen: set[int] = set()
    for loop in loops:
        if not isinstance(loop, For):
            raise ScheduleError(f"{primitive} takes loops, got {type(loop).__name__}")
        if id(loop) in seen:
            raise ScheduleError(f"{primitive}: loop {loop.loop_var.name!r} is listed twice")
        seen.add(id(loop))


_KIND_VERBS = {ForKind.PARALLEL: "parallelize", ForKind.VECTORIZED: "vectorize"}


def set_loop_kind(func: PrimFunc, loop: For, kind: ForKind) -> PrimFunc:
    """Make ``loop`` serial, unrolled, parallel or vectorized.

    Serial and unrolled loops run their iterations in order, so they are always
    legal. Parallel and vectorized iterations run at the same time; the rules they
    must follow are in ``concurrency.check_concurrent``.
    """
    if not isinstance(kind, ForKind) or kind is ForKind.THREAD_BINDING:
        allowed = [k.value for k in ForKind if k is not ForKind.THREAD_BINDING]
        raise ScheduleError(f"loop kind {kind!r} cannot be set here; use one of {allowed}")
    if kind in _KIND_VERBS:
        check_concurrent(func, loop, _KIND_VERBS[kind])
    if loop.kind is kind:
        return func
    return replace_node(func, loop, dataclasses.replace(loop, kind=kind))


# The GPU thread axes a loop may be bound to. A virtual thread (``vthread``) is a loop
# whose iterations a GPU kernel interleaves within one thread: it strides a thread's
# work across the tile so neighbouring threads touch neighbouring elements.
THREAD_AXES = tuple(
    f"{kind}.{dim}" for kind in ("blockIdx", "threadIdx", "vthread") for dim in "xyz"
)


def bind(func: PrimFunc, loop: For, thread_axis: str) -> PrimFunc:
    """Bind ``loop`` to a GPU thread axis: its iterations run on the blocks or threads
    of that axis at the same time, so they follow the rules of a parallel loop
    (``concurrency.check_concurrent``). The extent must be a constant: it becomes a
    launch dimension. A loop of a reduction binds to ``threadIdx.x`` when the threads
    can share the reduction (``cross_thread``)."""
    name = loop.loop_var.name
    if thread_axis not in THREAD_AXES:
        raise ScheduleError(
            f"bind of loop {name!r}: {thread_axis!r} is not a thread axis; use one of "
            f"{', '.join(THREAD_AXES)}"
        )
    if loop.kind is not ForKind.SERIAL:
        bound = f" to {loop.thread_binding}" if loop.thread_binding else ""
        raise ScheduleError(
            f"bind of loop {name!r} to {thread_axis}: only serial loops bind; it is "
            f"{loop.kind.value}{bound}"
        )
    extent = const_int(loop.extent)
    if extent is None or extent < 1:
        raise ScheduleError(
            f"bind of loop {name!r} to {thread_axis}: its extent {loop.extent} is not a "
            "positive constant; split it by a constant factor and bind the inner loop"
        )
    check_concurrent(func, loop, "bind", cross_thread=thread_axis == "threadIdx.x")
    bound_loop = dataclasses.replace(loop, kind=ForKind.THREAD_BINDING, thread_binding=thread_axis)
    return replace_node(func, loop, bound_loop)


def annotate(func: PrimFunc, node: Block | For, key: str, value: Any) -> PrimFunc:
    """Store ``key: value`` in the annotations of a block or loop. The value must be
    JSON data (int, float, str, bool, or lists of them) so traces can carry it."""
    if not isinstance(node, (Block, For)):
        raise ScheduleError(f"annotate takes a block or a loop, got {type(node).__name__}")
    what = f"block {node.name!r}" if isinstance(node, Block) else f"loop {node.loop_var.name!r}"
    if not isinstance(key, str) or not key:
        raise ScheduleError(f"annotate {what}: the key must be a non-empty string, got {key!r}")
    if not _is_json_data(value):
        raise ScheduleError(
            f"annotate {what}: value {value!r} for {key!r} is not JSON data; use an int, "
            "a finite float, a str, a bool, or a list of those"
        )
    if not _contains(func.body, node):
        raise ScheduleError(f"annotate: {what} is not in this function")
    annotations = {**node.annotations, key: _copy_json(value)}
    return replace_node(func, node, dataclasses.replace(node, annotations=annotations))


def _is_json_data(value: Any) -> bool:
    if isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_is_json_data(v) for v in value)
    return False


def _copy_json(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_copy_json(v) for v in value]
    return value


def _contains(root: Node, target: Node) -> bool:
    found = False

    def look(n: Node) -> bool | None:
        nonlocal found
        if n is target:
            found = True
        return not found

    visit(root, look)
    return found
