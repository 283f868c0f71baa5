"""The tables, as SQLAlchemy ORM models. Private to ``db``: the API hands out the
dataclasses of ``db.record`` instead.

The schema is created and changed only by the Alembic migrations in
``db/migrations``; a test checks that the migrations and these models agree.
Timestamps are stored in UTC. Run times are a JSON list; ``mean_seconds`` is set
only for successful records (a CHECK constraint says so), which is what keeps a
failure from ever looking like a slow success; ``min_seconds`` (the fastest run time,
what every ranking reads) likewise. Rows
are only ever inserted (and deleted by an explicit prune): a careful re-timing of a
trace is a row of its own with ``purpose`` "retime", next to the trace's "search" row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from db.record import STATUSES

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT.
RecordId = BigInteger().with_variant(Integer(), "sqlite")

PURPOSES = ("search", "retime")
JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")
ROLES = ("read", "submit", "admin")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class WorkloadRow(Base):
    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    json: Mapped[str] = mapped_column(Text)
    flop_count: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TargetRow(Base):
    __tablename__ = "targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target: Mapped[str] = mapped_column(String(500), unique=True)
    host_kind: Mapped[str] = mapped_column(String(200))


class TokenRow(Base):
    __tablename__ = "tokens"
    __table_args__ = (
        CheckConstraint(_in("role", ROLES), name="role"),
        CheckConstraint("quota IS NULL OR quota >= 0", name="quota"),
        CheckConstraint("upload_limit IS NULL OR upload_limit > 0", name="upload_limit"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    quota: Mapped[int | None] = mapped_column(Integer)
    upload_limit: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ModelFileRow(Base):
    __tablename__ = "model_files"
    # A file is stored once per set of input shapes it is imported with.
    __table_args__ = (UniqueConstraint("digest", "shapes_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    digest: Mapped[str] = mapped_column(String(64))
    shapes_key: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    shapes: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    token_id: Mapped[int | None] = mapped_column(ForeignKey("tokens.id"))


class ModelFileChunkRow(Base):
    """A model file's bytes in pieces (``db.model_files.CHUNK_BYTES`` each, the last one
    shorter), in the order of ``seq``: a file is written and read a piece at a time, so
    neither side of the connection holds it whole."""

    __tablename__ = "model_file_chunks"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("model_files.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_in("status", JOB_STATUSES), name="status"),
        # claim_job(): the queued job of the highest priority, the oldest among equals
        Index("ix_jobs_queue", "status", "priority", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    coordinator: Mapped[str | None] = mapped_column(String(128))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    token_id: Mapped[int | None] = mapped_column(ForeignKey("tokens.id"))
    priority: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        CheckConstraint(_in("status", JOB_STATUSES), name="status"),
        CheckConstraint("trials_asked >= 0 AND trials_done >= 0", name="trials"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    status: Mapped[str] = mapped_column(String(16))
    trials_asked: Mapped[int] = mapped_column(Integer)
    trials_done: Mapped[int] = mapped_column(Integer)
    best_seconds: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RecordRow(Base):
    __tablename__ = "records"
    __table_args__ = (
        CheckConstraint(_in("status", STATUSES), name="status"),
        CheckConstraint(
            "(status = 'ok' AND mean_seconds IS NOT NULL AND mean_seconds >= 0)"
            " OR (status <> 'ok' AND mean_seconds IS NULL)",
            name="mean_only_when_ok",
        ),
        CheckConstraint(
            "(status = 'ok' AND min_seconds IS NOT NULL AND min_seconds >= 0)"
            " OR (status <> 'ok' AND min_seconds IS NULL)",
            name="min_only_when_ok",
        ),
        CheckConstraint(_in("purpose", PURPOSES), name="purpose"),
        # best(): one workload's current-format successes on one target, in answer order
        Index(
            "ix_records_best",
            "workload_id",
            "target_id",
            "status",
            "trace_version",
            "min_seconds",
            "id",
        ),
        # best(): the fastest re-timing of each re-timed trace
        Index("ix_records_purpose", "workload_id", "target_id", "purpose", "trace_hash", "id"),
        # is_measured(): has this schedule been measured here already
        Index("ix_records_trace", "workload_id", "target_id", "trace_hash"),
    )

    id: Mapped[int] = mapped_column(RecordId, primary_key=True, autoincrement=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    trace: Mapped[str] = mapped_column(Text)
    trace_hash: Mapped[str] = mapped_column(String(64))
    trace_version: Mapped[int] = mapped_column(Integer)
    tensortune_version: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    run_times: Mapped[list[float]] = mapped_column(JSON)
    mean_seconds: Mapped[float | None] = mapped_column(Float)
    min_seconds: Mapped[float | None] = mapped_column(Float)
    purpose: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    worker_host: Mapped[str] = mapped_column(String(200))
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
