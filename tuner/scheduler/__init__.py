"""Task schedulers: how one trial budget is shared by the tasks of a model (see ``base``).

``create(kind, **options)`` with kind ``gradient`` (Ansor's rule, the default) or
``round-robin``."""

from __future__ import annotations

from typing import Any

from tuner.scheduler.base import (
    MIN_GAIN,
    SchedulerError,
    TaskScheduler,
    TaskState,
    stop_reason,
)
from tuner.scheduler.gradient import GradientScheduler
from tuner.scheduler.round_robin import RoundRobin

KINDS: dict[str, type[TaskScheduler]] = {"gradient": GradientScheduler, "round-robin": RoundRobin}


def create(kind: str, **options: Any) -> TaskScheduler:
    if kind not in KINDS:
        raise SchedulerError(f"unknown task scheduler {kind!r}; the kinds are {', '.join(KINDS)}")
    return KINDS[kind](**options)


__all__ = [
    "KINDS",
    "MIN_GAIN",
    "SchedulerError",
    "TaskScheduler",
    "TaskState",
    "create",
    "stop_reason",
]
