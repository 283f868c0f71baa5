"""The tuning loop of one task: the one place where a search, the workers and the
database meet (the strategies only propose, the workers only measure).

``tune(task, database=..., workers=...)`` runs, in order:

1. the task's space (from the space registry), and the workload committed to the
   database;
2. resume: every stored record of the workload on the target is restored into the
   strategy, so nothing is measured twice and stored trials count towards the budget;
   on a CPU, the default schedule is the first trial of a new workload (the bar a
   searched schedule must clear); a trace whose measurement was lost with its host
   (``ErrorKind.HOST_LOST``) is no stored trial: it is measured again first;
   transfer: the records of similar workloads (``tuner.transfer``) are offered to the
   strategy, which a model-based one trains on before its first batch;
3. ask a batch, measure it, commit its records (one transaction), tell the strategy,
   update the progress line; measure again the trials the strategy asks to confirm
   (``SearchStrategy.confirmation_candidates``), commit and tell those too; until the
   strategy says it is done or Ctrl-C;
4. re-time the fastest stored schedules with more repeats and store the re-timing:
   the GFLOP/s a run reports, and the schedule ``Database.best`` (and so the build)
   picks, come from it, not from the luckiest measurement of the search.

A KeyboardInterrupt stops the loop cleanly: every batch committed before it stays in
the database, the batch in flight is dropped, and the result says it was interrupted.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TypeVar

from compiler.schedule.default import schedule_by_default
from compiler.schedule.trace import Trace
from compiler.target.parse import target_kind
from compiler.workload.key import workload_to_json
from db import Database, Measurement, Purpose, TuningRecord
from tuner import search
from tuner import space as spaces
from tuner.failures import FailureGroup, group_failures
from tuner.measurement import to_measurement
from tuner.progress import Progress
from tuner.search import MeasureResult, SearchStrategy
from tuner.space import Decisions, TraceCandidate
from tuner.task import TuneTask
from tuner.transfer import similar_workloads
from workers import Candidate, ErrorKind, RunResult, Workers
from workers.tally import WorkTotals

T = TypeVar("T")

RECORD_PAGE = 1000
# A search candidate one of whose timed calls is this many times slower than the best so
# far is timed no further (``Candidate.cutoff_seconds``): its record keeps that one real,
# slow time, which tells a search as much as five. A template-free search's first
# batches are mostly such candidates (random GEMM 1024^3 schedules ran 0.2-5 s a call
# against a best of 0.3 s): at ten times, each one between three and ten times the best
# was timed five times over. Three times the best, the searches of
# ``benchmarks/search.py`` (GEMM, conv2d) ran 10-45 % more trials a second and found
# schedules as fast; every plausible contender is still timed in full.
CUTOFF_FACTOR = 3.0
# A candidate slower than this many times the best so far is no contender for it: the
# runner times it in fewer loops (``Candidate.contender_seconds``). The searches of
# ``benchmarks/search.py`` (GEMM, conv2d) measured about a third of their candidates
# between this and ``CUTOFF_FACTOR``.
CONTENDER_FACTOR = 1.25
# Traces of a first batch measured before the rest of it, to give the rest a cutoff.
SCOUTS = 2
# The default candidates made in this process, by workload key and target, oldest first.
DEFAULT_CANDIDATES_KEPT = 256
_DEFAULT_CANDIDATES: OrderedDict[tuple[str, str], TraceCandidate] = OrderedDict()
# The accepted range of each numeric option. A seed reaches numpy and XGBoost, which
# take an unsigned 32-bit one; the others bound what one run may ask for.
OPTION_RANGES: dict[str, tuple[int, int]] = {
    "trials": (1, 1_000_000),
    "batch_size": (1, 10_000),
    "early_stopping": (1, 1_000_000),
    "seed": (0, 2**32 - 1),
    "retime_top": (0, 1_000),
    "retime_rounds": (1, 1_000),
}


class TuneOptionsError(ValueError):
    """A tuning option is out of its range (``OPTION_RANGES``); ``option`` names it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True, kw_only=True)
