"""Multi-level tiling ``SSSRRSRS`` for reductions that reuse their inputs on a GPU
(matmul, dense, convolutions): MetaSchedule's CUDA structure.

Every spatial loop is split in five and every reduction loop in three with
``sample_perfect_tile`` (innermost factor at most MAX_INNERMOST) and the pieces
reordered ``S0 S1 S2 R0 R1 S3 R2 S4``:

- ``S0`` is the output tile of a thread block (``blockIdx``), ``S2`` its threads
  (fused and bound to ``threadIdx.x``: the product of the spatial loops'
  factors), ``S3 S4`` with ``R1 R2`` one thread's register tile;
- ``S1`` splits the block's tile into sub-tiles that sit apart, each thread
  computing one element group of every sub-tile: fused and bound to
  ``vthread.x``, as MetaSchedule does. GPU lowering interleaves the virtual
  threads inside each thread (``compiler.lower.virtual_threads``), and the shared
  tiles are staged once for all of them; more than ``MAX_VIRTUAL_THREADS`` is
  refused;
- the result accumulates in a ``local`` buffer (``cache_write``) written back at
  the end of the thread loop, with a single elementwise consumer (bias, ReLU)
  folded into the write-back;
- every input is staged in ``shared`` memory once per step of ``R0``
  (``cache_read`` + ``compute_at``): the threads of the block fetch the tile
  together, the copy's loops fused and split as ``[rest, threads, lanes]``, the
  thread piece bound to ``threadIdx.x`` with the compute's own thread factors (so
  the launch has one thread count whatever the decisions) and ``lanes`` a sampled
  vector length (1, 2 or 4 consecutive elements per thread and step).

The block tiles are bound to ``blockIdx.x``, ``.y`` and ``.z`` (innermost spatial
loop on ``x``; the outermost ones fused on ``z`` when there are more than three)
rather than all fused on ``blockIdx.x``: a fused block index is recovered with
``%``, whose bound the analysis widens to the whole dimension, so a fetch under it
would stage the input for every block instead of its own. For the same reason a
spatial loop of extent 1 (a batch of one) keeps its block tile out of the fusion.

The thread count is a product of sampled factors that ``sample_perfect_tile``
cannot bound, and so are the shared and local tiles; a point beyond the target's
threads, shared memory or registers per block is refused by GPU lowering (a
ScheduleError), as MetaSchedule's ``VerifyGPUCode`` refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.schedule import BlockRV, ExprRV, LoopRV, Schedule, ScheduleError
from compiler.schedule.primitives.common import const_int
from compiler.schedule.primitives.dataflow import reads_of, writes_of
from tuner.space.rules.analysis import (
    REDUCE,
    SPATIAL,
    attempt,
    consumers,
    has_reuse,
    is_injective,
    is_plain_nest,
    loop_kinds,
    realize_of,
)
from tuner.space.rules.base import ScheduleRule
from tuner.space.rules.gpu_loops import is_bound

MAX_INNERMOST = 64
SPATIAL_TILES = 5
REDUCE_TILES = 3
# Elements one thread copies per step of a cooperative fetch; MetaSchedule's
# candidates for float32 (those of 16 bytes or less), less the odd 3.
VECTOR_LANES = (1, 2, 4)
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


@dataclass(frozen=True)
class _Tiles:
    """The loops that the tiling made and the binding reads."""

    thread: LoopRV
    reduce_outer: list[LoopRV]
    thread_factors: list[ExprRV]


class GPUMultiLevelTiling(ScheduleRule):
    """``SSSRRSRS`` tiling of a reduction with data reuse, bound to blocks and
    threads, with shared-memory inputs and a local accumulator."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        tiled = attempt(sch, lambda s: _tile_and_bind(s, block))
        return [tiled or sch]

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        if not realize_of(sch, block).block.is_reduction or not is_plain_nest(sch, block):
            return False
        if is_bound(sch, block):
            return False
        kinds = loop_kinds(sch, block)
        if None in kinds or SPATIAL not in kinds or REDUCE not in kinds:
            return False
        return has_reuse(sch, block)


