"""Stored rows as the API answers them (``tuner.service.schemas``): GFLOP/s from a
workload's flop count, a job's errors by kind and its estimated time left."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from db import Job as StoredJob
from db import JobStatus, Purpose, TuningRecord, WorkloadEntry
from db.jobs import FINAL
from db.record import OK_STATUS
from tuner.service.schemas import BestSchedule, Job, JobTask, Record, Trial, Workload


def job_view(job: StoredJob, flops: dict[str, int | None]) -> Job:
    """``job`` with the GFLOP/s of each task's best (``flops``: the flop count of each
    workload by key) and the time left at the pace its tasks have measured so far."""
    pace = _seconds_per_trial(job)
    tasks = [
        JobTask(
            id=t.id,
            workload_key=t.workload_key,
            target=t.target,
            status=t.status.value,
            trials_asked=t.trials_asked,
            trials_done=t.trials_done,
            best_seconds=t.best_seconds,
            best_gflops=gflops(flops.get(t.workload_key), t.best_seconds),
            measured=sum(t.outcomes.values()),
            errors={kind: n for kind, n in t.outcomes.items() if kind != OK_STATUS},
            seconds_left=_seconds_left(job, t.status, t.trials_asked - t.trials_done, pace),
        )
        for t in job.tasks
    ]
    lefts = [t.seconds_left for t in tasks]
    return Job(
        id=job.id,
        status=job.status.value,
        priority=job.priority,
        request=job.spec,
        error=job.error,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        seconds_left=None if None in lefts else sum(s for s in lefts if s is not None),
        tasks=tasks,
    )


def _seconds_per_trial(job: StoredJob) -> float | None:
    """The job's pace: the time its started tasks have run over the trials they have
    measured; None before it has measured any."""
    clock = datetime.now(UTC)
    spent = 0.0
    measured = 0
    for task in job.tasks:
        if task.started_at is None:
            continue
        spent += ((task.finished_at or clock) - task.started_at).total_seconds()
        measured += sum(task.outcomes.values())
    return spent / measured if measured else None


def _seconds_left(
    job: StoredJob, status: JobStatus, trials_left: int, pace: float | None
) -> float | None:
    if job.status in FINAL or status is JobStatus.DONE or trials_left <= 0:
        return 0.0
    return None if pace is None else trials_left * pace


def gflops(flop_count: int | None, seconds: float | None) -> float | None:
    return None if not seconds or flop_count is None else flop_count / seconds / 1e9


def workload_view(entry: WorkloadEntry) -> Workload:
    return Workload(key=entry.key, name=entry.name, flop_count=entry.flop_count)


def record_view(record: TuningRecord, entry: WorkloadEntry) -> Record:
    seconds = record.seconds
    return Record(
        id=record.id,
        workload_key=record.workload_key,
        target=record.target,
        trace=json.loads(record.trace),
        trace_hash=record.trace_hash,
        purpose=record.purpose.value,
        seconds=seconds,
        run_times=list(record.run_times),
        gflops=gflops(entry.flop_count, seconds),
        error_kind=None if record.error_kind is None else record.error_kind.value,
        error=record.error,
        worker_host=record.worker_host,
        job_id=record.job_id,
        created_at=record.created_at,
    )


def best_view(
    record: TuningRecord, entry: WorkloadEntry, search_seconds: float | None
) -> BestSchedule:
    """``record`` among the best; ``search_seconds``: the trace as the search measured
    it (the record's own time unless it is a re-timing)."""
    return BestSchedule(
        **record_view(record, entry).model_dump(),
        python="\n".join(record.to_trace().as_python()),
        retimed=record.purpose is Purpose.RETIME,
        search_gflops=gflops(entry.flop_count, search_seconds),
    )


def trial_view(record: TuningRecord, task_id: int | None, flop_count: int | None) -> Trial:
    return Trial(
        id=record.id,
        task_id=task_id,
        at=record.created_at,
        seconds=record.seconds,
        gflops=gflops(flop_count, record.seconds),
        error_kind=None if record.error_kind is None else record.error_kind.value,
    )
