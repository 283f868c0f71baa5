"""Tuning a whole model: one trial budget shared by its tasks in rounds.

Each round gives one task (chosen by a task scheduler, ``tuner.scheduler``) a batch
of trials with the single-workload loop (``tuner.tune.start_tuning``), which resumes
from the task's stored records. So the model's tuning resumes like a single task's:
run it again with the same budget and it goes on from what the database holds. A
task's rounds are handed its siblings, the tasks whose spaces share its points (one
operator under another epilogue, ``Space.shares_points_with``), whose records its
search learns from first. The model's estimated latency is the sum over tasks of
weight times best time.

While a round's batch builds, the next round's search runs (``TuningRun.build_ahead``):
otherwise the builders wait for the search, which takes one core. That next round's
task is picked before the round in flight has its times, and is never the task of
that round, whose search has yet to learn them. The runs wait for the builds and the
search alike, so no timing shares the machine. A task's space is made by its first
round's search, so that too runs beside the builds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from compiler.graph.algorithms import compared_seconds
from db import Database
from tuner import scheduler
from tuner.model_retime import finalists, retime_finalists
from tuner.model_tasks import ModelTask, tuned_tasks
from tuner.scheduler import TaskScheduler, TaskState, stop_reason
from tuner.space import Space
from tuner.space_choice import choose_space
from tuner.tune import TuneOptions, TuningRun, search_records, start_tuning
from workers import Workers
from workers.tally import WorkTotals

# Trials of a round, unless the options say otherwise: one batch of the single-task loop.
ROUND_TRIALS = 16


@dataclass(frozen=True, kw_only=True)
class ModelTuneOptions:
    """``trials`` is the model's budget, stored trials included; each round gives one
    task ``round_trials`` of it (None: ``ROUND_TRIALS``, less when the budget would not
    give every task a round of that size). A task whose best fell by less than
    ``tuner.scheduler.MIN_GAIN`` over its last ``stall_rounds`` rounds gets no more
    while another task takes rounds: the others get its trials; once none does, the
    scheduler picks among the stalled ones, a round at a time, until the budget is
    spent (None: every task gets rounds until the budget is spent).
    Once the budget is spent, each task's ``retime_top`` fastest schedules and its
    default one are re-timed side by side, ``retime_rounds`` times (``tuner.model_retime``;
    0: none), when the run measured anything."""

    trials: int = 2000
    round_trials: int | None = None
    stall_rounds: int | None = 5
    retime_top: int = 2
    retime_rounds: int = 3
    scheduler: str = "gradient"
    tuner: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.trials < 1 or (self.round_trials is not None and self.round_trials < 1):
            raise ValueError(
                f"trials and round_trials must be at least 1, got {self.trials} and "
                f"{self.round_trials}"
            )
        if self.retime_top < 0 or self.retime_rounds < 1:
            raise ValueError(
                f"retime_top must be at least 0 and retime_rounds at least 1, got "
                f"{self.retime_top} and {self.retime_rounds}"
            )
        if self.stall_rounds is not None and self.stall_rounds < 1:
            raise ValueError(f"stall_rounds must be at least 1 or None, got {self.stall_rounds}")
        scheduler.create(self.scheduler)

    def round_size(self, tasks: int) -> int:
        """Trials of a round among ``tasks`` tasks worth tuning."""
        if self.round_trials is not None:
            return self.round_trials
        return max(1, min(ROUND_TRIALS, self.trials // max(tasks, 1)))


@dataclass(frozen=True)
class TaskProgress:
    task: ModelTask
    state: TaskState


@dataclass(frozen=True)
class ModelTuneResult:
    """The tasks' progress after ``rounds`` rounds; ``retimed``: how many finalists were
    re-timed side by side at the end (``tuner.model_retime``). Where ``wall_seconds``
    went: ``work``, the builds and runs of the tuning's workers, and
    ``search_seconds``, the searches' own (proposing and learning; a round's search
    runs while the round before builds, so these overlap)."""

    tasks: tuple[TaskProgress, ...]
    rounds: int
    wall_seconds: float
    retimed: int = 0
    work: WorkTotals = field(default_factory=WorkTotals)
    search_seconds: float = 0.0

    @property
    def trials(self) -> int:
        return sum(progress.state.trials for progress in self.tasks)

    @property
    def estimated_seconds(self) -> float | None:
        """The model's time in its tuned tasks: weight times best time, summed over
        the tasks it runs (of an operator's algorithms, the one a build takes:
        ``compiler.graph.algorithms.choose``); None while a task has no successful
        trial."""
        chosen: dict[str, tuple[float, float]] = {}  # by choice: (compared, seconds)
        for k, progress in enumerate(self.tasks):
            best = progress.state.best_seconds
            if best is None:
                return None
            key = progress.state.choice or str(k)
            direct = not progress.task.is_alternative
            timed = (compared_seconds(best, direct=direct), progress.task.weight * best)
            chosen[key] = min(timed, chosen.get(key, timed))
        return sum(seconds for _, seconds in chosen.values())

    def time_text(self) -> str:
        """Where the wall time went, for a person."""
        return (
            f"{self.wall_seconds:.0f} s: {self.work.text()}, the searches "
            f"{self.search_seconds:.0f} s"
        )

    def estimate_text(self) -> str:
        """The estimate for a person: milliseconds, or "-" before there is one."""
        seconds = self.estimated_seconds
        return "-" if seconds is None else f"{seconds * 1e3:.4g} ms"


def tune_model(
    tasks: Sequence[ModelTask],
    *,
    database: Database,
    workers: Workers,
    options: ModelTuneOptions | None = None,
    on_round: Callable[[ModelTuneResult], None] | None = None,
    on_retime: Callable[[int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    job_id: int | None = None,
) -> ModelTuneResult:
    """Tune the tasks worth tuning until the budget is spent, every space is exhausted
    or ``should_stop`` says so (asked after each batch); ``on_round`` sees the
    progress after each round, ``on_retime`` the number of finalists before they are
    re-timed. Measurements are stored as made by the job ``job_id``, when one is given."""
    options = options or ModelTuneOptions()
    clock = _Clock(workers)
    chosen = tuned_tasks(tasks)
    pick = scheduler.create(options.scheduler)
    states = [_stored_state(database, task) for task in chosen]
    rounds = _Rounds(chosen, options, pick, database, workers, should_stop, job_id)
    for k, state in enumerate(states):
        if state.trials:  # stored records, which its siblings learn from
            rounds.space(k)
    rounds_done = 0
    ahead: _Round | None = None
    while (current := ahead or rounds.start(states)) is not None:
        current.run.build_ahead()
        ahead = rounds.start(states, busy=current)
        result = current.run.finish()
        clock.searched += result.search_seconds
        rounds_done += 1
        k = current.task
        done = result.restored + result.measured
        history = _with_best(states[k].history, done, database, chosen[k])
        states[k] = replace(
            states[k],
            trials=done,
            history=history,
            stopped=stop_reason(result.stop_reason, history, options.stall_rounds),
        )
        progress = _result(chosen, states, rounds_done, clock)
        if on_round is not None:
            on_round(progress)
        if result.stop_reason in ("interrupted", "cancelled"):
            return progress
    if rounds_done and options.retime_top:
        chosen_finalists = finalists(chosen, database, options.retime_top)
        if on_retime is not None:
            on_retime(len(chosen_finalists))
        retimed = retime_finalists(
            chosen_finalists,
            database=database,
            workers=workers,
            rounds=options.retime_rounds,
            job_id=job_id,
        )
        states = [
            replace(state, history=_with_best(state.history, state.trials, database, task))
            for state, task in zip(states, chosen, strict=True)
        ]
        return replace(_result(chosen, states, rounds_done, clock), retimed=retimed)
    return _result(chosen, states, rounds_done, clock)


@dataclass(frozen=True)
class _Round:
    """A round started: the task's index, the trials it may add, its run."""

    task: int
    trials: int
    run: TuningRun


