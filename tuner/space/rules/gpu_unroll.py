"""Auto-unroll on a GPU: the most loop steps to unroll, sampled once per program
(the unroll part of MetaSchedule's ParallelizeVectorizeUnroll for CUDA).

The size is a ``sample_categorical`` annotated on the root block under the key the
CPU rule uses, so the space's postprocessing unrolls the innermost serial loops
of every block (inside its thread loops) while the steps under them stay within
it, and the space knows the decision's role. A GPU has no parallel or vector
size to sample: threads come from the bindings, and a vectorized loop is
unrolled by the NVPTX code generator anyway.
"""

from __future__ import annotations

from compiler.schedule import BlockRV, Schedule
from tuner.space.rules.base import ScheduleRule
from tuner.space.rules.parallel_vectorize_unroll import UNROLL

# MetaSchedule's CUDA steps are 0, 16, 32, ..., 1024 under an LLVM pragma that may
# unroll less; here a loop is unrolled whole, so the list stops where a register
# tile's unrolled micro-kernel (an 8 x 8 tile over 8 reduction steps is 512)
# still builds in well under a second.
UNROLL_MAX_STEPS = (0, 16, 64, 512)


class AutoUnroll(ScheduleRule):
    """Sample the unroll size; applied to the root block."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        annotated = sch.copy()
        steps = annotated.sample_categorical(
            UNROLL_MAX_STEPS, [1 / len(UNROLL_MAX_STEPS)] * len(UNROLL_MAX_STEPS)
        )
        annotated.annotate(block, UNROLL, steps)
        return [annotated]
