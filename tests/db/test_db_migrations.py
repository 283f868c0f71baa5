"""Schema migrations, the `tensortune db` command line, and databases that cannot be used."""

from __future__ import annotations

import io
import json
import statistics
import subprocess
import sys
from datetime import UTC, datetime

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from db_helpers import MATMUL, ZEN, split_trace
from pg_server import BACKENDS, fresh_url
from sqlalchemy import inspect, text

from compiler.errors import ErrorKind
from compiler.schedule.trace import TRACE_FORMAT_VERSION
from compiler.target.parse import canonical_target
from db import ConnectError, Measurement, Purpose, SchemaError, SQLDatabase, migrate, model_files
from db.compiler_border import trace_hash
from db.engine import open_engine
from db.environment import default_sqlite_path, default_url
from db.models import Base
from tuner.cli.main import main

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
RETIMED = datetime(2026, 1, 2, 4, 0, 0, tzinfo=UTC)


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


def _previous_version_database(url: str) -> tuple[str, list[str]]:
    """A database as the previous tensortune left it: schema 0002, records written by
    SQL, two of them with their re-timing stored in place. Returns the workload key
    and the traces the previous ``best`` answered, best first."""
    with SQLDatabase(url) as database:
        key = database.commit_workload(MATMUL).key
    engine = open_engine(url)
    migrate.downgrade(engine, "0002")
    with engine.begin() as connection:
        target_id = connection.execute(
            text("INSERT INTO targets (target, host_kind) VALUES (:t, 'zen') RETURNING id"),
            {"t": ZEN},
        ).scalar_one()
        workload_id = connection.execute(text("SELECT id FROM workloads")).scalar_one()
        for factor, seconds, retime in [(2, 2e-4, None), (3, 3e-4, [9e-4, 5e-4, 6e-4]),
                                        (4, 4e-4, [1e-4]), (5, 5e-4, None)]:  # fmt: skip
            trace = split_trace(factor).to_json_string()
            connection.execute(
                text(
                    "INSERT INTO records (workload_id, target_id, trace, trace_hash, "
                    "trace_version, tensortune_version, status, run_times, mean_seconds, "
                    "error, worker_host, created_at, retime_times, retimed_seconds, retimed_at) "
                    "VALUES (:w, :t, :trace, :hash, :version, '0.1', 'ok', :times, :mean, "
                    "NULL, 'old host', :at, :retime, :retimed, :retimed_at)"
                ),
                {
                    "w": workload_id, "t": target_id, "trace": trace,
                    "hash": trace_hash(trace), "version": TRACE_FORMAT_VERSION,
                    "times": json.dumps([seconds]), "mean": seconds, "at": CREATED,
                    "retime": None if retime is None else json.dumps(retime),
                    "retimed": None if retime is None else statistics.median(retime),
                    "retimed_at": None if retime is None else RETIMED,
                },
            )  # fmt: skip
        connection.execute(
            text(
                "INSERT INTO records (workload_id, target_id, trace, trace_hash, trace_version, "
                "tensortune_version, status, run_times, error, worker_host, created_at) "
                "VALUES (:w, :t, '{}', :hash, 1, '0.1', 'timeout', '[]', 'slow', 'h', :at)"
            ),
            {"w": workload_id, "t": target_id, "hash": trace_hash("{}"), "at": CREATED},
        )
    engine.dispose()
    previous_best = [split_trace(f).to_json_string() for f in (4, 3, 2, 5)]
    return key, previous_best


