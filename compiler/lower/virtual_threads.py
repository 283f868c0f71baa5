"""Virtual threads interleaved inside one GPU thread (TVM's InjectVirtualThread).

A loop bound to ``vthread`` splits a thread's work into sub-tiles that sit apart
in the block's tile, so that neighbouring threads touch neighbouring elements.
Its iterations may run at the same time (``bind`` checked it), so this pass need
not run them one after another. It pushes the loop inward, down to the
statements that depend on it:

- a statement that neither reads the loop variable nor touches a buffer private
  to a virtual thread runs once, not once per virtual thread: the cooperative
  fetch of a shared tile, which every virtual thread needs whole (``compute_at``
  and ``compact_buffers`` size shared buffers over the virtual threads, as over
  the threads);
- a buffer allocated inside the loop that holds different values per virtual
  thread (a store to it depends on the loop variable, or on such a buffer) gets
  one slice per virtual thread, indexed by the loop variable: a thread's
  accumulators, expanded;
- loops and sequences that do not depend on the variable in their bounds are
  entered; an unrolled copy of the loop wraps each statement that does, so the
  virtual threads' updates interleave in the innermost loops, and their reads of
  shared memory neighbour each other.

It runs on one lowered kernel (flat buffers), before barriers go in: the fetches,
now once per step, get their barriers as any other.
"""

from __future__ import annotations

import dataclasses
import math

from compiler.ir.analysis import buffers_read, buffers_written, substitute, uses_var
from compiler.ir.buffer import Buffer
from compiler.ir.expr import BufferLoad, IntImm, PrimExpr, Var
from compiler.ir.node import Node, children, transform, transform_pre, visit
from compiler.ir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from compiler.schedule.errors import ScheduleError

# The most virtual threads around a statement: beyond it the copies only add
# registers (MetaSchedule's VerifyGPUCode allows as many).
MAX_VIRTUAL_THREADS = 8


def inject_virtual_threads(nest: Stmt) -> Stmt:
    """``nest`` with every loop bound to ``vthread`` pushed down to the statements
    that depend on it; a ScheduleError for more than MAX_VIRTUAL_THREADS nested."""
    _check_count(nest)

    def inject(node: Node) -> Node | None:
        if isinstance(node, For) and _is_virtual(node):
            return transform_pre(_Injection(node).run(), inject)
        return None

    return transform_pre(nest, inject)


def _is_virtual(loop: For) -> bool:
    return (loop.thread_binding or "").startswith("vthread")


def _check_count(nest: Stmt) -> None:
    def walk(node: Node, count: int) -> None:
        if isinstance(node, For) and _is_virtual(node):
            if not isinstance(node.extent, IntImm) or not isinstance(node.min, IntImm):
                raise ScheduleError(
                    f"loop {node.loop_var.name!r} bound to {node.thread_binding} needs a "
                    "constant range"
                )
            count *= node.extent.value
            if count > MAX_VIRTUAL_THREADS:
                raise ScheduleError(
                    f"loop {node.loop_var.name!r} bound to {node.thread_binding} makes "
                    f"{count} virtual threads, more than the {MAX_VIRTUAL_THREADS} a thread "
                    "may interleave; give the virtual-thread tiles fewer iterations"
                )
        for child in children(node):
            walk(child, count)

    walk(nest, 1)


