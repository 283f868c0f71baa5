"""cache_read and cache_write.

A cache is a new buffer ``<name>_<scope>`` of the same shape and a copy block of
the same name with a full loop nest over it. Later primitives (compute_at,
reverse_compute_at) move that copy under a tile loop and lowering shrinks the
buffer to the tile, which is what makes a "local" cache small.

The copy block is placed among the top-level statements of the block's scope
(the root block in practice), so a move is refused when the block shares its
loop nest with another user of the buffer: the copy could not run between them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from compiler.arith import same_expr
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import Range, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, visit
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterKind,
    IterVar,
    Stmt,
    seq,
    true_predicate,
)
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.coverage import covers_spatial_domain
from compiler.schedule.primitives.dataflow import (
    BlockSite,
    accesses,
    buffer_names,
    child_index,
    fresh_name,
    is_param,
    leaf_realizes,
    locate,
    reads_of,
    replace,
    replace_in_func,
    scope_children,
    swap_buffer,
    taken_block_names,
    writers,
    writes_of,
)

STORAGE_SCOPES = ("global", "shared", "local")


def cache_read(
    func: PrimFunc, block: Block, read_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Make ``block`` read a copy of its ``read_buffer_index``-th input.

    Inputs are numbered in the order of their first load in the block (init,
    then body), leaving out the buffers the block writes: for a matmul
    ``C[i, j] += A[i, k] * B[k, j]`` index 0 is A and 1 is B. The copy runs right
    after the last block that writes the buffer before ``block`` (at the start of
    the scope for an input nobody writes); other readers keep the original.
    """
    site = locate(func, block, "cache_read")
    _check_scope("cache_read", block, storage_scope)
    written = writes_of(block)
    inputs = [b for b in reads_of(block) if all(b is not w for w in written)]
    buffer = _pick("cache_read", block, inputs, read_buffer_index, "read_buffer_index", "reads")
    cache, name = _new_cache(func, buffer, storage_scope)

    children = scope_children(site.scope)
    consumer_at = child_index(site.scope, site.realize)
    insert_at = 0
    for writer in writers(func, buffer):
        at = _position_in_scope(site, writer, "cache_read", buffer)
        if at == consumer_at:
            raise ScheduleError(
                f"cache_read of block {block.name!r}: block {writer.block.name!r} writes "
                f"{buffer.name} inside the same loop nest, so no copy fits between them; "
                "cache before compute_at"
            )
        if at < consumer_at:
            insert_at = max(insert_at, at + 1)

    new_block = swap_buffer(block, buffer, cache)
    children[consumer_at] = replace(children[consumer_at], block, new_block)
    children.insert(insert_at, copy_nest(name, src=buffer, dst=cache))
    return _install_scope(func, site, children, cache), name


