"""The schedule-rule extension point: how a generated space turns one block into
one or more partial schedules (MetaSchedule's ScheduleRule).

A rule looks at one block of a schedule and returns the schedules it makes of it:
several when it has alternatives (a fork: each becomes its own design trace), the
schedule unchanged when it does not apply. Rules draw their choices with sampling
instructions, so that a design trace replayed with other decisions is another
point of the space; what they decide from the IR itself (which loops to tile,
where a cache goes) is structure, fixed per design.
"""

from __future__ import annotations

import abc

from compiler.schedule import BlockRV, Schedule


class ScheduleRule(abc.ABC):
    """One way to schedule a block; ``apply`` may fork."""

    @abc.abstractmethod
    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """The schedules this rule makes of ``block`` in ``sch``: ``[sch]`` unchanged
        when it does not apply; copies (``sch.copy()``) for each alternative, since
        every returned schedule becomes a design trace of its own."""