class _Injection:
    """One virtual-thread loop pushed into its body."""

    def __init__(self, loop: For) -> None:
        self.loop = loop
        self.var = loop.loop_var
        assert isinstance(loop.extent, IntImm)  # _check_count refused any other
        self.count = loop.extent.value
        self.private: set[int] = set()

    def run(self) -> Stmt:
        body = self._expanded(self.loop.body)
        return self._push(body)

    # buffers private to a virtual thread ---------------------------------------

    def _expanded(self, body: Stmt) -> Stmt:
        """``body`` with each buffer allocated in it that holds different values per
        virtual thread replaced by one with a slice per virtual thread."""
        allocated = _allocations(body)
        private = self._private(body, allocated)
        if not private:
            return body
        grown = {id(b): _grown(b, self.count) for b in allocated if id(b) in private}
        self.private = {id(b) for b in grown.values()}
        var = self.var

        def slice_of(buffer: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
            (index,) = indices
            return (var * _elements(buffer) + index,)

        def rewrite(node: Node) -> Node | None:
            if isinstance(node, Allocate) and id(node.buffer) in grown:
                return Allocate(grown[id(node.buffer)], node.body)
            if isinstance(node, BufferLoad) and id(node.buffer) in grown:
                return BufferLoad(grown[id(node.buffer)], slice_of(node.buffer, node.indices))
            if isinstance(node, BufferStore) and id(node.buffer) in grown:
                new = grown[id(node.buffer)]
                return BufferStore(new, node.value, slice_of(node.buffer, node.indices))
            return None

        return transform(body, rewrite)

    def _private(self, body: Stmt, allocated: list[Buffer]) -> set[int]:
        """The ids of the buffers in ``allocated`` that some store gives a value or an
        index depending on the loop variable or on another such buffer."""
        candidates = {id(b) for b in allocated}
        stores: list[BufferStore] = []
        visit(body, lambda n: stores.append(n) if isinstance(n, BufferStore) else None)
        private: set[int] = set()
        changed = True
        while changed:
            changed = False
            for store in stores:
                target = id(store.buffer)
                if target in private or target not in candidates:
                    continue
                reads = buffers_read(store)
                if uses_var(store, self.var) or any(id(b) in private for b in reads):
                    private.add(target)
                    changed = True
        return private

    # pushing the loop inward -------------------------------------------------------

    def _depends(self, node: Node) -> bool:
        if uses_var(node, self.var):
            return True
        touched = (*buffers_read(node), *buffers_written(node)) if self.private else ()
        return any(id(b) in self.private for b in touched)

    def _push(self, stmt: Stmt) -> Stmt:
        if not self._depends(stmt):
            return stmt
        if isinstance(stmt, SeqStmt):
            return SeqStmt(tuple(self._push(s) for s in stmt.seq))
        if isinstance(stmt, Allocate):
            return dataclasses.replace(stmt, body=self._push(stmt.body))
        if isinstance(stmt, For) and not self._depends(stmt.min) and not self._depends(stmt.extent):
            return dataclasses.replace(stmt, body=self._push(stmt.body))
        if isinstance(stmt, IfThenElse) and not self._depends(stmt.condition):
            else_case = None if stmt.else_case is None else self._push(stmt.else_case)
            return IfThenElse(stmt.condition, self._push(stmt.then_case), else_case)
        return self._copies(stmt)

    def _copies(self, stmt: Stmt) -> Stmt:
        """``stmt`` once per virtual thread, in a loop that code generation unrolls."""
        fresh = Var(self.var.name, self.var.dtype)
        shifted = fresh if _is_zero(self.loop.min) else fresh + self.loop.min
        body = substitute(stmt, {self.var: shifted})
        return For(fresh, IntImm(0, self.var.dtype), self.loop.extent, ForKind.UNROLLED, body)


def _allocations(body: Stmt) -> list[Buffer]:
    found: list[Buffer] = []
    visit(body, lambda n: found.append(n.buffer) if isinstance(n, Allocate) else None)
    return found


def _grown(buffer: Buffer, count: int) -> Buffer:
    """``buffer`` with a leading dimension of ``count`` slices (accesses are flat
    offsets by now, so the slice is a multiple of the old size)."""
    return dataclasses.replace(buffer, shape=(IntImm(count, "int64"), *buffer.shape))


def _elements(buffer: Buffer) -> int:
    sizes = [d.value for d in buffer.shape if isinstance(d, IntImm)]
    if len(sizes) != len(buffer.shape):
        raise ScheduleError(
            f"buffer {buffer.name!r} under a virtual thread has the symbolic shape "
            f"{list(buffer.shape)}; a virtual thread's buffers need constant sizes"
        )
    return math.prod(sizes)


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0
