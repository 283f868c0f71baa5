"""Jobs have a priority (``jobs.priority``, 0 for the jobs already stored): a
coordinator claims the queued job of the highest priority first, the oldest among
equals, which an index on (status, priority, id) answers without a scan.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("priority", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    op.create_index("ix_jobs_queue", "jobs", ["status", "priority", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_queue", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("priority")
