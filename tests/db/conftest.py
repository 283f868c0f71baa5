"""The databases the db tests run against: a fresh SQLite file and a fresh database on
the PostgreSQL server the tests start (skipped where PostgreSQL is not installed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import BACKENDS, fresh_url

from db import SQLDatabase


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_url(request.param, tmp_path)


@pytest.fixture
def database(database_url: str) -> Iterator[SQLDatabase]:
    db = SQLDatabase(database_url)
    yield db
    db.close()
