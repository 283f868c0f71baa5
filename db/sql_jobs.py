"""``SQLDatabase``'s jobs and tasks (``db.jobs`` holds their interfaces and checks).

A change of a job's state is one transaction whose ``UPDATE`` names the state it
changes from, so of two racing changes (a cancel and a coordinator's end, two
coordinators claiming) exactly one happens and the other finds the job as the first
left it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, Select, func, insert, or_, select, update

from db.errors import RecordError
from db.jobs import check_job, check_run_end, checked_tasks, refuse_unknown_jobs, task_changes
from db.models import JobRow, RecordRow, TargetRow, TaskRow, WorkloadRow
from db.queries import (
    database_now,
    ensure_targets,
    now,
    task_select,
    to_job,
    to_task,
    workload_rows,
)
from db.record import Job, JobStatus, JobTask
from db.tokens import check_quota

_UNFINISHED = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)


def create_job(
    engine: Engine,
    spec: Mapping[str, Any],
    tasks: Sequence[tuple[str, str, int]],
    token_id: int | None = None,
    priority: int = 0,
) -> Job:
    spec = check_job(spec, priority)
    with engine.begin() as connection:
        if token_id is not None:
            check_quota(connection, token_id)
        workloads = workload_rows(connection, {key for key, _, _ in tasks})
        checked = checked_tasks(tasks, set(workloads))
        targets = [target for _, target, _ in checked]
        rows = [
            {"workload_id": workloads[key].id, "trials_asked": trials} for key, _, trials in checked
        ]
        created = now()
        job_id = connection.execute(
            insert(JobRow)
            .values(
                status=JobStatus.QUEUED.value,
                spec=spec,
                created_at=created,
                token_id=token_id,
                priority=priority,
            )
            .returning(JobRow.id)
        ).scalar_one()
        target_ids = ensure_targets(connection, set(targets))
        for row, target in zip(rows, targets, strict=True):
            row.update(
                job_id=job_id,
                target_id=target_ids[target],
                status=JobStatus.QUEUED.value,
                trials_done=0,
                created_at=created,
            )
        if rows:
            connection.execute(insert(TaskRow), rows)
        return load_job(connection, job_id)


def load_job(connection: Connection, job_id: int) -> Job:
    found = load_jobs_by_id(connection, [job_id])
    if not found:
        raise RecordError(f"no job with id {job_id!r}")
    return found[0]


def load_jobs(
    connection: Connection,
    status: JobStatus | None,
    *,
    limit: int | None = None,
    before_id: int | None = None,
) -> list[Job]:
    """Jobs newest first: those in ``status`` (all when None), at most ``limit``, and
    only those older than the job ``before_id`` (to page on)."""
    stmt = select(JobRow.id).order_by(JobRow.id.desc()).limit(limit)
    if status is not None:
        stmt = stmt.where(JobRow.status == JobStatus(status).value)
    if before_id is not None:
        stmt = stmt.where(JobRow.id < before_id)
    return load_jobs_by_id(connection, list(connection.execute(stmt).scalars()))


def load_jobs_by_id(connection: Connection, job_ids: Sequence[int]) -> list[Job]:
    """The jobs of ``job_ids`` that exist, in that order, each with its tasks and how
    its measurements ended: three queries, however many jobs."""
    rows = connection.execute(select(JobRow.__table__).where(JobRow.id.in_(job_ids)))
    by_id = {row.id: row for row in rows}
    tasks: dict[int, list[JobTask]] = {job_id: [] for job_id in by_id}
    outcomes = _outcomes(connection, list(by_id))
    stmt = task_select().where(TaskRow.job_id.in_(list(by_id))).order_by(TaskRow.id)
    for row in connection.execute(stmt):
        tasks[row.job_id].append(to_task(row, outcomes.get((row.job_id, row.key, row.target))))
    return [to_job(by_id[i], tasks[i]) for i in job_ids if i in by_id]


def _outcomes(
    connection: Connection, job_ids: Sequence[int]
) -> dict[tuple[int, str, str], dict[str, int]]:
    """How many records each job measured, by (job, workload key, target) and by
    status ("ok" or the error kind)."""
    stmt = (
        select(RecordRow.job_id, WorkloadRow.key, TargetRow.target, RecordRow.status, func.count())
        .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
        .join(TargetRow, RecordRow.target_id == TargetRow.id)
        .where(RecordRow.job_id.in_(job_ids), RecordRow.purpose == "search")
        .group_by(RecordRow.job_id, WorkloadRow.key, TargetRow.target, RecordRow.status)
    )
    found: dict[tuple[int, str, str], dict[str, int]] = {}
    for row in connection.execute(stmt):
        found.setdefault((row.job_id, row.key, row.target), {})[row.status] = row[-1]
    return found


def job_counts(connection: Connection) -> dict[JobStatus, int]:
    """How many jobs are in each status (every status, zero included)."""
    rows = connection.execute(select(JobRow.status, func.count()).group_by(JobRow.status))
    counted = {JobStatus(status): count for status, count in rows}
    return {status: counted.get(status, 0) for status in JobStatus}


def existing_job_ids(connection: Connection, job_ids: Collection[int]) -> list[int]:
    return list(connection.execute(select(JobRow.id).where(JobRow.id.in_(list(job_ids)))).scalars())


def claim_job(engine: Engine, coordinator: str, stale_after: timedelta) -> Job | None:
    """The queued job of the highest priority (the oldest among equals), now running
    for ``coordinator``, or None when none is queued. First every running job whose
    coordinator has not beaten its heart for ``stale_after`` goes back to the queue
    (its tasks too, but for finished ones).
    Several coordinators may claim at once: the claim moves the job only if it is
    still queued, so exactly one of them gets it (on PostgreSQL the others also skip
    the row while it is locked instead of waiting for it)."""
    with engine.begin() as connection:
        _requeue_stale(connection, database_now(connection, stale_after))
    while True:  # a lost race means another coordinator got a job: try the next one
        with engine.begin() as connection:
            job_id = connection.execute(_next_queued()).scalar()
            if job_id is None:
                return None
            claimed = connection.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == JobStatus.QUEUED.value)
                .values(
                    status=JobStatus.RUNNING.value,
                    started_at=now(),
                    coordinator=coordinator,
                    heartbeat_at=database_now(connection),
                )
            )
            if claimed.rowcount == 1:
                return load_job(connection, job_id)


def _next_queued() -> Select[int]:
    return (
        select(JobRow.id)
        .where(JobRow.status == JobStatus.QUEUED.value)
        .order_by(JobRow.priority.desc(), JobRow.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )


def _requeue_stale(connection: Connection, cutoff: ColumnElement[Any]) -> None:
    """Requeue the running jobs whose last heartbeat is older than ``cutoff`` (a time
    of the database's clock: see ``db.queries.database_now``)."""
    stale = select(JobRow.id).where(
        JobRow.status == JobStatus.RUNNING.value,
        or_(JobRow.heartbeat_at.is_(None), JobRow.heartbeat_at < cutoff),
    )
    job_ids = list(connection.execute(stale).scalars())
    if not job_ids:
        return
    connection.execute(
        update(JobRow)
        .where(JobRow.id.in_(job_ids), JobRow.status == JobStatus.RUNNING.value)
        .values(status=JobStatus.QUEUED.value, coordinator=None)
    )
    _requeue_tasks(connection, job_ids)


def beat(engine: Engine, job_id: int, coordinator: str) -> bool:
    """Note that ``coordinator`` is alive and still running the job; False when the
    job is no longer its to run (cancelled, finished, or requeued as stale)."""
    with engine.begin() as connection:
        alive = connection.execute(
            update(JobRow)
            .where(
                JobRow.id == job_id,
                JobRow.coordinator == coordinator,
                JobRow.status == JobStatus.RUNNING.value,
            )
            .values(heartbeat_at=database_now(connection))
        )
        return alive.rowcount == 1


def cancel_job(engine: Engine, job_id: int) -> Job:
    """Cancel the job if it is queued or running, with its unfinished tasks; a job
    that ended (or ends meanwhile) stays as it ended. A running job's coordinator sees
    the cancellation at its next batch and may no longer end the job otherwise."""
    with engine.begin() as connection:
        load_job(connection, job_id)
        cancelled = connection.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.status.in_(_UNFINISHED))
            .values(status=JobStatus.CANCELLED.value, finished_at=now())
        )
        if cancelled.rowcount == 1:
            _close_tasks(connection, job_id, JobStatus.CANCELLED)
        return load_job(connection, job_id)


