"""Records between databases as JSON lines: the stream format, whatever stores it.

The stream is a header line, then one line per workload, then one per record:

    {"format": "tensortune.records", "version": 4}
    {"kind": "workload", "key": "...", "name": "...", "flop_count": 123, "json": "..."}
    {"kind": "record", "workload": "<key>", "target": "llvm -mcpu=znver3 ...", ...}
    {"kind": "end", "workloads": 1, "records": 1}

Version 4 ends with a trailer that counts the lines before it, so a stream cut short
(at a line end or not) is refused whole instead of half imported; a version 4 stream
without its trailer, with lines after it or with other counts is refused. Streams of
versions 1 to 3 have no trailer and are read as they are. Version 3 gives each record
its ``purpose`` (a search measurement or a re-timing).
Version 2 carried a re-timing inside its record (``retime_times``, ``retimed_at``):
such a line reads as the search record plus a re-timing record. Version 1 had no
re-timings. A record keeps the trace format and tensortune versions it was written
with, so an old record moved into a new database is still recognised as stale.
Importing checks every line as a commit does (a current-format trace must replay on
its workload, a workload's key must be the hash of its JSON) before anything is
written, and skips records that are already there, so importing twice adds nothing
the second time. Records are told apart by everything they measured (the
``fingerprint``), counted as a multiset: two equal measurements in one stream are two
records, and importing them again finds both there.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from db.compiler_border import (
    TRACE_FORMAT_VERSION,
    ErrorKind,
    WorkloadError,
    trace_hash,
    workload_from_json,
    workload_key,
)
from db.errors import RecordError
from db.record import Purpose, TuningRecord, WorkloadEntry, status_of
from db.validate import (
    TraceChecker,
    check_flop_count,
    check_outcome,
    check_text,
    outcome_columns,
    parse_status,
    target_key,
)

FORMAT = "tensortune.records"
VERSION = 4
HEADER = {"format": FORMAT, "version": VERSION}
READABLE_VERSIONS = (1, 2, 3, 4)
TRAILED_VERSIONS = (4,)
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
RECORD_FIELDS = {
    1: RECORD_FIELDS_V1,
    2: (*RECORD_FIELDS_V1, "retime_times", "retimed_at"),
    3: (*RECORD_FIELDS_V1, "purpose"),
    4: (*RECORD_FIELDS_V1, "purpose"),
}
WORKLOAD_FIELDS = ("kind", "key", "name", "flop_count", "json")
TRAILER_FIELDS = ("kind", "workloads", "records")
PURPOSE_NAMES = ", ".join(p.value for p in Purpose)


@dataclass(frozen=True)
class ImportSummary:
    workloads_added: int
    records_added: int
    records_skipped: int


@dataclass(frozen=True)
class ImportedRecord:
    """A checked record line: its columns, workload key, canonical target and the
    target's host description."""

    row: dict[str, Any]
    workload_key: str
    target: str
    host_kind: str

    @property
    def fingerprint(self) -> tuple:
        """What makes two records the same measurement, whichever database holds them."""
        return fingerprint(self.workload_key, self.target, self.row)


@dataclass
class ImportPlan:
    """Checked lines, ready to write: the workloads new to the database and the
    records it lacks, judged against ``stored``, the fingerprints it held then."""

    workloads: list[dict[str, Any]] = field(default_factory=list)
    records: list[ImportedRecord] = field(default_factory=list)
    skipped: int = 0
    stored: Counter[tuple] = field(default_factory=Counter)


def fingerprint(workload_key: str, target: str, row: Mapping[str, Any]) -> tuple:
    """Everything a measurement measured: two records with other fingerprints are two
    measurements, and so are two with one fingerprint (a multiset, see plan_import)."""
    return (
        workload_key,
        target,
        row["trace_hash"],
        row["trace_version"],
        row["tensortune_version"],
        row["purpose"],
        row["status"],
        tuple(row["run_times"]),
        row["error"],
        row["worker_host"],
        row["created_at"],
    )


# export ------------------------------------------------------------------------------


