"""How the service answers a request it refuses: every refusal is ``{"detail": ...}``
with one message, a bad field names itself, and a database that failed under the
request is a 503 that says when to try again."""

from __future__ import annotations

import logging

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from db import ConnectError, DatabaseError, RecordError
from db.errors import StorageError
from tuner.service import jobs

logger = logging.getLogger(__name__)

# What a 503 for a failed database asks the client to wait before it tries again.
RETRY_AFTER_SECONDS = 5


def add_error_handlers(app: FastAPI, v1: APIRouter) -> None:
    """Answer refusals of ``app`` and of the routes of ``v1`` (which ``app`` includes)."""

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


def _methods_of_path(routes: list[BaseRoute], request: Request) -> list[str]:
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, BaseRoute) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)
