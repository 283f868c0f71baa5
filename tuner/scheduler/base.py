"""The task scheduler extension point: which task of a model gets the next round of
trials. A scheduler reads each task's state and answers an index; the loop that owns
the workers (``tuner.model_tune``) runs the round and asks again, so a scheduler
never measures anything and is tested with canned states."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, replace


class SchedulerError(ValueError):
    """An unknown scheduler kind or an option out of range."""


# A task keeps getting rounds while its best falls by at least this share over its last
# few rounds (``stop_reason``); less is within the timing's noise.
MIN_GAIN = 0.01
# How the reason a task stopped for that begins.
STALLED = "its best fell by less than"


@dataclass(frozen=True)
class TaskState:
    """One task as the scheduler sees it: ``weight`` (how often its workload occurs in
    the model), the trials done, the best seconds after each round as (trials, seconds)
    pairs (none before its first success), and why it gets no more trials: ``stopped``
    (its space is exhausted, or its best stopped falling), empty while it gets them.
    Tasks with the same non-empty ``choice`` are algorithms of one operator (a direct
    and a Winograd convolution): the model runs only the fastest of them."""

    weight: int
    trials: int
    history: tuple[tuple[int, float], ...] = ()
    stopped: str = ""
    choice: str = ""

    @property
    def best_seconds(self) -> float | None:
        return self.history[-1][1] if self.history else None


def fastest_by_choice(states: Sequence[TaskState]) -> dict[str, float]:
    """The best seconds of the fastest algorithm of each choice that has one."""
    fastest: dict[str, float] = {}
    for state in states:
        best = state.best_seconds
        if state.choice and best is not None:
            fastest[state.choice] = min(best, fastest.get(state.choice, best))
    return fastest


class TaskScheduler(abc.ABC):
    @abc.abstractmethod
    def next_task(self, states: Sequence[TaskState]) -> int | None:
        """The index of the task to tune next, or None when no task can take trials."""

    def next_round(self, states: Sequence[TaskState]) -> int | None:
        """The task of a model's next round: ``next_task`` of the tasks not stopped;
        once every task is, of the stalled ones too, since their spaces may still hold
        faster points and the budget left is the user's. None when every task's space
        or search is spent."""
        chosen = self.next_task(states)
        if chosen is None:
            chosen = self.next_task([replace(s, stopped="") if stalled(s) else s for s in states])
        return chosen


def open_tasks(states: Sequence[TaskState]) -> list[int]:
    return [k for k, state in enumerate(states) if not state.stopped]


def stop_reason(
    round_stop: str, history: tuple[tuple[int, float], ...], stall_rounds: int | None
) -> str:
    """Why a task gets no more rounds after one that ended with ``round_stop`` (the
    single-task loop's reason), given its best after each round: its space is spent, or
    its best fell by less than ``MIN_GAIN`` over its last ``stall_rounds`` rounds (never
    with None). Empty when it goes on."""
    if round_stop in ("space exhausted", "early stopping"):
        return round_stop
    if stall_rounds is not None and len(history) > stall_rounds:
        then, now = history[-1 - stall_rounds][1], history[-1][1]
        if now > then * (1 - MIN_GAIN):
            return f"{STALLED} {MIN_GAIN:.0%} in its last {stall_rounds} rounds"
    return ""


def stalled(state: TaskState) -> bool:
    """Whether ``state`` was stopped because its best stopped falling (its space may
    still hold faster points), not because its space or search was spent."""
    return state.stopped.startswith(STALLED)
