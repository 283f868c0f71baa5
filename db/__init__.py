"""The tuning database: every measurement tensortune makes, and the best schedules.

``db.create(url)`` opens a SQLite file or PostgreSQL (``db.default_url()`` is the
default one the command line uses: ``$TENSORTUNE_DB_URL``, else the embedded SQLite
file), ``db.create("memory")`` a database held in this process; both are a
``db.TuningStore``, and so a ``db.Database``. ``compiler.build(mod, target,
database=db)`` applies their best traces.
"""

from __future__ import annotations

from typing import Any

from db.base import Database
from db.engine import URL_FORMS
from db.environment import URL_VARIABLE, default_sqlite_path, default_url
from db.errors import ConnectError, DatabaseError, QuotaError, RecordError, SchemaError
from db.exchange import ImportSummary
from db.history import History, JobBest
from db.jobs import JobQueue, JobStore
from db.memory import MemoryDatabase
from db.model_files import ModelFile, ModelStore
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
from db.store import TuningStore
from db.tokens import ApiToken, Role, TokenStore

KINDS = ("memory",)


def create(kind_or_url: str, **options: Any) -> TuningStore:
    """A database by kind or by URL: ``"memory"``, or a database URL. ``options`` go
    to the implementation (``create=False`` for SQL)."""
    if kind_or_url == "memory":
        return MemoryDatabase(**options)
    if isinstance(kind_or_url, str) and "://" in kind_or_url:
        return SQLDatabase(kind_or_url, **options)
    raise DatabaseError(
        f"unknown database {kind_or_url!r}; give the kind {', '.join(KINDS)} "
        f"or a URL ({', '.join(URL_FORMS)})"
    )


__all__ = [
    "KINDS",
    "URL_VARIABLE",
    "ApiToken",
    "ConnectError",
    "Database",
    "DatabaseError",
    "History",
    "ImportSummary",
    "Job",
    "JobBest",
    "JobQueue",
    "JobStatus",
    "JobStore",
    "JobTask",
    "Measurement",
    "MemoryDatabase",
    "ModelFile",
    "ModelStore",
    "Purpose",
    "QuotaError",
    "RecordError",
    "Role",
    "SQLDatabase",
    "SchemaError",
    "TokenStore",
    "TuningRecord",
    "TuningStore",
    "WorkloadEntry",
    "create",
    "default_sqlite_path",
    "default_url",
]