class TuneOptions:
    """``trials`` is the budget of the workload on the target, stored trials included
    (so the same command resumes instead of starting over); ``tuner`` a search kind;
    ``early_stopping`` ends the search after that many trials without a faster one;
    ``retime_top`` stored schedules are re-timed ``retime_rounds`` times each (0: none,
    as in a model's rounds);
    ``transfer`` offers the search the records of similar workloads; ``baseline``
    measures the default schedule as the first trial of a new CPU workload, the bar a
    searched schedule must clear (off, to judge a search by itself)."""

    trials: int = 64
    tuner: str = "auto"
    batch_size: int = 16
    early_stopping: int | None = None
    seed: int = 0
    template: str | None = None
    retime_top: int = 3
    retime_rounds: int = 5
    transfer: bool = True
    baseline: bool = True

    def __post_init__(self) -> None:
        """Refuse an out-of-range option here, before a run stores anything."""
        for name, (low, high) in OPTION_RANGES.items():
            value = getattr(self, name)
            if value is None and name == "early_stopping":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise TuneOptionsError(
                    name,
                    f"TuneOptions.{name} must be an integer from {low} to {high}, got {value!r}",
                )


@dataclass(frozen=True)
class RankedSchedule:
    """A stored schedule and its times: ``search_seconds`` as the search measured it,
    ``seconds`` as re-timed (None when the re-timing failed or was interrupted)."""

    trace: str
    search_seconds: float
    seconds: float | None
    gflops: float | None


@dataclass(frozen=True)
class TuneResult:
    """What a run did: ``measured`` trials this run (``errors`` of them failed, grouped
    by kind in ``failures``), ``restored`` trials found in the database (``space`` names
    the space searched, ``space_size`` its number of points when it has one),
    ``transferred`` records of ``similar`` other workloads the search learned from, why
    it stopped, the best GFLOP/s so far after each trial of this run (``curve``), and
    the best schedules re-timed, fastest first (``best``; after an interrupt, the best
    stored ones, not re-timed). ``search_seconds`` of ``wall_seconds`` went to the
    search strategy itself (proposing and learning); the rest to measuring, storing
    and re-timing. ``confirmed`` measurements measured a trial again before it steered
    the search (they are not trials). ``work``: the workers' builds and runs during a
    ``tune`` (a model's rounds overlap one another, so ``tune_model`` counts its own)."""

    task: TuneTask
    space: str
    space_size: int | None
    measured: int
    restored: int
    errors: int
    stop_reason: str
    wall_seconds: float
    curve: tuple[float, ...] = ()
    best: tuple[RankedSchedule, ...] = field(default=())
    transferred: int = 0
    similar: int = 0
    failures: tuple[FailureGroup, ...] = ()
    search_seconds: float = 0.0
    confirmed: int = 0
    work: WorkTotals = field(default_factory=WorkTotals)

    @property
    def interrupted(self) -> bool:
        return self.stop_reason == "interrupted"

    @property
    def best_gflops(self) -> float | None:
        """The re-timed GFLOP/s of the best schedule, None when nothing was re-timed."""
        timed = [r.gflops for r in self.best if r.gflops is not None]
        return max(timed) if timed else None

    @property
    def trials_per_second(self) -> float:
        return self.measured / self.wall_seconds if self.wall_seconds > 0 else 0.0


def tune(
    task: TuneTask,
    *,
    database: Database,
    workers: Workers,
    options: TuneOptions | None = None,
    progress: Progress | None = None,
    space: spaces.Space | None = None,
    should_stop: Callable[[], bool] | None = None,
    job_id: int | None = None,
    siblings: Sequence[spaces.Space] = (),
) -> TuneResult:
    """Tune ``task`` with ``workers``, storing every measurement in ``database`` (as
    measured by the stored job ``job_id``, when one is given). The search is over
    ``space`` (of the task's workload), by default the template that fits
    (``options.template`` names another). ``should_stop`` is asked after each batch;
    when it answers True the run ends there ("cancelled"), without re-timing. With
    transfer, the search learns first from the records of the workloads of
    ``siblings`` (other spaces, as a model's tasks whose spaces share this one's
    points), then from those of other similar workloads."""
    before = workers.tally.totals()
    result = start_tuning(
        task,
        database=database,
        workers=workers,
        options=options,
        progress=progress,
        space=space,
        should_stop=should_stop,
        job_id=job_id,
        siblings=siblings,
    ).finish()
    return replace(result, work=workers.tally.totals() - before)


