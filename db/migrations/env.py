"""Alembic's environment: migrations run on the connection that ``db.migrate`` hands
over in ``config.attributes["connection"]``, never on a URL read from a file, so the
same code upgrades SQLite and PostgreSQL and takes part in the caller's locking."""

from alembic import context

from db.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