def test_a_database_of_the_previous_version_upgrades_losing_nothing(url, capsys):
    key, previous_best = _previous_version_database(url)
    with pytest.raises(SchemaError, match="revision '0002'"):
        SQLDatabase(url)
    assert main(["db", "upgrade", "--url", url]) == 0
    assert f"0002 -> {migrate.head_revision()}" in capsys.readouterr().out
    with SQLDatabase(url) as database:
        records = database.records(key, limit=100)
        assert [r.trace for r in database.best(key, ZEN, k=4)] == previous_best
        assert [r.seconds for r in database.best(key, ZEN, k=2)] == [1e-4, 5e-4]
        searched = database.records(key, purpose=Purpose.SEARCH)
        assert sorted(r.mean_seconds or 0 for r in searched) == [0, 2e-4, 3e-4, 4e-4, 5e-4]
        assert all(r.created_at == CREATED and r.worker_host != "" for r in searched)
        retimed = database.records(key, purpose=Purpose.RETIME)
        assert sorted(r.run_times for r in retimed) == [(1e-4,), (9e-4, 5e-4, 6e-4)]
        assert all(r.created_at == RETIMED and r.worker_host == "old host" for r in retimed)
        assert len(records) == 7 and database.count(key, ZEN, ErrorKind.TIMEOUT) == 1
        assert {r.target for r in records} == {canonical_target(ZEN)}
    engine = open_engine(url)
    migrate.downgrade(engine, "0002")
    with engine.connect() as connection:
        rows = (
            connection.execute(text("SELECT retimed_seconds FROM records ORDER BY id"))
            .scalars()
            .all()
        )
    engine.dispose()
    assert rows == [None, 6e-4, 1e-4, None, None]


def test_a_database_of_the_first_schema_upgrades_keeping_its_records(url, capsys):
    with SQLDatabase(url) as db:
        key = db.commit_workload(MATMUL).key
        db.commit_records([Measurement.ok(key, ZEN, split_trace(f), [f * 1e-4]) for f in (2, 3)])
        before = db.records(key)
    engine = open_engine(url)
    migrate.downgrade(engine, "0001")
    assert "purpose" not in {c["name"] for c in inspect(engine).get_columns("records")}
    with engine.begin() as connection, pytest.raises(Exception, match=r"(?i)check"):
        connection.execute(text("UPDATE records SET mean_seconds = NULL WHERE status = 'ok'"))
    engine.dispose()
    with pytest.raises(SchemaError, match="revision '0001'"):
        SQLDatabase(url)
    assert main(["db", "upgrade", "--url", url]) == 0
    assert f"0001 -> {migrate.head_revision()}" in capsys.readouterr().out
    with SQLDatabase(url) as db:
        assert db.records(key) == before
        engine = open_engine(url)
        with engine.begin() as connection, pytest.raises(Exception, match=r"(?i)check"):
            connection.execute(text("UPDATE records SET min_seconds = NULL"))
        engine.dispose()


def test_the_internal_error_kind_migrates_up_and_down(url):
    """0004 lets a record fail as ``internal``; on the way down such a record becomes a
    ``run_error`` and every other record is left as it was."""
    with SQLDatabase(url) as db:
        key = db.commit_workload(MATMUL).key
        db.commit_records([Measurement.ok(key, ZEN, split_trace(2), [2e-4])])
    engine = open_engine(url)
    migrate.downgrade(engine, "0003")
    with engine.begin() as connection, pytest.raises(Exception, match=r"(?i)check"):
        connection.execute(
            text("UPDATE records SET status = 'internal', mean_seconds = NULL, min_seconds = NULL")
        )
    migrate.upgrade(engine)
    engine.dispose()
    internal = Measurement.failed(key, ZEN, split_trace(3), ErrorKind.INTERNAL, "a bug")
    with SQLDatabase(url) as db:
        db.commit_records([internal])
        before = {r.trace_hash: r for r in db.records(key)}
    assert {r.error_kind for r in before.values()} == {None, ErrorKind.INTERNAL}
    engine = open_engine(url)
    migrate.downgrade(engine, "0003")
    with engine.connect() as connection:
        statuses = dict(connection.execute(text("SELECT trace_hash, status FROM records")).all())
    engine.dispose()
    assert sorted(statuses.values()) == ["ok", "run_error"]
    ok_hash = next(h for h, r in before.items() if r.ok)
    assert statuses[ok_hash] == "ok"


