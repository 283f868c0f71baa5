"""Records get their careful re-timing: ``retime_times``, ``retimed_seconds`` (their
median) and ``retimed_at``, all empty on the records already stored, and an index
that hands over the re-timed records of a workload on a target fastest first.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("records", sa.Column("retime_times", sa.JSON(), nullable=True))
    op.add_column("records", sa.Column("retimed_seconds", sa.Float(), nullable=True))
    op.add_column("records", sa.Column("retimed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_records_retimed",
        "records",
        ["workload_id", "target_id", "trace_version", "retimed_seconds", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_records_retimed", table_name="records")
    for column in ("retimed_at", "retimed_seconds", "retime_times"):
        op.drop_column("records", column)
