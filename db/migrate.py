"""Schema migrations through Alembic, driven from code (no alembic.ini to find).

``upgrade`` brings a database to the newest revision; ``Database`` calls it on an
empty database so the embedded SQLite file works without a setup step, and refuses
a database at any other revision than the newest, naming ``tensortune db upgrade``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect

MIGRATIONS = Path(__file__).with_name("migrations")


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision this tensortune's models correspond to."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, f"no migrations in {MIGRATIONS}"
    return head


def current_revision(engine: Engine) -> str | None:
    """The database's revision, or None for a database Alembic never touched."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def has_tables(engine: Engine) -> bool:
    with engine.connect() as connection:
        return bool(inspect(connection).get_table_names())


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run the migrations up to ``revision`` in one transaction."""
    with engine.begin() as connection:
        command.upgrade(_config(connection), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        command.downgrade(_config(connection), revision)
