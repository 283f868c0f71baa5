"""A throwaway PostgreSQL server for the database tests, from the machine's binaries.

The server runs from a temporary directory on a free loopback port, with fsync off,
and is stopped when the test process exits. ``initdb`` and ``pg_ctl`` refuse to
run as root, so as root they run as ``nobody`` through ``setpriv``. One server
serves the whole test session; each test gets a database of its own.

Missing binaries skip the PostgreSQL tests with the command that installs them
(``scripts/install_system_deps.sh``, which CI runs); any other failure is an error.
"""

from __future__ import annotations

import atexit
import functools
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

BIN_DIRS = ("/usr/lib/postgresql/15/bin", *sorted(glob.glob("/usr/lib/postgresql/*/bin")))
INSTALL_HINT = "install them with scripts/install_system_deps.sh (apt-get install postgresql)"
AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
SETTINGS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
    "-c full_page_writes=off -c max_connections=60"
)


def bin_dir() -> Path | None:
    for candidate in BIN_DIRS:
        if Path(candidate, "initdb").exists() and Path(candidate, "pg_ctl").exists():
            return Path(candidate)
    return None


class PostgresServer:
    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.root = Path(tempfile.mkdtemp(prefix="tensortune-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self._names = itertools.count()
        as_root = os.geteuid() == 0
        if as_root:
            shutil.chown(self.root, "nobody", "nogroup")
        self._prefix = AS_NOBODY if as_root else ()

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [*self._prefix, *args], cwd=self.root, capture_output=True, text=True, timeout=60
        )
        if result.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}{tail}"
            )

    def start(self) -> None:
        self._run(
            str(self.binaries / "initdb"),
            "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-locale", "--no-sync",
        )  # fmt: skip
        for attempt in range(3):
            self.port = _free_port()
            try:
                self.resume()
                return
            except RuntimeError:
                if attempt == 2:
                    raise

    def halt(self) -> None:
        """Stop the server as an outage would, keeping its data and its port."""
        self._run(str(self.binaries / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w")

    def resume(self) -> None:
        """Start the server on its port (again, after ``halt``)."""
        options = f"{SETTINGS} -p {self.port} -k {self.root}"
        self._run(
            str(self.binaries / "pg_ctl"),
            "start", "-D", str(self.data), "-w", "-t", "30",
            "-l", str(self.root / "server.log"), "-o", options,
        )  # fmt: skip

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                [
                    *self._prefix,
                    str(self.binaries / "pg_ctl"),
                    "stop",
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                ],
                cwd=self.root,
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database on this server."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@functools.cache
def server() -> PostgresServer:
    """The session's server, started on first use; skips the test where there are no
    PostgreSQL binaries."""
    binaries = bin_dir()
    if binaries is None:
        pytest.skip(f"PostgreSQL tests skipped: no initdb/pg_ctl in {BIN_DIRS}; {INSTALL_HINT}")
    started = PostgresServer(binaries)
    atexit.register(started.stop)
    started.start()
    return started


BACKENDS = ("sqlite", "postgresql")


def fresh_url(backend: str, tmp_path: Path) -> str:
    """An empty database of ``backend`` for one test."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'tuning.db'}"
    return server().new_database()
