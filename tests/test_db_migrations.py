"""Schema migrations, the `tensortune db` command line, and databases that cannot be used."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from db_helpers import MATMUL, ZEN, split_trace
from pg_server import BACKENDS, fresh_url
from sqlalchemy import inspect, text

from db import ConnectError, SQLDatabase, Measurement, SchemaError, migrate
from db.engine import default_sqlite_path, default_url, open_engine
from db.models import Base
from tuner.cli import main


@pytest.fixture(params=BACKENDS)
def url(request, tmp_path):
    return fresh_url(request.param, tmp_path)


def test_upgrade_builds_exactly_the_models_schema_and_downgrades(url, capsys):
    assert main(["db", "upgrade", "--url", url]) == 0
    assert f"schema revision None -> {migrate.head_revision()}" in capsys.readouterr().out
    engine = open_engine(url)
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    migrate.downgrade(engine, "base")
    assert inspect(engine).get_table_names() == ["alembic_version"]
    assert migrate.current_revision(engine) is None
    engine.dispose()
    assert main(["db", "current", "--url", url]) == 0
    assert f"revision None (this tensortune: {migrate.head_revision()})" in capsys.readouterr().out


def test_a_database_of_the_first_schema_upgrades_keeping_its_records(url, capsys):
    with SQLDatabase(url) as db:
        key = db.commit_workload(MATMUL).key
        db.commit_records([Measurement.ok(key, ZEN, split_trace(f), [f * 1e-4]) for f in (2, 3)])
        before = db.records(key)
    engine = open_engine(url)
    migrate.downgrade(engine, "0001")
    assert "retimed_seconds" not in {c["name"] for c in inspect(engine).get_columns("records")}
    with engine.begin() as connection, pytest.raises(Exception, match="(?i)check"):
        connection.execute(text("UPDATE records SET mean_seconds = NULL WHERE status = 'ok'"))
    engine.dispose()
    with pytest.raises(SchemaError, match="revision '0001'"):
        SQLDatabase(url)
    assert main(["db", "upgrade", "--url", url]) == 0
    assert "0001 -> 0002" in capsys.readouterr().out
    with SQLDatabase(url) as db:
        assert db.records(key) == before
        db.commit_retiming(before[0].id, [5e-4])
        assert [r.seconds for r in db.best(key, ZEN, 2)] == [5e-4, 2e-4]


def test_a_database_at_another_revision_is_refused_until_upgraded(url):
    SQLDatabase(url).close()
    engine = open_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0000'"))
    engine.dispose()
    with pytest.raises(SchemaError, match=r"revision '0000'.*run `tensortune db upgrade"):
        SQLDatabase(url)


def test_an_empty_database_is_created_unless_told_not_to(url):
    with pytest.raises(SchemaError, match="revision None"):
        SQLDatabase(url, create=False)
    with SQLDatabase(url) as db:
        assert db.count() == 0


@pytest.mark.parametrize(
    "bad_url, message",
    [
        ("postgresql+psycopg://postgres@127.0.0.1:9/none", "cannot open the tuning database"),
        ("postgresql://user:secret@127.0.0.1:9/none", r"user:\*\*\*@127.0.0.1:9"),
        ("sqlite:////nonexistent/dir/tuning.db", "cannot open the tuning database"),
        ("mysql://localhost/db", "backend 'mysql' is not supported"),
        ("not a url", "does not parse; the forms are sqlite:///"),
    ],
)
def test_a_database_that_cannot_be_reached_is_a_clear_error(bad_url, message):
    with pytest.raises(ConnectError, match=message):
        SQLDatabase(bad_url)


def test_the_default_url_is_the_environment_or_the_embedded_file(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORTUNE_DB_URL", "sqlite:///elsewhere.db")
    assert default_url() == "sqlite:///elsewhere.db"
    monkeypatch.delenv("TENSORTUNE_DB_URL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_sqlite_path() == tmp_path / "tensortune" / "tuning.db"
    assert default_url() == f"sqlite:///{tmp_path}/tensortune/tuning.db"
    assert (tmp_path / "tensortune").is_dir()


def test_the_command_line_exports_imports_merges_and_prunes(tmp_path, capsys):
    source, target = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    with SQLDatabase(source) as db:
        key = db.commit_workload(MATMUL).key
        db.commit_records([Measurement.ok(key, ZEN, split_trace(f), [f * 1e-4]) for f in (2, 3, 4)])
    dump = tmp_path / "best.jsonl"
    assert main(["db", "export", "--url", source, "--best", "2", "-o", str(dump)]) == 0
    assert main(["db", "import", "--url", target, str(dump)]) == 0
    assert "added 1 workloads and 2 records" in capsys.readouterr().out
    assert main(["db", "merge", "--url", target, source]) == 0
    assert "1 records; skipped 2" in capsys.readouterr().out
    assert main(["db", "prune", "--url", target, "--keep", "1"]) == 0
    assert "deleted 2 records" in capsys.readouterr().out
    assert main(["db", "import", "--url", target, str(tmp_path / "missing.jsonl")]) == 1
    assert "missing.jsonl" in capsys.readouterr().err


def test_the_command_runs_as_a_program(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "db", "upgrade", "--url", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"-> {migrate.head_revision()}" in done.stdout


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path}/wal.db")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 60_000
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()
