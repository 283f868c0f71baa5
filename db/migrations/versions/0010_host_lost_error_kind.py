"""Records may fail with the kind ``host_lost`` (the host building or running the
candidate was lost, or none of its kind came): the status CHECK constraint gains that
word. On the way down such a record becomes ``crashed``, the kind it was stored as
before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from alembic import op

from db.migrations.record_statuses import replace_status_check

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

OLD_STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong_result", "crashed", "internal")
NEW_STATUSES = (*OLD_STATUSES, "host_lost")


def upgrade() -> None:
    replace_status_check(NEW_STATUSES)


def downgrade() -> None:
    op.execute("UPDATE records SET status = 'crashed' WHERE status = 'host_lost'")
    replace_status_check(OLD_STATUSES)
