"""The default database, from the environment: the one module of ``db`` that reads it.

Nothing in ``db`` calls it: ``db.create`` and ``SQLDatabase`` take the URL they are
given. The edges that offer a default database call it once, when they start: the
command line (``tuner.cli.commands``) and ``tuner.tune_tir`` without a database.
"""

from __future__ import annotations

import os
from pathlib import Path

URL_VARIABLE = "TENSORTUNE_DB_URL"


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
