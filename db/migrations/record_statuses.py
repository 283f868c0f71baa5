"""What the migrations that add a record status share: the status CHECK constraint of
``records`` replaced by one that allows ``statuses`` (SQLite copies the table to change
a constraint; ``recreate="auto"`` does it only there)."""

import sqlalchemy as sa
from alembic import op


def replace_status_check(statuses: tuple[str, ...]) -> None:
    allowed = ", ".join(repr(status) for status in statuses)
    with op.batch_alter_table("records", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_records_status"), type_="check")
        batch.create_check_constraint(op.f("ck_records_status"), sa.text(f"status IN ({allowed})"))
