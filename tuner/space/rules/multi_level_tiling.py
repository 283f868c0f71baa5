"""Multi-level tiling ``SSRSRS`` for reductions that reuse their inputs (matmul,
dense, batch matmul, convolutions): MetaSchedule's CPU structure.

Every spatial loop is split in four and every reduction loop in two, with
``sample_perfect_tile`` (the innermost spatial factor at most MAX_INNERMOST, one
vector register file's worth), and the pieces reordered ``S0 S1 R0 S2 R1 S3``:
``S0`` for threads, ``S1`` a block of the output that stays in cache while the
reduction ``R0`` streams through it, ``S2 R1 S3`` the register micro-kernel with
``S3`` innermost to be vectorized. The block forks into

- the plain tiling, accumulating in the output;
- a local accumulator (``cache_write``) written back after tile level 1 or 2
  (the end of ``S0`` or ``S1``), with an elementwise epilogue (bias, ReLU) folded
  into the write-back, as the GEMM and convolution templates do;
- the epilogue itself computed after tile level 1 or 2 (``reverse_compute_at``),
  while the tile it reads is still in cache;
- with a local accumulator, each input that the micro-kernel reads along its
  vectorized loop and reuses across output rows (matmul's ``B``, an NCHW
  convolution's input, dense's weight ``W[j, k]``) packed into a contiguous tile at
  tile level 1 (``cache_read``), as the GEMM template's packing does: the
  micro-kernel then streams the tile instead of striding through the whole input.
  A tile whose vectorized dimension is not the last is transposed as it is packed
  (``transform_layout`` of the copy), so that the micro-kernel's vector loads are
  contiguous.

In each the initialization gets its own nest just outside ``R0``
(``decompose_reduction``), so the vectorized ``S3`` loop never tests for the
first reduction step: what the templates found fast in this codegen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from compiler.schedule import BlockRV, LoopRV, Schedule
from tuner.space.rules.analysis import (
    SPATIAL,
    PackableRead,
    attempt,
    consumers,
    has_reuse,
    is_injective,
    is_plain_nest,
    loop_kinds,
    packable_reads,
    realize_of,
)
from tuner.space.rules.base import ScheduleRule

MAX_INNERMOST = 64
SPATIAL_TILES = 4
REDUCE_TILES = 2
# Tile levels (1: after S0, 2: after S1) a write-back or an epilogue is placed at.
FUSE_LEVELS = (1, 2)


class MultiLevelTiling(ScheduleRule):
    """``SSRSRS`` tiling of a reduction with data reuse, forked over where its
    result is written back."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        tiled = sch.copy()
        levels, first_reduce = _tile(tiled, block)
        epilogue = _epilogue(tiled, block)
        accumulating = _successes(
            tiled, [partial(_cache_write, block=block, epilogue=epilogue, at=at) for at in levels]
        )
        fused = []
        if epilogue is not None:
            fused = _successes(
                tiled,
                [partial(Schedule.reverse_compute_at, block=epilogue, loop=at) for at in levels],
            )
        packs = [
            partial(_pack, block=block, read=read, at=levels[0])
            for read in packable_reads(tiled, block)
        ]
        packed = [f for base in accumulating for f in _successes(base, packs)]
        forks = [tiled, *accumulating, *fused, *packed]
        split_init = partial(Schedule.decompose_reduction, block=block, loop=first_reduce)
        return [attempt(f, split_init) or f for f in forks]

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        if not realize_of(sch, block).block.is_reduction or not is_plain_nest(sch, block):
            return False
        kinds = loop_kinds(sch, block)
        return None not in kinds and SPATIAL in kinds and has_reuse(sch, block)


def _tile(sch: Schedule, block: BlockRV) -> tuple[list[LoopRV], LoopRV]:
    """Split and reorder the nest ``S0 S1 R0 S2 R1 S3``; the loops that end the
    FUSE_LEVELS (the last of ``S0``, of ``S1``) and the outermost reduction loop."""
    kinds = loop_kinds(sch, block)
    spatial: list[list[LoopRV]] = [[] for _ in range(SPATIAL_TILES)]
    reduce: list[list[LoopRV]] = [[] for _ in range(REDUCE_TILES)]
    for loop, kind in zip(sch.get_loops(block), kinds, strict=True):
        parts = SPATIAL_TILES if kind == SPATIAL else REDUCE_TILES
        factors = sch.sample_perfect_tile(loop, parts, MAX_INNERMOST)
        pieces = sch.split(loop, factors)
        for level, piece in zip(spatial if kind == SPATIAL else reduce, pieces, strict=True):
            level.append(piece)
    s0, s1, s2, s3 = spatial
    r0, r1 = reduce
    sch.reorder(*s0, *s1, *r0, *s2, *r1, *s3)
    return [spatial[level - 1][-1] for level in FUSE_LEVELS], r0[0]


def _epilogue(sch: Schedule, block: BlockRV) -> BlockRV | None:
    """The single elementwise consumer of the block (a bias, a ReLU), if any."""
    users = consumers(sch, block)
    if len(users) != 1 or not is_injective(users[0]):
        return None
    return sch.get_block(users[0].name, block.func_name)


def _cache_write(sch: Schedule, block: BlockRV, epilogue: BlockRV | None, at: LoopRV) -> None:
    write_back = sch.cache_write(block, 0, "local")
    if epilogue is not None:
        sch.reverse_compute_inline(epilogue)
    sch.reverse_compute_at(write_back, at)


def _successes(sch: Schedule, moves: Sequence[Callable[[Schedule], object]]) -> list[Schedule]:
    """A copy of ``sch`` after each move the primitives accept."""
    return [f for f in (attempt(sch, move) for move in moves) if f is not None]


def _pack(sch: Schedule, block: BlockRV, read: PackableRead, at: LoopRV) -> None:
    copy = sch.cache_read(block, read.index, "global")
    sch.compute_at(copy, at)
    if read.layout is not None:
        sch.transform_layout(copy, ("write", 0), read.layout)
