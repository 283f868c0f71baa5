"""Several processes open a database that has no schema yet at the same moment: one
creates it, the others find it made, and none fails. The processes are spawned, as
separate tensortune runs would be, and a barrier releases them together."""

from __future__ import annotations

import multiprocessing

import pytest
from pg_server import BACKENDS, fresh_url

from db import SQLDatabase, migrate
from db.engine import open_engine

PROCESSES = 6
ROUNDS = 4


def open_at_once(
    urls: list[str], start: multiprocessing.Barrier, results: multiprocessing.Queue
) -> None:
    """Open each database in turn, all processes together (one round each)."""
    for round_, url in enumerate(urls):
        start.wait(timeout=120)
        try:
            with SQLDatabase(url) as db:
                results.put((round_, "ok", db.count()))
        except Exception as err:
            results.put((round_, "failed", f"{type(err).__name__}: {err}"))
            raise


@pytest.mark.parametrize("backend", BACKENDS)
def test_processes_creating_one_schema_at_once_all_succeed(backend, tmp_path):
    """The processes are started once and race on a new database each round."""
    context = multiprocessing.get_context("spawn")
    urls = []
    for round_ in range(ROUNDS):
        folder = tmp_path / str(round_)
        folder.mkdir()
        urls.append(fresh_url(backend, folder))
    start = context.Barrier(PROCESSES)
    results = context.Queue()
    processes = [
        context.Process(target=open_at_once, args=(urls, start, results)) for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    outcomes = sorted(results.get(timeout=300) for _ in range(ROUNDS * PROCESSES))
    for process in processes:
        process.join(timeout=60)
    assert outcomes == sorted((r, "ok", 0) for r in range(ROUNDS) for _ in processes)
    assert [p.exitcode for p in processes] == [0] * PROCESSES
    for url in urls:
        engine = open_engine(url)
        assert migrate.current_revision(engine) == migrate.head_revision()
        engine.dispose()
