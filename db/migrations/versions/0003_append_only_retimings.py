"""Records become append-only: a re-timing is a record of its own.

Every record gets a ``purpose`` ("search" for all that exist) and the fastest of its
run times (``min_seconds``, what every ranking reads: interference on a shared host
only ever slows a run, so the fastest repeat is the reproducible one). The
re-timing that 0002 stored inside a record (``retime_times``, ``retimed_at``) becomes
a new "retime" record of the same workload, target and trace, taken at
``retimed_at``; then those columns go. Target strings are rewritten to the
canonical spelling, which now always names the CPU's code-generation features
(``-mattr``); two spellings of one target become one. Nothing is lost: the downgrade
puts each trace's newest re-timing back on its newest search record (the target
strings keep their new spelling, which older versions read as well).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

import statistics

import sqlalchemy as sa
from alembic import op

from db.compiler_border import TargetError, canonical_target

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

RECORD_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COPIED = (
    "workload_id",
    "target_id",
    "trace",
    "trace_hash",
    "trace_version",
    "tensortune_version",
    "worker_host",
    "job_id",
)
RECORDS = sa.table(
    "records",
    sa.column("id", RECORD_ID),
    *(sa.column(name) for name in COPIED),
    sa.column("status", sa.String()),
    sa.column("run_times", sa.JSON()),
    sa.column("mean_seconds", sa.Float()),
    sa.column("min_seconds", sa.Float()),
    sa.column("purpose", sa.String()),
    sa.column("error", sa.Text()),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("retime_times", sa.JSON()),
    sa.column("retimed_seconds", sa.Float()),
    sa.column("retimed_at", sa.DateTime(timezone=True)),
)
MIN_CHECK = (
    "(status = 'ok' AND min_seconds IS NOT NULL AND min_seconds >= 0)"
    " OR (status <> 'ok' AND min_seconds IS NULL)"
)
RETIMED_INDEX = ["workload_id", "target_id", "trace_version", "retimed_seconds", "id"]
PURPOSE_INDEX = ["workload_id", "target_id", "purpose", "trace_hash", "id"]
BEST_INDEX = ["workload_id", "target_id", "status", "trace_version", "{}", "id"]


def upgrade() -> None:
    with op.batch_alter_table("records") as batch:
        batch.add_column(sa.Column("min_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("purpose", sa.String(length=16), nullable=True))
    connection = op.get_bind()
    _fill_purpose_and_minimums(connection)
    _insert_retimings(connection)
    _canonical_targets(connection)
    op.drop_index("ix_records_retimed", table_name="records")
    with op.batch_alter_table("records") as batch:
        batch.alter_column("purpose", existing_type=sa.String(length=16), nullable=False)
        for column in ("retime_times", "retimed_seconds", "retimed_at"):
            batch.drop_column(column)
        batch.create_check_constraint(op.f("ck_records_min_only_when_ok"), MIN_CHECK)
        batch.create_check_constraint(op.f("ck_records_purpose"), "purpose IN ('search', 'retime')")
    op.create_index("ix_records_purpose", "records", PURPOSE_INDEX)
    op.drop_index("ix_records_best", table_name="records")
    op.create_index("ix_records_best", "records", _best_index("min_seconds"))


def _best_index(seconds_column: str) -> list[str]:
    """The columns of best()'s index, ranked by ``seconds_column``."""
    return [seconds_column if name == "{}" else name for name in BEST_INDEX]


def _fill_purpose_and_minimums(connection: sa.Connection) -> None:
    connection.execute(sa.update(RECORDS).values(purpose="search"))
    successes = sa.select(RECORDS.c.id, RECORDS.c.run_times).where(RECORDS.c.status == "ok")
    minimums = [
        {"record_id": row.id, "fastest": min(row.run_times)}
        for row in connection.execute(successes)
    ]
    if minimums:
        connection.execute(
            sa.update(RECORDS)
            .where(RECORDS.c.id == sa.bindparam("record_id"))
            .values(min_seconds=sa.bindparam("fastest")),
            minimums,
        )