def start_tuning(
    task: TuneTask,
    *,
    database: Database,
    workers: Workers,
    options: TuneOptions | None = None,
    progress: Progress | None = None,
    space: spaces.Space | None = None,
    should_stop: Callable[[], bool] | None = None,
    job_id: int | None = None,
    siblings: Sequence[spaces.Space] = (),
) -> TuningRun:
    """``tune``'s first half (the same arguments): everything up to the search's first
    batch, measuring nothing. ``TuningRun.finish`` measures and goes on."""
    options = options or TuneOptions()
    start = time.monotonic()
    space = space or spaces.space_for(task.func, target=task.target, template=options.template)
    if space.workload_key != task.workload_key:
        raise spaces.SpaceError(
            f"{space.name} is a space of workload {space.workload_key[:12]}, not of the "
            f"task's {task.workload_key[:12]}; build the space on the task's func"
        )
    workers.runner.check_target(task.target)
    database.commit_workload(task.func, name=task.name, flop_count=task.flop_count)
    stored = list(search_records(database, task))
    lost = _lost_candidates(task, stored)
    stored = [r for r in stored if r.error_kind is not ErrorKind.HOST_LOST]
    loop = _Loop(task, database, workers, progress, should_stop, job_id)
    run = TuningRun(options, space, loop, start)
    baseline = default_candidate(task) if options.baseline else None
    loop.restored = _restored_count(space, stored)
    if baseline is not None and baseline.trace_hash in {r.trace_hash for r in stored}:
        loop.restored += 1
        baseline = None
    if baseline is not None:
        lost = [c for c in lost if c.trace_hash != baseline.trace_hash]
    remaining = options.trials - loop.restored
    if remaining <= 0:
        return run
    loop.known = {r.trace_hash: MeasureResult(r.seconds, r.error, r.error_kind) for r in stored}
    loop.best_seconds = min((r.seconds for r in stored if r.seconds), default=None)
    if baseline is not None:
        run.baseline = baseline
        remaining -= 1
    run.lost = lost[: max(remaining, 0)]
    remaining -= len(run.lost)
    if remaining > 0:
        run.strategy, run.transferred, run.similar = loop.timed(
            lambda: _strategy(task, space, database, stored, remaining, options, siblings)
        )
        try:
            run.batch = loop.timed(run.strategy.generate_measure_candidates)
        except KeyboardInterrupt:
            run.reason = "interrupted"
    return run


class TuningRun:
    """A ``tune`` started by ``start_tuning``: what it measures first (the default
    schedule, the traces lost with their host) and the search's first batch, not yet
    measured. ``build_ahead`` starts their builds, so that the caller can search for
    another task meanwhile (a model's tuning does); ``finish`` measures them, goes on
    until the search stops, and returns the result."""

    def __init__(
        self, options: TuneOptions, space: spaces.Space, loop: _Loop, start: float
    ) -> None:
        self.options = options
        self.space = space
        self.loop = loop
        self.start = start
        self.baseline: TraceCandidate | None = None
        self.lost: list[TraceCandidate] = []
        self.strategy: SearchStrategy | None = None
        self.batch: list[TraceCandidate] | None = None
        self.transferred = 0
        self.similar = 0
        self.reason = "budget"

    def build_ahead(self) -> None:
        """Start building, in the background, what ``finish`` measures first."""
        first = [self.baseline] if self.baseline is not None else []
        traces = [*first, *self.lost, *(self.batch or [])]
        if traces and self.reason != "interrupted":
            self.loop.workers.build_ahead(self.loop.candidates(traces))

    def finish(self) -> TuneResult:
        """Measure, search on until the search stops, re-time, and return the result."""
        loop, task, options = self.loop, self.loop.task, self.options
        reason = self.reason
        if reason != "interrupted":
            if self.baseline is not None:
                loop.measure([self.baseline])
            if self.lost:
                loop.measure(self.lost)
            if self.strategy is not None:
                reason = loop.run(self.strategy, self.batch)
        if loop.progress is not None:
            loop.progress.finish()
        if reason in ("interrupted", "cancelled") or options.retime_top == 0:
            best = _unretimed_best(task, loop.database, options)
        else:
            best, reason = _retime(task, loop.database, loop.workers, options, reason, loop.job_id)
        space = self.space
        return TuneResult(
            task=task,
            space=space.name,
            space_size=space.size if isinstance(space, spaces.EnumerableSpace) else None,
            measured=loop.measured,
            restored=loop.restored,
            errors=loop.errors,
            stop_reason=reason,
            wall_seconds=time.monotonic() - self.start,
            curve=tuple(loop.curve),
            search_seconds=loop.search_seconds,
            best=best,
            transferred=self.transferred,
            similar=self.similar,
            failures=group_failures(loop.failed),
            confirmed=loop.confirmed,
        )


