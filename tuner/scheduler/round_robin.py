"""Round robin: the open task with the fewest trials, the first of them on a tie."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.scheduler.base import TaskScheduler, TaskState, open_tasks


class RoundRobin(TaskScheduler):
    def next_task(self, states: Sequence[TaskState]) -> int | None:
        candidates = open_tasks(states)
        return min(candidates, key=lambda k: states[k].trials, default=None)
