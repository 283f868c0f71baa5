"""How tuning went, for people watching it: a job's measurements in the order they
were stored, the best each job found for a workload, and the search measurement of
re-timed traces (so a re-timed best shows both figures), and how records ended.
``History`` is what the service's live views ask; the functions below are
``SQLDatabase``'s implementation."""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, select

from db.models import RecordRow, TargetRow, WorkloadRow
from db.queries import RECORDS, as_utc, record_select, to_record
from db.record import OK_STATUS, Purpose, TuningRecord


@dataclass(frozen=True)
class JobBest:
    """The fastest search measurement one job made of a workload on a target."""

    job_id: int
    seconds: float
    last_at: datetime


class History(abc.ABC):
    @abc.abstractmethod
    def job_trials(
        self, job_id: int, *, after_id: int = 0, limit: int = 1000
    ) -> list[TuningRecord]:
        """The job's search measurements stored after the record ``after_id``, oldest
        first, at most ``limit``: what a live view of the job adds at each update."""

    @abc.abstractmethod
    def best_by_job(self, workload_key: str, target: str) -> list[JobBest]:
        """The fastest search measurement of the workload on the target by each job
        that measured it, oldest job first: how the best improved from job to job."""

    @abc.abstractmethod
    def search_seconds(
        self, workload_key: str, target: str, trace_hashes: Collection[str]
    ) -> dict[str, float]:
        """The fastest search measurement of each trace (by hash) of the workload on
        the target; a re-timed best shows it beside its re-timing."""

    @abc.abstractmethod
    def record_counts(self) -> dict[str, int]:
        """How many records end in each status ("ok" or an error kind's value; every
        status, zero included)."""


def job_trials(
    connection: Connection, job_id: int, after_id: int, limit: int
) -> list[TuningRecord]:
    """The job's search measurements with an id above ``after_id``, oldest first."""
    stmt = (
        record_select()
        .where(RecordRow.job_id == job_id, RecordRow.purpose == Purpose.SEARCH.value)
        .where(RecordRow.id > after_id)
        .order_by(RecordRow.id)
        .limit(limit)
    )
    return [to_record(row) for row in connection.execute(stmt)]


def best_by_job(connection: Connection, workload_key: str, target: str) -> list[JobBest]:
    """For each job that measured the workload on the (canonical) target, its fastest
    successful search measurement and when its last one was stored, oldest job first."""
    stmt = (
        select(
            RecordRow.job_id,
            func.min(RecordRow.min_seconds).label("seconds"),
            func.max(RecordRow.created_at).label("last_at"),
        )
        .select_from(RECORDS)
        .where(WorkloadRow.key == workload_key, TargetRow.target == target)
        .where(RecordRow.job_id.is_not(None), RecordRow.status == OK_STATUS)
        .where(RecordRow.purpose == Purpose.SEARCH.value)
        .group_by(RecordRow.job_id)
        .order_by(RecordRow.job_id)
    )
    found = []
    for job_id, seconds, last_at in connection.execute(stmt):
        assert job_id is not None and seconds is not None, "the filters rule out NULLs"
        found.append(JobBest(job_id, seconds, as_utc(last_at)))
    return found


def search_seconds(
    connection: Connection, workload_key: str, target: str, trace_hashes: Collection[str]
) -> dict[str, float]:
    """The fastest successful search measurement of each of the traces, by hash."""
    if not trace_hashes:
        return {}
    stmt = (
        select(RecordRow.trace_hash, func.min(RecordRow.min_seconds).label("seconds"))
        .select_from(RECORDS)
        .where(WorkloadRow.key == workload_key, TargetRow.target == target)
        .where(RecordRow.trace_hash.in_(list(trace_hashes)), RecordRow.status == OK_STATUS)
        .where(RecordRow.purpose == Purpose.SEARCH.value)
        .group_by(RecordRow.trace_hash)
    )
    found = {}
    for trace_hash, seconds in connection.execute(stmt):
        assert seconds is not None, "only successes are selected"
        found[trace_hash] = seconds
    return found
