"""compute_inline and reverse_compute_inline.

Both remove a block and fold its one store into its neighbour, which is only
equivalent when the buffer between the two carries nothing else: one writer,
no function parameter, and (for the reverse direction) one reader reading at
exactly its own iteration point. Each legality rule below says which program
the move would otherwise break.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from compiler.arith import same_expr
from compiler.ir import expr as E
from compiler.ir.analysis import ancestors_of, substitute
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform, visit
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.coverage import covers_spatial_domain
from compiler.schedule.primitives.dataflow import (
    BlockSite,
    drop_alloc,
    is_param,
    leaf_realizes,
    locate,
    names_of,
    readers,
    reads_of,
    remove_realize,
    replace_in_func,
    single_store,
    vars_in,
    writers,
    writes_of,
)

Fail = Callable[[str], ScheduleError]


def compute_inline(func: PrimFunc, block: Block) -> PrimFunc:
    """Remove ``block`` (``X[v0, v1, ...] = expr``) and replace every load
    ``X[idx]`` elsewhere by ``expr`` at ``idx``; ``X`` stops being allocated."""
    site = locate(func, block, "compute_inline")

    def fail(reason: str) -> ScheduleError:
        return ScheduleError(f"cannot inline block {block.name!r}: {reason}")

    store = _element_store(func, block, fail)
    buffer = store.buffer
    others = [r for r in writers(func, buffer) if r is not site.realize]
    if others:
        raise fail(f"{buffer.name} is also written by block(s) {names_of(others)}")
    _check_inputs_stay(func, site, store.value, fail)
    index_vars: list[Var] = []
    for index in store.indices:
        assert isinstance(index, Var), "_element_store admits only block variables as indices"
        index_vars.append(index)
    value = _as_dtype(store.value, buffer.dtype)

    def inline_load(n: Node) -> Node | None:
        if isinstance(n, E.BufferLoad) and n.buffer is buffer:
            return substitute(value, dict(zip(index_vars, n.indices, strict=True)))
        return None

    result = remove_realize(func, site.realize, "compute_inline")
    result = dataclasses.replace(result, body=transform(result.body, inline_load))
    return drop_alloc(result, buffer)


def reverse_compute_inline(func: PrimFunc, block: Block) -> PrimFunc:
    """Remove the consumer ``block`` (``Y[f(v)] = g(X[v])``) and make the single
    producer of ``X`` store ``g`` of its value into ``Y`` directly."""
    site = locate(func, block, "reverse_compute_inline")

    def fail(reason: str) -> ScheduleError:
        return ScheduleError(f"cannot reverse-inline block {block.name!r}: {reason}")

    if block.init is not None or block.is_reduction:
        raise fail("it is a reduction; only a spatial block reverse-inlines")
    store = single_store(block)
    if store is None:
        raise fail("its body is not a single store `Y[...] = expr`")
    buffer, producer_realize = _single_producer(func, site, store, fail)
    producer = producer_realize.block
    p_store = _producer_store(func, producer, buffer, fail)
    load_vars = _consumer_load_vars(block, store, buffer, fail)
    _check_injective_store(block, store, fail)
    _check_free_vars(func, block, store, fail)
    reason = covers_spatial_domain(site)
    if reason is not None:
        raise fail(f"it may not run over all of {buffer.name}: {reason}")
    _check_nothing_between(func, producer_realize, site.realize, store, buffer, fail)

    mapping = dict(zip(load_vars, p_store.indices, strict=True))
    produced = _as_dtype(p_store.value, buffer.dtype)

    def fold_load(n: Node) -> Node | None:
        if isinstance(n, E.BufferLoad) and n.buffer is buffer:
            return produced
        return None

    value = substitute(transform(store.value, fold_load), mapping)
    indices = tuple(substitute(i, mapping) for i in store.indices)
    new_producer = dataclasses.replace(producer, body=BufferStore(store.buffer, value, indices))
    result = replace_in_func(func, producer, new_producer)
    result = remove_realize(result, site.realize, "reverse_compute_inline")
    return drop_alloc(result, buffer)


# compute_inline checks ---------------------------------------------------------------


def _element_store(func: PrimFunc, block: Block, fail: Fail) -> BufferStore:
    """The block's store when it computes one element of a buffer per point."""
    if block.init is not None or block.is_reduction:
        raise fail("it is a reduction; only a spatial block that stores one element inlines")
    store = single_store(block)
    if store is None:
        raise fail("its body is not a single store `X[v0, v1, ...] = expr`")
    buffer = store.buffer
    if is_param(func, buffer):
        raise fail(f"it writes {buffer.name}, a function parameter, which must stay written")
    block_vars = [iv.var for iv in block.iter_vars]
    indices = store.indices
    distinct = len({id(i) for i in indices}) == len(indices)
    if not distinct or not all(any(i is v for v in block_vars) for i in indices):
        raise fail(
            f"it stores {buffer.name}[{', '.join(map(str, indices))}]; the indices must be "
            "distinct block variables"
        )
    for var in vars_in(store.value):
        if any(var is v for v in block_vars) and not any(var is i for i in indices):
            raise fail(f"its value uses block variable {var.name!r}, which no index determines")
    _check_free_vars(func, block, store, fail)
    if any(b is buffer for b in reads_of(block)):
        raise fail(f"it reads {buffer.name}, the buffer it writes")
    return store


