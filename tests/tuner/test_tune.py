"""The tuning loop end to end: real local workers, a temporary SQLite database, a small
matmul. Resume measures nothing twice (a search confirms its fastest trials with a
second measurement, never more); Ctrl-C leaves every committed batch stored."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import pytest
from quick_measure import QUICK
from searched_traces import searched_traces

from compiler.errors import ErrorKind
from compiler.schedule.default import schedule_by_default
from db import Measurement, Purpose, SQLDatabase
from tuner import space as spaces
from tuner import tune as tune_module
from tuner.cli.tables import format_table
from tuner.progress import Progress
from tuner.task import TuneTask
from tuner.tune import CUTOFF_FACTOR, SCOUTS, TuneOptions, TuneResult, tune
from workers import BuildResult, Candidate, Runner, RunResult, Workers

SPEC = {"op": "matmul", "args": {"m": 40, "n": 56, "k": 24}}


@pytest.fixture(scope="module")
def task() -> TuneTask:
    return TuneTask.from_spec(SPEC)


def _options(trials: int, tuner: str = "xgb", *, baseline: bool = False) -> TuneOptions:
    """Options of a search by itself (no default-schedule baseline) unless asked."""
    return TuneOptions(
        trials=trials, tuner=tuner, batch_size=8, seed=3, retime_rounds=2, baseline=baseline
    )


def test_tune_stores_records_and_retimes_the_best(task, database, backend):
    result = tune(task, database=database, workers=backend, options=_options(16))
    assert (result.measured, result.restored, result.stop_reason) == (16, 0, "budget")
    assert searched_traces(database, task) == 16
    stored = database.records(task.workload_key, task.target, purpose=Purpose.SEARCH)
    assert 0 < result.confirmed == len(stored) - 16  # the xgb search confirms its fastest
    assert len(result.curve) == 16
    assert 0 < result.search_seconds < result.wall_seconds
    # Every trial built once (the re-timing takes the kept builds) and every trial,
    # confirmation and re-timing round run.
    retimings = len(result.best) * _options(16).retime_rounds
    assert result.work.builds == 16 and result.work.build_seconds > 0
    assert result.work.runs == 16 + result.confirmed + retimings
    assert 0 < result.work.run_seconds < result.wall_seconds
    assert all(a <= b for a, b in zip(result.curve, result.curve[1:], strict=False))
    assert 1 <= len(result.best) <= 3
    stored = {r.trace for r in database.records(task.workload_key, task.target)}
    assert all(row.trace in stored for row in result.best)
    assert result.best_gflops is not None and result.best_gflops > 0
    assert result.best[0].gflops == result.best_gflops
    stored_best = database.best(task.workload_key, task.target, k=len(result.best))
    assert [r.trace for r in stored_best] == [row.trace for row in result.best]
    assert [r.seconds for r in stored_best] == [row.seconds for row in result.best]
    assert all(r.purpose is Purpose.RETIME for r in stored_best)
    assert all(len(r.run_times) == 2 * QUICK.repeat for r in stored_best)
    assert database.best_trace(task.workload_key, task.target) == result.best[0].trace
    table = format_table(result)
    assert "16 measured this run" in table and "matmul.x86" in table
    assert f"{result.confirmed} measurements confirmed the fastest" in table
    assert "time: 16 builds took" in table


def test_the_same_command_resumes_without_measuring_twice(task, database, backend):
    first = tune(task, database=database, workers=backend, options=_options(16, "random"))
    again = tune(task, database=database, workers=backend, options=_options(16, "random"))
    assert (again.measured, again.restored) == (0, first.measured)
    assert searched_traces(database, task) == 16
    more = tune(task, database=database, workers=backend, options=_options(24))
    assert (more.measured, more.restored) == (8, 16)
    assert searched_traces(database, task) == 24


def test_a_measurement_lost_with_its_host_is_taken_again_on_resume(task, database, backend):
    """A HOST_LOST record is no trial: the resumed run measures its trace first."""
    tune(task, database=database, workers=backend, options=_options(8, "random"))
    measured = database.measured_hashes(task.workload_key, task.target)
    space = spaces.space_for(task.func, target=task.target)
    assert isinstance(space, spaces.EnumerableSpace)
    fresh = (space.candidate(point) for point in space.enumerate())
    lost = next(c for c in fresh if c.trace_hash not in measured)
    database.commit_records(
        [
            Measurement.failed(
                task.workload_key, task.target, lost.trace, ErrorKind.HOST_LOST, "gone"
            )
        ]
    )
    again = tune(task, database=database, workers=backend, options=_options(9, "random"))
    assert (again.restored, again.measured) == (8, 1)
    outcomes = [
        r.error_kind
        for r in database.records(task.workload_key, task.target, purpose=Purpose.SEARCH)
        if r.trace_hash == lost.trace_hash
    ]
    assert sorted(outcomes, key=str) == sorted([None, ErrorKind.HOST_LOST], key=str)


def test_a_similar_workload_in_the_database_warm_starts_the_model(task, database, backend):
    tune(task, database=database, workers=backend, options=_options(16, "random"))
    other = TuneTask.from_spec({"op": "matmul", "args": {"m": 48, "n": 40, "k": 32}})
    learned = tune(other, database=database, workers=backend, options=_options(8))
    assert (learned.similar, learned.transferred) == (1, 16)
    assert "learned from 16 records of 1 similar workloads" in format_table(learned)
    alone = tune(other, database=database, workers=backend, options=_options(16, "random"))
    assert alone.transferred == 0
    cold = TuneOptions(trials=24, batch_size=8, seed=3, retime_rounds=1, transfer=False)
    assert tune(other, database=database, workers=backend, options=cold).transferred == 0


@dataclass(frozen=True)
class _Recording(Workers):
    """The real workers, keeping every batch they were given and what it measured."""

    batches: list[list[RunResult]] = field(default_factory=list)

    def measure(self, candidates: Sequence[Candidate]) -> list[RunResult]:
        runs = super().measure(candidates)
        self.batches.append(runs)
        return runs


def _cutoffs(batch: Sequence[RunResult]) -> set[float | None]:
    return {run.candidate.cutoff_seconds for run in batch}


def test_the_default_schedule_is_the_first_trial_and_the_bar_for_the_rest(task, database, backend):
    recording = _Recording(backend.builder, backend.runner)
    options = _options(9, "random", baseline=True)
    result = tune(task, database=database, workers=recording, options=options)
    default = schedule_by_default(task.func, target=task.target).trace
    first, *_ = recording.batches
    assert len(first) == 1 and _cutoffs(first) == {None}  # measured alone, first
    stored = database.records(task.workload_key, task.target, purpose=Purpose.SEARCH)
    assert default.structural_hash in {r.trace_hash for r in stored}
    assert result.measured == 9 == len(stored)  # one of the budget's trials
    best = min(r.seconds for r in stored if r.trace_hash == default.structural_hash)
    assert _cutoffs(recording.batches[1]) == {CUTOFF_FACTOR * best}
    again = tune(task, database=database, workers=backend, options=options)
    assert (again.measured, again.restored) == (0, 9)  # resumed: the default counts


def test_each_batch_is_cut_at_ten_times_the_best_so_far_and_retiming_never(task, database, backend):
    recording = _Recording(backend.builder, backend.runner)
    tune(task, database=database, workers=recording, options=_options(16, "random"))
    scouts, first, second, retiming = recording.batches
    assert len(scouts) == SCOUTS and _cutoffs(scouts) == {None} and _cutoffs(retiming) == {None}
    best = min(run.seconds for run in scouts if run.seconds is not None)
    assert _cutoffs(first) == {CUTOFF_FACTOR * best}
    best = min(run.seconds for run in scouts + first if run.seconds is not None)
    assert _cutoffs(second) == {CUTOFF_FACTOR * best}
    stored = database.records(task.workload_key, task.target, purpose=Purpose.SEARCH)
    best_stored = min(r.seconds for r in stored if r.seconds is not None)
    resumed = _Recording(backend.builder, backend.runner)
    tune(task, database=database, workers=resumed, options=_options(24, "random"))
    assert _cutoffs(resumed.batches[0]) == {CUTOFF_FACTOR * best_stored}


def test_no_schedule_is_re_timed_when_none_is_asked_for(task, database, backend):
    """A model's rounds say ``retime_top=0``: a re-timing there would cost a schedule's
    five more runs every round."""
    recording = _Recording(backend.builder, backend.runner)
    options = replace(_options(8, "random"), retime_top=0)
    result = tune(task, database=database, workers=recording, options=options)
    assert sum(len(batch) for batch in recording.batches) == 8 == result.measured
    assert not database.records(task.workload_key, task.target, purpose=Purpose.RETIME)
    assert len(result.best) == 1 and result.best[0].seconds is None


class _InterruptAt(Progress):
    """Raises KeyboardInterrupt the way Ctrl-C does between two batches: at the
    ``after``-th progress update."""

    def __init__(self, total: int, *, after: int) -> None:
        super().__init__(total, stream=io.StringIO(), tty=False)
        self.after = after
        self.updates = 0

    def update(self, done: int, best_gflops: float | None, errors: int) -> None:
        super().update(done, best_gflops, errors)
        self.updates += 1
        if self.updates == self.after:
            raise KeyboardInterrupt


class _CtrlCDuringBatch(Runner):
    """A real runner interrupted in batch number ``batch``, once that batch's first
    result is in, the way Ctrl-C interrupts it: a KeyboardInterrupt out of the
    runner. (A real SIGINT can be handled inside a finalizer that the garbage
    collector happens to run, where Python drops the exception; the command-line
    tests send real signals to a real process.)"""

    def __init__(self, runner: Runner, *, batch: int) -> None:
        self.runner = runner
        self.batch = batch
        self.batches = 0

    def stream(self, builds: Sequence[BuildResult]) -> Iterator[tuple[int, RunResult]]:
        self.batches += 1
        for count, item in enumerate(self.runner.stream(builds)):
            yield item
            if self.batches == self.batch and count == 0:
                raise KeyboardInterrupt

    def close(self) -> None:
        """The real runner belongs to the module's backend, which closes it."""


