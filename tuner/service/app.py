"""The API's routes over one database.

Jobs: submit (checked whole, 422 naming the bad field), list, get (per task the
trials done and the best so far), follow as Server-Sent Events, cancel. Reads: the
workloads and targets the database knows, a workload's best schedules on a target
and its records, page by page; ``/healthz`` says whether the database answers. A
query the database refuses is a 422 that says why. Routes are plain functions that
FastAPI runs in its thread pool, so one slow query does not hold the others; the
database opens a connection per call. The event stream is the exception: it lasts as
long as its job, so it is a coroutine that takes a thread only to read the job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

import db
from db import (
    ApiToken,
    ConnectError,
    DatabaseError,
    Purpose,
    RecordError,
    Role,
    SQLDatabase,
    TuningRecord,
    WorkloadEntry,
)
from db import Job as StoredJob
from db.errors import StorageError
from db.jobs import FINAL
from db.validate import INT64_MAX
from tuner.service import jobs
from tuner.service.access import TokenLookup, caller
from tuner.service.body_limit import BodyLimit
from tuner.service.history_routes import add_history_routes
from tuner.service.memo import Memo, RecentMemo
from tuner.service.metrics import add_metrics
from tuner.service.model_routes import MAX_MODEL_BYTES, add_model_routes
from tuner.service.schemas import (
    NO_JOB,
    NOT_FOUND,
    BestQuery,
    BestSchedule,
    ErrorDetail,
    Health,
    Job,
    JobId,
    JobSubmission,
    Record,
    Workload,
)
from tuner.service.views import best_view, job_view, record_view, workload_view
from tuner.task import TuneTask

Route = TypeVar("Route", bound=Callable[..., Any])
logger = logging.getLogger(__name__)

API_PREFIX = "/v1"
MAX_BEST = 100
MAX_PAGE = 1000
QUOTA: dict[int | str, dict[str, Any]] = {
    429: {"model": ErrorDetail, "description": "the token's quota of unfinished jobs is used"}
}
# What any route under /v1 may answer besides its own: a body that is not JSON, no or
# an unknown token, a role too low, a body too large, a field out of its bounds, a
# database that failed.
REFUSALS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorDetail, "description": "the body is not JSON"},
    401: {"model": ErrorDetail, "description": "no API token, or one unknown or revoked"},
    403: {"model": ErrorDetail, "description": "the token's role is below the route's"},
    413: {"model": ErrorDetail, "description": "the request body is too large"},
    422: {"model": ErrorDetail, "description": "a bad request: the message names the field"},
    503: {
        "model": ErrorDetail,
        "description": "the database failed under the request; try again after Retry-After",
    },
}
# How often an event stream looks at its job: progress lands in the database, written
# by a coordinator that may run in another process.
EVENT_POLL_SECONDS = 0.5
# How long an answer of "best" is served again before the database is asked anew: a
# tuning run adds records every few seconds, and build farms ask far more often.
BEST_FRESH_SECONDS = 1.0
BEST_LIST = TypeAdapter(list[BestSchedule])
NO_WORKERS = "none in this server: coordinators run apart"
# The dashboard: a page, its script and style sheet, and the chart library it uses.
DASHBOARD = Path(__file__).parent / "static"
# What a 503 for a failed database asks the client to wait before it tries again.
RETRY_AFTER_SECONDS = 5
# Threads the routes run on (see _few_route_threads).
ROUTE_THREADS = 8
# The largest request body taken: a job of many specs fits in a small fraction of it.
MAX_BODY_BYTES = 1 << 20


def create_app(
    database: SQLDatabase,
    *,
    anonymous_reads: bool = False,
    submitted: Callable[[], None] | None = None,
    workers_health: Callable[[], str] | None = None,
    metrics_token: bool = False,
) -> FastAPI:
    """The service's application over ``database`` (which it does not close). Every
    route under ``/v1`` needs an API token of the role it names, reads none when
    ``anonymous_reads``; ``/metrics`` needs one (any role) only when ``metrics_token``.
    ``submitted`` is called after each job is stored (to wake a coordinator);
    ``workers_health`` says "ok" or what is wrong with the coordinator and workers of
    this server (None: it has none, they run apart)."""
    app = FastAPI(
        lifespan=_few_route_threads,
        title="tensortune",
        summary="Tuned schedules of tensor programs: the tuning database over HTTP.",
        version="1",
    )
    entries: Memo[str, WorkloadEntry] = Memo()
    best_views: Memo[int, BestSchedule] = Memo()
    best_answers: RecentMemo[tuple[str, str, int], bytes] = RecentMemo(BEST_FRESH_SECONDS)

    def entry_of(key: str) -> WorkloadEntry:
        """The stored workload of ``key``; 404 when there is none."""
        return entries.get(key, lambda: _entry(database, key))

    def best_view_of(
        record: TuningRecord, entry: WorkloadEntry, search_seconds: float | None
    ) -> BestSchedule:
        return best_views.get(record.id, lambda: best_view(record, entry, search_seconds))

    lookup = TokenLookup(database)
    reader = Depends(caller(lookup, Role.READ, anonymous_reads))
    submitter = Depends(caller(lookup, Role.SUBMIT, anonymous_reads))
    add_metrics(app, database, [Depends(caller(lookup, Role.READ, False))] if metrics_token else [])

    v1 = APIRouter(
        prefix=API_PREFIX, responses=REFUSALS, dependencies=[Depends(_only_known_parameters)]
    )

    app.add_middleware(
        BodyLimit, max_bytes=MAX_BODY_BYTES, by_path={f"{API_PREFIX}/models": MAX_MODEL_BYTES}
    )

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        """A request the schema refuses: one message naming each bad field, where it
        was (``body.trials``, ``query.k``) and what is wrong with it."""
        problems = [
            f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
            for problem in err.errors()
        ]
        return JSONResponse(status_code=422, content={"detail": "; ".join(problems)})

    @app.exception_handler(StarletteHTTPException)
    def refused(request: Request, err: StarletteHTTPException) -> JSONResponse:
        """Any refusal as ``{"detail": ...}``; a 405 lists every method of the path in
        ``Allow`` (the router names only those of the first route it tried). The
        routes of ``v1`` are looked at in it: the app holds the router, not them."""
        headers = dict(err.headers or {})
        if err.status_code == 405:
            headers["Allow"] = ", ".join(
                _methods_of_path([*app.router.routes, *v1.routes], request)
            )
        return JSONResponse({"detail": err.detail}, status_code=err.status_code, headers=headers)

    @app.exception_handler(jobs.JobRequestError)
    def bad_job(request: Request, err: jobs.JobRequestError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(err)})

    @app.exception_handler(RecordError)
    def bad_request(request: Request, err: RecordError) -> JSONResponse:
        """A query the database refuses (a target it cannot parse, say) is the client's."""
        return JSONResponse(status_code=422, content={"detail": str(err)})

    @app.exception_handler(StorageError)
    @app.exception_handler(ConnectError)
    def unavailable(request: Request, err: DatabaseError) -> JSONResponse:
        """The database's storage failed under the request (a read-only file, a server
        gone): 503 with a one-line reason and when to try again, and one log line
        instead of a traceback. Nothing was stored: each write is one transaction."""
        reason = str(err).splitlines()[0]
        logger.warning("%s %s: 503: %s", request.method, request.url.path, reason)
        return JSONResponse(
            status_code=503,
            content={"detail": reason},
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}})
    def healthz() -> Health | JSONResponse:
        try:
            database.job_counts()
            stored = "ok"
        except DatabaseError as err:
            stored = str(err).splitlines()[0]
        working = NO_WORKERS if workers_health is None else workers_health()
        if stored == "ok" and working in ("ok", NO_WORKERS):
            return Health(status="ok", database=stored, workers=working)
        body = Health(status="unavailable", database=stored, workers=working)
        return JSONResponse(status_code=503, content=body.model_dump())

    @v1.get("/workloads", response_model=list[Workload], dependencies=[reader])
    def workloads() -> list[Workload]:
        return [workload_view(entry) for entry in database.workloads()]

    def of_a_workload(suffix: str, model: Any) -> Callable[[Route], Route]:
        """The decorator of a GET route under one workload (404 when it is unknown)."""
        path = f"/workloads/{{key}}{suffix}"
        return v1.get(path, response_model=model, responses=NOT_FOUND, dependencies=[reader])

    @of_a_workload("", Workload)
    def workload(key: str) -> Workload:
        return workload_view(entry_of(key))

    @of_a_workload("/targets", list[str])
    def targets(key: str) -> list[str]:
        entry_of(key)
        return database.targets(key)

    @of_a_workload("/best", list[BestSchedule])
    async def best(
        key: str,
        target: Annotated[str, Query(min_length=1, description="compile target")] = "llvm",
        k: Annotated[int, Query(ge=1, le=MAX_BEST, description="how many")] = 1,
    ) -> Response:
        """The ``k`` fastest. The same question within BEST_FRESH_SECONDS gets the same
        answer, encoded once and given from the event loop; else the database is asked
        from a thread."""

        def answer() -> bytes:
            entry = entry_of(key)
            found = database.best(key, target, k)
            retimed = [r.trace_hash for r in found if r.purpose is Purpose.RETIME]
            searched = database.search_seconds(key, target, retimed) if retimed else {}
            views = [
                best_view_of(
                    r,
                    entry,
                    searched.get(r.trace_hash) if r.purpose is Purpose.RETIME else r.seconds,
                )
                for r in found
            ]
            return BEST_LIST.dump_json(views)

        question = (key, target, k)
        body = best_answers.fresh(question) or await run_in_threadpool(
            best_answers.get, question, answer
        )
        return Response(content=body, media_type="application/json")

    @v1.post(
        "/best",
        response_model=list[BestSchedule],
        responses=NOT_FOUND,
        dependencies=[reader],
    )
    async def best_of_spec(query: BestQuery) -> Response:
        """The best schedules of the workload an operator spec names (as a job names
        it), so that a client needs no workload key."""
        try:
            task = await run_in_threadpool(TuneTask.from_spec, query.workload, query.target)
        except ValueError as err:
            raise HTTPException(status_code=422, detail=f"workload: {err}") from None
        return await best(task.workload_key, query.target, query.k)

    @of_a_workload("/records", list[Record])
    def records(
        key: str,
        target: Annotated[str | None, Query(min_length=1)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        before_id: Annotated[
            int | None, Query(ge=1, le=INT64_MAX, description="page on: records older than this id")
        ] = None,
    ) -> list[Record]:
        entry = entry_of(key)
        page = database.records(key, target, limit=limit, before_id=before_id)
        return [record_view(record, entry) for record in page]

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
        return _job(database, _stored_job(database, job_id))

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
        stored = await run_in_threadpool(_stored_job, database, job_id)
        flops = await run_in_threadpool(_flop_counts, database, stored)

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
        job = _stored_job(database, job_id)
        if token.role is not Role.ADMIN and job.token_id != token.id:
            raise HTTPException(
                status_code=403,
                detail=f"job {job_id} was submitted by another token; only an admin token "
                "cancels the jobs of others",
            )
        return _job(database, database.cancel_job(job_id))

    add_history_routes(
        v1,
        database,
        reader,
        entry_of,
        lambda job_id: _stored_job(database, job_id),
        lambda job: _flop_counts(database, job),
    )
    add_model_routes(v1, database, reader, submitter)
    app.include_router(v1)
    app.mount("/ui", StaticFiles(directory=DASHBOARD, html=True), name="dashboard")

    @app.get("/", include_in_schema=False)
    def dashboard() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return app


@asynccontextmanager
async def _few_route_threads(app: FastAPI) -> AsyncIterator[None]:
    """Run the routes on ROUTE_THREADS threads instead of anyio's 40: they hold the
    GIL for most of their time, and 40 of them contending for it answered "get job"
    207 times a second where 8 answered 270 (benchmarks/service.py, 32 clients, 2
    cores)."""
    to_thread.current_default_thread_limiter().total_tokens = ROUTE_THREADS
    yield


async def _only_known_parameters(request: Request) -> None:
    """Refuse a query parameter the route does not take (a misspelt ``?stauts=done``
    would otherwise be ignored without a word)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _route_query_names(route)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise HTTPException(
            status_code=422,
            detail=f"query: unknown parameter {', '.join(unknown)}; this route takes {takes}",
        )


_QUERY_NAMES: Memo[tuple[str, frozenset[str]], frozenset[str]] = Memo()


def _route_query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters a route takes, found once per route (not at each request)."""
    return _QUERY_NAMES.get(
        (route.path, frozenset(route.methods or ())),
        lambda: frozenset(_query_names(route.dependant)),
    )


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for inner in dependant.dependencies:
        names |= _query_names(inner)
    return names


def _methods_of_path(routes: list[BaseRoute], request: Request) -> list[str]:
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, BaseRoute) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def _stored_job(database: SQLDatabase, job_id: int) -> StoredJob:
    try:
        return database.job(job_id)
    except RecordError:
        raise HTTPException(status_code=404, detail=f"no job with id {job_id}") from None


def _job(database: SQLDatabase, job: StoredJob) -> Job:
    return job_view(job, _flop_counts(database, job))


def _flop_counts(database: SQLDatabase, job: StoredJob) -> dict[str, int | None]:
    """The flop count of each workload the job tunes, by key."""
    keys = {t.workload_key for t in job.tasks}
    return {entry.key: entry.flop_count for entry in database.workloads(keys)}


def _entry(database: SQLDatabase, key: str) -> WorkloadEntry:
    try:
        return database.workload(key)
    except RecordError:
        raise HTTPException(status_code=404, detail=f"no workload with key {key!r}") from None