def _insert_retimings(connection: sa.Connection) -> None:
    retimed = (
        sa.select(
            *(RECORDS.c[name] for name in COPIED), RECORDS.c.retime_times, RECORDS.c.retimed_at
        )
        .where(RECORDS.c.retime_times.is_not(None))
        .order_by(RECORDS.c.retimed_at, RECORDS.c.id)
    )
    rows = [
        {
            **{name: row._mapping[name] for name in COPIED},
            "status": "ok",
            "run_times": list(row.retime_times),
            "mean_seconds": statistics.fmean(row.retime_times),
            "min_seconds": min(row.retime_times),
            "purpose": "retime",
            "error": None,
            "created_at": row.retimed_at,
        }
        for row in connection.execute(retimed)
    ]
    if rows:
        connection.execute(sa.insert(RECORDS), rows)


def _canonical_targets(connection: sa.Connection) -> None:
    targets = sa.table("targets", sa.column("id", sa.Integer()), sa.column("target", sa.String()))
    tasks = sa.table("tasks", sa.column("target_id", sa.Integer()))
    ids = {row.target: row.id for row in connection.execute(sa.select(targets))}
    for old, old_id in sorted(ids.items()):
        try:
            new = canonical_target(old)
        except TargetError:
            continue
        if new == old:
            continue
        if new in ids:
            for table in (RECORDS, tasks):
                connection.execute(
                    sa.update(table).where(table.c.target_id == old_id).values(target_id=ids[new])
                )
            connection.execute(sa.delete(targets).where(targets.c.id == old_id))
        else:
            connection.execute(sa.update(targets).where(targets.c.id == old_id).values(target=new))
            ids[new] = old_id


def downgrade() -> None:
    op.drop_index("ix_records_purpose", table_name="records")
    op.drop_index("ix_records_best", table_name="records")
    with op.batch_alter_table("records") as batch:
        batch.drop_constraint(op.f("ck_records_purpose"), type_="check")
        batch.drop_constraint(op.f("ck_records_min_only_when_ok"), type_="check")
        batch.add_column(sa.Column("retime_times", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("retimed_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("retimed_at", sa.DateTime(timezone=True), nullable=True))
    connection = op.get_bind()
    _fold_retimings(connection)
    connection.execute(sa.delete(RECORDS).where(RECORDS.c.purpose == "retime"))
    with op.batch_alter_table("records") as batch:
        batch.drop_column("purpose")
        batch.drop_column("min_seconds")
    op.create_index("ix_records_retimed", "records", RETIMED_INDEX)
    op.create_index("ix_records_best", "records", _best_index("mean_seconds"))


def _fold_retimings(connection: sa.Connection) -> None:
    """Each trace's newest re-timing goes back onto its newest search record."""
    retimings = (
        sa.select(RECORDS.c.workload_id, RECORDS.c.target_id, RECORDS.c.trace_hash)
        .add_columns(RECORDS.c.run_times, RECORDS.c.created_at)
        .where(RECORDS.c.purpose == "retime")
        .order_by(RECORDS.c.id)
    )
    newest = {(r.workload_id, r.target_id, r.trace_hash): r for r in connection.execute(retimings)}
    for (workload_id, target_id, digest), retiming in newest.items():
        search = (
            sa.select(sa.func.max(RECORDS.c.id))
            .where(RECORDS.c.workload_id == workload_id)
            .where(RECORDS.c.target_id == target_id)
            .where(RECORDS.c.trace_hash == digest)
            .where(RECORDS.c.purpose == "search")
            .where(RECORDS.c.status == "ok")
        ).scalar_subquery()
        connection.execute(
            sa.update(RECORDS)
            .where(RECORDS.c.id == search)
            .values(
                retime_times=list(retiming.run_times),
                retimed_seconds=statistics.median(retiming.run_times),
                retimed_at=retiming.created_at,
            )
        )