def _tile_and_bind(sch: Schedule, block: BlockRV) -> None:
    epilogue = _epilogue(sch, block)
    write_back = sch.cache_write(block, 0, "local")
    if epilogue is not None:
        try:
            sch.reverse_compute_inline(epilogue)
        except ScheduleError:
            pass  # the epilogue keeps a kernel of its own
    tiles = _tile(sch, block)
    sch.reverse_compute_at(write_back, tiles.thread, preserve_unit_loops=True)
    body = realize_of(sch, block).block
    inputs = [b for b in reads_of(body) if all(b is not w for w in writes_of(body))]
    for index in range(len(inputs)):
        _fetch(sch, block, index, tiles)
    sch.decompose_reduction(block, tiles.reduce_outer[0])


def _epilogue(sch: Schedule, block: BlockRV) -> BlockRV | None:
    """The single elementwise consumer of the block (a bias, a ReLU), if any."""
    users = consumers(sch, block)
    if len(users) != 1 or not is_injective(users[0]):
        return None
    return sch.get_block(users[0].name, block.func_name)


def _tile(sch: Schedule, block: BlockRV) -> _Tiles:
    """Split, reorder ``S0 S1 S2 R0 R1 S3 R2 S4`` and bind ``S0``, ``S1`` and ``S2``."""
    kinds = loop_kinds(sch, block)
    spatial: list[list[LoopRV]] = [[] for _ in range(SPATIAL_TILES)]
    reduce: list[list[LoopRV]] = [[] for _ in range(REDUCE_TILES)]
    thread_factors: list[ExprRV] = []
    unit_tiles: list[LoopRV] = []
    for loop, kind in zip(sch.get_loops(block), kinds, strict=True):
        unit = const_int(sch.get(loop).extent) == 1
        parts = SPATIAL_TILES if kind == SPATIAL else REDUCE_TILES
        factors = sch.sample_perfect_tile(loop, parts, MAX_INNERMOST)
        pieces = sch.split(loop, factors)
        for level, piece in zip(spatial if kind == SPATIAL else reduce, pieces, strict=True):
            level.append(piece)
        if kind == SPATIAL:
            thread_factors.append(factors[2])
            if unit:
                unit_tiles.append(spatial[0].pop())
    s0, s1, s2, s3, s4 = spatial
    r0, r1, r2 = reduce
    sch.reorder(*s0, *unit_tiles, *s1, *s2, *r0, *r1, *s3, *r2, *s4)
    _bind_block_tiles(sch, s0)
    sch.bind(_fused(sch, s1), "vthread.x")
    thread = _fused(sch, s2)
    sch.bind(thread, "threadIdx.x")
    return _Tiles(thread, r0, thread_factors)


def _bind_block_tiles(sch: Schedule, loops: list[LoopRV]) -> None:
    """The innermost block tile on ``blockIdx.x``, the next on ``.y``, the rest fused
    on ``.z``."""
    axes = len(BLOCK_AXES)
    if len(loops) > axes:
        loops = [_fused(sch, loops[: len(loops) - axes + 1]), *loops[len(loops) - axes + 1 :]]
    for loop, axis in zip(reversed(loops), BLOCK_AXES, strict=False):
        sch.bind(loop, axis)


def _fused(sch: Schedule, loops: list[LoopRV]) -> LoopRV:
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _fetch(sch: Schedule, block: BlockRV, index: int, tiles: _Tiles) -> None:
    """Stage input ``index`` of ``block`` in shared memory at the last loop of
    ``R0``, copied by the block's threads together, ``lanes`` elements each."""
    copy = sch.cache_read(block, index, "shared")
    at = tiles.reduce_outer[-1]
    sch.compute_at(copy, at, preserve_unit_loops=True)
    loops = sch.get_loops(copy)
    depth = next(k for k, loop in enumerate(loops) if loop.var is at.var) + 1
    if depth == len(loops):
        return  # a scalar: every thread copies the one element
    fused = _fused(sch, loops[depth:])
    lanes = sch.sample_categorical(VECTOR_LANES, [1 / len(VECTOR_LANES)] * len(VECTOR_LANES))
    pieces = sch.split(fused, [None, *tiles.thread_factors, lanes])
    sch.bind(_fused(sch, pieces[1:-1]), "threadIdx.x")
    sch.vectorize(pieces[-1])
