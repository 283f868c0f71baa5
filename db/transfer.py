"""Records between databases as JSON lines, and pruning.

The stream is a header line, then one line per workload, then one per record:

    {"format": "tensortune.records", "version": 1}
    {"kind": "workload", "key": "...", "name": "...", "flop_count": 123, "json": "..."}
    {"kind": "record", "workload": "<key>", "target": "llvm -mcpu=znver3", ...}

Version 2 added a record's re-timing (``retime_times``, ``retimed_at``, both null
when it has none); a version 1 stream still imports, its records not re-timed.
A record keeps the trace format and tensortune versions it was written with, so an
old record moved into a new database is still recognised as stale. Importing checks
every line as a commit does (a current-format trace must replay on its workload, a
workload's key must be the hash of its JSON) before one transaction writes them, and
skips records that are already there, so merging twice adds nothing the second time.
"""

from __future__ import annotations

import io
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from sqlalchemy import Connection, delete, func, select

from compiler.errors import ErrorKind
from compiler.schedule.trace import TRACE_FORMAT_VERSION
from compiler.workload import WorkloadError
from compiler.workload_key import workload_from_json, workload_key
from db.errors import RecordError
from db.models import RecordRow, TargetRow, WorkloadRow
from db.queries import (
    RECORDS,
    as_utc,
    best_order,
    ensure_targets,
    insert_ignoring_duplicates,
    insert_records,
    now,
    target_key,
    workload_rows,
)
from db.records import OK_STATUS, status_of, trace_hash
from db.validate import TraceChecker, check_outcome, check_text, parse_status

FORMAT = "tensortune.records"
VERSION = 2
HEADER = {"format": FORMAT, "version": VERSION}
READABLE_VERSIONS = (1, 2)
RECORD_FIELDS_V1 = (
    "kind",
    "workload",
    "target",
    "host_kind",
    "trace",
    "trace_hash",
    "trace_version",
    "tensortune_version",
    "status",
    "run_times",
    "error",
    "worker_host",
    "created_at",
)
RETIME_FIELDS = ("retime_times", "retimed_at")
RECORD_FIELDS = RECORD_FIELDS_V1 + RETIME_FIELDS
WORKLOAD_FIELDS = ("kind", "key", "name", "flop_count", "json")


@dataclass(frozen=True)
class ImportSummary:
    workloads_added: int
    records_added: int
    records_skipped: int


# export ------------------------------------------------------------------------------


def export_lines(connection: Connection, out: IO[str], best_k: int | None) -> int:
    """Write the stream to ``out``; with ``best_k`` only the fastest current-format
    successes of each workload on each target. Returns the number of records."""
    _write(out, HEADER)
    for row in connection.execute(select(WorkloadRow.__table__).order_by(WorkloadRow.id)):
        _write(
            out,
            {
                "kind": "workload",
                "key": row.key,
                "name": row.name,
                "flop_count": row.flop_count,
                "json": row.json,
            },
        )
    stmt = select(
        RecordRow.__table__, WorkloadRow.key, TargetRow.target, TargetRow.host_kind
    ).select_from(RECORDS)
    if best_k is not None:
        stmt = stmt.where(RecordRow.id.in_(_best_ids(best_k)))
    count = 0
    for row in connection.execute(stmt.order_by(RecordRow.id)):
        _write(out, _record_line(row))
        count += 1
    return count


def export_to_list(connection: Connection) -> list[str]:
    buffer = io.StringIO()
    export_lines(connection, buffer, None)
    return buffer.getvalue().splitlines()