def test_a_database_at_another_revision_is_refused_until_upgraded(url):
    SQLDatabase(url).close()
    engine = open_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0000'"))
    engine.dispose()
    with pytest.raises(SchemaError, match=r"revision '0000'.*run `tensortune db upgrade"):
        SQLDatabase(url)


def test_an_empty_database_is_created_unless_told_not_to(url, tmp_path):
    if url.startswith("sqlite"):
        with pytest.raises(ConnectError, match=r"does not exist\); check the path"):
            SQLDatabase(url, create=False)
        assert list(tmp_path.iterdir()) == []
        (tmp_path / url.rsplit("/", 1)[1]).touch()
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
        [sys.executable, "-m", "tuner.cli.main", "db", "upgrade", "--url", url],
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


def test_model_files_keyed_by_shapes_migrate_up_and_down(url):
    """0009 keys a model file by its bytes and its shapes: files stored before it get
    their shapes' key, the same bytes may then be stored with other shapes, and on the
    way down each file keeps its first model."""
    with SQLDatabase(url) as db:
        first, _ = db.commit_model_file("m", b"onnx bytes", {"x": (1, 8)})
    engine = open_engine(url)
    migrate.downgrade(engine, "0008")
    migrate.upgrade(engine)
    engine.dispose()
    with SQLDatabase(url) as db:
        again, stored_now = db.commit_model_file("m", b"onnx bytes", {"x": [1, 8]})
        assert (again.id, stored_now) == (first.id, False)
        other, stored_now = db.commit_model_file("m", b"onnx bytes", {"x": (4, 8)})
        assert stored_now and other.id != first.id and other.shapes == {"x": (4, 8)}
    engine = open_engine(url)
    migrate.downgrade(engine, "0008")
    with engine.connect() as connection:
        kept = connection.execute(text("SELECT id FROM model_files")).scalars().all()
    engine.dispose()
    assert kept == [first.id]


def test_the_host_lost_error_kind_migrates_up_and_down(url):
    """0010 lets a record fail as ``host_lost``; on the way down it becomes ``crashed``,
    the kind such a failure was stored as before."""
    with SQLDatabase(url) as db:
        key = db.commit_workload(MATMUL).key
        db.commit_records([Measurement.ok(key, ZEN, split_trace(2), [2e-4])])
        db.commit_records(
            [Measurement.failed(key, ZEN, split_trace(3), ErrorKind.HOST_LOST, "node lost")]
        )
        assert db.count(key, ZEN, ErrorKind.HOST_LOST) == 1
    engine = open_engine(url)
    migrate.downgrade(engine, "0009")
    with engine.connect() as connection:
        statuses = connection.execute(text("SELECT status FROM records ORDER BY id")).scalars()
        assert list(statuses) == ["ok", "crashed"]
    engine.dispose()


def test_model_files_migrate_to_pieces_and_back_keeping_their_bytes(url):
    """0012 moves each stored file into 4 MiB pieces; on the way down the pieces are
    joined into the file's one value again."""
    content = np.random.default_rng(0).bytes(model_files.CHUNK_BYTES + 12345)
    with SQLDatabase(url) as db:
        stored, _ = db.commit_model_file("m", content, {"x": (1, 8)})
    engine = open_engine(url)
    migrate.downgrade(engine, "0011")
    with engine.connect() as connection:
        whole = connection.execute(text("SELECT content FROM model_files")).scalar_one()
    assert bytes(whole) == content
    migrate.upgrade(engine)
    with engine.connect() as connection:
        sizes = connection.execute(
            text("SELECT LENGTH(data) FROM model_file_chunks ORDER BY seq")
        ).scalars()
        assert list(sizes) == [model_files.CHUNK_BYTES, 12345]
    engine.dispose()
    with SQLDatabase(url) as db:
        copy = io.BytesIO()
        db.write_model_content(stored.id, copy)
    assert copy.getvalue() == content