def test_ctrl_c_between_batches_keeps_the_committed_ones(task, database, backend):
    progress = _InterruptAt(64, after=3)  # the first batch's scouts, its rest, a second batch
    result = tune(task, database=database, workers=backend, options=_options(64), progress=progress)
    assert result.interrupted and result.measured == 16
    assert searched_traces(database, task) == 16
    assert result.best and all(row.seconds is None for row in result.best)
    stored = database.best(task.workload_key, task.target, k=len(result.best))
    assert [row.trace for row in result.best] == [r.trace for r in stored]
    assert "stopped: interrupted" in format_table(result)


def test_ctrl_c_during_a_batch_drops_only_that_batch(task, database, backend):
    # Runner batches: the first batch's scouts, its rest, then the second batch.
    interrupted = Workers(backend.builder, _CtrlCDuringBatch(backend.runner, batch=3))
    result = tune(task, database=database, workers=interrupted, options=_options(64))
    assert result.interrupted
    assert result.measured == 8
    assert searched_traces(database, task) == result.measured
    resumed = tune(task, database=database, workers=backend, options=_options(result.measured + 8))
    assert (resumed.restored, resumed.measured) == (result.measured, 8)
    assert searched_traces(database, task) == result.measured + 8


def test_the_seed_makes_the_choices_reproducible(task, tmp_path, backend):
    traces = []
    for run in range(2):
        with SQLDatabase(f"sqlite:///{tmp_path / f'seed{run}.db'}") as db:
            tune(task, database=db, workers=backend, options=_options(8, "random"))
            traces.append(sorted(db.measured_hashes(task.workload_key, task.target)))
    assert traces[0] == traces[1]