def _write(out: IO[str], document: dict[str, Any]) -> None:
    out.write(json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n")


def _record_line(row: Any) -> dict[str, Any]:
    return {
        "kind": "record",
        "workload": row.key,
        "target": row.target,
        "host_kind": row.host_kind,
        "trace": row.trace,
        "trace_hash": row.trace_hash,
        "trace_version": row.trace_version,
        "tensortune_version": row.tensortune_version,
        "status": row.status,
        "run_times": row.run_times,
        "error": row.error,
        "worker_host": row.worker_host,
        "created_at": as_utc(row.created_at).isoformat(),
        "retime_times": row.retime_times,
        "retimed_at": None if row.retimed_at is None else as_utc(row.retimed_at).isoformat(),
    }


def _best_ids(k: int) -> Any:
    """The ids of the ``k`` best current-format successes per workload and target, in
    the order of ``Database.best``."""
    rank = (
        func.row_number()
        .over(
            partition_by=(RecordRow.workload_id, RecordRow.target_id),
            order_by=best_order(),
        )
        .label("rank")
    )
    ranked = (
        select(RecordRow.id, rank)
        .where(RecordRow.status == OK_STATUS)
        .where(RecordRow.trace_version == TRACE_FORMAT_VERSION)
        .subquery()
    )
    return select(ranked.c.id).where(ranked.c.rank <= k)


def prune(connection: Connection, keep: int) -> int:
    """Delete all but the ``keep`` best records of each workload on each target."""
    result = connection.execute(delete(RecordRow).where(RecordRow.id.not_in(_best_ids(keep))))
    return result.rowcount


# import ------------------------------------------------------------------------------


@dataclass
class ImportPlan:
    """Checked lines, ready to write: new workloads, and records with their workload
    key and canonical target."""

    workloads: list[dict[str, Any]] = field(default_factory=list)
    records: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)
    host_kinds: dict[str, str] = field(default_factory=dict)
    skipped: int = 0


def plan_import(connection: Connection, lines: Iterable[str], checker: TraceChecker) -> ImportPlan:
    documents = _parse_lines(lines)
    checked = {}
    for number, doc in documents:
        if doc["kind"] == "workload":
            workload = _checked_workload(doc, f"line {number}")
            checked[workload["key"]] = workload
    named = {d["workload"] for _, d in documents if isinstance(d.get("workload"), str)}
    stored = workload_rows(connection, set(checked) | named)
    plan = ImportPlan(workloads=[w for key, w in checked.items() if key not in stored])
    seen = _existing_fingerprints(connection, stored)
    for number, doc in documents:
        where = f"line {number}"
        if doc["kind"] == "workload":
            continue
        row, key, target = _checked_record(doc, where)
        if key in stored:
            workload_json = stored[key].json
        elif key in checked:
            workload_json = checked[key]["json"]
        else:
            raise RecordError(
                f"{where}: unknown workload {key!r}; neither the stream nor the database has it"
            )
        if row["trace_version"] == TRACE_FORMAT_VERSION:
            checker.check(key, workload_json, row["trace"], row["trace_hash"], where)
        fingerprint = _fingerprint(key, target, row)
        if fingerprint in seen:
            plan.skipped += 1
            continue
        seen.add(fingerprint)
        plan.host_kinds.setdefault(target, doc["host_kind"])
        plan.records.append((row, key, target))
    return plan


def write_import(connection: Connection, plan: ImportPlan) -> ImportSummary:
    insert_ignoring_duplicates(connection, WorkloadRow, plan.workloads)
    keys = {key for _, key, _ in plan.records}
    workloads = workload_rows(connection, keys)
    targets = ensure_targets(connection, {t for _, _, t in plan.records}, plan.host_kinds)
    rows = []
    for row, key, target in plan.records:
        rows.append({**row, "workload_id": workloads[key].id, "target_id": targets[target]})
    insert_records(connection, rows)
    return ImportSummary(len(plan.workloads), len(rows), plan.skipped)


