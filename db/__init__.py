"""The tuning database: every measurement tensortune makes, and the best schedules.

``db.create()`` opens the embedded SQLite file, ``db.create(url)`` PostgreSQL or another
SQLite file, ``db.create("memory")`` a database held in this process; all of them are
a ``db.Database``. ``compiler.build(mod, target, database=db)`` applies their best traces.
"""

from __future__ import annotations

from typing import Any

from db.base import Database
from db.engine import URL_FORMS, URL_VARIABLE, default_sqlite_path, default_url
from db.errors import ConnectError, DatabaseError, QuotaError, RecordError, SchemaError
from db.exchange import ImportSummary
from db.memory import MemoryDatabase
from db.model_files import ModelFile
from db.record import (
    Job,
    JobStatus,
    JobTask,
    Measurement,
    Purpose,
    TuningRecord,
    WorkloadEntry,
)
from db.sql import SQLDatabase
from db.tokens import ApiToken, Role

KINDS = ("memory", "sql")


def create(kind_or_url: str | None = None, **options: Any) -> Database:
    """A database by kind or by URL: ``"memory"``; ``"sql"`` or None (the URL of
    ``$TENSORTUNE_DB_URL``, else the embedded SQLite file); or a database URL.
    ``options`` go to the implementation (``create=False`` for SQL)."""
    if kind_or_url == "memory":
        return MemoryDatabase(**options)
    if kind_or_url in (None, "sql"):
        return SQLDatabase(**options)
    if isinstance(kind_or_url, str) and "://" in kind_or_url:
        return SQLDatabase(kind_or_url, **options)
    raise DatabaseError(
        f"unknown database {kind_or_url!r}; give one of the kinds {', '.join(KINDS)} "
        f"or a URL ({', '.join(URL_FORMS)})"
    )


__all__ = [
    "KINDS",
    "URL_VARIABLE",
    "ApiToken",
    "ConnectError",
    "Database",
    "DatabaseError",
    "ImportSummary",
    "Job",
    "JobStatus",
    "JobTask",
    "Measurement",
    "MemoryDatabase",
    "ModelFile",
    "Purpose",
    "QuotaError",
    "RecordError",
    "Role",
    "SQLDatabase",
    "SchemaError",
    "TuningRecord",
    "WorkloadEntry",
    "create",
    "default_sqlite_path",
    "default_url",
]
