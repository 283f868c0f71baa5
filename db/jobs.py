"""Jobs and their tasks: what was submitted, and how far each workload has got.

Unlike records these change as a job runs (status, trials done, best so far). The
tuning service drives them through two small interfaces: ``JobStore`` (submit, show,
count, cancel) and ``JobQueue`` (what a coordinator does with a job it runs); the
records a job produces point at it. The checks here are shared by the implementations
(``db.sql_jobs`` for SQL, ``db.memory_stores`` in memory), so both refuse alike.
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from db.errors import RecordError
from db.queries import now
from db.record import Job, JobStatus, JobTask
from db.validate import target_key

FINAL = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)
# How a run may end its job: done, failed, or back in the queue to be resumed.
RUN_ENDS = (JobStatus.DONE, JobStatus.FAILED, JobStatus.QUEUED)
# A running job whose coordinator has not beaten its heart for this long is taken for
# dead and requeued; coordinators beat far more often (``Coordinator.HEARTBEAT``).
STALE_AFTER = timedelta(seconds=60)


class JobStore(abc.ABC):
    """Submitted jobs as the service keeps them: stored, shown, counted, cancelled."""

    @abc.abstractmethod
    def create_job(
        self,
        spec: Mapping[str, Any],
        tasks: Sequence[tuple[str, str, int]],
        *,
        token_id: int | None = None,
        priority: int = 0,
    ) -> Job:
        """A queued job with its ``spec`` (as submitted, JSON) and one task per
        (workload key, target, trials asked); ``token_id`` names who submitted it
        (QuotaError, and nothing stored, when its quota of unfinished jobs is used). Of
        the queued jobs, those of a higher ``priority`` are claimed first."""

    @abc.abstractmethod
    def job(self, job_id: int) -> Job:
        """The job with its tasks, each with how the job's measurements of it ended;
        RecordError when there is none."""

    @abc.abstractmethod
    def jobs(
        self,
        status: JobStatus | None = None,
        *,
        limit: int | None = None,
        before_id: int | None = None,
    ) -> list[Job]:
        """Jobs newest first, those in ``status`` only when it is given; at most
        ``limit``, older than the job ``before_id`` when it is given (to page on)."""

    @abc.abstractmethod
    def job_counts(self) -> dict[JobStatus, int]:
        """How many jobs are in each status (every status, zero included)."""

    @abc.abstractmethod
    def cancel_job(self, job_id: int) -> Job:
        """Cancel the job if it is queued or running, with its unfinished tasks; a job
        that ended (or ends meanwhile) stays as it ended. A running job's coordinator
        sees the cancellation at its next batch and may no longer end the job otherwise."""


class JobQueue(abc.ABC):
    """What a coordinator does with the jobs: claim the next one, beat its heart while
    it runs it, report each task's progress, and end its run."""

    @abc.abstractmethod
    def claim_job(
        self, coordinator: str = "", *, stale_after: timedelta = STALE_AFTER
    ) -> Job | None:
        """The queued job of the highest priority (the oldest among equals), now running
        for ``coordinator`` alone, or None when none is queued. First every running job
        whose coordinator has not beaten its heart for ``stale_after`` goes back to the
        queue (its running tasks too)."""

    @abc.abstractmethod
    def beat(self, job_id: int, coordinator: str) -> bool:
        """Note that ``coordinator`` is alive and still running the job; False when the
        job is no longer its to run (cancelled, finished, or requeued as stale)."""

    @abc.abstractmethod
    def update_task(
        self,
        task_id: int,
        *,
        status: JobStatus | None = None,
        trials_done: int | None = None,
        best_seconds: float | None = None,
    ) -> JobTask:
        """Set what is given of the task (RUNNING stamps its start, a final status its
        end) and return it; RecordError for a bad value or an unknown task."""

    @abc.abstractmethod
    def end_job(
        self, job_id: int, coordinator: str, status: JobStatus, *, error: str | None = None
    ) -> Job:
        """End the run of ``coordinator`` on the job: DONE or FAILED (its unfinished
        tasks with it), or QUEUED to be resumed later (its running tasks with it). The
        change is made only while the job is running for ``coordinator``: one whose job
        was cancelled, or requeued as stale and perhaps claimed by another, writes
        nothing. Returns the job as it stands."""


def check_job(spec: Any, priority: Any) -> dict[str, Any]:
    """The spec as plain JSON; RecordError for a spec or a priority that is not one."""
    if type(priority) is not int:
        raise RecordError(f"priority: must be an integer, got {priority!r}")
    return _check_spec(spec)


def checked_tasks(
    tasks: Sequence[tuple[str, str, int]], known: Collection[str]
) -> list[tuple[str, str, int]]:
    """The tasks with their canonical targets; RecordError naming the first task whose
    target does not parse, then the first whose workload is not among ``known`` or
    whose trials are not a positive integer."""
    targets = [target_key(target, f"tasks[{i}]") for i, (_, target, _) in enumerate(tasks)]
    for i, (key, _, trials) in enumerate(tasks):
        if key not in known:
            raise RecordError(f"tasks[{i}]: unknown workload {key!r}; commit it first")
        if type(trials) is not int or trials < 1:
            raise RecordError(f"tasks[{i}]: trials must be a positive integer, got {trials!r}")
    return [(key, target, trials) for (key, _, trials), target in zip(tasks, targets, strict=True)]


def _check_spec(spec: Any) -> dict[str, Any]:
    if not isinstance(spec, Mapping):
        raise RecordError(f"spec: must be a JSON object, got {type(spec).__name__}")
    try:
        return json.loads(json.dumps(spec, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise RecordError(f"spec: must be plain JSON: {err}") from None


def check_run_end(status: JobStatus) -> None:
    if status not in RUN_ENDS:
        raise RecordError(f"a run ends its job done, failed or queued, not {status.value}")


def task_changes(
    status: JobStatus | None, trials_done: int | None, best_seconds: float | None
) -> dict[str, Any]:
    """The task's fields to set (RUNNING stamps ``started_at``, a final status
    ``finished_at``), checked; RecordError for a value out of its bounds."""
    values: dict[str, Any] = {}
    if status is not None:
        status = JobStatus(status)
        values["status"] = status
        if status is JobStatus.RUNNING:
            values["started_at"] = now()
        if status in FINAL:
            values["finished_at"] = now()
    if trials_done is not None:
        if type(trials_done) is not int or trials_done < 0:
            raise RecordError(f"trials_done: must be a non-negative integer, got {trials_done!r}")
        values["trials_done"] = trials_done
    if best_seconds is not None:
        if not math.isfinite(best_seconds) or best_seconds < 0:
            raise RecordError(f"best_seconds: must be finite and not negative, got {best_seconds}")
        values["best_seconds"] = best_seconds
    return values


def refuse_unknown_jobs(named: Collection[int], found: Collection[int]) -> None:
    missing = sorted(set(named) - set(found))
    if missing:
        raise RecordError(f"records name jobs {missing} that do not exist; create them first")
