"""The checks a record passes before anything is written.

A record's run times must be real (finite, not negative) and present exactly when
it succeeded; a failure needs its message; and its trace must replay on its
workload, so the database never holds a schedule the compiler cannot apply.
Replaying costs milliseconds, so a ``TraceChecker`` remembers which traces it has
seen replay on which workload, and the database skips traces it already stores
for that workload (they were checked when they came in) and traces its caller
says its workers built (a build replays the trace first).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from db.compiler_border import (
    TRACE_FORMAT_VERSION,
    ErrorKind,
    PrimFunc,
    ScheduleError,
    TargetError,
    WorkloadError,
    canonical_target,
    canonical_trace,
    normalize_spec,
    replayed,
    trace_hash,
    workload_from_json,
    workload_from_spec,
    workload_key,
    workload_to_json,
)
from db.errors import RecordError
from db.record import STATUSES, Measurement, Purpose, error_kind_of, status_of

NAME_LIMIT = 200
HOST_LIMIT = 200
MAX_PAGE = 10_000
# Every stored count and id is a signed 64-bit integer in SQL.
INT64_MAX = 2**63 - 1


def parse_status(status: Any, where: str) -> ErrorKind | None:
    """The failure a status word (as an export file spells it) names; None for ok."""
    if status not in STATUSES:
        raise RecordError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
    return error_kind_of(status)


def target_key(target: str, where: str) -> str:
    """The canonical spelling of a target, which records are stored under."""
    try:
        return canonical_target(target)
    except TargetError as err:
        raise RecordError(f"{where}: {err}") from None


def checked_rows(
    batch: list[Measurement],
    workloads: Mapping[str, str],
    checker: TraceChecker,
    version: str,
    *,
    built: bool = False,
) -> list[tuple[dict[str, Any], str]]:
    """Each measurement's stored columns and canonical target, checked against the
    workloads' JSON by key (the trace of a success the caller's workers ``built`` is
    not replayed again: building replayed it); raises RecordError naming the first
    bad one."""
    created = datetime.now(UTC)
    rows = []
    for i, m in enumerate(batch):
        where = f"records[{i}]"
        workload_json = workloads.get(m.workload_key)
        if workload_json is None:
            raise RecordError(
                f"{where}: unknown workload {m.workload_key!r}; commit it first with "
                "Database.commit_workload"
            )
        error_kind, times = check_outcome(m.error_kind, m.run_times, m.error, where)
        target = target_key(m.target, where)
        trace = canonical_trace(m.trace)
        digest = trace_hash(trace)
        if built and error_kind is None:
            checker.remember(m.workload_key, digest)
        else:
            checker.check(m.workload_key, workload_json, trace, digest, where)
        row = {
            "trace": trace,
            "trace_hash": digest,
            "trace_version": TRACE_FORMAT_VERSION,
            "tensortune_version": version,
            "purpose": m.purpose.value,
            "error": m.error,
            "worker_host": check_text(m.worker_host, f"{where}.worker_host", HOST_LIMIT),
            "job_id": m.job_id,
            "created_at": created,
            **outcome_columns(error_kind, times),
        }
        rows.append((row, target))
    return rows


def outcome_columns(error_kind: ErrorKind | None, times: tuple[float, ...]) -> dict[str, Any]:
    """The status and time columns of a checked outcome."""
    return {
        "status": status_of(error_kind),
        "run_times": list(times),
        "mean_seconds": statistics.fmean(times) if times else None,
        "min_seconds": min(times) if times else None,
    }


def checked_workload(
    workload: PrimFunc | Mapping[str, Any], name: str | None, flop_count: int | None
) -> dict[str, Any]:
    """The stored columns of a workload given as a PrimFunc or an operator spec."""
    func, default_name = _as_func(workload)
    name = check_text(name if name is not None else default_name, "name", NAME_LIMIT)
    check_flop_count(flop_count, "flop_count")
    return {
        "key": workload_key(func),
        "name": name,
        "json": workload_to_json(func),
        "flop_count": flop_count,
        "created_at": datetime.now(UTC),
    }


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


def check_flop_count(flop_count: Any, where: str) -> None:
    """A workload's flop count: None, or a count a 64-bit column holds."""
    if flop_count is not None and (type(flop_count) is not int or not 0 <= flop_count <= INT64_MAX):
        raise RecordError(
            f"{where}: must be an integer from 0 to {INT64_MAX} or null, got {flop_count!r}"
        )


