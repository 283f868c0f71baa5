"""The checks a record passes before anything is written.

A record's run times must be real (finite, not negative) and present exactly when
it succeeded; a failure needs its message; and its trace must replay on its
workload, so the database never holds a schedule the compiler cannot apply.
Replaying costs milliseconds, so a ``TraceChecker`` remembers which traces it has
seen replay on which workload, and the database skips traces it already stores
for that workload (they were checked when they came in).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from compiler.errors import ErrorKind
from compiler.ir.function import PrimFunc
from compiler.schedule.errors import ScheduleError
from compiler.schedule.replay import replayed
from compiler.schedule.trace import TRACE_FORMAT_VERSION
from compiler.workload import WorkloadError
from compiler.workload_key import workload_from_json
from db.errors import RecordError
from db.records import STATUSES, Measurement, error_kind_of, status_of


def parse_status(status: Any, where: str) -> ErrorKind | None:
    """The failure a status word (as an export file spells it) names; None for ok."""
    if status not in STATUSES:
        raise RecordError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
    return error_kind_of(status)


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
