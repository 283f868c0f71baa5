"""A token may have an upload limit (``tokens.upload_limit``, bytes): the largest model
file it may upload to the service. The tokens already stored have none.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("upload_limit", sa.BigInteger(), nullable=True))
        batch.create_check_constraint(
            op.f("ck_tokens_upload_limit"), sa.text("upload_limit IS NULL OR upload_limit > 0")
        )


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_constraint(op.f("ck_tokens_upload_limit"), type_="check")
        batch.drop_column("upload_limit")
