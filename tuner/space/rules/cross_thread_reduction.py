"""Cross-thread reduction: the threads of one GPU block share a reduction whose
output is too small to keep a GPU busy one element per thread (a softmax row's
maximum and sum, layer norm's moments, a full sum): MetaSchedule's
CrossThreadReduction, in the primitives this compiler has.

As in MetaSchedule, the reduction loops are fused and split ``[rest, T]``, ``T``
sampled from THREAD_EXTENTS among those dividing the reduction (a partial under a
guard would leave threads out of the combination), and the ``T`` piece, moved
outermost, is bound to ``threadIdx.x``: each thread reduces ``rest`` elements in a
register, and lowering combines the threads' results with warp shuffles
(``compiler.lower.thread_reduction``), the first thread storing the total.

When the block's consumers share a loop with it (the row loop of softmax's
normalisation), the reduction is computed at that loop (``compute_at``) and the
consumer's innermost loop is split by the same ``T`` and bound to ``threadIdx.x``,
so one kernel computes a row's reduction and uses it, the total in shared memory; a
consumer that an earlier application already bound lends its thread count, read off
the trace, so that every thread loop of the kernel has one extent whatever the
decisions. The unshared block stays a fork of its own, as in MetaSchedule.
"""

from __future__ import annotations

import math

from compiler.ir.stmt import For
from compiler.schedule import BlockRV, ExprRV, LoopRV, Schedule
from tuner.space.rules.analysis import (
    REDUCE,
    SPATIAL,
    attempt,
    consumers,
    extents,
    has_reuse,
    is_plain_nest,
    loop_kinds,
    loops_of,
    realize_of,
    spatial_work,
    written,
)
from tuner.space.rules.base import ScheduleRule
from tuner.space.rules.gpu_loops import axis_of, is_bound

# MetaSchedule's CUDA candidates for the threads that share one reduction.
THREAD_EXTENTS = (4, 8, 16, 32, 64, 128, 256, 512)


class CrossThreadReduction(ScheduleRule):
    """Fork a reduction into one shared by ``T`` threads of a block; at most
    ``max_threads`` threads (the target's threads per block)."""

    def __init__(self, max_threads: int) -> None:
        self.max_threads = max_threads

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        candidates = self._thread_extents(sch, block)
        if not candidates:
            return [sch]
        shared = attempt(sch, lambda s: _share(s, block, candidates))
        return [sch] if shared is None else [shared, sch]

    def _thread_extents(self, sch: Schedule, block: BlockRV) -> list[int]:
        """The thread counts this block may be reduced with; none when the rule does
        not apply: a reduction with its reduction loops innermost and its output
        small next to its reduction (or not reused, so no tiling wants it)."""
        body = realize_of(sch, block).block
        if not body.is_reduction or len(written(body)) != 1 or not is_plain_nest(sch, block):
            return []
        if is_bound(sch, block):
            return []
        kinds = loop_kinds(sch, block)
        if REDUCE not in kinds or SPATIAL in kinds[kinds.index(REDUCE) :]:
            return []
        reduction = math.prod(extents(loops_of(sch, block)[kinds.index(REDUCE) :]))
        spatial = spatial_work(sch, block)
        if has_reuse(sch, block) and (spatial >= reduction or spatial > self.max_threads):
            return []
        return [t for t in THREAD_EXTENTS if t <= self.max_threads and reduction % t == 0]


def _share(sch: Schedule, block: BlockRV, candidates: list[int]) -> None:
    threads = _fuse_into_consumer(sch, block, candidates)
    if threads is None:
        threads = _sample_threads(sch, candidates)
    loops = sch.get_loops(block)
    kinds = loop_kinds(sch, block)
    reduce = [loop for loop, kind in zip(loops, kinds, strict=True) if kind == REDUCE]
    fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
    rest, lanes = sch.split(fused, [None, threads])
    sch.reorder(lanes, rest)
    sch.bind(lanes, "threadIdx.x")


def _sample_threads(sch: Schedule, candidates: list[int]) -> ExprRV:
    return sch.sample_categorical(candidates, [1 / len(candidates)] * len(candidates))


def _fuse_into_consumer(sch: Schedule, block: BlockRV, candidates: list[int]) -> ExprRV | None:
    """Compute ``block`` at the loop it shares with its consumers, the first of them
    bound to threads; the thread count, None when it stays where it is."""
    target = _target(sch, block)
    if target is None:
        return None
    name, position = target
    loops = sch.get_loops(sch.get_block(name, block.func_name))
    bound = [loop for loop in loops if axis_of(sch.get(loop)) == "threadIdx"]
    if bound:
        threads = _split_factor(sch, bound[0])
        if threads is None:
            return None
        at = loops[position]
    else:
        innermost = loops[-1]
        threads = _sample_threads(sch, candidates)
        outer, inner = sch.split(innermost, [None, threads])
        sch.bind(inner, "threadIdx.x")
        at = outer if position == len(loops) - 1 else loops[position]
    sch.compute_at(block, at, preserve_unit_loops=True)
    return threads


def _target(sch: Schedule, block: BlockRV) -> tuple[str, int] | None:
    """The consumer to compute ``block`` in and the position of the loop, as in
    MetaSchedule: the first consumer, at the deepest of its loops that matches a
    spatial loop of ``block`` and is not inside the consumers' common loop. A
    reduction not yet bound to threads is no target: its innermost loop reduces,
    and cannot be bound."""
    users = consumers(sch, block)
    if not users:
        return None
    first_user = _named(block, users[0].name)
    if users[0].is_reduction and not is_bound(sch, first_user):
        return None
    user_loops = [loops_of(sch, _named(block, u.name)) for u in users]
    common = _common_prefix(user_loops)
    if len(users) > 1 and not common:
        return None
    lca = common[-1] if len(users) > 1 else None
    own = loops_of(sch, block)
    kinds = loop_kinds(sch, block)
    first = user_loops[0]
    position = min(len(own), len(first)) - 1
    for k in range(min(len(own), len(first))):
        if kinds[k] != SPATIAL:
            position = k - 1
            break
        if first[k] is lca:
            position = k
            break
    if position < 0 or any(axis_of(loop) for loop in first[: position + 1]):
        return None
    return users[0].name, position


def _named(block: BlockRV, name: str) -> BlockRV:
    """A handle on block ``name`` of ``block``'s function, for analysis only: the
    trace does not know it."""
    return BlockRV(name, block.func_name)


def _common_prefix(nests: list[list[For]]) -> list[For]:
    common: list[For] = []
    for loops in zip(*nests, strict=False):
        if any(loop is not loops[0] for loop in loops):
            break
        common.append(loops[0])
    return common


def _split_factor(sch: Schedule, loop: LoopRV) -> ExprRV | None:
    """The sampled factor that gave ``loop`` its extent, read off the trace; None
    when a constant or a fuse did."""
    for inst in sch.trace.instructions:
        if inst.kind != "split":
            continue
        for k, out in enumerate(inst.outputs):
            if out.var is loop.var:
                factor = inst.inputs["factors"][k]
                return factor if isinstance(factor, ExprRV) else None
    return None
