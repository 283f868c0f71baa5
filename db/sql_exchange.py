"""``SQLDatabase``'s side of the JSON lines stream (``db.exchange``), and pruning.

Export streams the rows in id order; import plans against the stored workloads and
record fingerprints, then one transaction writes the plan, less what other imports
stored meanwhile (imports take turns there: SQLite's write lock, an advisory lock on
PostgreSQL; four concurrent imports of one stream stored it four times when the plan
was all there was). "The best ``k``" of a
workload on a target are the records of the ``k`` traces ``best`` ranks first: a
re-timed trace keeps its search measurement and its re-timings together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import IO

from sqlalchemy import Connection, delete, select, text

from db import exchange
from db.compiler_border import TRACE_FORMAT_VERSION
from db.models import RecordRow, TargetRow, WorkloadRow
from db.queries import (
    RECORDS,
    as_utc,
    ensure_targets,
    insert_ignoring_duplicates,
    insert_records,
    ranked,
    record_select,
    to_record,
    to_workload,
    workload_rows,
)
from db.record import OK_STATUS
from db.validate import TraceChecker

# The advisory lock imports take turns under on PostgreSQL; it spells "tensortune import".
IMPORT_LOCK = 0x7474_696D_706F


def export_lines(connection: Connection, out: IO[str], best_k: int | None) -> int:
    """Write the stream to ``out``; with ``best_k`` only the records of the best
    ``best_k`` traces of each workload on each target. Returns the number of records."""
    workloads = connection.execute(select(WorkloadRow.__table__).order_by(WorkloadRow.id))
    stmt = record_select().add_columns(TargetRow.host_kind)
    if best_k is not None:
        stmt = stmt.where(RecordRow.id.in_(best_ids(connection, best_k)))
    records = connection.execute(stmt.order_by(RecordRow.id))
    return exchange.write_stream(
        out,
        (to_workload(row) for row in workloads.all()),
        ((to_record(row), row.host_kind) for row in records),
    )


def best_ids(connection: Connection, k: int) -> list[int]:
    """The ids of the current-format successes of the ``k`` best traces of each
    workload on each target."""
    pairs = select(WorkloadRow.key, TargetRow.target).select_from(RECORDS).distinct()
    ids: list[int] = []
    for key, target in connection.execute(pairs).all():
        hashes = [r.trace_hash for r in ranked(connection, key, target, k, None)]
        stmt = (
            select(RecordRow.id)
            .select_from(RECORDS)
            .where(WorkloadRow.key == key)
            .where(TargetRow.target == target)
            .where(RecordRow.trace_hash.in_(hashes))
            .where(RecordRow.status == OK_STATUS)
            .where(RecordRow.trace_version == TRACE_FORMAT_VERSION)
        )
        ids += connection.execute(stmt).scalars()
    return ids


def prune(connection: Connection, keep: int) -> int:
    """Delete all but the records of the ``keep`` best traces of each workload on each
    target."""
    kept = best_ids(connection, keep)
    result = connection.execute(delete(RecordRow).where(RecordRow.id.not_in(kept)))
    return result.rowcount


def plan_import(
    connection: Connection, lines: Iterable[str], checker: TraceChecker
) -> exchange.ImportPlan:
    lines = exchange.text_lines(lines)
    stored = workload_rows(connection, exchange.workload_keys_named(lines))
    stored_json = {key: row.json for key, row in stored.items()}
    return exchange.plan_import(lines, stored_json, _fingerprints(connection, stored), checker)


def write_import(connection: Connection, plan: exchange.ImportPlan) -> exchange.ImportSummary:
    """Write the plan in the caller's write transaction, less the records that match
    what was stored since it was made."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": IMPORT_LOCK})
    insert_ignoring_duplicates(connection, WorkloadRow, plan.workloads)
    workloads = workload_rows(connection, {r.workload_key for r in plan.records})
    meanwhile = _fingerprints(connection, workloads) - plan.stored
    records = []
    for record in plan.records:
        if meanwhile[record.fingerprint] > 0:
            meanwhile[record.fingerprint] -= 1
        else:
            records.append(record)
    host_kinds = {r.target: r.host_kind for r in records}
    targets = ensure_targets(connection, set(host_kinds), host_kinds)
    rows = [
        {**r.row, "workload_id": workloads[r.workload_key].id, "target_id": targets[r.target]}
        for r in records
    ]
    insert_records(connection, rows)
    skipped = plan.skipped + len(plan.records) - len(records)
    return exchange.ImportSummary(len(plan.workloads), len(rows), skipped)


def _fingerprints(connection: Connection, stored: dict) -> Counter[tuple]:
    """How many records of the stored workloads have each fingerprint."""
    if not stored:
        return Counter()
    stmt = (
        select(
            WorkloadRow.key,
            TargetRow.target,
            RecordRow.trace_hash,
            RecordRow.trace_version,
            RecordRow.tensortune_version,
            RecordRow.purpose,
            RecordRow.status,
            RecordRow.run_times,
            RecordRow.error,
            RecordRow.worker_host,
            RecordRow.created_at,
        )
        .select_from(RECORDS)
        .where(RecordRow.workload_id.in_([w.id for w in stored.values()]))
    )
    return Counter(
        exchange.fingerprint(
            row.key, row.target, {**row._mapping, "created_at": as_utc(row.created_at)}
        )
        for row in connection.execute(stmt)
    )
