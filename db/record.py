"""The database's records as plain frozen data: what callers commit and what they read.

The ORM rows stay inside ``db``; everything that crosses the API is one of these
dataclasses, so callers never hold a session or a lazy attribute.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from compiler.schedule.trace import TRACE_FORMAT_VERSION, Trace


class RecordStatus(enum.Enum):
    """How a measurement ended. Only ``OK`` has run times that count; a failure is a
    status and a message, never a made-up large time."""

    OK = "ok"
    BUILD_ERROR = "build_error"
    RUN_ERROR = "run_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"
    CRASHED = "crashed"


class Purpose(enum.Enum):
    """Why a schedule was measured. A search measurement is the one the search saw; a
    re-timing is a later, more careful measurement of a trace already searched, stored
    as a record of its own so the search measurement stays as it was."""

    SEARCH = "search"
    RETIME = "retime"


class JobStatus(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


def canonical_trace(trace: Trace | Mapping[str, Any] | str) -> str:
    """The trace as canonical JSON text (sorted keys, no whitespace), so one schedule
    always hashes the same whichever form it arrived in. Text that is not JSON is
    kept as it is; validation reports it."""
    if isinstance(trace, Trace):
        return trace.to_json_string()
    document: Any = trace
    if isinstance(trace, str):
        try:
            document = json.loads(trace)
        except json.JSONDecodeError:
            return trace
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def trace_hash(trace_json: str) -> str:
    return hashlib.sha256(trace_json.encode()).hexdigest()


@dataclass(frozen=True)
class Measurement:
    """One measured schedule, as a worker reports it, before it is stored.

    ``status`` OK needs ``run_times`` (seconds, each finite and not negative); any
    other status needs an ``error`` message. ``target`` is any spelling the compiler
    accepts (``"llvm"``); the database stores its canonical form. ``purpose`` RETIME
    marks a careful re-timing of a trace the search measured before.
    """

    workload_key: str
    target: str
    trace: str
    status: RecordStatus
    run_times: tuple[float, ...] = ()
    error: str | None = None
    worker_host: str = ""
    job_id: int | None = None
    purpose: Purpose = Purpose.SEARCH

    @staticmethod
    def ok(
        workload_key: str,
        target: str,
        trace: Trace | Mapping[str, Any] | str,
        run_times: Sequence[float],
        *,
        worker_host: str = "",
        job_id: int | None = None,
        purpose: Purpose = Purpose.SEARCH,
    ) -> Measurement:
        return Measurement(
            workload_key,
            target,
            canonical_trace(trace),
            RecordStatus.OK,
            tuple(run_times),
            None,
            worker_host,
            job_id,
            purpose,
        )

    @staticmethod
    def failed(
        workload_key: str,
        target: str,
        trace: Trace | Mapping[str, Any] | str,
        status: RecordStatus,
        error: str,
        *,
        worker_host: str = "",
        job_id: int | None = None,
        purpose: Purpose = Purpose.SEARCH,
    ) -> Measurement:
        return Measurement(
            workload_key,
            target,
            canonical_trace(trace),
            status,
            (),
            error,
            worker_host,
            job_id,
            purpose,
        )


@dataclass(frozen=True)
class TuningRecord:
    """A stored measurement, never changed once stored. ``trace_version`` and
    ``tensortune_version`` say what wrote it; a record whose trace format is not the
    current one is ``stale``: it is never replayed as if it were current, only
    reported. A re-timing (``purpose`` RETIME) is a record of its own next to the
    search measurement of the same trace; ``seconds`` is what ``best`` ranks it by."""

    id: int
    workload_key: str
    target: str
    trace: str
    trace_hash: str
    status: RecordStatus
    run_times: tuple[float, ...]
    mean_seconds: float | None
    median_seconds: float | None
    error: str | None
    worker_host: str
    job_id: int | None
    created_at: datetime
    trace_version: int
    tensortune_version: str
    purpose: Purpose = Purpose.SEARCH

    @property
    def seconds(self) -> float | None:
        """The time ``best`` ranks by: a re-timing's median (robust against the odd
        slow round), a search measurement's mean (what the search itself compared)."""
        if self.purpose is Purpose.RETIME:
            return self.median_seconds
        return self.mean_seconds

    @property
    def stale(self) -> bool:
        return self.trace_version != TRACE_FORMAT_VERSION

    def to_trace(self) -> Trace:
        """The schedule, ready to replay; raises ScheduleError for a stale record."""
        return Trace.from_json(self.trace)


@dataclass(frozen=True)
class WorkloadEntry:
    """A stored workload: its key (a hash of ``json``), the canonical PrimFunc JSON,
    a name for people, and its floating-point operation count where known."""

    key: str
    name: str
    json: str
    flop_count: int | None = None


@dataclass(frozen=True)
class JobTask:
    """One workload of a job on one target, with its progress."""

    id: int
    job_id: int
    workload_key: str
    target: str
    status: JobStatus
    trials_asked: int
    trials_done: int
    best_seconds: float | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Job:
    """A submitted tuning job: the spec as it was submitted, its status and its tasks."""

    id: int
    status: JobStatus
    spec: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    tasks: tuple[JobTask, ...] = field(default=())
