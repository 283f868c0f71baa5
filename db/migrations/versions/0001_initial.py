"""The initial schema: workloads, targets, jobs and their tasks, tuning records.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

RECORD_STATUSES = "('ok', 'build_error', 'run_error', 'timeout', 'wrong_result', 'crashed')"
JOB_STATUSES = "('queued', 'running', 'done', 'failed', 'cancelled')"
RECORD_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("json", sa.Text(), nullable=False),
        sa.Column("flop_count", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workloads")),
        sa.UniqueConstraint("key", name=op.f("uq_workloads_key")),
    )
    op.create_table(
        "targets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=500), nullable=False),
        sa.Column("host_kind", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_targets")),
        sa.UniqueConstraint("target", name=op.f("uq_targets_target")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(f"status IN {JOB_STATUSES}", name=op.f("ck_jobs_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("trials_asked", sa.Integer(), nullable=False),
        sa.Column("trials_done", sa.Integer(), nullable=False),
        sa.Column("best_seconds", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(f"status IN {JOB_STATUSES}", name=op.f("ck_tasks_status")),
        sa.CheckConstraint("trials_asked >= 0 AND trials_done >= 0", name=op.f("ck_tasks_trials")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_tasks_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["target_id"], ["targets.id"], name=op.f("fk_tasks_target_id_targets")
        ),
        sa.ForeignKeyConstraint(
            ["workload_id"], ["workloads.id"], name=op.f("fk_tasks_workload_id_workloads")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
    )
    op.create_index(op.f("ix_tasks_job_id"), "tasks", ["job_id"])
    op.create_table(
        "records",
        sa.Column("id", RECORD_ID, autoincrement=True, nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("trace", sa.Text(), nullable=False),
        sa.Column("trace_hash", sa.String(length=64), nullable=False),
        sa.Column("trace_version", sa.Integer(), nullable=False),
        sa.Column("tensortune_version", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_times", sa.JSON(), nullable=False),
        sa.Column("mean_seconds", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker_host", sa.String(length=200), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(f"status IN {RECORD_STATUSES}", name=op.f("ck_records_status")),
        sa.CheckConstraint(
            "(status = 'ok' AND mean_seconds IS NOT NULL AND mean_seconds >= 0)"
            " OR (status <> 'ok' AND mean_seconds IS NULL)",
            name=op.f("ck_records_mean_only_when_ok"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_records_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["target_id"], ["targets.id"], name=op.f("fk_records_target_id_targets")
        ),
        sa.ForeignKeyConstraint(
            ["workload_id"], ["workloads.id"], name=op.f("fk_records_workload_id_workloads")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_records")),
    )
    op.create_index(
        "ix_records_best",
        "records",
        ["workload_id", "target_id", "status", "trace_version", "mean_seconds", "id"],
    )
    op.create_index("ix_records_trace", "records", ["workload_id", "target_id", "trace_hash"])
    op.create_index(op.f("ix_records_job_id"), "records", ["job_id"])


def downgrade() -> None:
    op.drop_table("records")
    op.drop_table("tasks")
    op.drop_table("jobs")
    op.drop_table("targets")
    op.drop_table("workloads")
