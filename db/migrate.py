"""Schema migrations through Alembic, driven from code (no alembic.ini to find).

``upgrade`` brings a database to a revision; ``create`` gives an empty database the
newest schema, so the embedded SQLite file works without a setup step. Both read the
revision and migrate inside one write transaction that holds the database's write lock
(SQLite's ``BEGIN IMMEDIATE``, a transaction-level advisory lock on PostgreSQL): several
processes opening a database that does not exist yet create its schema once, and the
others find it made. A database with tables that are not ours is never migrated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, inspect, text

from db.engine import WRITE, shown
from db.errors import SchemaError
from db.models import Base

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "alembic_version"
# Any constant names the lock; this one spells "tensortune schema".
SCHEMA_LOCK = 0x7465_6E73_6F72


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
        return _revision(connection)


def create(engine: Engine) -> str | None:
    """Give the database the newest schema if it has none yet; returns its revision
    (the one found when another process made or migrated it first)."""
    with _locked(engine) as connection:
        revision = _revision(connection)
        if revision is None:
            _refuse_foreign(connection, engine)
            command.upgrade(_config(connection), "head")
            revision = _revision(connection)
        return revision


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Run the migrations up to ``revision`` in one transaction; returns the revisions
    before and after."""
    _check_revision_name(engine, revision)
    with _locked(engine) as connection:
        before = _revision(connection)
        if before is None:
            _refuse_foreign(connection, engine)
        try:
            command.upgrade(_config(connection), revision)
        except CommandError as err:
            raise SchemaError(_revision_message(engine, revision, err)) from None
        return before, _revision(connection)


def downgrade(engine: Engine, revision: str) -> None:
    _check_revision_name(engine, revision)
    with _locked(engine) as connection:
        try:
            command.downgrade(_config(connection), revision)
        except CommandError as err:
            raise SchemaError(_revision_message(engine, revision, err)) from None


@contextmanager
def _locked(engine: Engine) -> Iterator[Connection]:
    """A write transaction that holds the database's schema lock until it ends."""
    with engine.execution_options(**{WRITE: True}).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        yield connection


def _revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _refuse_foreign(connection: Connection, engine: Engine) -> None:
    """Refuse a database without our revision that holds tables: they are not ours
    (tables of our names without a revision are named too: something else made them)."""
    tables = sorted(set(inspect(connection).get_table_names()) - {VERSION_TABLE})
    if tables:
        foreign = [t for t in tables if t not in Base.metadata.tables] or tables
        raise SchemaError(
            f"{shown(engine.url)} is not a tensortune database: it holds the tables "
            f"{', '.join(foreign)} and no tensortune schema revision; give the URL of a "
            "tensortune database or of an empty one"
        )


def _check_revision_name(engine: Engine, revision: str) -> None:
    """Refuse a revision that is not a keyword or a known revision (or the start of
    one), optionally with a relative step (``head-1``, ``0002+1``), before Alembic
    sees it: some malformed names (an empty one) fail inside Alembic with an assertion."""
    name = re.sub(r"[+-][0-9]+$", "", revision.strip())
    if name in ("head", "heads", "base") or (
        name and any(known.startswith(name) for known in _known_revisions())
    ):
        return
    raise SchemaError(_revision_message(engine, revision, "no such revision"))


def _known_revisions() -> list[str]:
    """The migrations' revisions, oldest first."""
    scripts = ScriptDirectory.from_config(_config()).walk_revisions()
    return [script.revision for script in reversed(list(scripts))]


def _revision_message(engine: Engine, revision: str, why: CommandError | str) -> str:
    return (
        f"{shown(engine.url)}: cannot migrate to revision {revision!r} ({why}); give one of "
        f"head, base or {', '.join(_known_revisions())}"
    )
