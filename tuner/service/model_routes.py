"""The routes of whole models: an ONNX file sent as the request body is imported,
stored and answered with its tasks; a stored model is shown again by id. A model job
is then a job naming the model (POST /v1/jobs with ``model``).

The server never holds a model file whole: the body is written to a temporary file as
it arrives, and a process of its own imports and stores it (``model_check``); a stored
model's view is made there too, once."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool

from db import ApiToken, ModelStore, RecordError
from tuner.model_tasks import parse_input_shapes
from tuner.service.memo import Memo
from tuner.service.schemas import NO_MODEL, ErrorDetail, ModelId, ModelView

# The largest model file taken (the body limit of POST /v1/models).
MAX_MODEL_BYTES = 512 << 20
# The stored models whose views GET /v1/models/{id} keeps.
MAX_VIEWS = 256
# How long the process that imports a model file may take.
CHECK_TIMEOUT_S = 600.0
UPLOAD: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


NO_CHECK_DETAIL = (
    "model files need a database that another process can open (an SQLite file or "
    "PostgreSQL); this server's database lives in its memory"
)
NO_CHECK: dict[int | str, dict[str, Any]] = {
    501: {"model": ErrorDetail, "description": "the database is in memory: no model files"}
}


class ModelCheckError(RuntimeError):
    """The process that reads a model file died or passed its deadline (a file that
    crashes the parser, or one too large for the memory the process may take)."""


def add_model_routes(
    v1: APIRouter, database: ModelStore, url: str | None, reader: Any, submitter: Any
) -> None:
    """The model routes over ``database``, which the check process opens again at
    ``url`` (given on its standard input, never its argv); without a ``url`` they
    answer 501."""

    @v1.post("/models", response_model=ModelView, openapi_extra=UPLOAD, responses=NO_CHECK)
    async def upload_model(
        request: Request,
        name: Annotated[str, Query(min_length=1, max_length=256, description="a name")],
        shape: Annotated[
            list[str],
            Query(description="NAME=D0,D1,...: fixes the dimensions an input leaves open"),
        ] = [],  # noqa: B006 (FastAPI copies a default; this list is never changed)
        token: Any = submitter,
    ) -> ModelView:
        checker_url = _checkable(url)
        shapes = _shapes(shape)
        limit = token.upload_limit if token is not None else None
        declared = request.headers.get("content-length", "")
        if limit is not None and declared.isdigit() and int(declared) > limit:
            raise _over(token)
        with tempfile.NamedTemporaryFile(prefix="tensortune-upload-", suffix=".onnx") as spool:
            async for chunk in request.stream():
                spool.write(chunk)
                if limit is not None and spool.tell() > limit:
                    raise _over(token)
            spool.flush()
            if not spool.tell():
                raise HTTPException(status_code=422, detail="body: the model file is empty")
            checked = {
                "url": checker_url,
                "path": spool.name,
                "name": name,
                "shapes": {key: list(dims) for key, dims in shapes.items()},
                "token_id": token and token.id,
            }
            try:
                answer = await run_in_threadpool(_checked, checked)
            except ModelCheckError as err:
                raise HTTPException(status_code=422, detail=f"body: {err}") from None
        if "error" in answer:
            raise HTTPException(status_code=422, detail=f"body: {answer['error']}")
        return ModelView.model_validate(answer["view"])

    # A stored model never changes: its view is made once, not at every read.
    views: Memo[int, ModelView] = Memo(size=MAX_VIEWS)

    @v1.get("/models/{model_id}", response_model=ModelView, responses=NO_MODEL | NO_CHECK)
    def get_model(model_id: ModelId, token: Any = reader) -> ModelView:
        checker_url = _checkable(url)
        return views.get(model_id, lambda: _stored_view(database, checker_url, model_id))


def _checkable(url: str | None) -> str:
    """``url``; the 501 refusal when the database has none."""
    if url is None:
        raise HTTPException(status_code=501, detail=NO_CHECK_DETAIL)
    return url


def _over(token: ApiToken) -> HTTPException:
    """The refusal of a file over the token's upload limit."""
    return HTTPException(
        status_code=413,
        detail=f"the model file is over {token.upload_limit} bytes, the upload limit of "
        f"token {token.name!r}",
    )


def _stored_view(database: ModelStore, url: str, model_id: int) -> ModelView:
    try:
        database.model_file(model_id)
    except RecordError:
        raise HTTPException(status_code=404, detail=f"there is no model {model_id}") from None
    return ModelView.model_validate(_checked({"url": url, "model_id": model_id})["view"])


def _checked(request: dict[str, Any]) -> dict[str, Any]:
    """The answer of a ``model_check`` process to ``request``."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tuner.service.model_check"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ModelCheckError(
            f"reading the model file took longer than {CHECK_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ModelCheckError(f"the process reading the model file failed: {last}")
    return json.loads(done.stdout)


def _shapes(given: list[str]) -> dict[str, tuple[int, ...]]:
    try:
        return parse_input_shapes(given)
    except ValueError as err:
        raise HTTPException(status_code=422, detail=f"query.shape: {err}") from None