def default_candidate(task: TuneTask) -> TraceCandidate | None:
    """The default schedule of a CPU task as a candidate: what a build runs before any
    record exists. Measured first, it is the bar every searched schedule must clear,
    so a tuned build is never slower than an untuned one (a few random trials of a
    large space often are: a blocked convolution's register tile is a point they
    rarely hit). Kept for the process by workload key and target (the key counts
    block names, so the trace replays on every func of that key): a model's tuning
    asks once a round per task, and scheduling a blocked convolution by default
    takes about 0.3 s."""
    if target_kind(task.target) != "llvm":
        return None
    key = (task.workload_key, task.target)
    made = _DEFAULT_CANDIDATES.get(key)
    if made is None:
        trace = schedule_by_default(task.func, target=task.target).trace
        made = TraceCandidate(task.workload_key, trace.structural_hash, trace, Decisions(0, ()))
        _DEFAULT_CANDIDATES[key] = made
        if len(_DEFAULT_CANDIDATES) > DEFAULT_CANDIDATES_KEPT:
            _DEFAULT_CANDIDATES.popitem(last=False)
    return made


def _strategy(
    task: TuneTask,
    space: spaces.Space,
    database: Database,
    stored: Sequence[TuningRecord],
    trials: int,
    options: TuneOptions,
    siblings: Sequence[spaces.Space],
) -> tuple[SearchStrategy, int, int]:
    """The search for ``trials`` more trials, told the stored records and, when it
    learns across workloads, those of similar workloads; with how many records of how
    many similar workloads it learned from."""
    strategy = search.create(
        options.tuner,
        space=space,
        max_trials=trials,
        batch_size=options.batch_size,
        early_stopping=options.early_stopping,
        seed=options.seed,
    )
    strategy.restore_traces((r.trace, r.seconds) for r in stored)
    transferred = similar = 0
    if options.transfer and strategy.learns_from_other_workloads:
        for other in similar_workloads(database, task, space, siblings=siblings):
            taken = strategy.learn_from(other.space, other.records)
            transferred += taken
            similar += 1 if taken else 0
    return strategy, transferred, similar


def check_search(space: spaces.Space, options: TuneOptions) -> None:
    """Raise SearchError when ``options.tuner`` cannot search ``space`` (grid search
    over a space that numbers no points), before a run starts workers or stores."""
    search.create(
        options.tuner,
        space=space,
        max_trials=options.trials,
        batch_size=options.batch_size,
        early_stopping=options.early_stopping,
        seed=options.seed,
    )


