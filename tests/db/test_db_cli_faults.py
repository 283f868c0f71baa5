"""Bad input and broken databases through the real ``tensortune`` program: each is a
non-zero exit with one line on stderr that names the input and the fix, no traceback,
and every record stored before is still there, unchanged."""

from __future__ import annotations

import gzip
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from db_helpers import MATMUL, ZEN, split_trace

from db import Measurement, SQLDatabase

ROOT = Path(__file__).resolve().parents[2]
HUGE = "99999999999999999999999"
TUNE = ["tune", "matmul", "--shape", "8", "8", "8", "--trials", "2", "--batch-size", "2"]


def tensortune(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


def assert_refused(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert done.returncode == code, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A SQLite file with a workload and three records."""
    path = tmp_path / "tuning.db"
    with SQLDatabase(f"sqlite:///{path}") as database:
        key = database.commit_workload(MATMUL).key
        database.commit_records(
            [Measurement.ok(key, ZEN, split_trace(f), [f * 1e-4]) for f in (2, 3, 4)]
        )
    return path


def snapshot(path: Path) -> list:
    with SQLDatabase(f"sqlite:///{path}", create=False) as database:
        return database.records(limit=10_000)


def export_of(path: Path) -> str:
    out = io.StringIO()
    with SQLDatabase(f"sqlite:///{path}", create=False) as database:
        database.export_jsonl(out)
    return out.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ["db", "prune", "--keep", "1"],
        TUNE,
        ["db", "import", "{export}"],
        ["db", "merge", "{other}"],
    ],
)
def test_a_read_only_database_is_one_line_and_nothing_changes(stored, tmp_path, argv):
    other = tmp_path / "other.db"
    with SQLDatabase(f"sqlite:///{other}") as database:
        key = database.commit_workload(MATMUL).key
        database.commit_records([Measurement.ok(key, ZEN, split_trace(5), [1e-3])])
    export = tmp_path / "export.jsonl"
    export.write_text(export_of(other))
    before = snapshot(stored)
    read_only = f"sqlite:///file:{stored}?mode=ro&uri=true"
    args = [a.format(export=export, other=f"sqlite:///{other}") for a in argv]
    assert_refused(tensortune(*args, "--db", read_only), 1, "read-only", "permissions")
    assert snapshot(stored) == before


def damage(path: Path) -> None:
    """Overwrite the start of every page after the first with garbage."""
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data), 4096):
        data[offset : offset + 100] = b"\xff" * 100
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "argv", [["records"], ["db", "export"], TUNE, ["db", "merge", "{damaged}"]]
)
def test_a_damaged_database_is_one_line_and_its_file_is_untouched(stored, tmp_path, argv):
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(stored.read_bytes())
    damage(damaged)
    pages = damaged.read_bytes()
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    if argv[-1] == "{damaged}":
        done = tensortune(*argv[:-1], f"sqlite:///{damaged}", "--db", fresh)
    else:
        done = tensortune(*argv, "--db", f"sqlite:///{damaged}")
    assert_refused(done, 1, str(damaged), "damaged", "restore it")
    assert damaged.read_bytes() == pages


@pytest.mark.parametrize(
    "argv, words",
    [
        (["db", "export", "--best", "0"], ["--best", "0 is out of range"]),
        (["db", "export", "--best", HUGE], ["--best", HUGE]),
        (["db", "prune", "--keep", "0"], ["--keep", "0 is out of range"]),
        (["records", "--db", ""], ["--db/--url is empty"]),
        (["db", "export", "--url", ""], ["--db/--url is empty"]),
        ([*TUNE, "--db", "sqlite://"], ["in memory", "sqlite:///path.db"]),
        (["db", "import", "x.jsonl", "--db", "sqlite://"], ["in memory"]),
    ],
)
def test_bad_values_are_usage_errors(stored, argv, words):
    before = snapshot(stored)
    if "--db" not in argv and "--url" not in argv:
        argv = [*argv, "--db", f"sqlite:///{stored}"]
    assert_refused(tensortune(*argv), 2, *words)
    assert snapshot(stored) == before


def test_paging_past_every_id_names_the_id(stored):
    done = tensortune("records", "--before", HUGE, "--db", f"sqlite:///{stored}")
    assert_refused(done, done.returncode or 1, HUGE)


@pytest.mark.parametrize(
    "content, words",
    [
        (
            gzip.compress(b'{"format": "tensortune.records", "version": 4}\n', mtime=0),
            ["not UTF-8"],
        ),
        (bytes(range(256)), ["not UTF-8"]),
        ("cut", ["ends without its trailer"]),
        ("flops", ["flop_count", "9223372036854775807"]),
    ],
)
def test_a_bad_import_file_is_refused_whole(stored, tmp_path, content, words):
    lines = export_of(stored).splitlines()
    if content == "cut":
        content = "\n".join(lines[:-1]).encode()
    elif content == "flops":
        workload = json.loads(lines[1])
        workload["flop_count"] = 10**30
        content = "\n".join([lines[0], json.dumps(workload), *lines[2:]]).encode()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    target = tmp_path / "target.db"
    done = tensortune("db", "import", str(bad), "--db", f"sqlite:///{target}")
    assert_refused(done, 1, str(bad), *words, "nothing from it was stored")
    assert snapshot(target) == []


def test_merge_from_a_missing_file_creates_nothing(stored, tmp_path):
    typo = tmp_path / "tunig.db"
    done = tensortune("db", "merge", f"sqlite:///{typo}", "--db", f"sqlite:///{stored}")
    assert_refused(done, 1, str(typo), "does not exist", "check the path")
    assert not typo.exists()


def test_upgrade_refuses_a_foreign_database(tmp_path):
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    done = tensortune("db", "upgrade", "--db", f"sqlite:///{foreign}")
    assert_refused(done, 1, "not a tensortune database", "customers")
    with sqlite3.connect(foreign) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        assert [name for (name,) in tables] == ["customers"]


def test_upgrade_to_an_unknown_revision_lists_the_known_ones(stored):
    done = tensortune("db", "upgrade", "--revision", "nosuch", "--db", f"sqlite:///{stored}")
    assert_refused(done, 1, "'nosuch'", "head, base or 0001")


def test_every_db_command_takes_both_url_and_db(stored):
    for flag in ("--url", "--db"):
        done = tensortune("db", "current", flag, f"sqlite:///{stored}")
        assert done.returncode == 0, done.stderr
