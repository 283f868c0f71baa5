"""The service's application over one database: the token checks, the body limit,
``/healthz``, the dashboard, and the routes, one module per resource (workloads,
jobs, a live view's history, models; ``errors`` answers what they refuse).

Routes are plain functions that FastAPI runs in its thread pool, so one slow query
does not hold the others; the database opens a connection per call. The event
stream is the exception: it lasts as long as its job, so it is a coroutine that
takes a thread only to read the job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from db import Database, DatabaseError, RecordError, Role, TuningStore, WorkloadEntry
from tuner.service.access import TokenLookup, caller
from tuner.service.body_limit import BodyLimit
from tuner.service.errors import add_error_handlers
from tuner.service.history_routes import add_history_routes
from tuner.service.job_routes import add_job_routes, flop_counts, stored_job
from tuner.service.memo import Memo
from tuner.service.metrics import add_metrics
from tuner.service.model_routes import MAX_MODEL_BYTES, add_model_routes
from tuner.service.schemas import ErrorDetail, Health
from tuner.service.workload_routes import add_workload_routes

API_PREFIX = "/v1"
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
NO_WORKERS = "none in this server: coordinators run apart"
# The dashboard: a page, its script and style sheet, and the chart library it uses.
DASHBOARD = Path(__file__).parent / "static"
# Threads the routes run on (see _few_route_threads).
ROUTE_THREADS = 8
# The largest request body taken: a job of many specs fits in a small fraction of it.
MAX_BODY_BYTES = 1 << 20


def create_app(
    database: TuningStore,
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
    this server (None: it has none, they run apart). A model file is read in a process
    of its own, which opens the database again by its ``url`` (``model_check``); over a
    database without one (``MemoryDatabase``) the model routes answer 501."""
    app = FastAPI(
        lifespan=_few_route_threads,
        title="tensortune",
        summary="Tuned schedules of tensor programs: the tuning database over HTTP.",
        version="1",
    )
    entries: Memo[str, WorkloadEntry] = Memo()

    def entry_of(key: str) -> WorkloadEntry:
        """The stored workload of ``key``; 404 when there is none."""
        return entries.get(key, lambda: _entry(database, key))

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

    add_error_handlers(app, v1)
    add_workload_routes(v1, database, reader, entry_of)
    add_job_routes(v1, database, reader, submitter, submitted)
    add_history_routes(
        v1,
        database,
        reader,
        entry_of,
        lambda job_id: stored_job(database, job_id),
        lambda job: flop_counts(database, job),
    )
    add_model_routes(v1, database, database.url, reader, submitter)
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


def _entry(database: Database, key: str) -> WorkloadEntry:
    try:
        return database.workload(key)
    except RecordError:
        raise HTTPException(status_code=404, detail=f"no workload with key {key!r}") from None