class _Loop:
    """The ask / measure / commit / tell loop and its counters."""

    def __init__(
        self,
        task: TuneTask,
        database: Database,
        workers: Workers,
        progress: Progress | None,
        should_stop: Callable[[], bool] | None,
        job_id: int | None,
    ) -> None:
        self.task = task
        self.should_stop = should_stop
        self.job_id = job_id
        self.database = database
        self.workers = workers
        self.progress = progress
        self.workload = workload_to_json(task.func)
        self.known: dict[str, MeasureResult] = {}
        self.restored = 0
        self.best_seconds: float | None = None
        self.measured = 0
        self.confirmed = 0
        self.errors = 0
        self.failed: list[tuple[ErrorKind, str]] = []
        self.curve: list[float] = []
        self.search_seconds = 0.0

    def run(self, strategy: SearchStrategy, batch: list[TraceCandidate] | None) -> str:
        """Measure ``batch``, the strategy's first, and go on until the strategy stops;
        returns why it stopped."""
        try:
            while batch is not None:
                results = self.measure(batch)
                self.timed(partial(strategy.notify_runner_results, batch, results))
                self.confirm(strategy)
                if self.should_stop is not None and self.should_stop():
                    return "cancelled"
                batch = self.timed(strategy.generate_measure_candidates)
        except KeyboardInterrupt:
            return "interrupted"
        if strategy.trials >= strategy.max_trials:
            return "budget"
        if strategy.exhausted:
            return "space exhausted"
        return "early stopping"

    def timed(self, step: Callable[[], T]) -> T:
        """``step()``, its time added to the search's own."""
        start = time.monotonic()
        try:
            return step()
        finally:
            self.search_seconds += time.monotonic() - start

    def measure(self, batch: Sequence[TraceCandidate]) -> list[MeasureResult]:
        """Measure the batch's new traces, commit their records, and return one result
        per candidate (stored ones from the database). Each is cut ``CUTOFF_FACTOR``
        times slower than the best so far, stored records included. While there is no
        best yet, the first ``SCOUTS`` traces are measured (and committed) on their own,
        so the rest of the batch has a cutoff: a random schedule can take seconds a call."""
        digests = [c.trace_hash for c in batch]
        fresh = [k for k, digest in enumerate(digests) if digest not in self.known]
        groups = [fresh]
        if self.best_seconds is None and len(fresh) > SCOUTS:
            groups = [fresh[:SCOUTS], fresh[SCOUTS:]]
        for group in groups:
            self._measure_new([batch[k] for k in group])
        return [self.known[digest] for digest in digests]

    def confirm(self, strategy: SearchStrategy) -> None:
        """Measure the strategy's confirmation candidates again, commit those records
        too (a trace's search measurements rank it by their fastest), and tell it."""
        again = self.timed(strategy.confirmation_candidates)
        if not again:
            return
        runs = self._run(again)
        faster = [run.seconds for run in runs if run.seconds is not None]
        if faster and (self.best_seconds is None or min(faster) < self.best_seconds):
            self.best_seconds = min(faster)
        self.confirmed += len(runs)
        self.timed(partial(strategy.notify_confirmations, again, runs))

    def candidates(self, traces: Sequence[TraceCandidate]) -> list[Candidate]:
        """The traces as the workers' candidates, cut at ``CUTOFF_FACTOR`` times the best
        so far and contenders up to ``CONTENDER_FACTOR`` times it."""
        best = self.best_seconds
        cutoff = None if best is None else CUTOFF_FACTOR * best
        contender = None if best is None else CONTENDER_FACTOR * best
        return [
            Candidate(
                self.workload, t.trace_json, self.task.target, self.task.spec, cutoff, contender
            )
            for t in traces
        ]

    def _run(self, traces: Sequence[TraceCandidate]) -> list[RunResult]:
        """Measure ``traces`` with the cutoff of the best so far; commit their records."""
        candidates = self.candidates(traces)
        runs = self.workers.measure(candidates) if candidates else []
        key = self.task.workload_key
        self.database.commit_records(
            (to_measurement(run, job_id=self.job_id, key=key) for run in runs), built=True
        )
        return runs

    def _measure_new(self, traces: Sequence[TraceCandidate]) -> None:
        """Measure traces not met before and commit their records in one transaction."""
        runs = self._run(traces)
        for trace, run in zip(traces, runs, strict=True):
            self.known[trace.trace_hash] = MeasureResult(run.seconds, run.error, run.error_kind)
        self._count(runs)

    def _count(self, runs: Sequence[RunResult]) -> None:
        for run in runs:
            self.measured += 1
            seconds = run.seconds
            if seconds is None:
                self.errors += 1
                assert run.error_kind is not None and run.error is not None
                self.failed.append((run.error_kind, run.error))
            elif self.best_seconds is None or seconds < self.best_seconds:
                self.best_seconds = seconds
            self.curve.append(self.best_gflops or 0.0)
        if self.progress is not None:
            self.progress.update(self.restored + self.measured, self.best_gflops, self.errors)

    @property
    def best_gflops(self) -> float | None:
        return None if self.best_seconds is None else self.task.gflops(self.best_seconds)


