"""Model files are stored in pieces (``model_file_chunks``, 4 MiB each) instead of one
``model_files.content`` value, so that storing or reading a file never holds it whole
in the database's driver. The files already stored are cut into pieces one at a time.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

CHUNK_BYTES = 4 << 20  # db.model_files.CHUNK_BYTES when this revision was written


def upgrade() -> None:
    op.create_table(
        "model_file_chunks",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "seq", name=op.f("pk_model_file_chunks")),
    )
    connection = op.get_bind()
    for model_id in _model_ids(connection):
        content = connection.execute(
            sa.text("SELECT content FROM model_files WHERE id = :id"), {"id": model_id}
        ).scalar_one()
        for seq, start in enumerate(range(0, len(content), CHUNK_BYTES)):
            connection.execute(
                sa.text("INSERT INTO model_file_chunks (model_id, seq, data) VALUES (:m, :s, :d)"),
                {"m": model_id, "s": seq, "d": bytes(content[start : start + CHUNK_BYTES])},
            )
    # SQLite drops a column by copying the table and dropping the old one, which would
    # delete the pieces through their foreign key: it is added after.
    with op.batch_alter_table("model_files") as batch:
        batch.drop_column("content")
    with op.batch_alter_table("model_file_chunks") as batch:
        batch.create_foreign_key(
            op.f("fk_model_file_chunks_model_id_model_files"),
            "model_files",
            ["model_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    with op.batch_alter_table("model_files") as batch:
        batch.add_column(sa.Column("content", sa.LargeBinary(), nullable=True))
    connection = op.get_bind()
    for model_id in _model_ids(connection):
        pieces = connection.execute(
            sa.text("SELECT data FROM model_file_chunks WHERE model_id = :id ORDER BY seq"),
            {"id": model_id},
        ).scalars()
        connection.execute(
            sa.text("UPDATE model_files SET content = :content WHERE id = :id"),
            {"id": model_id, "content": b"".join(bytes(piece) for piece in pieces)},
        )
    with op.batch_alter_table("model_files") as batch:
        batch.alter_column("content", existing_type=sa.LargeBinary(), nullable=False)
    op.drop_table("model_file_chunks")


def _model_ids(connection: sa.Connection) -> list[int]:
    return list(connection.execute(sa.text("SELECT id FROM model_files ORDER BY id")).scalars())