def write_stream(
    out: IO[str],
    workloads: Iterable[WorkloadEntry],
    records: Iterable[tuple[TuningRecord, str]],
) -> int:
    """Write the header, the workloads, the records (each with its target's host
    description) and the trailer that counts them; returns the number of records."""
    out.write(_line(HEADER))
    workload_count = 0
    for entry in workloads:
        out.write(workload_line(entry))
        workload_count += 1
    record_count = 0
    for record, host_kind in records:
        out.write(record_line(record, host_kind))
        record_count += 1
    out.write(_line({"kind": "end", "workloads": workload_count, "records": record_count}))
    return record_count


def workload_line(entry: WorkloadEntry) -> str:
    return _line(
        {
            "kind": "workload",
            "key": entry.key,
            "name": entry.name,
            "flop_count": entry.flop_count,
            "json": entry.json,
        }
    )


def record_line(record: TuningRecord, host_kind: str) -> str:
    return _line(
        {
            "kind": "record",
            "workload": record.workload_key,
            "target": record.target,
            "host_kind": host_kind,
            "trace": record.trace,
            "trace_hash": record.trace_hash,
            "trace_version": record.trace_version,
            "tensortune_version": record.tensortune_version,
            "status": status_of(record.error_kind),
            "run_times": list(record.run_times),
            "error": record.error,
            "worker_host": record.worker_host,
            "created_at": record.created_at.astimezone(UTC).isoformat(),
            "purpose": record.purpose.value,
        }
    )


