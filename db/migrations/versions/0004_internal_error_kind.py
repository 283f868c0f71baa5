"""Records may fail with the kind ``internal`` (tensortune itself failed around the
candidate): the status CHECK constraint gains that word. Stored values are the same
words as before, so no row changes on the way up; on the way down an ``internal``
record becomes a ``run_error``, the nearest kind the older schema knows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from alembic import op

from db.migrations.record_statuses import replace_status_check

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

OLD_STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong_result", "crashed")
NEW_STATUSES = (*OLD_STATUSES, "internal")


def upgrade() -> None:
    replace_status_check(NEW_STATUSES)


def downgrade() -> None:
    op.execute("UPDATE records SET status = 'run_error' WHERE status = 'internal'")
    replace_status_check(OLD_STATUSES)
