"""Random compute location: where a block that no other rule placed is computed
(a convolution's padding, softmax's row maximum) becomes a decision of the space.

``sample_compute_location`` offers the root, inlining where it is legal, and every
loop of its consumers the block can be computed at; the space reads that domain
from the design. The design itself records the root (decision -1), which is
always legal, so every design replays whatever the other rules made.
"""

from __future__ import annotations

from compiler.schedule import BlockRV, Schedule
from tuner.space.rules.analysis import consumers, is_output, is_plain_nest
from tuner.space.rules.base import ScheduleRule

ROOT = -1


class RandomComputeLocation(ScheduleRule):
    """Sample where a block with consumers, still in its own plain nest, runs."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if is_output(sch, block) or not is_plain_nest(sch, block) or not consumers(sch, block):
            return [sch]
        placed = sch.copy()
        location = placed.sample_compute_location(block, decision=ROOT)
        placed.compute_at(block, location)
        return [placed]
