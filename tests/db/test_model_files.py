"""Model files in the database: stored once per set of shapes, in pieces, from bytes or
from a file, and read back whole."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from sqlalchemy import text

from db import RecordError, model_files
from db.engine import open_engine


def test_a_file_is_stored_in_pieces_and_read_back_whole(
    database, database_url, monkeypatch, tmp_path
):
    monkeypatch.setattr(model_files, "CHUNK_BYTES", 1000)
    content = np.random.default_rng(0).bytes(4321)
    path = tmp_path / "m.onnx"
    path.write_bytes(content)
    with path.open("rb") as file:
        stored, stored_now = database.commit_model_file("m", file, {"x": (1, 2)})
    assert stored_now and stored.size == len(content)
    assert stored.digest == hashlib.sha256(content).hexdigest()
    engine = open_engine(database_url)
    with engine.connect() as connection:
        sizes = connection.execute(
            text("SELECT LENGTH(data) FROM model_file_chunks ORDER BY seq")
        ).scalars()
        assert list(sizes) == [1000, 1000, 1000, 1000, 321]
    engine.dispose()
    copy = io.BytesIO()
    database.write_model_content(stored.id, copy)
    assert copy.getvalue() == content
    again, stored_now = database.commit_model_file("n", content, {"x": [1, 2]})
    assert (again.id, again.name, stored_now) == (stored.id, "m", False)


def test_an_empty_file_is_refused_and_nothing_is_stored(database):
    with pytest.raises(RecordError, match="it is empty"):
        database.commit_model_file("m", io.BytesIO(), {})
    with pytest.raises(RecordError, match="no model file with id 1"):
        database.model_file(1)


def test_reading_a_model_that_is_not_stored_is_a_record_error(database):
    with pytest.raises(RecordError, match="no model file with id 7"):
        database.write_model_content(7, io.BytesIO())
