"""Run results as database records: one ``db.Measurement`` per result, the status
taken straight from the result's error kind (the enums share their values)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.workload_key import workload_from_json, workload_key
from workers.base import RunResult

if TYPE_CHECKING:
    from db.record import Measurement


def to_measurement(result: RunResult, *, job_id: int | None = None) -> Measurement:
    """The record of ``result``, keyed by its workload's canonical key."""
    from db.record import Measurement, RecordStatus

    candidate = result.candidate
    key = workload_key(workload_from_json(candidate.workload))
    if result.error_kind is None:
        return Measurement.ok(
            key,
            candidate.target,
            candidate.trace,
            result.run_times,
            worker_host=result.worker_host,
            job_id=job_id,
        )
    assert result.error is not None
    return Measurement.failed(
        key,
        candidate.target,
        candidate.trace,
        RecordStatus(result.error_kind.value),
        result.error,
        worker_host=result.worker_host,
        job_id=job_id,
    )
