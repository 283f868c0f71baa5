"""Barriers where the threads of a GPU block pass data through shared memory.

Serial loops promise that a statement sees what the statements before it wrote.
On a GPU the threads of a block run side by side, so a statement that reads a
shared buffer another thread wrote, or overwrites what another thread still has
to read, must wait at a barrier (``__syncthreads``) for every thread to finish
the statements before it. This pass puts one

- in a sequence, before a statement whose first accesses conflict with those of
  the statements since the last barrier (read after write, write after read,
  write after write);
- at the end of a loop body whose last accesses conflict with the first
  accesses of its next iteration (the next tile overwriting the one still read).
  Writes alone do not conflict across iterations here: a loop that only fills a
  buffer writes each element in one iteration.

A barrier must be reached by every thread of the block, so it only goes where
all threads run: not under a loop bound to fewer threads than the block has,
nor under a condition or loop bound that depends on the thread. Threads that pass
data through shared memory there cannot be synchronized, and the kernel is
refused. Buffers in local memory are private to a thread and need no barrier;
global memory is not ordered between blocks at all, which the binding checks
(``gpu_bindings``) keep schedules from relying on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from compiler.ir.analysis import free_vars
from compiler.ir.buffer import Buffer
from compiler.ir.expr import BufferLoad, PrimExpr
from compiler.ir.node import Node, visit
from compiler.ir.stmt import (
    Allocate,
    Barrier,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Stmt,
    seq,
)
from compiler.ir.structural import structural_equal
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int


@dataclass(frozen=True)
class _Accesses:
    reads: frozenset[int] = frozenset()
    writes: frozenset[int] = frozenset()

    def __or__(self, other: _Accesses) -> _Accesses:
        return _Accesses(self.reads | other.reads, self.writes | other.writes)

    def conflicts(self, later: _Accesses, *, write_after_write: bool = True) -> bool:
        hazards = (self.writes & later.reads) | (self.reads & later.writes)
        if write_after_write:
            hazards |= self.writes & later.writes
        return bool(hazards)


_NONE = _Accesses()


@dataclass(frozen=True)
class _Segments:
    """A statement's shared accesses before its first barrier and after its last
    (both all of them when it has none)."""

    first: _Accesses
    last: _Accesses
    has_barrier: bool


def insert_barriers(body: Stmt, block_dims: Mapping[str, int]) -> Stmt:
    """``body`` (one kernel, loops still marked with their thread axes) with barriers
    where its threads share data; ``block_dims`` is the launch size of each
    ``threadIdx`` axis. Raises ScheduleError where a barrier is needed that not all
    threads would reach."""
    return _Planner(block_dims, _thread_vars(body)).stmt(body, uniform=True)


class _Planner:
    def __init__(self, block_dims: Mapping[str, int], thread_vars: frozenset[int]) -> None:
        self.block_dims = block_dims
        self.thread_vars = thread_vars

    def stmt(self, s: Stmt, uniform: bool) -> Stmt:
        if not uniform:
            _refuse_hazards(s)
            return s
        if isinstance(s, SeqStmt):
            return self._seq(s)
        if isinstance(s, For):
            return self._for(s)
        if isinstance(s, IfThenElse):
            branch_uniform = not self._depends_on_thread(s.condition)
            then_case = self.stmt(s.then_case, branch_uniform)
            else_case = None if s.else_case is None else self.stmt(s.else_case, branch_uniform)
            return IfThenElse(s.condition, then_case, else_case)
        if isinstance(s, Allocate):
            return dataclasses.replace(s, body=self.stmt(s.body, uniform))
        if isinstance(s, BufferStore):
            _refuse_racing_update(s)
        return s

    def _seq(self, s: SeqStmt) -> Stmt:
        out: list[Stmt] = []
        pending = _NONE
        for child in s.seq:
            synced = self.stmt(child, uniform=True)
            parts = segments(synced)
            if pending.conflicts(parts.first):
                out.append(Barrier())
                pending = _NONE
            pending = parts.last if parts.has_barrier else pending | parts.last
            out.append(synced)
        return seq(*out)

    def _for(self, loop: For) -> Stmt:
        body_uniform = self._body_is_uniform(loop)
        body = self.stmt(loop.body, body_uniform)
        iterates = loop.kind is not ForKind.THREAD_BINDING or not _is_hardware(loop)
        if body_uniform and iterates and const_int(loop.extent) != 1:
            parts = segments(body)
            if parts.last.conflicts(parts.first, write_after_write=False):
                body = seq(body, Barrier())
        return dataclasses.replace(loop, body=body)

    def _body_is_uniform(self, loop: For) -> bool:
        """Every thread of the block runs the loop's body (as often as the others)."""
        axis = loop.thread_binding
        if loop.kind is ForKind.THREAD_BINDING and axis is not None:
            if axis.startswith("threadIdx"):
                return const_int(loop.extent) == self.block_dims[axis]
            return True
        return not (self._depends_on_thread(loop.min) or self._depends_on_thread(loop.extent))

    def _depends_on_thread(self, e: PrimExpr) -> bool:
        return any(id(v) in self.thread_vars for v in free_vars(e))


