"""``SQLDatabase``: the tuning database in SQL, the embedded SQLite file by default or
PostgreSQL by URL.

Every lookup is by workload key and canonical target string, so records from
different targets never mix. Several processes may commit into one database at once:
a batch is checked outside the write transaction and written by one. Besides the
contract of ``db.base.Database`` it keeps what the service needs (``db.store``: jobs,
API tokens, model files, history), merges another database in, and prunes (the one,
explicit, way records are ever dropped).
"""

from __future__ import annotations

import io
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import timedelta
from importlib import metadata
from typing import IO, Any

from sqlalchemy import Connection, func, select

from db import history, migrate, model_files, sql_exchange, sql_jobs, tokens
from db.base import Database
from db.compiler_border import (
    TRACE_FORMAT_VERSION,
    ErrorKind,
    PrimFunc,
    canonical_trace,
    trace_hash,
)
from db.engine import WRITE, open_engine, shown
from db.errors import SchemaError
from db.exchange import ImportSummary
from db.jobs import STALE_AFTER
from db.model_files import ModelFile
from db.models import RecordRow, TargetRow, WorkloadRow
from db.queries import (
    RECORDS,
    ensure_targets,
    insert_ignoring_duplicates,
    insert_records,
    ranked,
    record_select,
    stored_hashes,
    to_record,
    to_workload,
    workload_rows,
)
from db.record import (
    OK_STATUS,
    STATUSES,
    Job,
    JobStatus,
    JobTask,
    Measurement,
    Purpose,
    TuningRecord,
    WorkloadEntry,
    status_of,
)
from db.store import TuningStore
from db.tokens import ApiToken, Role
from db.validate import (
    TraceChecker,
    check_fields,
    check_k,
    check_page,
    checked_rows,
    checked_workload,
    target_key,
)


def tensortune_version() -> str:
    try:
        return metadata.version("tensortune")
    except metadata.PackageNotFoundError:
        return "0+source"