def test_progress_line_on_a_terminal_and_in_a_log():
    log = io.StringIO()
    progress = Progress(10, stream=log, tty=False)
    progress.update(4, 12.5, 1)
    progress.update(10, 20.0, 1)
    progress.finish()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "4/10 trials" in lines[0] and "12.50 GFLOP/s" in lines[0]
    assert "1 errors" in lines[1] and "0s left" in lines[1]
    terminal = io.StringIO()
    live = Progress(10, stream=terminal, tty=True)
    live.update(1, None, 0)
    live.finish()
    assert terminal.getvalue().startswith("\r") and terminal.getvalue().endswith("\n")
    assert "best - GFLOP/s" in terminal.getvalue()


def test_a_result_reports_no_gflops_without_a_retiming(task):
    result = TuneResult(task, "matmul.x86", 1, 0, 0, 0, "interrupted", 1.0)
    assert result.best_gflops is None and result.trials_per_second == 0.0
    assert "no successful schedule" in format_table(result)


def test_a_tasks_default_candidate_is_scheduled_once_per_target(monkeypatch) -> None:
    """A model's tuning asks for each task's default candidate every round; the default
    schedule is made once per workload and target, and is the one a build makes."""
    scheduled: list[str] = []

    def counted(func, target="llvm"):
        scheduled.append(str(target))
        return schedule_by_default(func, target=target)

    monkeypatch.setattr(tune_module, "schedule_by_default", counted)
    spec = {"op": "matmul", "args": {"m": 40, "n": 24, "k": 16}}
    task = TuneTask.from_spec(spec, "llvm -mcpu=znver4")
    first = tune_module.default_candidate(task)
    again = tune_module.default_candidate(TuneTask.from_spec(spec, "llvm -mcpu=znver4"))
    other = tune_module.default_candidate(TuneTask.from_spec(spec, "llvm -mcpu=haswell"))
    assert first is not None and again is first and other is not None
    assert len(scheduled) == 2 and "znver4" in scheduled[0] and "haswell" in scheduled[1]
    fresh = schedule_by_default(task.func, target=task.target).trace
    assert first.trace_hash == fresh.structural_hash
