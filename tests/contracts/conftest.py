"""Every implementation of the database's interfaces, for the contract tests: held in
memory, an SQLite file, and a real PostgreSQL server. A contract test takes
``database`` (one empty store) or ``make`` (a function that opens another), and asserts
the same outcome of each."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pg_server import fresh_url

import db
from db import TuningStore

KINDS = ("memory", "sqlite", "postgresql")


@pytest.fixture(params=KINDS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], TuningStore]]:
    """A function that opens a new, empty database of the parameter's kind."""
    opened: list[TuningStore] = []

    def open_one() -> TuningStore:
        if request.param == "memory":
            database = db.create("memory")
        else:
            folder = tmp_path / str(len(opened))
            folder.mkdir()
            database = db.create(fresh_url(request.param, folder))
        opened.append(database)
        return database

    yield open_one
    for database in opened:
        database.close()


@pytest.fixture
def database(make: Callable[[], TuningStore]) -> TuningStore:
    return make()
