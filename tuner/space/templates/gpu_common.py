"""Helpers the GPU templates share: thread tiles sized by the target, the local
accumulator, and the cooperative fetch of a tile into shared memory.

The templates follow TVM's CUDA schedules: each spatial axis splits in four
(``[blockIdx, vthread, threadIdx, inner]``), the loops ordered blocks, virtual
threads, threads, then the reduction and the thread's own tile. Each split's
candidates are cut per axis, so that any combination of them stays within the
target's threads per block and (where the template can bound it) shared memory;
what one axis cannot know (registers per block) is refused when the kernel is
built, with a ScheduleError, which the search skips.

A thread computes one ``inner`` tile in each of its virtual threads' sub-tiles,
which sit a thread block's width apart: GPU lowering interleaves them inside the
thread (``compiler.lower.virtual_threads``, TVM's ``InjectVirtualThread``), and
the shared tiles staged under the virtual-thread loops are fetched once for all
of them. So a thread's accesses to shared memory neighbour those of the next
thread, as in the interleaved 8 x 8 tiles of the fast SGEMM kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compiler.ir.expr import byte_size
from compiler.ir.function import PrimFunc
from compiler.schedule import BlockRV, LoopRV, Schedule
from compiler.target.cuda import CudaTarget
from tuner.space.config import ConfigEntity
from tuner.space.templates.common import divisors, fold_epilogues

# The widths a cooperative fetch may copy per thread (float, float2, float4).
FETCH_VECTORS = (1, 2, 4)

Tile = tuple[int, int, int, int]


def cuda_target(cfg: ConfigEntity) -> CudaTarget:
    """The GPU a GPU template schedules for (the registry gives it only CUDA targets)."""
    target = cfg.target
    assert isinstance(target, CudaTarget), f"a GPU template got the target {target}"
    return target


def thread_tiles(
    total: int, *, max_threads: int, max_inner: int, max_vthreads: int, max_block: int
) -> list[Tile]:
    """(blocks, vthreads, threads, inner) exact splits of ``total`` with at most
    ``max_threads`` threads, ``max_vthreads`` virtual threads, ``max_inner`` elements
    per thread (over all its virtual threads: they are its registers) and
    ``max_block`` per block."""
    return [
        (total // (inner * threads * vthreads), vthreads, threads, inner)
        for inner in divisors(total)
        if inner <= max_inner
        for threads in divisors(total // inner)
        if threads <= max_threads
        for vthreads in divisors(total // inner // threads)
        if vthreads <= max_vthreads
        and vthreads * inner <= max_inner
        and vthreads * threads * inner <= max_block
    ]


def axis_thread_limits(target: CudaTarget, axes: int) -> list[int]:
    """Threads each of ``axes`` thread axes (x first) may take, chosen so that their
    product never exceeds the threads per block: an equal share, in powers of two,
    with x (the axis of coalesced accesses) getting the larger ones."""
    caps = target.capabilities
    budget = int(math.log2(caps.max_threads_per_block))
    shares = [budget // axes + (1 if k < budget % axes else 0) for k in range(axes)]
    return [min(2**s, caps.max_block_dims[k]) for k, s in enumerate(shares)]


def block_size(tile: Tile) -> int:
    """Elements of one axis a block computes: vthreads x threads x inner."""
    return tile[1] * tile[2] * tile[3]


def shared_step_limit(elements_per_step: int, func: PrimFunc, target: CudaTarget) -> int:
    """The most reduction steps whose shared tiles fit the target's shared memory,
    when one step of the reduction stages ``elements_per_step`` elements."""
    per_step = elements_per_step * byte_size(func.params[-1].dtype)
    return max(1, target.capabilities.max_shared_bytes_per_block // per_step)


def local_accumulator(sch: Schedule, block: BlockRV, epilogues: list[BlockRV]) -> BlockRV:
    """Give ``block`` a local accumulator (registers), written back with any epilogue
    by the returned block. Done before tiling: cache_write needs to see that the block
    writes all of its output, which fused and split loops hide."""
    write_back = sch.cache_write(block, 0, "local")
    fold_epilogues(sch, epilogues)
    return write_back


def accumulate_at(
    sch: Schedule, block: BlockRV, write_back: BlockRV, thread_loop: LoopRV, first: LoopRV
) -> None:
    """Write the accumulator back from ``thread_loop`` (each thread its own tile), and
    split its init out before the reduction loop ``first`` so it is not tested on
    every step; both unrolled, as the accumulator's indices must be constants."""
    sch.reverse_compute_at(write_back, thread_loop)
    init = sch.decompose_reduction(block, first)
    for owner in (write_back, init):
        unroll_inner(sch, owner, thread_loop)


def unroll_inner(sch: Schedule, block: BlockRV, outer: LoopRV) -> None:
    """Unroll every loop of ``block`` inside ``outer``: the accumulator is indexed by
    them, and only constant indices keep it in registers."""
    loops = sch.get_loops(block)
    inside = [loop.var for loop in loops].index(outer.var) + 1
    for loop in loops[inside:]:
        sch.unroll(loop)


def cooperative_fetch(
    sch: Schedule,
    reader: BlockRV,
    operand: int,
    at: LoopRV,
    threads: Sequence[tuple[str, int]],
    vector: int,
) -> BlockRV:
    """Stage operand ``operand`` of ``reader`` in shared memory at loop ``at``: all
    threads of the block copy the tile together, the copy's loops fused and split by
    the thread counts (``threads``, outermost axis first) so that neighbouring threads
    copy neighbouring elements, each ``vector`` of them at once. Returns the copy."""
    shared = sch.cache_read(reader, operand, "shared")
    sch.compute_at(shared, at, preserve_unit_loops=True)
    loops = sch.get_loops(shared)
    nest = loops[[loop.var for loop in loops].index(at.var) + 1 :]
    fused = sch.fuse(*nest) if len(nest) > 1 else nest[0]
    counts = [count for _, count in threads]
    parts = sch.split(fused, [None, *counts, *([vector] if vector > 1 else [])])
    for loop, (axis, _) in zip(parts[1 : 1 + len(threads)], threads, strict=True):
        sch.bind(loop, axis)
    if vector > 1:
        sch.vectorize(parts[-1])
    return shared
