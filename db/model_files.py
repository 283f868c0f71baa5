"""Model files: ONNX models uploaded to the service, each stored once (by SHA-256)
with the input shapes to import it with. The database keeps the bytes and knows
nothing of ONNX: checking that a file is a model the compiler imports is the
service's job, before it stores one."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Row, insert, select
from sqlalchemy.exc import IntegrityError

from db.errors import RecordError
from db.models import ModelFileRow
from db.queries import as_utc, now


@dataclass(frozen=True)
class ModelFile:
    id: int
    name: str
    digest: str
    size: int
    shapes: dict[str, tuple[int, ...]]
    created_at: datetime
    token_id: int | None


def commit_model_file(
    engine: Engine,
    name: str,
    content: bytes,
    shapes: Mapping[str, Sequence[int]],
    token_id: int | None,
) -> tuple[ModelFile, bool]:
    """The stored file of ``content`` and whether this call stored it: the same bytes
    twice are one file (the first name and shapes kept)."""
    if not name or len(name) > 256:
        raise RecordError(f"model name: give 1 to 256 characters, got {len(name)}")
    if not content:
        raise RecordError("model file: it is empty")
    digest = hashlib.sha256(content).hexdigest()
    stored = _with_digest(engine, digest)
    if stored is not None:
        return stored, False
    row = {
        "name": name,
        "digest": digest,
        "size": len(content),
        "shapes": {key: [int(d) for d in dims] for key, dims in shapes.items()},
        "content": content,
        "created_at": now(),
        "token_id": token_id,
    }
    stored_here = True
    try:
        with engine.begin() as connection:
            connection.execute(insert(ModelFileRow).values(**row))
    except IntegrityError:
        stored_here = False  # a racing upload of the same bytes stored them first
    found = _with_digest(engine, digest)
    assert found is not None, "this call or a racing one stored it"
    return found, stored_here


def model_file(engine: Engine, model_id: int) -> ModelFile:
    with engine.connect() as connection:
        row = connection.execute(select(*_COLUMNS).where(ModelFileRow.id == model_id)).first()
    if row is None:
        raise RecordError(f"no model file with id {model_id!r}")
    return _from_row(row)


def model_content(engine: Engine, model_id: int) -> bytes:
    with engine.connect() as connection:
        content = connection.execute(
            select(ModelFileRow.content).where(ModelFileRow.id == model_id)
        ).scalar_one_or_none()
    if content is None:
        raise RecordError(f"no model file with id {model_id!r}")
    return bytes(content)


_COLUMNS = (
    ModelFileRow.id,
    ModelFileRow.name,
    ModelFileRow.digest,
    ModelFileRow.size,
    ModelFileRow.shapes,
    ModelFileRow.created_at,
    ModelFileRow.token_id,
)


def _with_digest(engine: Engine, digest: str) -> ModelFile | None:
    with engine.connect() as connection:
        row = connection.execute(select(*_COLUMNS).where(ModelFileRow.digest == digest)).first()
    return None if row is None else _from_row(row)


def _from_row(row: Row[Any]) -> ModelFile:
    return ModelFile(
        id=row.id,
        name=row.name,
        digest=row.digest,
        size=row.size,
        shapes={key: tuple(dims) for key, dims in row.shapes.items()},
        created_at=as_utc(row.created_at),
        token_id=row.token_id,
    )