def end_job(
    engine: Engine, job_id: int, coordinator: str, status: JobStatus, error: str | None
) -> Job:
    """End the run of ``coordinator`` on the job: DONE or FAILED (its unfinished tasks
    with it), or QUEUED to be resumed later (its running tasks with it). The change is
    made only while the job is running for ``coordinator``: one whose job was
    cancelled, or requeued as stale and perhaps claimed by another, writes nothing.
    Returns the job as it stands."""
    check_run_end(status)
    values: dict[str, Any] = {"status": status.value, "error": error}
    if status is JobStatus.QUEUED:
        values["coordinator"] = None
    else:
        values["finished_at"] = now()
    with engine.begin() as connection:
        load_job(connection, job_id)
        ended = connection.execute(
            update(JobRow)
            .where(
                JobRow.id == job_id,
                JobRow.status == JobStatus.RUNNING.value,
                JobRow.coordinator == coordinator,
            )
            .values(**values)
        )
        if ended.rowcount == 1 and status is JobStatus.QUEUED:
            _requeue_tasks(connection, [job_id])
        elif ended.rowcount == 1:
            _close_tasks(connection, job_id, status)
        return load_job(connection, job_id)


def _close_tasks(connection: Connection, job_id: int, status: JobStatus) -> None:
    """The job's queued and running tasks, ended as ``status`` with it."""
    connection.execute(
        update(TaskRow)
        .where(TaskRow.job_id == job_id, TaskRow.status.in_(_UNFINISHED))
        .values(status=status.value, finished_at=now())
    )


def _requeue_tasks(connection: Connection, job_ids: Sequence[int]) -> None:
    connection.execute(
        update(TaskRow)
        .where(TaskRow.job_id.in_(job_ids), TaskRow.status == JobStatus.RUNNING.value)
        .values(status=JobStatus.QUEUED.value)
    )


def update_task(
    engine: Engine,
    task_id: int,
    status: JobStatus | None,
    trials_done: int | None,
    best_seconds: float | None,
) -> JobTask:
    values = task_changes(status, trials_done, best_seconds)
    if "status" in values:
        values["status"] = values["status"].value
    with engine.begin() as connection:
        if values:
            connection.execute(update(TaskRow).where(TaskRow.id == task_id).values(**values))
        row = connection.execute(task_select().where(TaskRow.id == task_id)).first()
        if row is None:
            raise RecordError(f"no task with id {task_id!r}")
        return to_task(row)


def check_jobs_exist(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Records may name only jobs that exist."""
    job_ids = {row["job_id"] for row in rows if row["job_id"] is not None}
    if not job_ids:
        return
    refuse_unknown_jobs(job_ids, set(existing_job_ids(connection, job_ids)))
