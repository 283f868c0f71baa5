"""Model files: ONNX models uploaded to the service, each stored once per set of input
shapes to import it with (keyed by the file's SHA-256 and the shapes'). The database
keeps the bytes, in pieces, and knows nothing of ONNX: checking that a file is a model the
compiler imports is the service's job, before it stores one. ``ModelStore`` is what the
service asks of them; the functions below are ``SQLDatabase``'s implementation."""

from __future__ import annotations

import abc
import hashlib
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from sqlalchemy import Engine, Row, insert, select
from sqlalchemy.exc import IntegrityError

from db.errors import RecordError
from db.models import ModelFileChunkRow, ModelFileRow
from db.queries import as_utc, now

# The size of the pieces a model file is stored in (migration 0012 cut the files stored
# before it alike).
CHUNK_BYTES = 4 << 20


@dataclass(frozen=True)
class ModelFile:
    id: int
    name: str
    digest: str
    size: int
    shapes: dict[str, tuple[int, ...]]
    created_at: datetime
    token_id: int | None


class ModelStore(abc.ABC):
    """Uploaded model files as the service keeps them: stored once, described, read."""

    @abc.abstractmethod
    def commit_model_file(
        self,
        name: str,
        content: bytes | IO[bytes],
        shapes: Mapping[str, Sequence[int]],
        *,
        token_id: int | None = None,
    ) -> tuple[ModelFile, bool]:
        """The stored file of ``content`` (bytes, or a binary file read from its start)
        with ``shapes`` and whether this call stored it: the same bytes with the same
        shapes twice are one model (the first name kept); with other shapes, another."""

    @abc.abstractmethod
    def model_file(self, model_id: int) -> ModelFile:
        """The stored model file; RecordError when there is none."""

    @abc.abstractmethod
    def write_model_content(self, model_id: int, target: IO[bytes]) -> None:
        """Write a stored model file's bytes to ``target``, a piece at a time;
        RecordError when there is none."""


def commit_model_file(
    engine: Engine,
    name: str,
    content: bytes | IO[bytes],
    shapes: Mapping[str, Sequence[int]],
    token_id: int | None,
) -> tuple[ModelFile, bool]:
    """The stored file of ``content`` (bytes, or a binary file read from its start) with
    ``shapes`` and whether this call stored it: the same bytes with the same shapes twice
    are one model (the first name kept); with other shapes, another. A file is read
    twice, a piece at a time: once for its digest, once to store it."""
    source, digest, size = checked_content(name, content)
    plain_shapes = plain(shapes)
    shapes_key = shapes_key_of(plain_shapes)
    stored = _stored(engine, digest, shapes_key)
    if stored is not None:
        return stored, False
    row = {
        "name": name,
        "digest": digest,
        "shapes_key": shapes_key,
        "size": size,
        "shapes": plain_shapes,
        "created_at": now(),
        "token_id": token_id,
    }
    stored_here = True
    try:
        with engine.begin() as connection:
            model_id = connection.execute(
                insert(ModelFileRow).values(**row).returning(ModelFileRow.id)
            ).scalar_one()
            for seq, piece in enumerate(pieces(source)):
                connection.execute(
                    insert(ModelFileChunkRow).values(model_id=model_id, seq=seq, data=piece)
                )
    except IntegrityError:
        stored_here = False  # a racing upload of the same model stored it first
    found = _stored(engine, digest, shapes_key)
    assert found is not None, "this call or a racing one stored it"
    return found, stored_here


def model_file(engine: Engine, model_id: int) -> ModelFile:
    with engine.connect() as connection:
        row = connection.execute(select(*_COLUMNS).where(ModelFileRow.id == model_id)).first()
    if row is None:
        raise RecordError(f"no model file with id {model_id!r}")
    return _from_row(row)


def write_model_content(engine: Engine, model_id: int, target: IO[bytes]) -> None:
    """Write the bytes of a stored model file to ``target``, a piece at a time."""
    model_file(engine, model_id)
    stmt = (
        select(ModelFileChunkRow.data)
        .where(ModelFileChunkRow.model_id == model_id)
        .order_by(ModelFileChunkRow.seq)
    )
    with engine.connect() as connection:
        for piece in connection.execution_options(yield_per=1).execute(stmt).scalars():
            target.write(piece)


_COLUMNS = (
    ModelFileRow.id,
    ModelFileRow.name,
    ModelFileRow.digest,
    ModelFileRow.size,
    ModelFileRow.shapes,
    ModelFileRow.created_at,
    ModelFileRow.token_id,
)


def checked_content(name: str, content: bytes | IO[bytes]) -> tuple[IO[bytes], str, int]:
    """The content as a file at its start, its SHA-256 and its size; RecordError for a
    name out of bounds or an empty file."""
    if not name or len(name) > 256:
        raise RecordError(f"model name: give 1 to 256 characters, got {len(name)}")
    source = io.BytesIO(content) if isinstance(content, bytes) else content
    digest, size = _digest(source)
    if not size:
        raise RecordError("model file: it is empty")
    return source, digest, size


def plain(shapes: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    return {key: [int(d) for d in dims] for key, dims in shapes.items()}


def shapes_key_of(shapes: Mapping[str, list[int]]) -> str:
    """The SHA-256 of the shapes as canonical JSON (migration 0009 computes it alike)."""
    canonical = json.dumps(shapes, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _digest(source: IO[bytes]) -> tuple[str, int]:
    """The SHA-256 and the size of the file, which is then read again from its start."""
    source.seek(0)
    digest = hashlib.sha256()
    size = 0
    for piece in pieces(source):
        digest.update(piece)
        size += len(piece)
    source.seek(0)
    return digest.hexdigest(), size


def pieces(source: IO[bytes]) -> Iterator[bytes]:
    return iter(lambda: source.read(CHUNK_BYTES), b"")


def _stored(engine: Engine, digest: str, shapes_key: str) -> ModelFile | None:
    stmt = select(*_COLUMNS).where(
        ModelFileRow.digest == digest, ModelFileRow.shapes_key == shapes_key
    )
    with engine.connect() as connection:
        row = connection.execute(stmt).first()
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
