"""Add rfactor: split a reduction into partial results over a sampled piece of its
reduction loop, where it has too few output elements to keep the machine busy (a
batch-1 dense, a full sum), or a reduction loop long enough to fill vectors (softmax
rows, layer norm): a float sum cannot be vectorized as it stands, since adding in
another order changes the result, but partials over the inner piece are independent
lanes.

The reduction loops are fused and split in two with ``sample_perfect_tile``; the
block forks into the plain reduction and ``rfactor`` over either piece: over the
outer piece the partials are independent rows a parallel loop can share, over
the inner one they are a contiguous vector of accumulators (the new axis goes
last in the partial buffer). The plain schedule stays as a fork of its own, since
for a long enough output the reduction is better left whole. A reduction with
enough output elements forks over the inner piece only: its rows already keep the
threads busy.
"""

from __future__ import annotations

import math
from functools import partial

from compiler.schedule import BlockRV, Schedule
from tuner.space.rules.analysis import (
    REDUCE,
    SPATIAL,
    attempt,
    extents,
    is_plain_nest,
    loop_kinds,
    loops_of,
    realize_of,
    spatial_work,
    written,
)
from tuner.space.rules.base import ScheduleRule

MAX_INNERMOST = 64
# The shortest reduction loop worth vector partials: two vectors of 16 lanes.
MIN_VECTOR_REDUCTION = 32


class AddRFactor(ScheduleRule):
    """Fork a reduction with a small output into rfactor'd variants; ``max_spatial``
    is the most output elements for which it does (the parallel extent a program
    may want: 16 jobs per core)."""

    def __init__(self, max_spatial: int) -> None:
        self.max_spatial = max_spatial

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        split = sch.copy()
        loops = split.get_loops(block)
        first = loop_kinds(split, block).index(REDUCE)
        reduce = loops[first:]
        fused = split.fuse(*reduce) if len(reduce) > 1 else reduce[0]
        pieces = split.split(fused, split.sample_perfect_tile(fused, 2, MAX_INNERMOST))
        axis = len(written(realize_of(split, block).block)[0].shape)
        if spatial_work(sch, block) >= self.max_spatial:
            pieces = pieces[1:]
        forks = [
            attempt(split, partial(Schedule.rfactor, loop=p, factor_axis=axis)) for p in pieces
        ]
        return [sch, *(f for f in forks if f is not None)]

    def _applies(self, sch: Schedule, block: BlockRV) -> bool:
        body = realize_of(sch, block).block
        if not body.is_reduction or len(written(body)) != 1 or not is_plain_nest(sch, block):
            return False
        kinds = loop_kinds(sch, block)
        if None in kinds or REDUCE not in kinds:
            return False
        first = kinds.index(REDUCE)
        if SPATIAL in kinds[first:]:
            return False
        reduction = math.prod(extents(loops_of(sch, block)[first:]))
        if spatial_work(sch, block) < self.max_spatial:
            return reduction >= 2
        return reduction >= MIN_VECTOR_REDUCTION