def check_page(limit: Any, before_id: Any) -> None:
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        raise RecordError(f"limit: must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
    if before_id is not None and (type(before_id) is not int or not 1 <= before_id <= INT64_MAX):
        raise RecordError(
            f"before_id: must be a record's id (an integer from 1 to {INT64_MAX}) or None, "
            f"got {before_id!r}"
        )


def check_k(k: Any, where: str = "k") -> None:
    if type(k) is not int or not 1 <= k <= INT64_MAX:
        raise RecordError(f"{where}: must be an integer from 1 to {INT64_MAX}, got {k!r}")


def check_outcome(
    error_kind: Any, run_times: Sequence[Any], error: Any, where: str
) -> tuple[ErrorKind | None, tuple[float, ...]]:
    """The run times as floats once they agree with the error kind, or RecordError."""
    if error_kind is not None and not isinstance(error_kind, ErrorKind):
        kinds = ", ".join(kind.name for kind in ErrorKind)
        raise RecordError(
            f"{where}: error_kind must be an ErrorKind ({kinds}) or None for a success, "
            f"got {error_kind!r}"
        )
    if isinstance(run_times, (str, bytes)) or not isinstance(run_times, Sequence):
        raise RecordError(f"{where}: run_times must be a list of seconds, got {run_times!r}")
    times = tuple(_check_time(t, f"{where}: run_times[{i}]") for i, t in enumerate(run_times))
    if error_kind is None:
        if not times:
            raise RecordError(f"{where}: an ok record needs at least one run time")
        if error is not None:
            raise RecordError(f"{where}: an ok record has no error message, got {error!r}")
    else:
        if times:
            raise RecordError(
                f"{where}: a {status_of(error_kind)} record has no run times (they would not "
                "count); store the failure with its error message only"
            )
        if not isinstance(error, str) or not error.strip():
            raise RecordError(f"{where}: a {status_of(error_kind)} record needs its error message")
    return error_kind, times


def check_fields(measurement: Any, where: str) -> None:
    """The fields a batch is grouped by, checked before anything is looked up."""
    if not isinstance(measurement, Measurement):
        raise RecordError(f"{where}: expected a Measurement, got {type(measurement).__name__}")
    if not isinstance(measurement.workload_key, str):
        raise RecordError(f"{where}.workload_key: must be a string (a workload's key)")
    if not isinstance(measurement.target, str):
        raise RecordError(f"{where}.target: must be a target string such as 'llvm'")
    if measurement.job_id is not None and type(measurement.job_id) is not int:
        raise RecordError(f"{where}.job_id: must be a job's id (an integer) or None")
    check_purpose(measurement, where)


def check_purpose(measurement: Measurement, where: str) -> Purpose:
    """A re-timing is a success: a failed re-timing is not stored, so a careful timing
    never ranks a trace that the search measured fine."""
    if not isinstance(measurement.purpose, Purpose):
        names = ", ".join(p.name for p in Purpose)
        raise RecordError(f"{where}.purpose: must be a Purpose ({names})")
    if measurement.purpose is Purpose.RETIME and measurement.error_kind is not None:
        raise RecordError(f"{where}: a re-timing is stored only when it succeeded")
    return measurement.purpose


def _check_time(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"{where}: must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise RecordError(
            f"{where}: {value!r} is not a run time; times are finite and not negative "
            "(store a failed run with its status instead)"
        )
    return seconds


def check_text(value: Any, where: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise RecordError(f"{where}: must be a string of at most {limit} characters")
    return value


class TraceChecker:
    """Replays traces on workloads, remembering the workloads it has read and the
    (workload key, trace hash) pairs that replayed."""

    def __init__(self) -> None:
        self._funcs: dict[str, PrimFunc] = {}
        self._replayed: set[tuple[str, str]] = set()

    def knows(self, workload_key: str, trace_hash: str) -> bool:
        return (workload_key, trace_hash) in self._replayed

    def remember(self, workload_key: str, trace_hash: str) -> None:
        self._replayed.add((workload_key, trace_hash))

    def check(
        self, workload_key: str, workload_json: str, trace_json: str, trace_hash: str, where: str
    ) -> None:
        """Raise RecordError unless the trace parses and replays on the workload."""
        if self.knows(workload_key, trace_hash):
            return
        func = self._func(workload_key, workload_json, where)
        try:
            replayed(func, trace_json, key=workload_key)
        except ScheduleError as err:
            raise RecordError(
                f"{where}: the trace does not replay on workload {workload_key[:12]} "
                f"(trace format {TRACE_FORMAT_VERSION}): {err}"
            ) from None
        self.remember(workload_key, trace_hash)

    def _func(self, workload_key: str, workload_json: str, where: str) -> PrimFunc:
        if workload_key not in self._funcs:
            try:
                self._funcs[workload_key] = workload_from_json(workload_json)
            except WorkloadError as err:
                raise RecordError(f"{where}: workload {workload_key} is broken: {err}") from None
        return self._funcs[workload_key]