def _line(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n"


# import ------------------------------------------------------------------------------


def plan_import(
    lines: Iterable[str],
    stored_workloads: Mapping[str, str],
    existing: Counter[tuple],
    checker: TraceChecker,
) -> ImportPlan:
    """Check a stream against what a database holds (its workloads' JSON by key, how
    many of its records have each fingerprint); raises RecordError naming the first bad
    line. A record is skipped while the database holds more of its fingerprint than the
    stream has already matched."""
    documents = _parse_lines(lines)
    checked = {}
    for number, doc in documents:
        if doc["kind"] == "workload":
            workload = _checked_workload(doc, f"line {number}")
            checked[workload["key"]] = workload
    plan = ImportPlan(
        workloads=[w for key, w in checked.items() if key not in stored_workloads],
        stored=Counter(existing),
    )
    unmatched = Counter(existing)
    for number, doc in documents:
        where = f"line {number}"
        if doc["kind"] == "workload":
            continue
        for record in _checked_records(doc, where):
            key = record.workload_key
            workload_json = stored_workloads.get(key) or checked.get(key, {}).get("json")
            if workload_json is None:
                raise RecordError(
                    f"{where}: unknown workload {key!r}; neither the stream nor the database has it"
                )
            if record.row["trace_version"] == TRACE_FORMAT_VERSION:
                checker.check(
                    key, workload_json, record.row["trace"], record.row["trace_hash"], where
                )
            if unmatched[record.fingerprint] > 0:
                unmatched[record.fingerprint] -= 1
                plan.skipped += 1
                continue
            plan.records.append(record)
    return plan


def workload_keys_named(lines: list[str]) -> set[str]:
    """The workload keys a stream's lines mention, to look up before planning."""
    keys = set()
    for line in lines:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            for name in ("key", "workload"):
                if isinstance(doc.get(name), str):
                    keys.add(doc[name])
    return keys


def _parse_lines(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    documents: list[tuple[int, dict[str, Any]]] = []
    version = None
    trailer = None
    for number, line in enumerate(text_lines(lines), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordError(f"line {number}: not JSON: {err}") from None
        if version is None:
            version = _header_version(doc, number, line)
            continue
        if trailer is not None:
            raise RecordError(f"line {number}: a line after the stream's end (line {trailer})")
        if version in TRAILED_VERSIONS and isinstance(doc, dict) and doc.get("kind") == "end":
            _check_trailer(doc, documents, f"line {number}")
            trailer = number
            continue
        documents.append((number, _checked_kind(doc, version, f"line {number}")))
    if version is None:
        raise RecordError(f"the stream is empty; it starts with {json.dumps(HEADER)}")
    if version in TRAILED_VERSIONS and trailer is None:
        raise RecordError(
            f"the stream ends without its trailer (a version {version} export ends with "
            '{"kind": "end", ...}): it was cut short; export it again'
        )
    return documents


def text_lines(lines: Iterable[str]) -> list[str]:
    """The stream's lines, read whole; text that is not UTF-8 is refused by line."""
    read: list[str] = []
    iterator = iter(lines)
    while True:
        try:
            read.append(next(iterator))
        except StopIteration:
            return read
        except UnicodeDecodeError:
            raise RecordError(
                f"line {len(read) + 1}: not UTF-8 text (a compressed or binary file?); give "
                "the JSON lines that tensortune db export writes, uncompressed"
            ) from None


def _check_trailer(
    doc: dict[str, Any], documents: list[tuple[int, dict[str, Any]]], where: str
) -> None:
    if set(doc) != set(TRAILER_FIELDS):
        raise RecordError(f"{where}: the trailer has the fields {', '.join(TRAILER_FIELDS)}")
    counted = Counter(d["kind"] for _, d in documents)
    found = {"workloads": counted["workload"], "records": counted["record"]}
    promised = {"workloads": doc["workloads"], "records": doc["records"]}
    if found != promised:
        raise RecordError(
            f"{where}: the trailer counts {promised['workloads']} workloads and "
            f"{promised['records']} records, the stream holds {found['workloads']} and "
            f"{found['records']}: it is damaged or cut short; export it again"
        )


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
    expected = WORKLOAD_FIELDS if doc["kind"] == "workload" else RECORD_FIELDS[version]
    if set(doc) != set(expected):
        missing = sorted(set(expected) - set(doc))
        extra = sorted(set(doc) - set(expected))
        raise RecordError(f"{where}: fields missing {missing}, unexpected {extra}")
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
    check_flop_count(flops, f"{where}.flop_count")
    return {
        "key": key,
        "name": check_text(doc["name"], f"{where}.name", 200),
        "json": doc["json"],
        "flop_count": flops,
        "created_at": datetime.now(UTC),
    }


def _checked_records(doc: dict[str, Any], where: str) -> list[ImportedRecord]:
    """The record of a line, and for a version 2 line with a re-timing, that re-timing
    as a record of its own."""
    key = check_text(doc["workload"], f"{where}.workload", 64)
    target = target_key(check_text(doc["target"], f"{where}.target", 500), f"{where}.target")
    host_kind = check_text(doc["host_kind"], f"{where}.host_kind", 200)
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
        "error": doc["error"],
        "worker_host": check_text(doc["worker_host"], f"{where}.worker_host", 200),
        "job_id": None,
        "created_at": _timestamp(doc["created_at"], f"{where}.created_at"),
        "purpose": _purpose(doc.get("purpose", Purpose.SEARCH.value), where).value,
        **outcome_columns(error_kind, times),
    }
    records = [ImportedRecord(row, key, target, host_kind)]
    retiming = _retiming(doc, error_kind, where)
    if retiming is not None:
        records.append(ImportedRecord({**row, **retiming}, key, target, host_kind))
    return records


def _purpose(value: Any, where: str) -> Purpose:
    try:
        return Purpose(value)
    except ValueError:
        raise RecordError(f"{where}.purpose: {value!r} is not one of {PURPOSE_NAMES}") from None


def _retiming(
    doc: dict[str, Any], error_kind: ErrorKind | None, where: str
) -> dict[str, Any] | None:
    """The re-timing a version 2 line carries, as the columns of a re-timing record."""
    times, stamp = doc.get("retime_times"), doc.get("retimed_at")
    if times is None and stamp is None:
        return None
    if times is None or stamp is None or error_kind is not None:
        raise RecordError(f"{where}: retime_times and retimed_at go together, on an ok record only")
    _, checked = check_outcome(None, times, None, f"{where}.retime_times")
    return {
        **outcome_columns(None, checked),
        "purpose": Purpose.RETIME.value,
        "created_at": _timestamp(stamp, f"{where}.retimed_at"),
    }


def _timestamp(value: Any, where: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(check_text(value, where, 64))
    except ValueError:
        raise RecordError(f"{where}: not an ISO 8601 time: {value!r}") from None
    if stamp.tzinfo is None:
        raise RecordError(f"{where}: the time needs its zone (UTC), got {value!r}")
    return stamp.astimezone(UTC)
