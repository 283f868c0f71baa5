"""Statements and row conversions shared by the Database's parts.

Each function takes an open Connection, so the caller decides the transaction;
the rows of ``db.models`` become the dataclasses of ``db.record`` here and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Row,
    Select,
    String,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from db.compiler_border import TRACE_FORMAT_VERSION, target_host_kind
from db.models import RecordRow, TargetRow, TaskRow, WorkloadRow
from db.record import (
    OK_STATUS,
    Job,
    JobStatus,
    JobTask,
    Purpose,
    TuningRecord,
    WorkloadEntry,
    error_kind_of,
)


def now() -> datetime:
    return datetime.now(UTC)


def database_now(connection: Connection, minus: timedelta = timedelta(0)) -> ColumnElement[Any]:
    """The database's own time, less ``minus``, as SQL: what hosts compare their
    heartbeats by, so that hosts whose clocks disagree still agree on which is stale.
    SQLite's is UTC text in the form SQLAlchemy stores a datetime in (microseconds
    padded from its milliseconds), so stored and computed times compare as text."""
    if connection.dialect.name == "sqlite":
        shift = f"{-minus.total_seconds():+.6f} seconds"
        return func.strftime("%Y-%m-%d %H:%M:%f000", "now", shift)
    return func.now() - minus if minus else func.now()


def as_utc(value: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; they were stored as UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _optional_utc(value: datetime | None) -> datetime | None:
    return None if value is None else as_utc(value)


def insert_ignoring_duplicates(connection: Connection, table: Any, rows: list[dict]) -> None:
    """Insert rows, skipping any whose unique key is already there (another process
    may have added the same workload or target a moment ago)."""
    if not rows:
        return
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    connection.execute(dialect.insert(table).on_conflict_do_nothing(), rows)


def workload_rows(connection: Connection, keys: Collection[str]) -> dict[str, Row]:
    """Stored workloads by key (id, key, json), for the keys that exist."""
    if not keys:
        return {}
    stmt = select(WorkloadRow.id, WorkloadRow.key, WorkloadRow.json).where(
        WorkloadRow.key.in_(list(keys))
    )
    return {row.key: row for row in connection.execute(stmt)}


def target_ids(connection: Connection, targets: Collection[str]) -> dict[str, int]:
    """Ids of the canonical target strings that exist."""
    if not targets:
        return {}
    stmt = select(TargetRow.id, TargetRow.target).where(TargetRow.target.in_(list(targets)))
    return {row.target: row.id for row in connection.execute(stmt)}


def ensure_targets(
    connection: Connection, targets: Collection[str], host_kinds: dict[str, str] | None = None
) -> dict[str, int]:
    """Ids of the canonical target strings, adding the missing ones."""
    known = target_ids(connection, targets)
    missing = [t for t in targets if t not in known]
    kinds = host_kinds or {}
    rows = [{"target": t, "host_kind": kinds.get(t) or target_host_kind(t)} for t in missing]
    insert_ignoring_duplicates(connection, TargetRow, rows)
    return target_ids(connection, targets) if missing else known


def insert_records(connection: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        connection.execute(insert(RecordRow), rows)


RECORDS = RecordRow.__table__.join(
    WorkloadRow.__table__, RecordRow.workload_id == WorkloadRow.id
).join(TargetRow.__table__, RecordRow.target_id == TargetRow.id)


def record_select() -> Select:
    """Records with their workload key and target string, for ``to_record``."""
    return select(RecordRow.__table__, WorkloadRow.key, TargetRow.target).select_from(RECORDS)


def to_record(r: Row) -> TuningRecord:
    return TuningRecord(
        id=r.id,
        workload_key=r.key,
        target=r.target,
        trace=r.trace,
        trace_hash=r.trace_hash,
        error_kind=error_kind_of(r.status),
        run_times=tuple(r.run_times),
        mean_seconds=r.mean_seconds,
        min_seconds=r.min_seconds,
        error=r.error,
        worker_host=r.worker_host,
        job_id=r.job_id,
        created_at=as_utc(r.created_at),
        trace_version=r.trace_version,
        tensortune_version=r.tensortune_version,
        purpose=Purpose(r.purpose),
    )


def ranked(
    connection: Connection, workload_key: str, target: str, k: int, purpose: Purpose | None
) -> list[TuningRecord]:
    """The ``k`` best current-format successes of a workload on a (canonical) target,
    as ``Database.best`` defines them: with ``purpose`` None the fastest re-timing of
    each re-timed trace, then the fastest search measurement of each trace never
    re-timed, each by its fastest run time (``min_seconds``); with a purpose, only
    those records (each trace's fastest search measurement, or its fastest re-timing).
    Ties: older first."""
    workload_id = select(WorkloadRow.id).where(WorkloadRow.key == workload_key).scalar_subquery()
    target_id = select(TargetRow.id).where(TargetRow.target == target).scalar_subquery()

    def current(stmt: Select, of: Purpose) -> Select:
        return (
            stmt.where(RecordRow.workload_id == workload_id)
            .where(RecordRow.target_id == target_id)
            .where(RecordRow.purpose == of.value)
            .where(RecordRow.status == OK_STATUS)
            .where(RecordRow.trace_version == TRACE_FORMAT_VERSION)
        )

    rows = select(
        RecordRow.__table__,
        literal(workload_key, String).label("key"),
        literal(target, String).label("target"),
    )

    def fastest_of_each_trace(of: Purpose) -> Select:
        order = func.row_number().over(
            partition_by=RecordRow.trace_hash, order_by=(RecordRow.min_seconds, RecordRow.id)
        )
        records = current(select(RecordRow.id, order.label("place")), of).subquery()
        fastest = select(records.c.id).where(records.c.place == 1)
        return rows.where(RecordRow.id.in_(fastest)).order_by(RecordRow.min_seconds, RecordRow.id)

    found: list[TuningRecord] = []
    if purpose in (None, Purpose.RETIME):
        stmt = fastest_of_each_trace(Purpose.RETIME)
        found += [to_record(row) for row in connection.execute(stmt.limit(k))]
    if purpose in (None, Purpose.SEARCH) and len(found) < k:
        stmt = fastest_of_each_trace(Purpose.SEARCH)
        if purpose is None:
            retimed = current(select(RecordRow.trace_hash), Purpose.RETIME)
            stmt = stmt.where(RecordRow.trace_hash.not_in(retimed))
        found += [to_record(row) for row in connection.execute(stmt.limit(k - len(found)))]
    return found


def to_workload(row: Row) -> WorkloadEntry:
    return WorkloadEntry(row.key, row.name, row.json, row.flop_count)


def to_task(t: Row, outcomes: Mapping[str, int] | None = None) -> JobTask:
    return JobTask(
        id=t.id,
        job_id=t.job_id,
        workload_key=t.key,
        target=t.target,
        status=JobStatus(t.status),
        trials_asked=t.trials_asked,
        trials_done=t.trials_done,
        best_seconds=t.best_seconds,
        created_at=as_utc(t.created_at),
        started_at=_optional_utc(t.started_at),
        finished_at=_optional_utc(t.finished_at),
        outcomes=outcomes or {},
    )


def task_select() -> Select:
    return (
        select(TaskRow.__table__, WorkloadRow.key, TargetRow.target)
        .join(WorkloadRow, TaskRow.workload_id == WorkloadRow.id)
        .join(TargetRow, TaskRow.target_id == TargetRow.id)
    )


def to_job(row: Row, tasks: Iterable[JobTask]) -> Job:
    return Job(
        id=row.id,
        status=JobStatus(row.status),
        spec=row.spec,
        created_at=as_utc(row.created_at),
        started_at=_optional_utc(row.started_at),
        finished_at=_optional_utc(row.finished_at),
        error=row.error,
        tasks=tuple(tasks),
        coordinator=row.coordinator,
        heartbeat_at=_optional_utc(row.heartbeat_at),
        token_id=row.token_id,
        priority=row.priority,
    )


def stored_hashes(
    connection: Connection, workloads: Iterable[Row], hashes: Collection[str]
) -> set[tuple[str, str]]:
    """Which of the (workload, trace hash) pairs are already stored in the current
    trace format, under any target: those traces were checked when they came in."""
    by_id = {w.id: w.key for w in workloads}
    if not by_id or not hashes:
        return set()
    stmt = (
        select(RecordRow.workload_id, RecordRow.trace_hash)
        .where(RecordRow.workload_id.in_(list(by_id)))
        .where(RecordRow.trace_hash.in_(list(hashes)))
        .where(RecordRow.trace_version == TRACE_FORMAT_VERSION)
        .distinct()
    )
    return {(by_id[row.workload_id], row.trace_hash) for row in connection.execute(stmt)}
