"""Ansor's gradient rule: after a warm-up round for every task, the task whose next
trials are expected to cut the model's weighted latency the most.

For task i of weight w_i, best time g_i after t_i trials, the expected change of the
model's latency per trial is w_i times a mix of two slopes of g_i: the one it had
over its last ``window`` trials (looking back), and the optimistic ``-g_i / t_i``, as
if its time kept falling at its average pace so far (looking ahead).
``backward_weight`` is the share of the first (Ansor's alpha). The task of the most
negative change gets the round; a task with no success yet goes first, since it may
be anywhere. An algorithm that is not the fastest of its operator's (a Winograd
convolution slower than the direct one) changes the model's latency only by as much
as its next time would undercut the fastest: nothing, unless it is close.

Except while it is young: an operator's other algorithm within ``alternative_reach``
times the fastest gets rounds, before the rule above, until it has had
``alternative_trials`` trials. A Winograd space has more stages to get right than
the direct one, and its first round says little: in ResNet-18 (``-mcpu=znver5``),
the 56x56 residual convolution's F(4x4) form went from 0.82 ms after 16 trials to
0.43 ms after 96, against the direct form's 0.58 ms, and the 14x14 one's F(2x2) from
0.77 to 0.43 ms against 0.53 ms, where the rule alone gave each no second round.
Those winners were 1.41x and 1.45x behind after their first round. In three tunings
of ResNet-18 on ``-mcpu=znver4`` (24 convolutions with two or three forms), every
form that won was at most 1.02x behind after its first round, while forms that lost
were up to 2.6x behind, and those within a reach of 2x kept getting rounds until
their 64th trial."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tuner.scheduler.base import (
    SchedulerError,
    TaskScheduler,
    TaskState,
    fastest_by_choice,
    open_tasks,
)


class GradientScheduler(TaskScheduler):
    def __init__(
        self,
        *,
        backward_weight: float = 0.2,
        window: int = 32,
        alternative_trials: int = 64,
        alternative_reach: float = 1.5,
    ) -> None:
        if not 0.0 <= backward_weight <= 1.0:
            raise SchedulerError(f"backward_weight must be in [0, 1], got {backward_weight}")
        if window < 1:
            raise SchedulerError(f"window must be at least 1 trial, got {window}")
        if alternative_trials < 0 or alternative_reach < 1.0:
            raise SchedulerError(
                f"alternative_trials must be at least 0 and alternative_reach at least 1, "
                f"got {alternative_trials} and {alternative_reach}"
            )
        self.backward_weight = backward_weight
        self.window = window
        self.alternative_trials = alternative_trials
        self.alternative_reach = alternative_reach

    def next_task(self, states: Sequence[TaskState]) -> int | None:
        candidates = open_tasks(states)
        if not candidates:
            return None
        untried = [k for k in candidates if states[k].best_seconds is None]
        if untried:
            return min(untried, key=lambda k: states[k].trials)
        fastest = fastest_by_choice(states)
        young = [k for k in candidates if self.is_young_alternative(states[k], fastest)]
        if young:
            return min(young, key=lambda k: states[k].trials)
        return min(candidates, key=lambda k: self.gradient(states[k], fastest))

    def is_young_alternative(self, state: TaskState, fastest: Mapping[str, float]) -> bool:
        """Whether ``state`` is an algorithm behind its operator's fastest but within
        reach of it, with fewer than ``alternative_trials`` trials."""
        best = state.best_seconds
        leader = fastest.get(state.choice)
        if best is None or leader is None or state.trials >= self.alternative_trials:
            return False
        return leader < best <= self.alternative_reach * leader

    def gradient(self, state: TaskState, fastest: Mapping[str, float] | None = None) -> float:
        """Expected change of the weighted latency per trial of this task (<= 0);
        ``fastest``: the best seconds of each choice's fastest algorithm."""
        trials, best = state.history[-1]
        backward = self._backward_slope(state.history)
        forward = -best / max(trials, 1)
        slope = self.backward_weight * backward + (1 - self.backward_weight) * forward
        leader = (fastest or {}).get(state.choice, best)
        if best > leader:  # the model runs another algorithm until this one undercuts it
            return state.weight * min(0.0, best + slope - leader)
        return state.weight * slope

    def _backward_slope(self, history: tuple[tuple[int, float], ...]) -> float:
        trials, best = history[-1]
        earlier = [(t, s) for t, s in history if t <= trials - self.window]
        if not earlier:
            return 0.0
        then_trials, then_best = earlier[-1]
        return (best - then_best) / (trials - then_trials)
