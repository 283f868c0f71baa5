"""The routes of whole models: an ONNX file sent as the request body is imported,
stored and answered with its tasks; a stored model is shown again by id. A model job
is then a job naming the model (POST /v1/jobs with ``model``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool

from compiler.graph import Graph
from db import ModelFile, RecordError, SQLDatabase
from tuner.model_tasks import extract_tasks, parse_input_shapes
from tuner.service.memo import Memo
from tuner.service.model_files import ModelFileError, read_model, store_model
from tuner.service.schemas import NO_MODEL, ModelId, ModelTaskView, ModelView

# The largest model file taken (the body limit of POST /v1/models).
MAX_MODEL_BYTES = 512 << 20
# The stored models whose views GET /v1/models/{id} keeps.
MAX_VIEWS = 256
UPLOAD: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def add_model_routes(v1: APIRouter, database: SQLDatabase, reader: Any, submitter: Any) -> None:
    @v1.post("/models", response_model=ModelView, openapi_extra=UPLOAD)
    async def upload_model(
        request: Request,
        name: Annotated[str, Query(min_length=1, max_length=256, description="a name")],
        shape: Annotated[
            list[str],
            Query(description="NAME=D0,D1,...: fixes the dimensions an input leaves open"),
        ] = [],  # noqa: B006 (FastAPI copies a default; this list is never changed)
        token: Any = submitter,
    ) -> ModelView:
        content = await request.body()
        shapes = _shapes(shape)
        try:
            stored, new, graph = await run_in_threadpool(
                store_model, database, name, content, shapes, token_id=token and token.id
            )
        except ModelFileError as err:
            raise HTTPException(status_code=422, detail=f"body: {err}") from None
        return await run_in_threadpool(_view, stored, new, graph)

    # A stored model never changes: its view is made once (reading the file whole and
    # importing it), not at every read.
    views: Memo[int, ModelView] = Memo(size=MAX_VIEWS)

    @v1.get("/models/{model_id}", response_model=ModelView, responses=NO_MODEL)
    def get_model(model_id: ModelId, token: Any = reader) -> ModelView:
        return views.get(model_id, lambda: _stored_view(database, model_id))


def _stored_view(database: SQLDatabase, model_id: int) -> ModelView:
    try:
        stored = database.model_file(model_id)
    except RecordError:
        raise HTTPException(status_code=404, detail=f"there is no model {model_id}") from None
    graph = read_model(database.model_content(model_id), stored.shapes)
    return _view(stored, False, graph)


def _view(stored: ModelFile, new: bool, graph: Graph) -> ModelView:
    tasks = [
        ModelTaskView(
            workload_key=task.task.workload_key,
            kind=task.kind,
            weight=task.weight,
            flop_count=task.task.flop_count,
            worth_tuning=task.worth_tuning,
        )
        for task in extract_tasks(graph)
    ]
    return ModelView(
        id=stored.id,
        name=stored.name,
        digest=stored.digest,
        size=stored.size,
        created_at=stored.created_at,
        stored_now=new,
        inputs={name: list(kind.shape) for name, kind in graph.inputs.items()},
        tasks=tasks,
    )


def _shapes(given: list[str]) -> dict[str, tuple[int, ...]]:
    try:
        return parse_input_shapes(given)
    except ValueError as err:
        raise HTTPException(status_code=422, detail=f"query.shape: {err}") from None
