"""A model file is keyed by its bytes and the input shapes it is imported with
(``model_files.shapes_key``, the SHA-256 of the shapes as canonical JSON): the same
file uploaded with other shapes is another model, where it used to answer with the
first upload's model. Downgrading keeps the first model of each file.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_files") as batch:
        batch.add_column(sa.Column("shapes_key", sa.String(64), nullable=True))
    connection = op.get_bind()
    for model_id, shapes in connection.execute(sa.text("SELECT id, shapes FROM model_files")):
        stored = json.loads(shapes) if isinstance(shapes, str) else shapes
        canonical = json.dumps(stored, sort_keys=True, separators=(",", ":"))
        connection.execute(
            sa.text("UPDATE model_files SET shapes_key = :key WHERE id = :id"),
            {"key": hashlib.sha256(canonical.encode()).hexdigest(), "id": model_id},
        )
    with op.batch_alter_table("model_files") as batch:
        batch.alter_column("shapes_key", existing_type=sa.String(64), nullable=False)
        batch.drop_constraint("uq_model_files_digest", type_="unique")
        batch.create_unique_constraint("uq_model_files_digest_shapes_key", ["digest", "shapes_key"])


def downgrade() -> None:
    op.execute(
        "DELETE FROM model_files WHERE id NOT IN (SELECT MIN(id) FROM model_files GROUP BY digest)"
    )
    with op.batch_alter_table("model_files") as batch:
        batch.drop_constraint("uq_model_files_digest_shapes_key", type_="unique")
        batch.drop_column("shapes_key")
        batch.create_unique_constraint("uq_model_files_digest", ["digest"])
