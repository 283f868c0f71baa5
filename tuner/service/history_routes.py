"""The routes a live view of tuning reads: a job's measurements as they are stored
(after the last one the view has), how the best of a workload improved from job to
job, and the loop nest a record's schedule makes of its workload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query

from compiler.schedule.errors import ScheduleError
from compiler.tuned.replay import replayed
from compiler.workload.key import workload_from_json
from db import Job as StoredJob
from db import RecordError, TuningStore, WorkloadEntry
from db.validate import INT64_MAX
from tuner.service.schemas import (
    NO_JOB,
    NOT_FOUND,
    ErrorDetail,
    JobBestOfWorkload,
    JobId,
    LoopNest,
    Trial,
)
from tuner.service.views import gflops, trial_view

MAX_TRIALS = 5000
NO_RECORD: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorDetail, "description": "no such record"}
}


def add_history_routes(
    v1: APIRouter,
    database: TuningStore,
    reader: Any,
    entry_of: Callable[[str], WorkloadEntry],
    stored_job: Callable[[int], StoredJob],
    flop_counts: Callable[[StoredJob], dict[str, int | None]],
) -> None:
    """Add the routes to ``v1``; the callables answer 404 for what is not stored."""

    @v1.get(
        "/jobs/{job_id}/trials",
        response_model=list[Trial],
        responses=NO_JOB,
        dependencies=[reader],
    )
    def trials(
        job_id: JobId,
        after_id: Annotated[
            int, Query(ge=0, le=INT64_MAX, description="only those stored after this record")
        ] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_TRIALS)] = 1000,
    ) -> list[Trial]:
        """The job's search measurements, oldest first."""
        job = stored_job(job_id)
        tasks = {(t.workload_key, t.target): t.id for t in job.tasks}
        flops = flop_counts(job)
        return [
            trial_view(r, tasks.get((r.workload_key, r.target)), flops.get(r.workload_key))
            for r in database.job_trials(job_id, after_id=after_id, limit=limit)
        ]

    @v1.get(
        "/workloads/{key}/history",
        response_model=list[JobBestOfWorkload],
        responses=NOT_FOUND,
        dependencies=[reader],
    )
    def history(
        key: str,
        target: Annotated[str, Query(min_length=1, description="compile target")] = "llvm",
    ) -> list[JobBestOfWorkload]:
        """The fastest search measurement of each job that tuned the workload on the
        target, oldest job first."""
        entry = entry_of(key)
        return [
            JobBestOfWorkload(
                job_id=best.job_id,
                best_seconds=best.seconds,
                best_gflops=gflops(entry.flop_count, best.seconds),
                last_at=best.last_at,
            )
            for best in database.best_by_job(key, target)
        ]

    @v1.get(
        "/records/{record_id}/loop-nest",
        response_model=LoopNest,
        responses=NO_RECORD,
        dependencies=[reader],
    )
    def loop_nest(
        record_id: Annotated[int, Path(ge=1, le=INT64_MAX, description="the record's id")],
    ) -> LoopNest:
        """The workload with the record's schedule applied, as text."""
        try:
            record = database.record(record_id)
        except RecordError:
            raise HTTPException(status_code=404, detail=f"no record with id {record_id}") from None
        func = workload_from_json(entry_of(record.workload_key).json)
        try:
            scheduled = replayed(func, record.trace, key=record.workload_key)
        except ScheduleError as err:
            raise HTTPException(
                status_code=422, detail=f"record {record_id} does not replay: {err}"
            ) from None
        return LoopNest(record_id=record_id, loop_nest=scheduled.func.script())
