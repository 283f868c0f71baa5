"""Fixtures of the tuning-loop tests: the real local workers with quick measurement
settings (started once per module), a fresh SQLite database per test, and the
service's API on it, served by a real uvicorn server, with an admin token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from quick_measure import QUICK
from service_server import serving

import workers
from db import Database, Role, SQLDatabase
from tuner.service import create_app
from workers import Workers


@pytest.fixture(scope="module")
def backend() -> Iterator[Workers]:
    with workers.create("local", config=QUICK) as local:
        yield local


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    with SQLDatabase(f"sqlite:///{tmp_path / 'tune.db'}") as opened:
        yield opened


@pytest.fixture
def admin(database: SQLDatabase) -> str:
    """The secret of an admin token."""
    return database.create_token("admin", Role.ADMIN)[1]


@pytest.fixture
def server(database: SQLDatabase) -> Iterator[str]:
    """The URL of the service's API over ``database``."""
    with serving(create_app(database)) as url:
        yield url
