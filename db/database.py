"""``Database``: the tuning records of every workload on every target, behind a small API.

Records are append-only: a measurement, successful or not, is committed once and
never edited (``prune`` is the one, explicit, way to drop any). Every lookup is by
workload key and canonical target string, so records from different targets never
mix. A batch of records is checked whole (workload known, run times real, trace
replays on its workload) before one transaction writes it, so a bad record leaves
the database as it was.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from typing import IO, Any

from sqlalchemy import Connection, String, func, literal, select, update
from sqlalchemy.exc import DBAPIError

from compiler.errors import ErrorKind
from compiler.ir.function import PrimFunc
from compiler.schedule.trace import TRACE_FORMAT_VERSION, Trace
from compiler.workload import WorkloadError, normalize_spec, workload_from_spec
from compiler.workload_key import workload_key, workload_to_json
from db import jobs, migrate, transfer
from db.engine import WRITE, default_url, open_engine, shown
from db.errors import RecordError, SchemaError
from db.models import RecordRow, TargetRow, WorkloadRow
from db.queries import (
    RECORDS,
    ensure_targets,
    insert_ignoring_duplicates,
    insert_records,
    now,
    record_select,
    stored_hashes,
    target_key,
    to_record,
    to_workload,
    workload_rows,
)
from db.records import (
    OK_STATUS,
    Job,
    JobStatus,
    JobTask,
    Measurement,
    TuningRecord,
    WorkloadEntry,
    canonical_trace,
    status_of,
    trace_hash,
)
from db.validate import TraceChecker, check_fields, check_outcome, check_text

logger = logging.getLogger(__name__)

NAME_LIMIT = 200
HOST_LIMIT = 200
MAX_PAGE = 10_000


def tensortune_version() -> str:
    try:
        return metadata.version("tensortune")
    except metadata.PackageNotFoundError:
        return "0+source"


class Database:
    """The tuning database at ``url`` (default: ``$TENSORTUNE_DB_URL``, else the
    embedded SQLite file of ``db.engine.default_sqlite_path``).

    An empty database gets the current schema; one at an older schema revision is
    refused until ``tensortune db upgrade`` has run (``create=False`` refuses an
    empty one too). Raises ConnectError when the URL cannot be opened.
    """

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        self.url = url or default_url()
        self._engine = open_engine(self.url)
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
        if revision is None and create and not migrate.has_tables(self._engine):
            try:
                migrate.upgrade(self._writer)
            except DBAPIError:
                # another process created the schema at the same moment: fine if it is ours
                revision = migrate.current_revision(self._engine)
                if revision != head:
                    raise
            return
        if revision != head:
            raise SchemaError(
                f"the tuning database {shown(self.url)} is at schema revision {revision!r}, "
                f"this tensortune needs {head!r}; run `tensortune db upgrade --url URL` "
                "(a newer revision means a newer tensortune wrote it: upgrade tensortune)"
            )

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({shown(self.url)!r})"

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
        """Store a workload (a PrimFunc or an operator spec such as ``{"op": "matmul",
        "args": {...}}``) and return its entry; committing it again changes nothing."""
        func, default_name = _as_func(workload)
        name = check_text(name if name is not None else default_name, "name", NAME_LIMIT)
        if flop_count is not None and (type(flop_count) is not int or flop_count < 0):
            raise RecordError(f"flop_count: must be a non-negative integer, got {flop_count!r}")
        key = workload_key(func)
        row = {
            "key": key,
            "name": name,
            "json": workload_to_json(func),
            "flop_count": flop_count,
            "created_at": now(),
        }
        with self._writer.begin() as connection:
            insert_ignoring_duplicates(connection, WorkloadRow, [row])
        return self.workload(key)

    def workload(self, key: str) -> WorkloadEntry:
        with self._engine.connect() as connection:
            row = connection.execute(
                select(WorkloadRow.__table__).where(WorkloadRow.key == key)
            ).first()
        if row is None:
            raise RecordError(f"no workload with key {key!r}; commit it with commit_workload")
        return to_workload(row)

    def workloads(self) -> list[WorkloadEntry]:
        with self._engine.connect() as connection:
            rows = connection.execute(select(WorkloadRow.__table__).order_by(WorkloadRow.id))
            return [to_workload(row) for row in rows]

    # records ---------------------------------------------------------------------

    def commit_records(self, measurements: Iterable[Measurement]) -> int:
        """Store every measurement in one transaction and return how many; raises
        RecordError naming the first bad one (``records[i]``), storing none."""
        batch = list(measurements)
        for i, measurement in enumerate(batch):
            check_fields(measurement, f"records[{i}]")
        with self._engine.connect() as connection:
            rows, targets = self._checked_rows(connection, batch)
        with self._writer.begin() as connection:
            ids = ensure_targets(connection, set(targets))
            for row, target in zip(rows, targets, strict=True):
                row["target_id"] = ids[target]
            jobs.check_jobs_exist(connection, rows)
            insert_records(connection, rows)
        return len(rows)

    def _checked_rows(
        self, connection: Connection, batch: list[Measurement]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        workloads = workload_rows(connection, {m.workload_key for m in batch})
        hashes = {trace_hash(canonical_trace(m.trace)) for m in batch}
        stored = stored_hashes(connection, workloads.values(), hashes)
        created = now()
        rows, targets = [], []
        for i, m in enumerate(batch):
            where = f"records[{i}]"
            workload = workloads.get(m.workload_key)
            if workload is None:
                raise RecordError(
                    f"{where}: unknown workload {m.workload_key!r}; commit it first with "
                    "Database.commit_workload"
                )
            error_kind, times = check_outcome(m.error_kind, m.run_times, m.error, where)
            targets.append(target_key(m.target, where))
            trace = canonical_trace(m.trace)
            digest = trace_hash(trace)
            if (m.workload_key, digest) in stored:
                self._checker.remember(m.workload_key, digest)
            self._checker.check(m.workload_key, workload.json, trace, digest, where)
            rows.append(
                {
                    "workload_id": workload.id,
                    "trace": trace,
                    "trace_hash": digest,
                    "trace_version": TRACE_FORMAT_VERSION,
                    "tensortune_version": self._version,
                    "status": status_of(error_kind),
                    "run_times": list(times),
                    "mean_seconds": statistics.fmean(times) if times else None,
                    "error": m.error,
                    "worker_host": check_text(m.worker_host, f"{where}.worker_host", HOST_LIMIT),
                    "job_id": m.job_id,
                    "created_at": created,
                }
            )
        return rows, targets

    def best(self, workload_key: str, target: str, k: int = 1) -> list[TuningRecord]:
        """The ``k`` best successful records of the current trace format for this
        workload on this target: the re-timed ones first, fastest re-timing first,
        then the others by their search mean (ties: the older first). A tuning run
        re-times its fastest schedules, so its lucky measurements rank behind them."""
        _check_k(k)
        retimed = self._ranked(workload_key, target, k, retimed=True)
        if len(retimed) == k:
            return retimed
        return retimed + self._ranked(workload_key, target, k - len(retimed), retimed=False)

    def best_measured(self, workload_key: str, target: str, k: int = 1) -> list[TuningRecord]:
        """The ``k`` fastest successful current-format records by their search mean,
        re-timed or not: the candidates a tuning run re-times."""
        _check_k(k)
        return self._ranked(workload_key, target, k, retimed=None)

    def _ranked(
        self, workload_key: str, target: str, k: int, *, retimed: bool | None
    ) -> list[TuningRecord]:
        """One indexed scan: the re-timed records by re-timing (``retimed=True``), the
        others by search mean (False), or all by search mean (None)."""
        target = target_key(target, "target")
        workload_id = select(WorkloadRow.id).where(WorkloadRow.key == workload_key)
        target_id = select(TargetRow.id).where(TargetRow.target == target)
        stmt = (
            select(
                RecordRow.__table__,
                literal(workload_key, String).label("key"),
                literal(target, String).label("target"),
            )
            .where(RecordRow.workload_id == workload_id.scalar_subquery())
            .where(RecordRow.target_id == target_id.scalar_subquery())
            .where(RecordRow.status == OK_STATUS)
            .where(RecordRow.trace_version == TRACE_FORMAT_VERSION)
            .limit(k)
        )
        if retimed:
            stmt = stmt.where(RecordRow.retimed_seconds.is_not(None)).order_by(
                RecordRow.retimed_seconds, RecordRow.id
            )
        else:
            if retimed is False:
                stmt = stmt.where(RecordRow.retimed_seconds.is_(None))
            stmt = stmt.order_by(RecordRow.mean_seconds, RecordRow.id)
        with self._engine.connect() as connection:
            return [to_record(row) for row in connection.execute(stmt)]

    def commit_retiming(self, record_id: int, run_times: Sequence[float]) -> TuningRecord:
        """Give a successful record its careful re-timing (``run_times`` in seconds; the
        median ranks it in ``best``), replacing an earlier one; returns the record.
        Raises RecordError for an unknown or failed record or bad times, changing
        nothing. This is the one change a stored record ever gets."""
        if type(record_id) is not int:
            raise RecordError(f"record_id: must be an integer, got {record_id!r}")
        _, times = check_outcome(None, run_times, None, f"record {record_id}")
        with self._writer.begin() as connection:
            row = connection.execute(
                select(RecordRow.status).where(RecordRow.id == record_id)
            ).first()
            if row is None:
                raise RecordError(f"no record with id {record_id!r}")
            if row.status != OK_STATUS:
                raise RecordError(
                    f"record {record_id} is a failure ({row.status}); only a success is re-timed"
                )
            connection.execute(
                update(RecordRow)
                .where(RecordRow.id == record_id)
                .values(
                    retime_times=list(times),
                    retimed_seconds=statistics.median(times),
                    retimed_at=now(),
                )
            )
            stored = connection.execute(record_select().where(RecordRow.id == record_id)).one()
        return to_record(stored)

    def best_trace(self, workload_key: str, target: str) -> str | None:
        """The best trace's JSON, for ``compiler.build(..., database=db)``. Logs a
        warning when faster records exist that were written in an older trace format:
        they are stale and are not applied."""
        best = self.best(workload_key, target)
        self._warn_stale(workload_key, target, best[0].seconds if best else None)
        return best[0].trace if best else None

    def _warn_stale(self, workload_key: str, target: str, best_seconds: float | None) -> None:
        stmt = (
            self._where(select(func.count(RecordRow.id)).select_from(RECORDS), workload_key, target)
            .where(RecordRow.status == OK_STATUS)
            .where(RecordRow.trace_version != TRACE_FORMAT_VERSION)
        )
        if best_seconds is not None:
            stmt = stmt.where(RecordRow.mean_seconds < best_seconds)
        with self._engine.connect() as connection:
            stale = connection.execute(stmt).scalar_one()
        if stale:
            logger.warning(
                "workload %s on %s: %d faster records are stale (another trace format than "
                "version %d); they are not applied: tune again to replace them",
                workload_key[:12],
                target,
                stale,
                TRACE_FORMAT_VERSION,
            )

    def records(
        self,
        workload_key: str | None = None,
        target: str | None = None,
        *,
        job_id: int | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[TuningRecord]:
        """Records newest first, of a workload (on a target) or of a job. Page by
        passing the last record's ``id`` as ``before_id``."""
        if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
            raise RecordError(f"limit: must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
        stmt = self._where(record_select(), workload_key, target)
        if job_id is not None:
            stmt = stmt.where(RecordRow.job_id == job_id)
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
    ) -> int:
        """How many records there are (of the workload, on the target, that failed with
        ``error_kind``: each filter applies when given)."""
        stmt = self._where(
            select(func.count(RecordRow.id)).select_from(RECORDS), workload_key, target
        )
        if error_kind is not None:
            stmt = stmt.where(RecordRow.status == ErrorKind(error_kind).value)
        with self._engine.connect() as connection:
            return connection.execute(stmt).scalar_one()

    def is_measured(
        self, workload_key: str, target: str, trace: Trace | Mapping[str, Any] | str
    ) -> bool:
        """Whether this schedule has a record (of any status) for the workload on the
        target, so a resumed job does not measure it again."""
        return trace_hash(canonical_trace(trace)) in self.measured_hashes(workload_key, target)

    def measured_hashes(self, workload_key: str, target: str) -> set[str]:
        """The trace hashes of every record of the workload on the target."""
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
        """Write every workload and record (or only the ``best_k`` fastest successes
        of each workload on each target) as JSON lines; returns the records written."""
        with self._engine.connect() as connection:
            return transfer.export_lines(connection, out, best_k)

    def import_jsonl(self, lines: Iterable[str]) -> transfer.ImportSummary:
        """Add the workloads and records of an ``export_jsonl`` stream in one transaction,
        keeping their versions; records already here are skipped. Raises RecordError
        naming the first bad line, storing nothing."""
        with self._engine.connect() as connection:
            plan = transfer.plan_import(connection, lines, self._checker)
        with self._writer.begin() as connection:
            return transfer.write_import(connection, plan)

    def merge(self, other: Database) -> transfer.ImportSummary:
        """Add every workload and record of ``other`` that this database lacks."""
        with other._engine.connect() as source:
            lines = transfer.export_to_list(source)
        return self.import_jsonl(lines)

    def prune(self, keep: int) -> int:
        """Delete every record except the ``keep`` fastest successes of each workload
        on each target (failures too); returns how many were deleted."""
        if type(keep) is not int or keep < 1:
            raise RecordError(f"keep: must be a positive integer, got {keep!r}")
        with self._writer.begin() as connection:
            return transfer.prune(connection, keep)

    # jobs --------------------------------------------------------------------------

    def create_job(self, spec: Mapping[str, Any], tasks: Sequence[tuple[str, str, int]]) -> Job:
        """A queued job with its ``spec`` (as submitted, JSON) and one task per
        (workload key, target, trials asked)."""
        return jobs.create_job(self._writer, spec, tasks)

    def job(self, job_id: int) -> Job:
        with self._engine.connect() as connection:
            return jobs.load_job(connection, job_id)

    def jobs(self, status: JobStatus | None = None) -> list[Job]:
        with self._engine.connect() as connection:
            return jobs.load_jobs(connection, status)

    def set_job_status(self, job_id: int, status: JobStatus, *, error: str | None = None) -> Job:
        """Move a job to ``status``; running stamps its start, a final status its end."""
        return jobs.set_job_status(self._writer, job_id, JobStatus(status), error)

    def update_task(
        self,
        task_id: int,
        *,
        status: JobStatus | None = None,
        trials_done: int | None = None,
        best_seconds: float | None = None,
    ) -> JobTask:
        return jobs.update_task(self._writer, task_id, status, trials_done, best_seconds)


def _check_k(k: Any) -> None:
    if type(k) is not int or k < 1:
        raise RecordError(f"k: must be a positive integer, got {k!r}")


def _as_func(workload: Any) -> tuple[PrimFunc, str]:
    if isinstance(workload, PrimFunc):
        return workload, str(workload.attrs.get("global_symbol", "main"))
    if isinstance(workload, Mapping):
        try:
            spec = normalize_spec(workload)
            func = workload_from_spec(spec)
        except WorkloadError as err:
            raise RecordError(f"workload spec: {err}") from None
        given = workload.get("args", {})
        args = ", ".join(f"{k}={json.dumps(given[k])}" for k in spec["args"] if k in given)
        return func, f"{spec['op']}({args})"[:NAME_LIMIT]
    raise RecordError(
        f"workload: expected a PrimFunc or an operator spec dict, got {type(workload).__name__}"
    )