class _Rounds:
    """Starts the rounds of one model's tuning (``start``)."""

    def __init__(
        self,
        tasks: Sequence[ModelTask],
        options: ModelTuneOptions,
        pick: TaskScheduler,
        database: Database,
        workers: Workers,
        should_stop: Callable[[], bool] | None,
        job_id: int | None,
    ) -> None:
        self.tasks = tasks
        self.options = options
        self.size = options.round_size(len(tasks))
        self.pick = pick
        self.database = database
        self.workers = workers
        self.should_stop = should_stop
        self.job_id = job_id
        self._spaces: dict[int, Space] = {}
        self._siblings: dict[int, list[int]] = {}

    def space(self, k: int) -> Space:
        """Task ``k``'s space, made when first asked for: a round's search makes it while
        the round before builds (ResNet-18's 32 spaces take about 20 s to make)."""
        made = self._spaces.get(k)
        if made is None:
            task = self.tasks[k].task
            made = choose_space("auto", task.func, target=task.target, seed=self.options.seed)
            self._siblings[k] = []
            for j, other in self._spaces.items():
                if made.shares_points_with(other):
                    self._siblings[k].append(j)
                    self._siblings[j].append(k)
            self._spaces[k] = made
        return made

    def siblings(self, k: int) -> list[Space]:
        """The spaces made so far that share task ``k``'s points, in task order. A task
        whose space is not made yet had no round, so it has no records to learn from."""
        self.space(k)
        return [self._spaces[j] for j in sorted(self._siblings[k])]

    def start(self, states: Sequence[TaskState], busy: _Round | None = None) -> _Round | None:
        """The next round, searched up to its batch (``start_tuning``): of the task the
        scheduler picks, while trials are left. ``busy``: a round whose batch is
        building meanwhile (``TuningRun.build_ahead``); its trials are spoken for, and
        its task is not picked, since its search has yet to learn that batch's times."""
        left = self.options.trials - sum(state.trials for state in states)
        if busy is not None:
            left -= busy.trials
            states = [
                replace(state, stopped="its batch is being measured") if k == busy.task else state
                for k, state in enumerate(states)
            ]
        k = self.pick.next_round(states) if left > 0 else None
        if k is None:
            return None
        trials = min(self.size, left)
        run = start_tuning(
            self.tasks[k].task,
            database=self.database,
            workers=self.workers,
            options=_round_options(self.options, states[k].trials + trials, self.size),
            space=self.space(k),
            should_stop=self.should_stop,
            job_id=self.job_id,
            siblings=self.siblings(k),
        )
        return _Round(k, trials, run)


