"""The schedule a PrimFunc gets on a GPU when nobody wrote one: every block's
leading spatial loops fused and spread over blocks and threads (TVM's auto-bind).

Each block keeps its own loop nest and so becomes a kernel of its own; its
reduction loops stay serial inside the thread, so a thread computes whole output
elements. A reduction with few outputs and a long reduction (a softmax's or layer
norm's rows, a batch-1 dense) gives each output a warp instead, whose threads share
its reduction (``compiler.lower.thread_reduction``): one thread per output would
leave most of the GPU idle. A block with no spatial loop (a sum to a scalar) runs
on one thread: slow, but right. A move the primitives refuse is dropped, so the
result is always a legal schedule of the same computation.
"""

from __future__ import annotations

import math

from compiler.ir.analysis import find_block_realize
from compiler.ir.expr import IntImm
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.stmt import For, IterKind
from compiler.schedule import primitives as P
from compiler.schedule.default import is_unscheduled
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import BlockRV, LoopRV
from compiler.schedule.schedule import SCHEDULED_ATTR, Schedule
from compiler.target.cuda import CudaTarget

# Threads per block of a default kernel: a multiple of the warp size that leaves
# room for several blocks on each multiprocessor.
DEFAULT_THREADS = 256
# A reduction with fewer outputs than this, over at least ``SHARED_REDUCTION`` elements
# that a warp divides, gets a warp per output.
FEW_OUTPUTS = 16384
WARP = 32
SHARED_REDUCTION = 4 * WARP


def gpu_default_schedule(func: PrimFunc, target: str | CudaTarget) -> Schedule:
    """The Schedule that binds every block of ``func`` for ``target``."""
    cuda = CudaTarget.parse(target)
    threads = min(DEFAULT_THREADS, cuda.capabilities.max_threads_per_block)
    sch = Schedule(func)
    for name in P.block_names(func):
        block = sch.get_block(name)
        spatial = _leading_spatial_loops(sch, block)
        if not spatial:
            continue
        attempt = sch.copy()
        try:
            if not _share_reduction(attempt, block, spatial):
                _bind_spatial(attempt, spatial, threads)
        except ScheduleError:
            continue
        sch = attempt
    return sch


def _share_reduction(sch: Schedule, block: BlockRV, spatial: list[LoopRV]) -> bool:
    """Give each output of a reduction with few outputs and a long reduction right
    inside its spatial loops a warp: the outputs on blocks, the reduction split by
    the warp, its lanes bound to ``threadIdx.x``. False where that does not apply;
    ScheduleError where a primitive refuses it."""
    rest = sch.get_loops(block)[len(spatial) :]
    outputs = math.prod(_extent(sch, loop) for loop in spatial)
    reduction = math.prod(_extent(sch, loop) for loop in rest)
    if not rest or outputs >= FEW_OUTPUTS or reduction < SHARED_REDUCTION or reduction % WARP:
        return False
    fused = sch.fuse(*rest) if len(rest) > 1 else rest[0]
    serial, lanes = sch.split(fused, [None, WARP])
    sch.reorder(lanes, serial)
    sch.bind(lanes, "threadIdx.x")
    rows = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    sch.bind(rows, "blockIdx.x")
    return True


def _extent(sch: Schedule, loop: LoopRV) -> int:
    extent = sch.get(loop).extent
    if not isinstance(extent, IntImm):
        raise ScheduleError(f"loop {sch.get(loop).loop_var.name!r} has a symbolic extent")
    return extent.value


def apply_gpu_default_schedule(mod: IRModule, target: str | CudaTarget) -> IRModule:
    """``mod`` with every unscheduled function given the default GPU schedule."""
    functions = {}
    for name, func in mod.items():
        if is_unscheduled(func):
            func = gpu_default_schedule(func, target).mod["main"].with_attr(SCHEDULED_ATTR, True)
        functions[name] = func
    return IRModule(functions)


def _leading_spatial_loops(sch: Schedule, block: BlockRV) -> list[LoopRV]:
    """The outermost loops of ``block``'s nest that each bind one spatial variable
    of it and nothing else, when the nest is plain (one loop inside the other)."""
    loops = sch.get_loops(block)
    realize = find_block_realize(sch.mod[block.func_name].body, block.name)
    if realize is None:
        return []
    spatial_vars = {
        id(value)
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.SPATIAL
    }
    chosen: list[LoopRV] = []
    for rv in loops:
        loop = sch.get(rv)
        if id(loop.loop_var) not in spatial_vars or not isinstance(loop.extent, IntImm):
            break
        if chosen and not _directly_inside(sch.get(chosen[-1]), loop):
            break
        chosen.append(rv)
    return chosen


def _directly_inside(outer: For, inner: For) -> bool:
    return outer.body is inner


def _bind_spatial(sch: Schedule, loops: list[LoopRV], threads: int) -> None:
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = sch.get(fused).extent
    assert isinstance(extent, IntImm)
    if extent.value <= threads:
        sch.bind(fused, "threadIdx.x")
        return
    outer, inner = sch.split(fused, [None, threads])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
