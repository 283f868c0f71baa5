"""Auto-bind: every block the other rules left off the GPU gets blocks and threads
(MetaSchedule's AutoBind, and its RewriteUnboundBlock postprocessor).

Applied to the root block once every block rule has run, so that a consumer is
still a plain loop nest when the rule for its producer wants to fuse into it (as
MetaSchedule gets by applying each rule to every block before the next rule).
For each block, in program order:

- already under ``blockIdx`` and ``threadIdx`` loops, or under ``blockIdx`` alone
  (a block computed in another's kernel, run by every thread of it): left alone;
- under ``threadIdx`` loops only (a cross-thread reduction, a consumer a reduction
  was fused into): its leading loops above the first thread loop that enclose
  one statement each and are spatial, the last of them may hold several, are
  fused and bound to ``blockIdx.x``;
- unbound, alone in its loop nest: its leading spatial loops (as above) are fused
  and split by a thread count sampled from THREAD_EXTENTS (those up to the
  loop's extent and the target's threads per block), the pieces bound to
  ``blockIdx.x`` and ``threadIdx.x``. A loop longer than MAX_BLOCKS blocks of the
  most threads is split ``[rest, MAX_BLOCKS, threads]`` and ``rest`` moved inside,
  each thread striding over the whole grid, as MetaSchedule does.

A block with no spatial loop (a full sum's write-back) stays as it is: its
kernel runs on one thread.
"""

from __future__ import annotations

from compiler.ir.expr import IntImm
from compiler.ir.stmt import For, ForKind
from compiler.schedule import BlockRV, ExprRV, Schedule
from compiler.schedule import primitives as P
from tuner.space.rules.analysis import SPATIAL, func_of, loop_kinds, loops_of
from tuner.space.rules.base import ScheduleRule
from tuner.space.rules.gpu_loops import axis_of

# MetaSchedule's CUDA candidates for the threads of a bound loop nest, and the most
# blocks before each thread loops over several elements.
THREAD_EXTENTS = (32, 64, 128, 256, 512, 1024)
MAX_BLOCKS = 256


class AutoBind(ScheduleRule):
    """Bind every unbound block under the root block it is applied to; at most
    ``max_threads`` threads per block."""

    def __init__(self, max_threads: int) -> None:
        self.max_threads = max_threads

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        bound = sch.copy()
        for name in P.block_names(func_of(bound, block)):
            child = BlockRV(name, block.func_name)
            axes = {axis_of(loop) for loop in loops_of(bound, child)}
            if "blockIdx" in axes:
                continue
            count = _leading(bound, child)
            if count == 0:
                continue
            handle = bound.get_block(name, block.func_name)
            if "threadIdx" in axes:
                _bind_grid(bound, handle, count)
            elif _alone(bound, child):
                self._bind_threads(bound, handle, count)
        return [bound]

    def _bind_threads(self, sch: Schedule, block: BlockRV, count: int) -> None:
        loops = sch.get_loops(block)[:count]
        fused = sch.fuse(*loops) if count > 1 else loops[0]
        extent = sch.get(fused).extent
        assert isinstance(extent, IntImm), "_leading takes constant extents only"
        if extent.value > MAX_BLOCKS * self.max_threads:
            rest, blocks, threads = sch.split(fused, [None, MAX_BLOCKS, self.max_threads])
            sch.reorder(blocks, threads, rest)
        else:
            blocks, threads = sch.split(fused, [None, self._threads(sch, extent.value)])
        sch.bind(blocks, "blockIdx.x")
        sch.bind(threads, "threadIdx.x")

    def _threads(self, sch: Schedule, extent: int) -> ExprRV | int:
        """A sampled thread count, or the only one that fits."""
        limit = min(extent, self.max_threads)
        candidates = [t for t in THREAD_EXTENTS if t <= limit]
        if len(candidates) <= 1:
            return candidates[0] if candidates else limit
        return sch.sample_categorical(candidates, [1 / len(candidates)] * len(candidates))


def _bind_grid(sch: Schedule, block: BlockRV, count: int) -> None:
    loops = sch.get_loops(block)[:count]
    sch.bind(sch.fuse(*loops) if count > 1 else loops[0], "blockIdx.x")


def _leading(sch: Schedule, block: BlockRV) -> int:
    """How many of the block's outermost loops may be fused and bound: serial,
    constant, spatial, each but the last holding only the next, none bound."""
    loops = loops_of(sch, block)
    kinds = loop_kinds(sch, block)
    count = 0
    for k, loop in enumerate(loops):
        if loop.kind is not ForKind.SERIAL or not isinstance(loop.extent, IntImm):
            break
        if kinds[k] != SPATIAL:
            break
        count += 1
        if not _holds_one(loop, loops[k + 1] if k + 1 < len(loops) else None):
            break
    return count


def _holds_one(loop: For, inner: For | None) -> bool:
    return inner is not None and loop.body is inner


def _alone(sch: Schedule, block: BlockRV) -> bool:
    """The block is the only one in its loop nest."""
    loops = loops_of(sch, block)
    return bool(loops) and P.child_block_names(loops[0]) == [block.name]
