"""The routes of tuning jobs: submit (checked whole, 422 naming the bad field; 429
past the token's quota), list, get (per task the trials done and the best so far),
follow as Server-Sent Events, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

import db
from db import ApiToken, Database, JobStore, RecordError, Role, TuningStore
from db import Job as StoredJob
from db.jobs import FINAL
from db.validate import INT64_MAX
from tuner.service import jobs
from tuner.service.schemas import NO_JOB, ErrorDetail, Job, JobId, JobSubmission
from tuner.service.views import job_view
from tuner.service.workload_routes import MAX_PAGE

QUOTA: dict[int | str, dict[str, Any]] = {
    429: {"model": ErrorDetail, "description": "the token's quota of unfinished jobs is used"}
}
# How often an event stream looks at its job: progress lands in the database, written
# by a coordinator that may run in another process.
EVENT_POLL_SECONDS = 0.5


def add_job_routes(
    v1: APIRouter,
    database: TuningStore,
    reader: Any,
    submitter: Any,
    submitted: Callable[[], None] | None,
) -> None:
    """Add the routes to ``v1``; ``submitted`` is called after each job is stored."""

    @v1.post("/jobs", response_model=Job, status_code=201, responses=QUOTA)
    def submit(submission: JobSubmission, token: ApiToken | None = submitter) -> Job:
        assert token is not None, "submitting always needs a token"
        if submission.targets and "target" in submission.model_fields_set:
            raise jobs.JobRequestError("target, targets: give one of them, not both")
        request = jobs.JobRequest(
            **{
                **submission.model_dump(),
                "workloads": tuple(submission.workloads),
                "targets": tuple(submission.targets),
            }
        )
        try:
            job = jobs.submit(database, request, token_id=token.id)
        except db.QuotaError as err:
            raise HTTPException(status_code=429, detail=str(err)) from None
        if submitted is not None:
            submitted()
        return _job(database, job)

    @v1.get("/jobs", response_model=list[Job], dependencies=[reader])
    def list_jobs(
        status: Annotated[db.JobStatus | None, Query(description="only jobs in this state")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        before_id: Annotated[
            int | None, Query(ge=1, le=INT64_MAX, description="page on: jobs older than this id")
        ] = None,
    ) -> list[Job]:
        return [
            _job(database, job) for job in database.jobs(status, limit=limit, before_id=before_id)
        ]

    @v1.get("/jobs/{job_id}", response_model=Job, responses=NO_JOB, dependencies=[reader])
    def get_job(job_id: JobId) -> Job:
        return _job(database, stored_job(database, job_id))

    @v1.get(
        "/jobs/{job_id}/events",
        responses={**NO_JOB, 200: {"content": {"text/event-stream": {}}}},
        response_class=StreamingResponse,
        dependencies=[reader],
    )
    async def job_events(job_id: JobId) -> StreamingResponse:
        """Server-Sent Events: a ``job`` event with the job (as ``GET /v1/jobs/{id}``
        answers it) whenever it changes, then ``end`` once it is finished.

        A stream is a coroutine that holds a route thread only while it reads the job:
        a stream that slept in a route thread held it for as long as its job ran, and
        ``ROUTE_THREADS`` watchers of a queued job stalled every other route. Starlette
        cancels the coroutine when its client leaves."""
        stored = await run_in_threadpool(stored_job, database, job_id)
        flops = await run_in_threadpool(flop_counts, database, stored)

        async def stream() -> AsyncIterator[str]:
            last = None
            while True:
                stored = await run_in_threadpool(database.job, job_id)
                job = job_view(stored, flops)
                if job != last:
                    yield f"event: job\ndata: {job.model_dump_json()}\n\n"
                    last = job
                if stored.status in FINAL:
                    yield "event: end\ndata: {}\n\n"
                    return
                await asyncio.sleep(EVENT_POLL_SECONDS)

        return StreamingResponse(stream(), media_type="text/event-stream")

    @v1.post("/jobs/{job_id}/cancel", response_model=Job, responses=NO_JOB)
    def cancel_job(job_id: JobId, token: ApiToken | None = submitter) -> Job:
        assert token is not None, "cancelling always needs a token"
        job = stored_job(database, job_id)
        if token.role is not Role.ADMIN and job.token_id != token.id:
            raise HTTPException(
                status_code=403,
                detail=f"job {job_id} was submitted by another token; only an admin token "
                "cancels the jobs of others",
            )
        return _job(database, database.cancel_job(job_id))


def stored_job(database: JobStore, job_id: int) -> StoredJob:
    """The stored job ``job_id``; 404 when there is none."""
    try:
        return database.job(job_id)
    except RecordError:
        raise HTTPException(status_code=404, detail=f"no job with id {job_id}") from None


def _job(database: Database, job: StoredJob) -> Job:
    return job_view(job, flop_counts(database, job))


def flop_counts(database: Database, job: StoredJob) -> dict[str, int | None]:
    """The flop count of each workload the job tunes, by key."""
    keys = {t.workload_key for t in job.tasks}
    return {entry.key: entry.flop_count for entry in database.workloads(keys)}
