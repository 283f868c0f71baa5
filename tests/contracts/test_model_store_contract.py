"""The contract of ``db.ModelStore``, over every implementation: a model file is stored
once per set of input shapes, from bytes or from a file, numbered in order, and read
back whole; an empty file or a bad name is refused and nothing stored."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest

from db import RecordError


def test_a_file_is_stored_once_per_set_of_shapes_and_read_back_whole(database, tmp_path):
    content = np.random.default_rng(0).bytes(4321)
    path = tmp_path / "m.onnx"
    path.write_bytes(content)
    with path.open("rb") as file:
        stored, stored_now = database.commit_model_file("m", file, {"x": (1, 2)}, token_id=None)
    assert stored_now and (stored.id, stored.name, stored.size) == (1, "m", len(content))
    assert stored.digest == hashlib.sha256(content).hexdigest()
    assert stored.shapes == {"x": (1, 2)} and stored.token_id is None
    assert stored.created_at.tzinfo is not None
    again, stored_now = database.commit_model_file("n", content, {"x": [1, 2]})
    assert not stored_now and again == stored
    other, stored_now = database.commit_model_file("n", content, {"x": [1, 4]})
    assert stored_now and (other.id, other.name, other.shapes) == (2, "n", {"x": (1, 4)})
    assert database.model_file(1) == stored and database.model_file(2) == other
    copy = io.BytesIO()
    database.write_model_content(other.id, copy)
    assert copy.getvalue() == content


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("m", b"", "model file: it is empty"),
        ("", b"onnx", "model name: give 1 to 256 characters, got 0"),
        ("x" * 257, b"onnx", "model name: give 1 to 256 characters, got 257"),
    ],
)
def test_a_bad_file_is_refused_and_nothing_is_stored(database, name, content, message):
    with pytest.raises(RecordError, match=message):
        database.commit_model_file(name, io.BytesIO(content), {})
    with pytest.raises(RecordError, match="no model file with id 1"):
        database.model_file(1)


def test_reading_a_model_that_is_not_stored_is_a_record_error(database):
    with pytest.raises(RecordError, match="no model file with id 7"):
        database.write_model_content(7, io.BytesIO())