def _check_free_vars(func: PrimFunc, block: Block, store: BufferStore, fail: Fail) -> None:
    allowed = {id(iv.var) for iv in block.iter_vars} | {id(v) for v in func.size_vars}
    for var in vars_in(store):
        if id(var) not in allowed:
            raise fail(
                f"its body uses {var.name!r}, which is neither a block variable nor a size "
                "of the function"
            )


def _check_inputs_stay(func: PrimFunc, site: BlockSite, value: PrimExpr, fail: Fail) -> None:
    """Inlining moves the loads of ``value`` to the consumers, so no block that may
    run after the producer may change what they read."""
    inputs = _loaded(value)
    for later in _may_run_after(func, site.realize):
        for b in writes_of(later.block):
            if any(b is i for i in inputs):
                raise fail(
                    f"block {later.block.name!r} writes {b.name}, which it reads, after it "
                    "runs; the inlined loads would see the new values"
                )


def _loaded(e: PrimExpr) -> list[Buffer]:
    found: list[Buffer] = []

    def collect(n: Node) -> None:
        if isinstance(n, E.BufferLoad) and all(n.buffer is not b for b in found):
            found.append(n.buffer)

    visit(e, collect)
    return found


def _may_run_after(func: PrimFunc, realize: BlockRealize) -> list[BlockRealize]:
    """Blocks later in program order, and every block sharing a loop with ``realize``."""
    order = leaf_realizes(func.body)
    position = next(i for i, r in enumerate(order) if r is realize)
    later = order[position + 1 :]
    outer = _outermost_loop(func, realize)
    if outer is not None:
        later += [r for r in leaf_realizes(outer) if r is not realize and r not in later]
    return later


def _outermost_loop(func: PrimFunc, realize: BlockRealize) -> For | None:
    return next((n for n in ancestors_of(func.body, realize) if isinstance(n, For)), None)


def _as_dtype(value: PrimExpr, dtype: str) -> PrimExpr:
    """What a load reads back after ``value`` was stored into a ``dtype`` buffer."""
    return value if value.dtype == dtype else E.Cast(dtype, value)


# reverse_compute_inline checks ---------------------------------------------------------


def _single_producer(
    func: PrimFunc, site: BlockSite, store: BufferStore, fail: Fail
) -> tuple[Buffer, BlockRealize]:
    inputs = [b for b in reads_of(site.block) if b is not store.buffer]
    produced = []
    for b in inputs:
        ws = [r for r in writers(func, b) if r is not site.realize]
        if ws:
            produced.append((b, ws))
    if not produced:
        names = ", ".join(b.name for b in inputs) or "nothing"
        raise fail(f"none of the buffers it reads ({names}) is written by another block")
    if len(produced) > 1 or len(produced[0][1]) > 1:
        described = "; ".join(f"{b.name} by {names_of(ws)}" for b, ws in produced)
        raise fail(f"it has several producers ({described}); exactly one is needed")
    buffer, (producer,) = produced[0]
    if is_param(func, buffer):
        raise fail(f"it reads {buffer.name}, a function parameter, which must stay written")
    other_readers = [
        r for r in readers(func, buffer) if r is not site.realize and r is not producer
    ]
    if other_readers:
        raise fail(f"{buffer.name} is also read by block(s) {names_of(other_readers)}")
    return buffer, producer