def cache_write(
    func: PrimFunc, block: Block, write_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Make ``block`` write (and read back) a cache of its ``write_buffer_index``-th
    output, copied into the original by a new block right after the block's
    loop nest. Outputs are numbered in the order of their first store."""
    site = locate(func, block, "cache_write")
    _check_scope("cache_write", block, storage_scope)
    outputs = writes_of(block)
    buffer = _pick(
        "cache_write", block, outputs, write_buffer_index, "write_buffer_index", "writes"
    )
    check_whole_write(func, site, buffer, "cache_write")
    cache, name = _new_cache(func, buffer, storage_scope)

    children = scope_children(site.scope)
    at = child_index(site.scope, site.realize)
    new_block = swap_buffer(block, buffer, cache)
    children[at] = replace(children[at], block, new_block)
    children.insert(at + 1, copy_nest(name, src=cache, dst=buffer))
    return _install_scope(func, site, children, cache), name


def copy_nest(name: str, src: Buffer, dst: Buffer) -> Stmt:
    """``for ax0, ax1, ...: block name: dst[v0, v1, ...] = src[v0, v1, ...]``."""
    return point_nest(name, src.shape, lambda point: BufferStore(dst, src[point], point))


def point_nest(
    name: str,
    shape: tuple[E.PrimExpr, ...],
    body: Callable[[tuple[E.PrimExpr, ...]], Stmt],
    annotations: dict[str, Any] | None = None,
) -> Stmt:
    """``for ax0, ax1, ...: block name: body((v0, v1, ...))``: a block at every point
    of ``shape``, one spatial block variable and one loop per dimension."""
    loop_vars = [Var(f"ax{k}", dim.dtype) for k, dim in enumerate(shape)]
    iter_vars = tuple(
        IterVar(Var(f"v{k}", dim.dtype), Range(E.const(0, dim.dtype), dim), IterKind.SPATIAL)
        for k, dim in enumerate(shape)
    )
    block = Block(
        name, iter_vars, body(tuple(iv.var for iv in iter_vars)), annotations=annotations or {}
    )
    stmt: Stmt = BlockRealize(tuple(loop_vars), true_predicate(), block)
    for var, dim in reversed(list(zip(loop_vars, shape, strict=True))):
        stmt = For(var, E.const(0, dim.dtype), dim, ForKind.SERIAL, stmt)
    return stmt


def _check_scope(primitive: str, block: Block, scope: str) -> None:
    if scope not in STORAGE_SCOPES:
        raise ScheduleError(
            f"{primitive} of block {block.name!r}: storage scope {scope!r} is not supported; "
            f"use one of {', '.join(STORAGE_SCOPES)}"
        )


def _pick(
    primitive: str, block: Block, buffers: list[Buffer], index: int, arg: str, verb: str
) -> Buffer:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(buffers):
        listing = ", ".join(f"{k} = {b.name}" for k, b in enumerate(buffers)) or "none"
        raise ScheduleError(
            f"{primitive} of block {block.name!r}: {arg} {index!r} is out of range; the block "
            f"{verb} {len(buffers)} buffer(s) ({listing})"
        )
    return buffers[index]


def _new_cache(func: PrimFunc, buffer: Buffer, scope: str) -> tuple[Buffer, str]:
    base = f"{buffer.name}_{scope}"
    cache = Buffer(fresh_name(base, buffer_names(func)), buffer.shape, buffer.dtype, scope)
    return cache, fresh_name(base, taken_block_names(func))


def _position_in_scope(site: BlockSite, other: BlockRealize, primitive: str, buffer: Buffer) -> int:
    try:
        return child_index(site.scope, other)
    except LookupError:
        raise ScheduleError(
            f"{primitive} of block {site.block.name!r}: block {other.block.name!r} uses "
            f"{buffer.name} outside the scope {site.scope.name!r}"
        ) from None


def _install_scope(
    func: PrimFunc, site: BlockSite, children: list[Stmt], cache: Buffer
) -> PrimFunc:
    scope = site.scope
    new_scope = dataclasses.replace(
        scope, body=seq(*children), alloc_buffers=(*scope.alloc_buffers, cache)
    )
    return replace_in_func(func, scope, new_scope)


def check_whole_write(func: PrimFunc, site: BlockSite, buffer: Buffer, primitive: str) -> None:
    """A copy-back after the block writes every element of ``buffer``; that is only
    harmless when the block wrote them all, unless nothing but the block defines
    the buffer."""
    block = site.block
    prefix = f"{primitive} of block {block.name!r}"
    stores: list[BufferStore] = []
    loads: list[E.BufferLoad] = []

    def collect(n: Node) -> bool | None:
        if isinstance(n, BlockRealize):
            return False
        if isinstance(n, BufferStore) and n.buffer is buffer:
            stores.append(n)
        if isinstance(n, E.BufferLoad) and n.buffer is buffer:
            loads.append(n)
        return None

    for part in (block.init, block.body):
        if part is not None:
            visit(part, collect)
    point = stores[0].indices
    others: list[BufferStore | E.BufferLoad] = [*stores[1:], *loads]
    for access in others:
        if len(access.indices) != len(point) or not all(
            same_expr(a, b) for a, b in zip(access.indices, point, strict=True)
        ):
            raise ScheduleError(
                f"{prefix}: it accesses {buffer.name} at more than one element per point; "
                "a copy of another layout could not stand in for it"
            )
    init_stores = block.init is not None and any(
        isinstance(n, BufferStore) and n.buffer is buffer for n in _stmts(block.init)
    )
    if loads and not init_stores:
        raise ScheduleError(
            f"{prefix}: it reads {buffer.name} without an init that writes it first, so the "
            "copy would start without the values it reads"
        )
    other_writers = [r for r in writers(func, buffer) if r is not site.realize]
    if is_param(func, buffer) or other_writers:
        reason = _writes_all(site, buffer, point)
        if reason is not None:
            raise ScheduleError(
                f"{prefix}: cannot prove it writes all of {buffer.name} ({reason}), and the "
                f"copy-back writes every element; apply {primitive} before split or compute_at"
            )
    at = child_index(site.scope, site.realize)
    for other in leaf_realizes(scope_children(site.scope)[at]):
        if other is not site.realize and accesses(other.block, buffer):
            raise ScheduleError(
                f"{prefix}: block {other.block.name!r} uses {buffer.name} inside the same loop "
                f"nest, before the copy-back could run; apply {primitive} before compute_at"
            )


def _writes_all(site: BlockSite, buffer: Buffer, point: tuple[E.PrimExpr, ...]) -> str | None:
    block = site.block
    for k, index in enumerate(point):
        iv = next((iv for iv in block.iter_vars if iv.var is index), None)
        if iv is None or iv.kind is not IterKind.SPATIAL:
            return f"index {index} of {buffer.name} is not a spatial block variable"
        if sum(1 for other in point if other is index) > 1:
            return f"block variable {index} indexes two dimensions"
        zero_min = isinstance(iv.dom.min, E.IntImm) and iv.dom.min.value == 0
        if not zero_min or not same_expr(iv.dom.extent, buffer.shape[k]):
            return f"block variable {index} does not span dimension {k}"
    return covers_spatial_domain(site)


def _stmts(root: Node) -> list[Node]:
    found: list[Node] = []
    visit(root, found.append)
    return found