class SQLDatabase(TuningStore):
    """The tuning database at ``url`` (``db.environment.default_url`` names the
    default one).

    An empty database gets the current schema; one at an older schema revision is
    refused until ``tensortune db upgrade`` has run (``create=False`` refuses an
    empty one, and a SQLite file that does not exist, too). Raises ConnectError when
    the URL cannot be opened, SchemaError for a database that is not ours.
    """

    url: str

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self._engine = open_engine(self.url, create=create)
        self._writer = self._engine.execution_options(**{WRITE: True})
        self._checker = TraceChecker()
        self._version = tensortune_version()
        try:
            self._check_schema(create)
        except BaseException:
            self._engine.dispose()
            raise

    def _check_schema(self, create: bool) -> None:
        head = migrate.head_revision()
        revision = migrate.current_revision(self._engine)
        if revision is None and create:
            revision = migrate.create(self._engine)
        if revision != head:
            raise SchemaError(
                f"the tuning database {shown(self.url)} is at schema revision {revision!r}, "
                f"this tensortune needs {head!r}; run `tensortune db upgrade --url URL` "
                "(a newer revision means a newer tensortune wrote it: upgrade tensortune)"
            )

    def close(self) -> None:
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"SQLDatabase({shown(self.url)!r})"

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engine.dialect.name

    # workloads -------------------------------------------------------------------

    def commit_workload(
        self,
        workload: PrimFunc | Mapping[str, Any],
        *,
        name: str | None = None,
        flop_count: int | None = None,
    ) -> WorkloadEntry:
        row = checked_workload(workload, name, flop_count)
        with self._writer.begin() as connection:
            insert_ignoring_duplicates(connection, WorkloadRow, [row])
        return self.workload(row["key"])

    def workloads(self, keys: Iterable[str] | None = None) -> list[WorkloadEntry]:
        stmt = select(WorkloadRow.__table__).order_by(WorkloadRow.id)
        if keys is not None:
            stmt = stmt.where(WorkloadRow.key.in_(list(keys)))
        with self._engine.connect() as connection:
            return [to_workload(row) for row in connection.execute(stmt)]

    # records ---------------------------------------------------------------------

    def commit_records(self, measurements: Iterable[Measurement], *, built: bool = False) -> int:
        batch = list(measurements)
        for i, measurement in enumerate(batch):
            check_fields(measurement, f"records[{i}]")
        with self._engine.connect() as connection:
            rows = self._checked_rows(connection, batch, built)
        with self._writer.begin() as connection:
            workloads = workload_rows(connection, {m.workload_key for m in batch})
            targets = ensure_targets(connection, {target for _, target in rows})
            stored = [
                {**row, "workload_id": workloads[m.workload_key].id, "target_id": targets[target]}
                for (row, target), m in zip(rows, batch, strict=True)
            ]
            sql_jobs.check_jobs_exist(connection, stored)
            insert_records(connection, stored)
        return len(stored)

    def _checked_rows(
        self, connection: Connection, batch: list[Measurement], built: bool
    ) -> list[tuple[dict[str, Any], str]]:
        """The batch's rows, its traces checked unless this database already holds
        them for their workload (they were checked when they came in) or they were
        ``built`` successfully."""
        workloads = workload_rows(connection, {m.workload_key for m in batch})
        hashes = {trace_hash(canonical_trace(m.trace)) for m in batch}
        for key, digest in stored_hashes(connection, workloads.values(), hashes):
            self._checker.remember(key, digest)
        by_key = {key: row.json for key, row in workloads.items()}
        return checked_rows(batch, by_key, self._checker, self._version, built=built)

    def best(
        self, workload_key: str, target: str, k: int = 1, *, purpose: Purpose | None = None
    ) -> list[TuningRecord]:
        check_k(k)
        with self._engine.connect() as connection:
            return ranked(connection, workload_key, target_key(target, "target"), k, purpose)

    def records(
        self,
        workload_key: str | None = None,
        target: str | None = None,
        *,
        job_id: int | None = None,
        purpose: Purpose | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[TuningRecord]:
        check_page(limit, before_id)
        stmt = self._where(record_select(), workload_key, target)
        if job_id is not None:
            stmt = stmt.where(RecordRow.job_id == job_id)
        if purpose is not None:
            stmt = stmt.where(RecordRow.purpose == Purpose(purpose).value)
        if before_id is not None:
            stmt = stmt.where(RecordRow.id < before_id)
        stmt = stmt.order_by(RecordRow.id.desc()).limit(limit)
        with self._engine.connect() as connection:
            return [to_record(row) for row in connection.execute(stmt)]

    def count(
        self,
        workload_key: str | None = None,
        target: str | None = None,
        error_kind: ErrorKind | None = None,
        *,
        ok: bool | None = None,
        stale: bool | None = None,
    ) -> int:
        """One COUNT query, rather than reading every record: ``best_trace`` counts at
        each build."""
        stmt = self._where(
            select(func.count(RecordRow.id)).select_from(RECORDS), workload_key, target
        )
        if error_kind is not None:
            stmt = stmt.where(RecordRow.status == status_of(error_kind))
        if ok is not None:
            stmt = stmt.where((RecordRow.status == OK_STATUS) == ok)
        if stale is not None:
            current = RecordRow.trace_version == TRACE_FORMAT_VERSION
            stmt = stmt.where(~current if stale else current)
        with self._engine.connect() as connection:
            return connection.execute(stmt).scalar_one()

    def record_counts(self) -> dict[str, int]:
        stmt = select(RecordRow.status, func.count(RecordRow.id)).group_by(RecordRow.status)
        with self._engine.connect() as connection:
            counted: dict[str, int] = {status: count for status, count in connection.execute(stmt)}
        return {status: counted.get(status, 0) for status in STATUSES}

    def targets(self, workload_key: str) -> list[str]:
        stmt = self._where(
            select(TargetRow.target).select_from(RECORDS).distinct(), workload_key, None
        )
        with self._engine.connect() as connection:
            return sorted(connection.execute(stmt).scalars())

    def measured_hashes(self, workload_key: str, target: str) -> set[str]:
        """The trace hashes of every record of the workload on the target, so a resumed
        job does not measure a schedule again."""
        distinct_hashes = select(RecordRow.trace_hash).select_from(RECORDS).distinct()
        stmt = self._where(distinct_hashes, workload_key, target)
        with self._engine.connect() as connection:
            return set(connection.execute(stmt).scalars())

    def _where(self, stmt: Any, workload_key: str | None, target: str | None) -> Any:
        """Restrict a statement over ``RECORDS`` (records joined with their workload
        and target) to a workload and a target."""
        if workload_key is not None:
            stmt = stmt.where(WorkloadRow.key == workload_key)
        if target is not None:
            stmt = stmt.where(TargetRow.target == target_key(target, "target"))
        return stmt

    # moving records between databases ----------------------------------------------

    def export_jsonl(self, out: IO[str], *, best_k: int | None = None) -> int:
        """Streams the rows in one query, rather than holding every record at once."""
        if best_k is not None:
            check_k(best_k)
        with self._engine.connect() as connection:
            return sql_exchange.export_lines(connection, out, best_k)

    def import_jsonl(self, lines: Iterable[str]) -> ImportSummary:
        with self._engine.connect() as connection:
            plan = sql_exchange.plan_import(connection, lines, self._checker)
        with self._writer.begin() as connection:
            return sql_exchange.write_import(connection, plan)

    def merge(self, other: Database) -> ImportSummary:
        """Add every workload and record of ``other`` that this database lacks."""
        buffer = io.StringIO()
        other.export_jsonl(buffer)
        return self.import_jsonl(buffer.getvalue().splitlines())

    def prune(self, keep: int) -> int:
        """Delete every record except those of the ``keep`` best traces of each workload
        on each target (failures too); returns how many were deleted."""
        check_k(keep, "keep")
        with self._writer.begin() as connection:
            return sql_exchange.prune(connection, keep)

    # jobs (``db.sql_jobs``) -----------------------------------------------------------

    def create_job(
        self,
        spec: Mapping[str, Any],
        tasks: Sequence[tuple[str, str, int]],
        *,
        token_id: int | None = None,
        priority: int = 0,
    ) -> Job:
        return sql_jobs.create_job(self._writer, spec, tasks, token_id, priority)

    def job(self, job_id: int) -> Job:
        with self._engine.connect() as connection:
            return sql_jobs.load_job(connection, job_id)

    def jobs(
        self,
        status: JobStatus | None = None,
        *,
        limit: int | None = None,
        before_id: int | None = None,
    ) -> list[Job]:
        with self._engine.connect() as connection:
            return sql_jobs.load_jobs(connection, status, limit=limit, before_id=before_id)

    def job_counts(self) -> dict[JobStatus, int]:
        with self._engine.connect() as connection:
            return sql_jobs.job_counts(connection)

    def cancel_job(self, job_id: int) -> Job:
        return sql_jobs.cancel_job(self._writer, job_id)

    def claim_job(
        self, coordinator: str = "", *, stale_after: timedelta = STALE_AFTER
    ) -> Job | None:
        return sql_jobs.claim_job(self._writer, coordinator, stale_after)

    def beat(self, job_id: int, coordinator: str) -> bool:
        return sql_jobs.beat(self._writer, job_id, coordinator)

    def update_task(
        self,
        task_id: int,
        *,
        status: JobStatus | None = None,
        trials_done: int | None = None,
        best_seconds: float | None = None,
    ) -> JobTask:
        return sql_jobs.update_task(self._writer, task_id, status, trials_done, best_seconds)

    def end_job(
        self, job_id: int, coordinator: str, status: JobStatus, *, error: str | None = None
    ) -> Job:
        return sql_jobs.end_job(self._writer, job_id, coordinator, JobStatus(status), error)

    # history (``db.history``) ----------------------------------------------------------

    def job_trials(
        self, job_id: int, *, after_id: int = 0, limit: int = 1000
    ) -> list[TuningRecord]:
        check_page(limit, None)
        with self._engine.connect() as connection:
            return history.job_trials(connection, job_id, after_id, limit)

    def best_by_job(self, workload_key: str, target: str) -> list[history.JobBest]:
        with self._engine.connect() as connection:
            return history.best_by_job(connection, workload_key, target_key(target, "target"))

    def search_seconds(
        self, workload_key: str, target: str, trace_hashes: Collection[str]
    ) -> dict[str, float]:
        with self._engine.connect() as connection:
            return history.search_seconds(
                connection, workload_key, target_key(target, "target"), trace_hashes
            )

    # model files (``db.model_files``) --------------------------------------------------

    def commit_model_file(
        self,
        name: str,
        content: bytes | IO[bytes],
        shapes: Mapping[str, Sequence[int]],
        *,
        token_id: int | None = None,
    ) -> tuple[ModelFile, bool]:
        return model_files.commit_model_file(self._writer, name, content, shapes, token_id)

    def model_file(self, model_id: int) -> ModelFile:
        return model_files.model_file(self._engine, model_id)

    def write_model_content(self, model_id: int, target: IO[bytes]) -> None:
        model_files.write_model_content(self._engine, model_id, target)

    # API tokens (``db.tokens``) ------------------------------------------------------

    def create_token(
        self, name: str, role: Role, *, quota: int | None = None, upload_limit: int | None = None
    ) -> tuple[ApiToken, str]:
        return tokens.create_token(self._writer, name, Role(role), quota, upload_limit)

    def ensure_token(self, name: str, role: Role, secret: str) -> tuple[ApiToken, bool]:
        return tokens.ensure_token(self._writer, name, Role(role), secret)

    def tokens(self) -> list[ApiToken]:
        return tokens.tokens(self._engine)

    def revoke_token(self, token_id: int) -> ApiToken:
        return tokens.revoke_token(self._writer, token_id)

    def token_for_secret(self, secret: str) -> ApiToken | None:
        return tokens.token_for_secret(self._engine, secret)
