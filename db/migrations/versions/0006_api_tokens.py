"""API tokens: a ``tokens`` table (a name, the SHA-256 digest of the secret, never the
secret itself; a role; an optional quota of unfinished jobs; when it was made and
revoked), and ``jobs.token_id``, the token that submitted a job (empty for the jobs
already stored).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("quota", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role IN ('read', 'submit', 'admin')", name=op.f("ck_tokens_role")),
        sa.CheckConstraint("quota IS NULL OR quota >= 0", name=op.f("ck_tokens_quota")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tokens")),
        sa.UniqueConstraint("digest", name=op.f("uq_tokens_digest")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f("fk_jobs_token_id_tokens"), "tokens", ["token_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("fk_jobs_token_id_tokens"), type_="foreignkey")
        batch.drop_column("token_id")
    op.drop_table("tokens")
