"""Opening a database URL: the embedded SQLite default, PostgreSQL by URL.

SQLite is set up for several worker processes writing one file at once: WAL mode
(readers never block the writer), a busy timeout (a writer waits its turn instead of
failing), and write transactions that take the write lock when they begin
(``BEGIN IMMEDIATE``), so two writers never deadlock upgrading a read lock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from db.errors import ConnectError

URL_VARIABLE = "TENSORTUNE_DB_URL"
URL_FORMS = (
    "sqlite:///relative/path.db",
    "sqlite:////absolute/path.db",
    "postgresql+psycopg://user:password@host:port/database",
)
BUSY_TIMEOUT_S = 60
CONNECT_TIMEOUT_S = 10
WRITE = "tensortune_write"


def default_sqlite_path() -> Path:
    """Where the embedded database lives: ``$XDG_DATA_HOME/tensortune/tuning.db``,
    that is ``~/.local/share/tensortune/tuning.db`` by default."""
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "tensortune" / "tuning.db"


def default_url() -> str:
    """``$TENSORTUNE_DB_URL`` if set, else the embedded SQLite file (its folder is made)."""
    configured = os.environ.get(URL_VARIABLE)
    if configured:
        return configured
    path = default_sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def shown(url: str | URL) -> str:
    """The URL as it may appear in a message: with the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return str(url)


def open_engine(url: str) -> Engine:
    """An engine for ``url``, checked by connecting; raises ConnectError naming the URL
    (password hidden) and what to do when the database cannot be opened."""
    parsed = _parse(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_S})
        _set_up_sqlite(engine)
    else:
        engine = create_engine(
            parsed,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
            pool_pre_ping=True,
        )
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as err:
        engine.dispose()
        raise ConnectError(
            f"cannot open the tuning database {shown(parsed)}: {_first_line(err.orig)}; "
            f"check that the server runs and the URL is right, or unset {URL_VARIABLE} "
            "to use the embedded SQLite file"
        ) from None
    return engine


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConnectError(
            f"database URL {url!r} does not parse; the forms are {', '.join(URL_FORMS)}"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "postgresql" and parsed.get_driver_name() != "psycopg":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if backend not in ("sqlite", "postgresql"):
        raise ConnectError(
            f"database URL {shown(parsed)}: backend {backend!r} is not supported; "
            f"the forms are {', '.join(URL_FORMS)}"
        )
    try:
        parsed.get_dialect()
    except NoSuchModuleError as err:
        raise ConnectError(f"database URL {shown(parsed)}: {err}") from None
    return parsed


def _first_line(error: Any) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _set_up_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own transaction handling would BEGIN lazily; we emit BEGIN ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