def _parse_lines(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    documents = []
    version = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordError(f"line {number}: not JSON: {err}") from None
        if version is None:
            version = _header_version(doc, number, line)
            continue
        documents.append((number, _checked_kind(doc, version, f"line {number}")))
    if version is None:
        raise RecordError(f"the stream is empty; it starts with {json.dumps(HEADER)}")
    return documents


def _header_version(doc: Any, number: int, line: str) -> int:
    if (
        not isinstance(doc, dict)
        or set(doc) != set(HEADER)
        or doc["format"] != FORMAT
        or doc["version"] not in READABLE_VERSIONS
    ):
        raise RecordError(
            f"line {number}: expected the header {json.dumps(HEADER)} (versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} are read), got {line[:80]!r}"
        )
    return doc["version"]


def _checked_kind(doc: Any, version: int, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("kind") not in ("workload", "record"):
        raise RecordError(f"{where}: expected an object with kind 'workload' or 'record'")
    if doc["kind"] == "workload":
        expected = WORKLOAD_FIELDS
    else:
        expected = RECORD_FIELDS if version >= 2 else RECORD_FIELDS_V1
    if set(doc) != set(expected):
        missing = sorted(set(expected) - set(doc))
        extra = sorted(set(doc) - set(expected))
        raise RecordError(f"{where}: fields missing {missing}, unexpected {extra}")
    if doc["kind"] == "record" and version < 2:
        doc = {**doc, "retime_times": None, "retimed_at": None}
    return doc


def _checked_workload(doc: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        func_ = workload_from_json(check_text(doc["json"], f"{where}.json", 10**8))
    except WorkloadError as err:
        raise RecordError(f"{where}.json: {err}") from None
    key = workload_key(func_)
    if doc["key"] != key:
        raise RecordError(f"{where}: key {doc['key']!r} is not the key of its JSON ({key})")
    flops = doc["flop_count"]
    if flops is not None and (type(flops) is not int or flops < 0):
        raise RecordError(f"{where}.flop_count: must be a non-negative integer or null")
    return {
        "key": key,
        "name": check_text(doc["name"], f"{where}.name", 200),
        "json": doc["json"],
        "flop_count": flops,
        "created_at": now(),
    }


def _checked_record(doc: dict[str, Any], where: str) -> tuple[dict[str, Any], str, str]:
    key = check_text(doc["workload"], f"{where}.workload", 64)
    target = target_key(check_text(doc["target"], f"{where}.target", 500), f"{where}.target")
    check_text(doc["host_kind"], f"{where}.host_kind", 200)
    error_kind = parse_status(doc["status"], f"{where}.status")
    error_kind, times = check_outcome(error_kind, doc["run_times"], doc["error"], where)
    trace = check_text(doc["trace"], f"{where}.trace", 10**8)
    if doc["trace_hash"] != trace_hash(trace):
        raise RecordError(f"{where}: trace_hash does not match the trace")
    version = doc["trace_version"]
    if type(version) is not int or version < 0:
        raise RecordError(f"{where}.trace_version: must be a non-negative integer")
    row = {
        "trace": trace,
        "trace_hash": doc["trace_hash"],
        "trace_version": version,
        "tensortune_version": check_text(
            doc["tensortune_version"], f"{where}.tensortune_version", 32
        ),
        "status": status_of(error_kind),
        "run_times": list(times),
        "mean_seconds": statistics.fmean(times) if times else None,
        "error": doc["error"],
        "worker_host": check_text(doc["worker_host"], f"{where}.worker_host", 200),
        "job_id": None,
        "created_at": _timestamp(doc["created_at"], f"{where}.created_at"),
        **_checked_retiming(doc, error_kind, where),
    }
    return row, key, target


def _checked_retiming(
    doc: dict[str, Any], error_kind: ErrorKind | None, where: str
) -> dict[str, Any]:
    """The re-timing columns of a record line: all null, or the times of a success and
    when they were taken."""
    times, stamp = doc["retime_times"], doc["retimed_at"]
    if times is None and stamp is None:
        return {"retime_times": None, "retimed_seconds": None, "retimed_at": None}
    if times is None or stamp is None or error_kind is not None:
        raise RecordError(f"{where}: retime_times and retimed_at go together, on an ok record only")
    _, checked = check_outcome(None, times, None, f"{where}.retime_times")
    return {
        "retime_times": list(checked),
        "retimed_seconds": statistics.median(checked),
        "retimed_at": _timestamp(stamp, f"{where}.retimed_at"),
    }


def _timestamp(value: Any, where: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(check_text(value, where, 64))
    except ValueError:
        raise RecordError(f"{where}: not an ISO 8601 time: {value!r}") from None
    if stamp.tzinfo is None:
        raise RecordError(f"{where}: the time needs its zone (UTC), got {value!r}")
    return stamp.astimezone(UTC)


def _existing_fingerprints(connection: Connection, stored: dict[str, Any]) -> set[tuple]:
    if not stored:
        return set()
    stmt = (
        select(
            WorkloadRow.key,
            TargetRow.target,
            RecordRow.trace_hash,
            RecordRow.status,
            RecordRow.worker_host,
            RecordRow.created_at,
        )
        .select_from(RECORDS)
        .where(RecordRow.workload_id.in_([w.id for w in stored.values()]))
    )
    return {
        (row.key, row.target, row.trace_hash, row.status, row.worker_host, as_utc(row.created_at))
        for row in connection.execute(stmt)
    }


def _fingerprint(key: str, target: str, row: dict[str, Any]) -> tuple:
    return (
        key,
        target,
        row["trace_hash"],
        row["status"],
        row["worker_host"],
        row["created_at"],
    )
