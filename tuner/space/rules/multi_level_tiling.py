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

- where the block's last spatial loop fills no whole vectors (an NCHW convolution's
  56 columns) and another spatial loop indexes only the output and a constant weight
  (its output channels), that loop split into vectors run innermost and vectorized,
  below ``S3``, with a local accumulator laid out with that dimension last, written
  back after tile level 1 or 2: the micro-kernel of the blocked ``NCHW[x]c``
  convolutions, each input element a broadcast, which the NCHW template offers too
  (``analysis.broadcast_vector``).

In each the initialization gets its own nest just outside ``R0``
(``decompose_reduction``), so the vectorized ``S3`` loop never tests for the
first reduction step: what the templates found fast in this codegen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from compiler.ir.expr import bits
from compiler.schedule import BlockRV, LoopRV, Schedule
from compiler.schedule.primitives.dataflow import writes_of
from tuner.space.rules.analysis import (
    SPATIAL,
    PackableRead,
    attempt,
    broadcast_vector,
    consumers,
    has_reuse,
    is_injective,
    is_plain_nest,
    loop_kinds,
    packable_reads,
    realize_of,
    vector_operand_loops,
)
from tuner.space.rules.base import ScheduleRule

MAX_INNERMOST = 64
SPATIAL_TILES = 4
REDUCE_TILES = 2
# Tile levels (1: after S0, 2: after S1) a write-back or an epilogue is placed at.
FUSE_LEVELS = (1, 2)


class MultiLevelTiling(ScheduleRule):
    """``SSRSRS`` tiling of a reduction with data reuse, forked over where its
    result is written back; with ``vector_bits`` (the target's vector registers),
    also the broadcast micro-kernel where the block has one."""

    def __init__(self, vector_bits: int | None = None) -> None:
        self.vector_bits = vector_bits

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        return [*self._tilings(sch, block), *self._broadcast_tilings(sch, block)]

    @staticmethod
    def _tilings(sch: Schedule, block: BlockRV) -> list[Schedule]:
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

    def _broadcast_tilings(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """The tiling with the broadcast loop (``analysis.broadcast_vector``) split
        into vectors whose piece runs innermost, vectorized, below ``S3``, and a local
        accumulator with that dimension last, written back after tile level 1 or 2."""
        if self.vector_bits is None:
            return []
        lanes = self.vector_bits // bits(writes_of(realize_of(sch, block).block)[0].dtype)
        found = broadcast_vector(sch, block, lanes) if lanes > 1 else None
        if found is None:
            return []
        tiled = sch.copy()
        tiled.split(tiled.get_loops(block)[found.loop], [None, lanes])
        levels, first_reduce = _tile(tiled, block, innermost=found.loop + 1)
        epilogue = _epilogue(tiled, block)
        writes = [
            partial(_cache_write, block=block, epilogue=epilogue, at=at, layout=found.layout)
            for at in levels
        ]
        forks = _successes(tiled, writes)
        finish = partial(_split_init_and_vectorize, block=block, first_reduce=first_reduce)
        return [f for f in (attempt(f, finish) for f in forks) if f is not None]

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        if not realize_of(sch, block).block.is_reduction or not is_plain_nest(sch, block):
            return False
        kinds = loop_kinds(sch, block)
        return None not in kinds and SPATIAL in kinds and has_reuse(sch, block)


def _tile(
    sch: Schedule, block: BlockRV, innermost: int | None = None
) -> tuple[list[LoopRV], LoopRV]:
    """Split and reorder the nest ``S0 S1 R0 S2 R1 S3`` (and the loop at position
    ``innermost``, untiled, last), ``S3`` with the loops that only the vector operands
    move with innermost: with a blocked convolution's channel blocks outside its
    columns, LLVM kept a broadcast per column live across the tile instead of a weight
    vector per block, and a tile of 2 blocks by 14 columns spilled and ran at half the
    speed (AVX-512); the loops that end the FUSE_LEVELS (the last of
    ``S0``, of ``S1``) and the outermost reduction loop."""
    kinds = loop_kinds(sch, block)
    vector_loop = (
        innermost
        if innermost is not None
        else max(k for k, kind in enumerate(kinds) if kind == SPATIAL)
    )
    inside = vector_operand_loops(sch, block, vector_loop)
    spatial: list[list[LoopRV]] = [[] for _ in range(SPATIAL_TILES)]
    reduce: list[list[LoopRV]] = [[] for _ in range(REDUCE_TILES)]
    kept: list[LoopRV] = []
    # S3's order: the loops the broadcast operands move with, then those only the vector
    # operands move with (``vector_operand_loops``), then the vector loop's own piece
    register_rank: dict[LoopRV, int] = {}
    for k, (loop, kind) in enumerate(zip(sch.get_loops(block), kinds, strict=True)):
        if k == innermost:
            kept.append(loop)
            continue
        parts = SPATIAL_TILES if kind == SPATIAL else REDUCE_TILES
        factors = sch.sample_perfect_tile(loop, parts, MAX_INNERMOST)
        pieces = sch.split(loop, factors)
        for level, piece in zip(spatial if kind == SPATIAL else reduce, pieces, strict=True):
            level.append(piece)
        register_rank[pieces[-1]] = 2 if k == vector_loop else 1 if k in inside else 0
    s0, s1, s2, s3 = spatial
    r0, r1 = reduce
    s3 = sorted(s3, key=register_rank.__getitem__)
    sch.reorder(*s0, *s1, *r0, *s2, *r1, *s3, *kept)
    return [spatial[level - 1][-1] for level in FUSE_LEVELS], r0[0]


def _epilogue(sch: Schedule, block: BlockRV) -> BlockRV | None:
    """The single elementwise consumer of the block (a bias, a ReLU), if any."""
    users = consumers(sch, block)
    if len(users) != 1 or not is_injective(users[0]):
        return None
    return sch.get_block(users[0].name, block.func_name)


def _cache_write(
    sch: Schedule,
    block: BlockRV,
    epilogue: BlockRV | None,
    at: LoopRV,
    layout: str | None = None,
) -> None:
    write_back = sch.cache_write(block, 0, "local")
    if layout is not None:
        sch.transform_layout(block, ("write", 0), layout)
    if epilogue is not None:
        sch.reverse_compute_inline(epilogue)
    sch.reverse_compute_at(write_back, at)


def _split_init_and_vectorize(sch: Schedule, block: BlockRV, first_reduce: LoopRV) -> None:
    sch.decompose_reduction(block, first_reduce)
    sch.vectorize(sch.get_loops(block)[-1])


def _successes(sch: Schedule, moves: Sequence[Callable[[Schedule], object]]) -> list[Schedule]:
    """A copy of ``sch`` after each move the primitives accept."""
    return [f for f in (attempt(sch, move) for move in moves) if f is not None]


def _pack(sch: Schedule, block: BlockRV, read: PackableRead, at: LoopRV) -> None:
    copy = sch.cache_read(block, read.index, "global")
    sch.compute_at(copy, at)
    if read.layout is not None:
        sch.transform_layout(copy, ("write", 0), read.layout)
