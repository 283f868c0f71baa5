"""The tuning database: every measurement tensortune makes, and the best schedules.

``Database(url)`` opens the embedded SQLite file by default or PostgreSQL by URL;
``compiler.build(mod, target, database=db)`` applies its best traces.
"""

from db.database import Database
from db.engine import URL_VARIABLE, default_sqlite_path, default_url
from db.errors import ConnectError, DatabaseError, RecordError, SchemaError
from db.records import (
    Job,
    JobStatus,
    JobTask,
    Measurement,
    TuningRecord,
    WorkloadEntry,
)
from db.transfer import ImportSummary

__all__ = [
    "URL_VARIABLE",
    "ConnectError",
    "Database",
    "DatabaseError",
    "ImportSummary",
    "Job",
    "JobStatus",
    "JobTask",
    "Measurement",
    "RecordError",
    "SchemaError",
    "TuningRecord",
    "WorkloadEntry",
    "default_sqlite_path",
    "default_url",
]
