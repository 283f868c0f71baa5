"""Records may fail with the kind ``internal`` (tensortune itself failed around the
candidate): the status CHECK constraint gains that word. Stored values are the same
words as before, so no row changes on the way up; on the way down an ``internal``
record becomes a ``run_error``, the nearest kind the older schema knows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

OLD_STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong_result", "crashed")
NEW_STATUSES = (*OLD_STATUSES, "internal")


def _replace_status_check(statuses: tuple[str, ...]) -> None:
    allowed = ", ".join(repr(status) for status in statuses)
    with op.batch_alter_table("records", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_records_status"), type_="check")
        batch.create_check_constraint(op.f("ck_records_status"), sa.text(f"status IN ({allowed})"))


def upgrade() -> None:
    _replace_status_check(NEW_STATUSES)


def downgrade() -> None:
    op.execute("UPDATE records SET status = 'run_error' WHERE status = 'internal'")
    _replace_status_check(OLD_STATUSES)
