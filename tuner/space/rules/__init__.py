"""Schedule rules: what a generated space does to each block (``base.ScheduleRule``),
one module per rule, and the rules a CPU or a GPU space applies, in order."""

from __future__ import annotations

from compiler.target.cuda import CudaTarget
from compiler.target.llvm import LLVMTarget
from compiler.target.parse import Target
from tuner.space.rules.auto_bind import AutoBind
from tuner.space.rules.auto_inline import AutoInline
from tuner.space.rules.base import ScheduleRule
from tuner.space.rules.chain import Chain
from tuner.space.rules.cross_thread_reduction import CrossThreadReduction
from tuner.space.rules.gpu_multi_level_tiling import GPUMultiLevelTiling
from tuner.space.rules.gpu_unroll import AutoUnroll
from tuner.space.rules.multi_level_tiling import MultiLevelTiling
from tuner.space.rules.parallel_vectorize_unroll import ParallelVectorizeUnroll
from tuner.space.rules.random_compute_location import RandomComputeLocation
from tuner.space.rules.rfactor import AddRFactor

# Parallel jobs per core that a program may want at most; a reduction with fewer
# output elements than this many per core is offered rfactor.
MAX_JOBS_PER_CORE = 16


def block_rules(target: Target) -> list[ScheduleRule]:
    """The rules applied to every block, in order (MetaSchedule's CPU order; on a GPU
    its CUDA rules but AutoBind, which ``root_rule`` applies once they all ran)."""
    if isinstance(target, CudaTarget):
        max_threads = target.capabilities.max_threads_per_block
        return [AutoInline(), CrossThreadReduction(max_threads), GPUMultiLevelTiling()]
    return [
        AutoInline(),
        AddRFactor(max_spatial=MAX_JOBS_PER_CORE * target.threads),
        MultiLevelTiling(vector_bits=target.vector_bits),
        RandomComputeLocation(),
    ]


def root_rule(target: Target) -> ScheduleRule:
    """The rule applied once to the root block, after every block."""
    if isinstance(target, CudaTarget):
        return Chain([AutoBind(target.capabilities.max_threads_per_block), AutoUnroll()])
    assert isinstance(target, LLVMTarget), "a target is a CPU or a CUDA target"
    return ParallelVectorizeUnroll(threads=target.threads)


__all__ = [
    "AddRFactor",
    "AutoBind",
    "AutoInline",
    "AutoUnroll",
    "Chain",
    "CrossThreadReduction",
    "GPUMultiLevelTiling",
    "MultiLevelTiling",
    "ParallelVectorizeUnroll",
    "RandomComputeLocation",
    "ScheduleRule",
    "block_rules",
    "root_rule",
]
