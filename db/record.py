"""The database's records as plain frozen data: what callers commit and what they read.

The ORM rows stay inside ``db``; everything that crosses the API is one of these
dataclasses, so callers never hold a session or a lazy attribute.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from db.compiler_border import (
    TRACE_FORMAT_VERSION,
    ErrorKind,
    Trace,
    canonical_trace,
)

# The status column holds "ok" for a success and the ErrorKind's value for a failure.
OK_STATUS = "ok"
STATUSES = (OK_STATUS, *(kind.value for kind in ErrorKind))


def status_of(error_kind: ErrorKind | None) -> str:
    """The status column's word for a record that failed with ``error_kind`` (None: ok)."""
    return OK_STATUS if error_kind is None else error_kind.value


def error_kind_of(status: str) -> ErrorKind | None:
    """The failure a stored status word names; None for a success."""
    return None if status == OK_STATUS else ErrorKind(status)


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


@dataclass(frozen=True)
class Measurement:
    """One measured schedule, as a worker reports it, before it is stored.

    A success (no ``error_kind``) needs ``run_times`` (seconds, each finite and not
    negative); a failure needs an ``error`` message and no run times. ``target`` is
    any spelling the compiler accepts (``"llvm"``); the database stores its canonical
    form. ``purpose`` RETIME marks a careful re-timing of a trace the search measured
    before.
    """

    workload_key: str
    target: str
    trace: str
    error_kind: ErrorKind | None
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
            None,
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
        error_kind: ErrorKind,
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
            error_kind,
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
    error_kind: ErrorKind | None
    run_times: tuple[float, ...]
    mean_seconds: float | None
    min_seconds: float | None
    error: str | None
    worker_host: str
    job_id: int | None
    created_at: datetime
    trace_version: int
    tensortune_version: str
    purpose: Purpose = Purpose.SEARCH

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def seconds(self) -> float | None:
        """The time every ranking reads: the fastest run time. Interference on a shared
        host only ever slows a run, so the fastest repeat is what a second measurement
        reproduces (measured under background load: 0.3 % spread between measurements
        of one kernel, against 9 % for the median of the same repeats)."""
        return self.min_seconds

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
    # The job's own measurements of this task by status ("ok" or an error kind);
    # trials restored from earlier records are not among them.
    outcomes: Mapping[str, int] = field(default_factory=dict)


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
    coordinator: str | None = None
    heartbeat_at: datetime | None = None
    token_id: int | None = None
    priority: int = 0
