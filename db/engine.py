"""Opening a database URL: the embedded SQLite default, PostgreSQL by URL.

SQLite is set up for several worker processes writing one file at once: WAL mode
(readers never block the writer), a busy timeout (a writer waits its turn instead of
failing), and write transactions that take the write lock when they begin
(``BEGIN IMMEDIATE``), so two writers never deadlock upgrading a read lock. Switching a
new file to WAL is the one step SQLite answers "locked" at once, without waiting, while
another process switches it too: that step is retried until the busy timeout.

Every engine opened here is the database's border: a failure of the storage under any
statement (a read-only file, damaged pages, a lock held too long, a server gone) leaves
it as a ``db.errors`` error naming the database and what to do, never as a driver's
exception.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc, text
from sqlalchemy.engine import URL, ExceptionContext, make_url

from db.environment import URL_VARIABLE
from db.errors import ConnectError, StorageError

URL_FORMS = (
    "sqlite:///relative/path.db",
    "sqlite:////absolute/path.db",
    "postgresql+psycopg://user:password@host:port/database",
)
BUSY_TIMEOUT_S = 60
CONNECT_TIMEOUT_S = 10
WRITE = "tensortune_write"


def shown(url: str | URL) -> str:
    """The URL as it may appear in a message: with the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return str(url)


def open_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for ``url``, checked by connecting; raises ConnectError naming the URL
    (password hidden) and what to do when the database cannot be opened. With ``create``
    False a SQLite file that does not exist is refused instead of made empty."""
    parsed = _parse(url)
    if not create:
        _check_exists(parsed)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_S})
        _set_up_sqlite(engine)
    else:
        engine = create_engine(
            parsed,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
            pool_pre_ping=True,
        )
    event.listen(engine, "handle_error", _translate_errors(parsed))
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except BaseException:
        engine.dispose()
        raise
    return engine


def in_memory(url: str) -> bool:
    """Whether ``url`` names a SQLite database held in memory, gone when the process ends."""
    parsed = _parse(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def sqlite_file(parsed: URL) -> Path | None:
    """The file a SQLite URL names; None for PostgreSQL, memory and ``file:`` URIs."""
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    if database.startswith("file:"):
        return None
    return Path(database)


def _check_exists(parsed: URL) -> None:
    path = sqlite_file(parsed)
    if path is not None and not path.is_file():
        raise ConnectError(
            f"no tuning database at {shown(parsed)} (the file {str(path)!r} does not exist); "
            "check the path"
        )


def _translate_errors(url: URL) -> Any:
    """The engine's ``handle_error`` listener: a storage failure becomes a StorageError
    (a ConnectError while connecting) that names the database and the fix. Errors that
    mean a bug in a statement (``ProgrammingError``, ``IntegrityError``) pass unchanged."""

    def on_error(context: ExceptionContext) -> None:
        error = context.sqlalchemy_exception
        if type(error) not in (exc.OperationalError, exc.DatabaseError, exc.InterfaceError):
            return
        reason = _first_line(getattr(error, "orig", error))
        if context.connection is None:
            raise ConnectError(
                f"cannot open the tuning database {shown(url)}: {reason}; "
                + (
                    _fix(reason)
                    or "check that the server runs, the file is readable and the URL is "
                    f"right, or unset {URL_VARIABLE} to use the embedded SQLite file"
                )
            )
        raise StorageError(
            f"the tuning database {shown(url)} failed: {reason}; "
            + (_fix(reason) or "check that the database is reachable and has room, then retry")
        )

    return on_error


def _fix(reason: str) -> str | None:
    """What to do about a storage failure the driver describes, when it is a known one."""
    lowered = reason.lower()
    if "readonly" in lowered or "read-only" in lowered or "permission" in lowered:
        return (
            "it is read-only: check the permissions of the file and its folder (and any "
            "mode=ro in the URL), or give another --db URL"
        )
    if "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        return (
            "its file is damaged: restore it from a backup or an export (tensortune db "
            "import FILE --db NEW_URL), or give another --db URL"
        )
    if "locked" in lowered:
        return (
            f"another process held it locked for over {BUSY_TIMEOUT_S} s: try again when "
            "that process is done"
        )
    return None


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
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
    except exc.NoSuchModuleError as err:
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
        _enter_wal_mode(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _enter_wal_mode(cursor: sqlite3.Cursor) -> None:
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
