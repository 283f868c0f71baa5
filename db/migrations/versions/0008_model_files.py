"""Model files (``model_files``): an ONNX model uploaded to the service, kept whole
with the input shapes it was imported with, so a coordinator anywhere imports the same
graph and tunes its tasks. A file is stored once (its SHA-256 is unique).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("shapes", sa.JSON(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"], ["tokens.id"], name=op.f("fk_model_files_token_id_tokens")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_files")),
        sa.UniqueConstraint("digest", name=op.f("uq_model_files_digest")),
    )


def downgrade() -> None:
    op.drop_table("model_files")