def _round_options(options: ModelTuneOptions, trials: int, size: int) -> TuneOptions:
    """One round: the task's budget raised to ``trials``, measured in batches of
    ``size``, and no re-timing (the model's best times are the search's)."""
    return TuneOptions(
        trials=trials,
        tuner=options.tuner,
        batch_size=size,
        seed=options.seed,
        retime_top=0,
    )


def _stored_state(database: Database, task: ModelTask) -> TaskState:
    trials = len(_stored_traces(database, task))
    history = _with_best((), trials, database, task) if trials else ()
    return TaskState(weight=task.weight, trials=trials, history=history, choice=task.choice)


def _stored_traces(database: Database, task: ModelTask) -> set[str]:
    """The traces of the task the search measured (re-timings are not trials)."""
    return {record.trace_hash for record in search_records(database, task.task)}


def _with_best(
    history: tuple[tuple[int, float], ...], trials: int, database: Database, task: ModelTask
) -> tuple[tuple[int, float], ...]:
    best = database.best(task.task.workload_key, task.task.target, 1)
    if not best or best[0].seconds is None:
        return history
    return (*history, (trials, best[0].seconds))


class _Clock:
    """The wall time, the workers' work and the searches' time since a tuning began."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.start = time.monotonic()
        self.work_before = workers.tally.totals()
        self.searched = 0.0


def _result(
    tasks: Sequence[ModelTask], states: Sequence[TaskState], rounds: int, clock: _Clock
) -> ModelTuneResult:
    progress = tuple(TaskProgress(task, state) for task, state in zip(tasks, states, strict=True))
    return ModelTuneResult(
        progress,
        rounds,
        time.monotonic() - clock.start,
        work=clock.workers.tally.totals() - clock.work_before,
        search_seconds=clock.searched,
    )
