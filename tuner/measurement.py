"""A run result as the database record the tuning loop commits: one ``db.Measurement``
per ``workers.RunResult``. It lives on the tuner's side because the tuner is what
joins workers and database; the workers know nothing of ``db``."""

from __future__ import annotations

from compiler.workload.key import workload_from_json, workload_key
from db.record import Measurement
from workers.base import RunResult


def to_measurement(
    result: RunResult, *, job_id: int | None = None, key: str | None = None
) -> Measurement:
    """The record of ``result``, keyed by its workload's canonical key; a failure keeps
    its ``ErrorKind`` (one enum for workers and database) and its message. A caller that
    knows the key passes it as ``key`` (a tuning loop computes it once per task):
    parsing a convolution's workload to compute it again takes milliseconds."""
    candidate = result.candidate
    if key is None:
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
        result.error_kind,
        result.error,
        worker_host=result.worker_host,
        job_id=job_id,
    )