def _is_hardware(loop: For) -> bool:
    """A loop bound to blocks or threads, which each thread runs at most once."""
    return (loop.thread_binding or "").startswith(("blockIdx", "threadIdx"))


def segments(s: Stmt) -> _Segments:
    """The shared accesses of ``s`` before its first barrier and after its last."""
    if isinstance(s, Barrier):
        return _Segments(_NONE, _NONE, True)
    if isinstance(s, SeqStmt):
        first, last, seen = _NONE, _NONE, False
        for child in s.seq:
            parts = segments(child)
            if not seen:
                first = first | parts.first
            last = parts.last if parts.has_barrier else last | parts.last
            seen = seen or parts.has_barrier
        return _Segments(first, last, seen)
    if isinstance(s, (For, Allocate)):
        return segments(s.body)
    if isinstance(s, IfThenElse):
        branches = [segments(s.then_case)]
        if s.else_case is not None:
            branches.append(segments(s.else_case))
        first = _NONE
        last = _NONE
        for parts in branches:
            first, last = first | parts.first, last | parts.last
        return _Segments(first | _loads(s.condition), last, any(p.has_barrier for p in branches))
    everything = _accesses(s)
    return _Segments(everything, everything, False)


def _accesses(node: Node) -> _Accesses:
    reads: set[int] = set()
    writes: set[int] = set()

    def look(n: Node) -> None:
        if isinstance(n, BufferLoad) and _is_shared(n.buffer):
            reads.add(id(n.buffer))
        elif isinstance(n, BufferStore) and _is_shared(n.buffer):
            writes.add(id(n.buffer))

    visit(node, look)
    return _Accesses(frozenset(reads), frozenset(writes))


def _loads(e: PrimExpr) -> _Accesses:
    return _accesses(e)


def _is_shared(buffer: Buffer) -> bool:
    return buffer.scope == "shared"


def _refuse_hazards(s: Stmt) -> None:
    """Refuse a statement that not every thread runs when two of its stores share a
    buffer in shared memory (no barrier can separate them there), unless every
    access of that buffer in it names the same element: each thread then works on
    its own (a partial sum initialized and updated under a guard)."""
    stores: list[BufferStore] = []
    visit(s, lambda n: stores.append(n) if isinstance(n, BufferStore) else None)
    private = _one_element_buffers(s)
    for k, store in enumerate(stores):
        _refuse_racing_update(store)
        mine = _accesses(store)
        for other in stores[k + 1 :]:
            theirs = _accesses(other)
            shared = ((mine.reads | mine.writes) & (theirs.reads | theirs.writes)) - private
            if shared and (mine.conflicts(theirs) or theirs.conflicts(mine)):
                name = _buffer_name(s, shared)
                raise ScheduleError(
                    f"threads pass data through shared buffer {name!r} under a loop bound to "
                    "fewer threads than the block has, or a condition on the thread index, "
                    "where no barrier can go (not every thread reaches it); bind the loop to "
                    "as many threads as the block's other loops of that axis"
                )


def _one_element_buffers(s: Stmt) -> frozenset[int]:
    """The shared buffers that every access in ``s`` indexes the same way."""
    indices: dict[int, tuple[PrimExpr, ...] | None] = {}

    def look(n: Node) -> None:
        if isinstance(n, (BufferLoad, BufferStore)) and _is_shared(n.buffer):
            seen = indices.setdefault(id(n.buffer), n.indices)
            if seen is not None and not all(
                structural_equal(a, b) for a, b in zip(seen, n.indices, strict=True)
            ):
                indices[id(n.buffer)] = None

    visit(s, look)
    return frozenset(key for key, found in indices.items() if found is not None)


def _refuse_racing_update(store: BufferStore) -> None:
    """A store that reads the shared element it writes is one thread's update; reading
    another element of the buffer it writes races with the threads writing that."""
    if not _is_shared(store.buffer):
        return
    loads: list[BufferLoad] = []
    visit(store.value, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    for load in loads:
        if load.buffer is store.buffer and not all(
            structural_equal(a, b) for a, b in zip(load.indices, store.indices, strict=True)
        ):
            raise ScheduleError(
                f"a store to shared buffer {store.buffer.name!r} reads another element of it; "
                "threads running it side by side would race: compute into a local buffer"
            )


def _buffer_name(s: Stmt, ids: frozenset[int]) -> str:
    names: list[str] = []

    def look(n: Node) -> None:
        if isinstance(n, (BufferLoad, BufferStore)) and id(n.buffer) in ids:
            names.append(n.buffer.name)

    visit(s, look)
    return names[0] if names else "?"


def _thread_vars(body: Stmt) -> frozenset[int]:
    found: set[int] = set()

    def look(n: Node) -> None:
        if isinstance(n, For) and n.thread_binding and n.thread_binding.startswith("threadIdx"):
            found.add(id(n.loop_var))

    visit(body, look)
    return frozenset(found)
