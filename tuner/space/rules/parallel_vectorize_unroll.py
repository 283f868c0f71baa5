"""Parallel, vectorize and unroll sizes sampled once per program (MetaSchedule's
ParallelizeVectorizeUnroll): three ``sample_categorical`` on the root block, each
stored there as an annotation that the postprocessing step turns into loops.

Annotating with the sampled variable (not its value) records the variable in the
trace, so a replay with other decisions annotates the new sizes.
"""

from __future__ import annotations

from compiler.schedule import BlockRV, Schedule
from compiler.workload.flops import flop_count
from tuner.space.rules.base import ScheduleRule

PARALLEL = "tensortune.parallel"
VECTORIZE = "tensortune.vectorize"
UNROLL = "tensortune.unroll"
# Parallel jobs per core (0: no parallel loop); the parallel extent is this times
# the target's threads.
JOBS_PER_CORE = (0, 1, 4, 16)
# A program of more floating-point operations than this is not offered a serial
# run on more than one thread: it takes at least about 100 us on one core, where a
# parallel loop starts in a few. Offered anyway, a serial point is a basin that a
# search in its first rounds can settle in (GEMM 1024^3 and a strided NHWC
# convolution each had a 64-trial seed stuck there at a third of the others' speed):
# a mutation moves the parallel extent in 2 % of children.
SERIAL_MAX_FLOPS = 1 << 24
VECTOR_LANES = (0, 4, 8, 16, 32, 64)
# MetaSchedule also offers 512, as a limit LLVM's unroller may stay under; here an
# unrolled loop is unrolled whole, and 512 copies of a GEMM micro-kernel took LLVM
# 8.6 s to build and ran 3x slower than 64 (GEMM 1024^3), so 64 is the largest.
UNROLL_MAX_STEPS = (0, 16, 64)
# What each annotation's domain controls, as the space's Domain.role.
ROLES = {PARALLEL: "parallel", VECTORIZE: "vectorize", UNROLL: "unroll"}


class ParallelVectorizeUnroll(ScheduleRule):
    """Sample the three sizes for ``threads`` threads; applied to the root block."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        annotated = sch.copy()
        jobs_per_core: tuple[int, ...] = JOBS_PER_CORE
        if self.threads > 1 and flop_count(sch.mod[block.func_name]) > SERIAL_MAX_FLOPS:
            jobs_per_core = tuple(jobs for jobs in JOBS_PER_CORE if jobs > 0)
        parallel = [jobs * self.threads for jobs in jobs_per_core]
        for key, candidates in (
            (PARALLEL, parallel),
            (VECTORIZE, VECTOR_LANES),
            (UNROLL, UNROLL_MAX_STEPS),
        ):
            value = annotated.sample_categorical(
                candidates, [1 / len(candidates)] * len(candidates)
            )
            annotated.annotate(block, key, value)
        return [annotated]