def _retime(
    task: TuneTask,
    database: Database,
    workers: Workers,
    options: TuneOptions,
    reason: str,
    job_id: int | None,
) -> tuple[tuple[RankedSchedule, ...], str]:
    """The ``retime_top`` fastest search measurements, each measured ``retime_rounds``
    more times (built afresh each time, in turns); a schedule whose every round
    succeeds gets those times stored as a re-timing record of its own, whose fastest
    time ranks it in ``Database.best`` (and so in ``build(..., database=)``). Returns the
    re-timed schedules fastest first, then any whose re-timing failed."""
    top = database.best(
        task.workload_key, task.target, k=options.retime_top, purpose=Purpose.SEARCH
    )
    if not top:
        return (), reason
    workload = workload_to_json(task.func)
    rounds = max(1, options.retime_rounds)
    # Round-robin, so a slow stretch of the machine slows one round of every schedule
    # rather than every round of one. No cutoff: these are the careful measurements.
    candidates = [
        Candidate(workload, record.trace, task.target, task.spec)
        for _ in range(rounds)
        for record in top
    ]
    try:
        runs = workers.measure(candidates)
    except KeyboardInterrupt:
        runs, reason = [], "interrupted"
    retimings = []
    for k, record in enumerate(top):
        rounds_of_record = runs[k :: len(top)]
        if rounds_of_record and all(run.seconds is not None for run in rounds_of_record):
            retimings.append(
                retiming(record.workload_key, record.target, record.trace, rounds_of_record, job_id)
            )
    database.commit_records(retimings)
    retimed = {m.trace: min(m.run_times) for m in retimings}
    ranked = []
    for record in top:
        seconds = retimed.get(record.trace)
        gflops = None if seconds is None else task.gflops(seconds)
        assert record.seconds is not None
        ranked.append(RankedSchedule(record.trace, record.seconds, seconds, gflops))
    ranked.sort(key=lambda r: (r.seconds is None, r.seconds or 0.0, r.search_seconds))
    return tuple(ranked), reason


def _unretimed_best(
    task: TuneTask, database: Database, options: TuneOptions
) -> tuple[RankedSchedule, ...]:
    """The fastest stored search measurements, not re-timed: what an interrupted run
    has found so far (it re-times nothing; the next run does), or a run told to
    re-time none (``retime_top=0``)."""
    top = database.best(
        task.workload_key, task.target, k=max(1, options.retime_top), purpose=Purpose.SEARCH
    )
    return tuple(
        RankedSchedule(record.trace, record.seconds, None, None)
        for record in top
        if record.seconds is not None
    )


def retiming(
    workload_key: str, target: str, trace: str, rounds: Sequence[RunResult], job_id: int | None
) -> Measurement:
    """A careful re-timing of a stored search measurement in ``rounds`` runs, as a
    record of its own (of the job ``job_id``, when one made it)."""
    return Measurement.ok(
        workload_key,
        target,
        trace,
        [t for run in rounds for t in run.run_times],
        worker_host=rounds[0].worker_host,
        job_id=job_id,
        purpose=Purpose.RETIME,
    )


def search_records(database: Database, task: TuneTask) -> Iterator[TuningRecord]:
    """The task's search measurements (not its re-timings), newest first, page by page."""
    before: int | None = None
    while True:
        page = database.records(
            task.workload_key,
            task.target,
            purpose=Purpose.SEARCH,
            limit=RECORD_PAGE,
            before_id=before,
        )
        yield from page
        if len(page) < RECORD_PAGE:
            return
        before = page[-1].id


def _lost_candidates(task: TuneTask, records: Sequence[TuningRecord]) -> list[TraceCandidate]:
    """The traces whose every stored measurement was lost with its host (HOST_LOST):
    no fault of theirs, so a resumed run measures them again, before it searches on."""
    lost: dict[str, TuningRecord] = {}
    measured = set()
    for record in records:
        if record.error_kind is ErrorKind.HOST_LOST:
            lost.setdefault(record.trace_hash, record)
        else:
            measured.add(record.trace_hash)
    return [
        TraceCandidate(task.workload_key, digest, Trace.from_json(record.trace), Decisions(0, ()))
        for digest, record in lost.items()
        if digest not in measured
    ]


def _restored_count(space: spaces.Space, records: Sequence[TuningRecord]) -> int:
    """How many distinct candidates of ``space`` the records hold."""
    hashes = set()
    for record in records:
        candidate = space.candidate_from_trace(record.trace)
        if candidate is not None:
            hashes.add(candidate.trace_hash)
    return len(hashes)