def _producer_store(func: PrimFunc, producer: Block, buffer: Buffer, fail: Fail) -> BufferStore:
    name = producer.name
    if producer.init is not None or producer.is_reduction:
        raise fail(f"its producer {name!r} is a reduction, whose result is not final per step")
    p_store = single_store(producer)
    if p_store is None or p_store.buffer is not buffer:
        raise fail(f"its producer {name!r} is not a single store `{buffer.name}[...] = expr`")
    if any(b is buffer for b in reads_of(producer)):
        raise fail(f"its producer {name!r} reads {buffer.name}, the buffer it writes")
    return p_store


def _consumer_load_vars(block: Block, store: BufferStore, buffer: Buffer, fail: Fail) -> list[Var]:
    """The block variables, by position, at which the block loads ``buffer``; they
    must be all of its variables, each once, spanning the buffer's shape."""
    loads: list[E.BufferLoad] = []
    visit(store, lambda n: loads.append(n) if isinstance(n, E.BufferLoad) else None)
    indices = [ld.indices for ld in loads if ld.buffer is buffer]
    first = indices[0]
    load_vars = [i for i in first if isinstance(i, Var)]
    is_permutation = len(load_vars) == len(first) == len(block.iter_vars) and {
        id(v) for v in load_vars
    } == {id(iv.var) for iv in block.iter_vars}
    if not is_permutation or any(not _same_indices(first, other) for other in indices[1:]):
        shown = ", ".join(map(str, first))
        raise fail(
            f"it reads {buffer.name}[{shown}]; it must read {buffer.name} only at its own "
            "block variables, each once, so that the producer's points map one to one"
        )
    for k, var in enumerate(load_vars):
        iv = next(iv for iv in block.iter_vars if iv.var is var)
        zero_min = isinstance(iv.dom.min, E.IntImm) and iv.dom.min.value == 0
        if not zero_min or not same_expr(iv.dom.extent, buffer.shape[k]):
            raise fail(
                f"its variable {var.name!r} ranges over {iv.dom}, not over dimension {k} "
                f"of {buffer.name} (0 to {buffer.shape[k]})"
            )
    return load_vars


def _same_indices(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> bool:
    return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b, strict=True))


def _check_injective_store(block: Block, store: BufferStore, fail: Fail) -> None:
    """Each block variable must appear in exactly one store index, alone or plus a
    constant, so that no two points write the same element. The block may not
    read what it stores: the producer may run a point more than once (compute_at
    recomputes overlaps), which is harmless only for a plain store."""
    used: list[Var] = []
    for index in store.indices:
        base = index.a if isinstance(index, (E.Add, E.Sub)) and _is_const(index.b) else index
        if isinstance(base, Var) and any(base is iv.var for iv in block.iter_vars):
            used.append(base)
        elif any(any(v is iv.var for iv in block.iter_vars) for v in vars_in(index)):
            raise fail(
                f"its store index {index} is not a block variable plus a constant; "
                "the producer's points could not be written one to one"
            )
    if len(used) != len(block.iter_vars) or len({id(v) for v in used}) != len(used):
        raise fail("its store indices do not use each block variable exactly once")
    if any(b is store.buffer for b in _loaded(store.value)):
        raise fail(f"it reads {store.buffer.name}, the buffer it writes")


def _is_const(e: PrimExpr) -> bool:
    return isinstance(e, E.IntImm)


def _check_nothing_between(
    func: PrimFunc,
    producer: BlockRealize,
    consumer: BlockRealize,
    store: BufferStore,
    inlined: Buffer,
    fail: Fail,
) -> None:
    """The consumer's work moves to the producer's place; no block that may run
    in between may touch its output or change its other inputs."""
    order = leaf_realizes(func.body)
    p_at = next(i for i, r in enumerate(order) if r is producer)
    c_at = next(i for i, r in enumerate(order) if r is consumer)
    if c_at < p_at:
        raise fail(f"it runs before its producer {producer.block.name!r}")
    between = order[p_at + 1 : c_at]
    for realize in (producer, consumer):
        outer = _outermost_loop(func, realize)
        if outer is not None:
            between += [r for r in leaf_realizes(outer) if r not in between]
    inputs = [b for b in _loaded(store.value) if b is not inlined]
    for realize in between:
        if realize is producer or realize is consumer:
            continue
        other = realize.block
        if any(b is store.buffer for b in reads_of(other) + writes_of(other)):
            raise fail(f"block {other.name!r} uses {store.buffer.name} between the producer and it")
        for b in writes_of(other):
            if any(b is i for i in inputs):
                raise fail(f"block {other.name!r} writes {b.name}, which it reads, in between")
