"""Several rules applied one after the other to the same block: how one root rule
both binds a GPU program's blocks and samples its unroll size."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.schedule import BlockRV, Schedule
from tuner.space.rules.base import ScheduleRule


class Chain(ScheduleRule):
    """Apply ``rules`` in order, each to every schedule the one before made."""

    def __init__(self, rules: Sequence[ScheduleRule]) -> None:
        self.rules = tuple(rules)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        made = [sch]
        for rule in self.rules:
            made = [out for each in made for out in rule.apply(each, block)]
        return made
