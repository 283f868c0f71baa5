"""The routes that read what the database knows of a workload: the workloads, a
workload's targets, its best schedules (by key, or by the operator spec a job names)
and its records, page by page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import TypeAdapter

from db import Purpose, TuningRecord, TuningStore, WorkloadEntry
from db.validate import INT64_MAX
from tuner.service.memo import Memo, RecentMemo
from tuner.service.schemas import NOT_FOUND, BestQuery, BestSchedule, Record, Workload
from tuner.service.views import best_view, record_view, workload_view
from tuner.task import TuneTask

Route = TypeVar("Route", bound=Callable[..., Any])

MAX_BEST = 100
MAX_PAGE = 1000
# How long an answer of "best" is served again before the database is asked anew: a
# tuning run adds records every few seconds, and build farms ask far more often.
BEST_FRESH_SECONDS = 1.0
BEST_LIST = TypeAdapter(list[BestSchedule])


def add_workload_routes(
    v1: APIRouter,
    database: TuningStore,
    reader: Any,
    entry_of: Callable[[str], WorkloadEntry],
) -> None:
    """Add the routes to ``v1``; ``entry_of`` answers 404 for a workload not stored."""
    best_views: Memo[int, BestSchedule] = Memo()
    best_answers: RecentMemo[tuple[str, str, int], bytes] = RecentMemo(BEST_FRESH_SECONDS)

    def best_view_of(
        record: TuningRecord, entry: WorkloadEntry, search_seconds: float | None
    ) -> BestSchedule:
        return best_views.get(record.id, lambda: best_view(record, entry, search_seconds))

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
