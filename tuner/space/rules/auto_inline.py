"""Auto-inline: fold cheap elementwise blocks into their neighbours, so that a chain
of injective operators becomes one loop nest that touches memory once.

A producer is inlined into its consumers (``compute_inline``) when every consumer
is elementwise too: inlined into a reduction it would be evaluated once per
reduction step (a convolution's padding is left to the compute-location rule,
which may still inline it as one of its choices). A block calling a costly
intrinsic (``exp``, ``erf``) is inlined only into a single consumer that reads it
once per point (GELU's ``erf`` into the multiply that ends it), since any other
consumer would evaluate it again.
An elementwise output block whose producers are all elementwise is folded into
its producer instead (``reverse_compute_inline``), which recomputes nothing.
"""

from __future__ import annotations

from compiler.ir.analysis import block_accesses
from compiler.ir.stmt import Block
from compiler.schedule import BlockRV, Schedule
from tuner.space.rules.analysis import (
    attempt,
    consumers,
    is_expensive,
    is_injective,
    is_output,
    producers,
    realize_of,
    written,
)
from tuner.space.rules.base import ScheduleRule


class AutoInline(ScheduleRule):
    """Inline injective blocks where it recomputes nothing costly."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        body = realize_of(sch, block).block
        if not is_injective(body):
            return [sch]
        if not is_output(sch, block):
            users = consumers(sch, block)
            if not users or any(u.is_reduction for u in users):
                return [sch]
            if is_expensive(body) and not _read_once_by_one(body, users):
                return [sch]
            return [attempt(sch, lambda s: s.compute_inline(block)) or sch]
        sources = producers(sch, block)
        if len(sources) != 1 or not is_injective(sources[0]):
            return [sch]
        return [attempt(sch, lambda s: s.reverse_compute_inline(block)) or sch]


def _read_once_by_one(block: Block, users: list[Block]) -> bool:
    """Whether one block reads what ``block`` writes, at one load."""
    if len(users) != 1:
        return False
    outputs = {id(b) for b in written(block)}
    reads = block_accesses(users[0])[0]
    return sum(id(access.buffer) in outputs for access in reads) == 1
