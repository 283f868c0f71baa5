"""Postprocessing of a generated space's candidate: constant weights laid out the
way the tiled loops read them, and the parallel, vector and unroll sizes sampled on
the root block (``rules.parallel_vectorize_unroll``) made loop kinds, with the
ordinary traced primitives, so the candidate's trace alone replays the program
(MetaSchedule's RewriteLayout and RewriteParallelVectorizeUnroll).

First the **layout rewrite** of every parameter the workload marks constant
(``compiler.schedule.layout_rewrite``), while the loops are still the tiling's:
its block sizes are the tile sizes the candidate's decisions chose. A build then
converts the weight once, outside every call, so the conversion's loops are left
plain. Then, in this order, so each sees what the one before left serial:

1. **Vectorize** the innermost loop of every block when it is spatial, holds the
   block alone and runs at most ``lanes`` iterations: whole, as the default
   schedule does (LLVM picks the vector width and handles the remainder); not
   around a call LLVM cannot widen (``erf``).
2. **Parallelize** every loop nest: its leading serial spatial loops, outermost
   first, fused while their iterations stay within the sampled parallel extent
   (at least the outermost), then run in parallel; fewer loops when the
   primitives refuse.
3. **Unroll** the innermost serial loops of every block, from the inside out,
   while the iterations under a loop stay within the sampled maximum.

A positive size that no loop can take (lanes and no loop fits them, a parallel
extent and no nest has a parallel loop) is a ScheduleError: that point of the
space is the same program as a smaller size, or none, and counts as illegal.

Each step also says the **least size** that realises the same loops: the widest
loop it vectorized, the most iterations it fused into one parallel loop, the most
it unrolled under one loop. Every size from that one up to the sampled one makes
the same program, so a space can hand out one trace for all of them (a search
otherwise builds and times 64 lanes and 16 lanes of a loop of 16 as two trials).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from compiler.ir.expr import IntImm
from compiler.ir.layout_free import LAYOUT_REWRITE_ATTR
from compiler.ir.stmt import BlockRealize, For, ForKind
from compiler.schedule import BlockRV, Schedule, ScheduleError
from compiler.schedule.layout_rewrite import rewrite_layout_free
from compiler.schedule.partition import rows_outside_channels
from tuner.space.rules.analysis import (
    SCALAR_CALLS,
    SPATIAL,
    attempt,
    calls_any,
    iterations,
    loop_kinds,
    loops_of,
)
from tuner.space.rules.parallel_vectorize_unroll import PARALLEL, UNROLL, VECTORIZE


@dataclass(frozen=True)
class Postprocessed:
    """A postprocessed schedule and, by annotation key, the least size that realises
    the same loops as the sampled one did (a size of 0 is left out: it is least)."""

    schedule: Schedule
    least_sizes: Mapping[str, int]


def postprocess(sch: Schedule) -> Postprocessed:
    """``sch`` with its constant weights laid out for its loops and its root block's
    sampled sizes realised as loop kinds. Raises ScheduleError for a size no loop can
    take."""
    rewrite_layout_free(sch)
    root = sch.get_block("root")
    sizes = sch.get(root).annotations
    if not any(key in sizes for key in (PARALLEL, VECTORIZE, UNROLL)):
        return Postprocessed(sch, {})
    # A constant weight's conversion runs once, at build time: its loops stay plain.
    blocks = [
        block
        for block in sch.get_child_blocks(root)
        if LAYOUT_REWRITE_ATTR not in sch.get(block).annotations
    ]
    least: dict[str, int] = {}
    if sizes.get(VECTORIZE, 0) > 0:
        sch, least[VECTORIZE] = _vectorize(sch, blocks, sizes[VECTORIZE])
    if sizes.get(PARALLEL, 0) > 0:
        sch, least[PARALLEL] = _parallelize(sch, blocks, sizes[PARALLEL])
    if sizes.get(UNROLL, 0) > 0:
        least[UNROLL] = _unroll(sch, blocks, sizes[UNROLL])
    return Postprocessed(sch, least)


def _extent(loop: For) -> int | None:
    return loop.extent.value if isinstance(loop.extent, IntImm) else None


def _vectorize(sch: Schedule, blocks: list[BlockRV], lanes: int) -> tuple[Schedule, int]:
    """The schedule and its widest vectorized loop."""
    vectorized, widest = 0, 0
    for block in blocks:
        loops = loops_of(sch, block)
        if not loops or loop_kinds(sch, block)[-1] != SPATIAL:
            continue
        inner = loops[-1]
        extent = _extent(inner)
        if inner.kind is not ForKind.SERIAL or extent is None or not 1 < extent <= lanes:
            continue
        if not isinstance(inner.body, BlockRealize) or calls_any(inner.body.block, SCALAR_CALLS):
            continue
        trial = attempt(sch, partial(_vectorize_innermost, block=block))
        if trial is not None:
            sch, vectorized, widest = trial, vectorized + 1, max(widest, extent)
    if vectorized == 0:
        raise ScheduleError(
            f"the sampled vector width {lanes} cannot be realised: no innermost spatial loop "
            f"of 2 to {lanes} iterations can be vectorized; this point is not a program"
        )
    return sch, widest


def _vectorize_innermost(sch: Schedule, block: BlockRV) -> None:
    sch.vectorize(sch.get_loops(block)[-1])


def _parallelize(sch: Schedule, blocks: list[BlockRV], extent: int) -> tuple[Schedule, int]:
    """The schedule and the least extent that fuses the same loops: 1 where each nest
    took its outermost loop alone (which it takes whatever the extent), 0 where there
    was no nest."""
    nests: set[int] = set()
    parallel, least = 0, 1
    for block in blocks:
        loops = loops_of(sch, block)
        if not loops or id(loops[0].loop_var) in nests:
            continue
        nests.add(id(loops[0].loop_var))
        sch = _rows_first(sch, block, extent)
        loops = loops_of(sch, block)
        for count in range(_leading(sch, block, extent), 0, -1):
            trial = attempt(sch, partial(_fuse_parallel, block=block, count=count))
            if trial is not None:
                if count > 1:
                    least = max(least, math.prod(_extent(loop) or 1 for loop in loops[:count]))
                sch, parallel = trial, parallel + 1
                break
    if nests and parallel == 0:
        raise ScheduleError(
            f"the sampled parallel extent {extent} cannot be realised: no loop nest starts "
            "with a spatial loop that can run in parallel; this point is not a program"
        )
    return sch, least if nests else 0


def _rows_first(sch: Schedule, block: BlockRV, extent: int) -> Schedule:
    """The block's leading loops with its rows outside its channels
    (``compiler.schedule.partition``), unless that leaves fewer iterations to run in
    parallel within ``extent``."""
    trial = sch.copy()
    loops = trial.get_loops(block)[: _leading(trial, block, 2**62)]
    if rows_outside_channels(trial, loops) is loops or _parallel_iterations(
        trial, block, extent
    ) < _parallel_iterations(sch, block, extent):
        return sch
    return trial


def _parallel_iterations(sch: Schedule, block: BlockRV, extent: int) -> int:
    loops = loops_of(sch, block)[: _leading(sch, block, extent)]
    return math.prod(_extent(loop) or 1 for loop in loops)


def _leading(sch: Schedule, block: BlockRV, extent: int) -> int:
    """How many leading loops of the block's nest to fuse: serial, spatial, each the
    whole body of the one above, iterations within ``extent`` (at least one)."""
    loops = loops_of(sch, block)
    kinds = loop_kinds(sch, block)
    count, product = 0, 1
    for k, loop in enumerate(loops):
        size = _extent(loop)
        if loop.kind is not ForKind.SERIAL or kinds[k] != SPATIAL or size is None:
            break
        if k > 0 and (loops[k - 1].body is not loop or product * size > extent):
            break
        count, product = count + 1, product * size
    return count


def _fuse_parallel(sch: Schedule, block: BlockRV, count: int) -> None:
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops[:count]) if count > 1 else loops[0]
    sch.parallel(fused)


def _unroll(sch: Schedule, blocks: list[BlockRV], max_steps: int) -> int:
    """Unroll in place; returns the most iterations under one unrolled loop (0: none
    was, the same program as no unrolling)."""
    unrolled: set[int] = set()
    least = 0
    for block in blocks:
        loops = loops_of(sch, block)
        chosen = []
        for k in reversed(range(len(loops))):
            loop = loops[k]
            if loop.kind is ForKind.VECTORIZED or id(loop.loop_var) in unrolled:
                continue
            if loop.kind is not ForKind.SERIAL or iterations(loop) > max_steps:
                break
            if _extent(loop) != 1:
                chosen.append(k)
                least = max(least, iterations(loop))
        if chosen:
            handles = sch.get_loops(block)
            for k in chosen:
                sch.unroll(handles[k])
                unrolled.add(id(loops[k].loop_var))
    return least
