"""Whether a scheduled function's thread bindings mean what its loops mean.

A schedule's loops have serial meaning: every iteration of every loop runs. On a
GPU a loop bound to ``threadIdx.x`` is not a loop: each thread runs its body once,
with the loop variable equal to its index, and every loop bound to the same axis
reads the same index. The two meanings agree when

- the iterations of each bound loop may run at the same time, which ``bind``
  checked when it was called and which is checked again here, since compute_at
  and reverse_compute_at may have moved blocks under the loop since;
- a block under several loops bound to one axis (a cooperative fetch, split and
  bound to ``threadIdx.x`` again under the compute's ``threadIdx.x`` loop) is
  indexed by at most one of them: a thread runs the pairs of equal indices only,
  which cover all the block's instances only when the others do not matter to it
  (they repeat the same work) and are at least as long as the one that does.
"""

from __future__ import annotations

from compiler.ir.analysis import free_vars
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, children
from compiler.ir.stmt import BlockRealize, For, ForKind
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int
from compiler.schedule.primitives.concurrency import check_concurrent


def verify_thread_bindings(func: PrimFunc) -> None:
    """Raise ScheduleError where a thread binding would change what ``func`` computes."""
    bound: list[For] = []

    def walk(node: Node, enclosing: tuple[For, ...]) -> None:
        if isinstance(node, For) and node.kind is ForKind.THREAD_BINDING:
            bound.append(node)
            _check_axis_nesting(node, enclosing)
            enclosing = (*enclosing, node)
        if isinstance(node, BlockRealize):
            _check_block(node, enclosing)
        for child in children(node):
            walk(child, enclosing)

    walk(func.body, ())
    for loop in bound:
        check_concurrent(func, loop, "bind", cross_thread=loop.thread_binding == "threadIdx.x")


def _check_axis_nesting(loop: For, enclosing: tuple[For, ...]) -> None:
    axis = loop.thread_binding
    assert axis is not None
    if not axis.startswith("blockIdx"):
        return
    for outer in enclosing:
        if outer.thread_binding == axis:
            raise ScheduleError(
                f"loops {outer.loop_var.name!r} and {loop.loop_var.name!r} are both bound to "
                f"{axis}, one inside the other; a kernel has one {axis}: fuse them first"
            )
        if outer.thread_binding is not None and outer.thread_binding.startswith("threadIdx"):
            raise ScheduleError(
                f"loop {loop.loop_var.name!r} is bound to {axis} inside loop "
                f"{outer.loop_var.name!r} bound to {outer.thread_binding}; blocks are "
                "outside threads: reorder the loops"
            )


def _check_block(realize: BlockRealize, enclosing: tuple[For, ...]) -> None:
    used = {id(v) for value in (*realize.iter_values, realize.predicate) for v in free_vars(value)}
    by_axis: dict[str, list[For]] = {}
    for loop in enclosing:
        if loop.thread_binding is not None and loop.thread_binding.startswith("threadIdx"):
            by_axis.setdefault(loop.thread_binding, []).append(loop)
    name = realize.block.name
    for axis, loops in by_axis.items():
        if len(loops) < 2:
            continue
        indexing = [loop for loop in loops if id(loop.loop_var) in used]
        if len(indexing) > 1:
            names = " and ".join(repr(loop.loop_var.name) for loop in indexing)
            raise ScheduleError(
                f"block {name!r} is indexed by loops {names}, both bound to {axis}: a thread "
                "runs them with one index, so most of the block's instances would never run; "
                "bind only one of them"
            )
        if not indexing:
            continue
        extent = const_int(indexing[0].extent)
        shorter = [lp for lp in loops if (const_int(lp.extent) or 0) < (extent or 0)]
        if shorter:
            raise ScheduleError(
                f"block {name!r} is indexed by loop {indexing[0].loop_var.name!r} bound to "
                f"{axis} with extent {extent}, inside loop {shorter[0].loop_var.name!r} bound "
                f"to {axis} with extent {shorter[0].extent}: only that many threads run it; "
                f"split the inner loop by {shorter[0].extent}"
            )
