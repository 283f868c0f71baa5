"""Model files in SQL: stored in pieces and read back whole (what every implementation
does with a model file is in ``tests/contracts/test_model_store_contract.py``)."""

from __future__ import annotations

import hashlib
import io

import numpy as np
from sqlalchemy import text

from db import model_files
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
