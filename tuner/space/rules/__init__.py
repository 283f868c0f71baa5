"""Schedule rules: what a generated space does to each block (``base.ScheduleRule``),
one module per rule, and the rules a CPU space applies, in order."""

from __future__ import annotations

from compiler.codegen.target import LLVMTarget
from tuner.space.rules.auto_inline import AutoInline
from tuner.space.rules.base import ScheduleRule
from tuner.space.rules.multi_level_tiling import MultiLevelTiling
from tuner.space.rules.parallel_vectorize_unroll import ParallelVectorizeUnroll
from tuner.space.rules.random_compute_location import RandomComputeLocation
from tuner.space.rules.rfactor import AddRFactor

# Parallel jobs per core that a program may want at most; a reduction with fewer
# output elements than this many per core is offered rfactor.
MAX_JOBS_PER_CORE = 16


def block_rules(target: LLVMTarget) -> list[ScheduleRule]:
    """The rules applied to every block, in order (MetaSchedule's CPU order)."""
    return [
        AutoInline(),
        AddRFactor(max_spatial=MAX_JOBS_PER_CORE * target.threads),
        MultiLevelTiling(),
        RandomComputeLocation(),
    ]


def root_rule(target: LLVMTarget) -> ScheduleRule:
    """The rule applied once to the root block, after every block."""
    return ParallelVectorizeUnroll(threads=target.threads)


__all__ = [
    "AddRFactor",
    "AutoInline",
    "MultiLevelTiling",
    "ParallelVectorizeUnroll",
    "RandomComputeLocation",
    "ScheduleRule",
    "block_rules",
    "root_rule",
]
