"""Fixtures of the tuning-loop tests: the real local workers with quick measurement
settings (started once per module) and a fresh SQLite database per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from quick_measure import QUICK

import workers
from db import Database, SQLDatabase
from workers import Workers


@pytest.fixture(scope="module")
def backend() -> Iterator[Workers]:
    with workers.create("local", config=QUICK) as local:
        yield local


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    with SQLDatabase(f"sqlite:///{tmp_path / 'tune.db'}") as opened:
        yield opened
