"""GPU knob templates for matrix products: matmul, batch matmul and dense.

The schedule is the classic shared-memory SGEMM that TVM's CUDA dense and batch
matmul schedules write:

- rows and columns each split in four, ``[blockIdx, vthread, threadIdx, inner]``
  (``tile_y`` over rows, ``tile_x`` over columns; a batch is ``blockIdx.z``), so
  a block computes a tile of ``vthread * threadIdx * inner`` on each axis and a
  thread ``vthread * inner``, its virtual threads' parts a block's width apart;
- the reduction split in two (``tile_k``): the outer loop steps over the
  reduction, and at each step all threads copy the block's slices of both
  operands into shared memory (neighbouring threads copy neighbouring elements,
  ``fetch_vector`` at a time) before computing from them;
- the results accumulated in registers (a local ``cache_write``, its init split
  out, written back with any bias/activation epilogue by each thread);
- the thread's tile unrolled, and the reduction step too by ``unroll_k``.

Threads per axis are capped so that a block never has more than the target
allows, and the reduction step so that both shared tiles always fit; the space
holds the known-good SGEMM shapes (128 x 128 block tiles, 8 x 8 per thread on
16 x 16 threads, interleaved as 2 x 2 virtual threads of 4 x 4, steps of 8 or
16, 256 threads fetching four floats each).
"""

from __future__ import annotations

from compiler.schedule import Schedule
from tuner.space.config import ConfigEntity
from tuner.space.registry import template
from tuner.space.templates.common import blocks_after, extent
from tuner.space.templates.gpu_common import (
    FETCH_VECTORS,
    Tile,
    accumulate_at,
    axis_thread_limits,
    block_size,
    cooperative_fetch,
    cuda_target,
    local_accumulator,
    shared_step_limit,
    thread_tiles,
)

# Per axis: a thread's tile of at most 8 (an 8 x 8 tile keeps 64 accumulators in
# registers, as the fast SGEMM kernels do), in up to 2 virtual threads, and blocks
# of at most 128.
MAX_INNER = 8
MAX_BLOCK = 128
MAX_VTHREADS = 2


@template("matmul.cuda", blocks=("T_matmul",), target_kind="cuda")
def matmul_cuda(cfg: ConfigEntity, sch: Schedule) -> None:
    gemm_cuda_template(cfg, sch, "T_matmul", batch=False)


@template("batch_matmul.cuda", blocks=("T_batch_matmul",), target_kind="cuda")
def batch_matmul_cuda(cfg: ConfigEntity, sch: Schedule) -> None:
    gemm_cuda_template(cfg, sch, "T_batch_matmul", batch=True)


@template("dense.cuda", blocks=("T_dense",), target_kind="cuda")
def dense_cuda(cfg: ConfigEntity, sch: Schedule) -> None:
    """Dense reads its weight as ``W[j, k]``: the shared copy keeps that layout, so
    the fetch still reads along ``k``, the weight's contiguous axis."""
    gemm_cuda_template(cfg, sch, "T_dense", batch=False)


def gemm_cuda_template(cfg: ConfigEntity, sch: Schedule, block_name: str, *, batch: bool) -> None:
    """Schedule the product ``block_name`` (loops ``[b,] i, j, k``) by ``cfg``."""
    target = cuda_target(cfg)
    block = sch.get_block(block_name)
    epilogues = blocks_after(sch, block)
    loops = sch.get_loops(block)
    b = loops[0] if batch else None
    i, j, k = loops[-3:]
    x_threads, y_threads = axis_thread_limits(target, 2)
    rows = _tiles(extent(sch, i), y_threads)
    columns = _tiles(extent(sch, j), x_threads)
    step = shared_step_limit(_staged_per_step(rows, columns), sch.mod["main"], target)

    cfg.define_split("tile_y", i, num_outputs=4, policy="candidate", candidate=rows)
    cfg.define_split("tile_x", j, num_outputs=4, policy="candidate", candidate=columns)
    cfg.define_split("tile_k", k, num_outputs=2, policy="factors", max_factor=step)
    cfg.define_knob("fetch_vector", list(FETCH_VECTORS))
    cfg.define_knob("unroll_k", [False, True])

    write_back = local_accumulator(sch, block, epilogues)
    by, vy, ty, yi = cfg["tile_y"].apply(sch, i)
    bx, vx, tx, xi = cfg["tile_x"].apply(sch, j)
    ko, ki = cfg["tile_k"].apply(sch, k)
    batch_loops = [b] if b is not None else []
    sch.reorder(*batch_loops, by, bx, vy, vx, ty, tx, ko, ki, yi, xi)
    if b is not None:
        sch.bind(b, "blockIdx.z")
    for loop, axis in (
        (by, "blockIdx.y"),
        (bx, "blockIdx.x"),
        (vy, "vthread.y"),
        (vx, "vthread.x"),
        (ty, "threadIdx.y"),
        (tx, "threadIdx.x"),
    ):
        sch.bind(loop, axis)

    accumulate_at(sch, block, write_back, tx, ko)
    threads = [("threadIdx.y", cfg["tile_y"].size[2]), ("threadIdx.x", cfg["tile_x"].size[2])]
    for operand in (0, 1):
        cooperative_fetch(sch, block, operand, ko, threads, cfg["fetch_vector"].val)
    sch.unroll(yi)
    sch.unroll(xi)
    if cfg["unroll_k"].val:
        sch.unroll(ki)


def _tiles(total: int, threads: int) -> list[Tile]:
    return thread_tiles(
        total,
        max_threads=threads,
        max_inner=MAX_INNER,
        max_vthreads=MAX_VTHREADS,
        max_block=MAX_BLOCK,
    )


def _staged_per_step(rows: list[Tile], columns: list[Tile]) -> int:
    """The most elements both shared tiles can hold per step of the reduction, over
    any pair of tiles: the block's rows and its columns."""
    return max(block_size(t) for t in rows) + max(block_size(t) for t in columns)
