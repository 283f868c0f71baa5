"""Four imports of one export into one database at the same time, on SQLite and on
PostgreSQL, each from a database object (and connections) of its own: every record is
stored once, and the imports together report each record of the stream as added once
and skipped three times."""

from __future__ import annotations

import io
import threading

import pytest
from db_helpers import MATMUL, ZEN, split_trace
from pg_server import BACKENDS, fresh_url

from db import ImportSummary, Measurement, SQLDatabase

IMPORTS = 4
RECORDS = 300


def export_of_records(tmp_path) -> list[str]:
    with SQLDatabase(f"sqlite:///{tmp_path / 'source.db'}") as source:
        key = source.commit_workload(MATMUL).key
        source.commit_records(
            Measurement.ok(key, ZEN, split_trace(2 + n % 9), [1e-4 * (1 + n)])
            for n in range(RECORDS)
        )
        out = io.StringIO()
        source.export_jsonl(out)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_imports_of_one_export_store_each_record_once(backend, tmp_path) -> None:
    lines = export_of_records(tmp_path)
    url = fresh_url(backend, tmp_path)
    SQLDatabase(url).close()  # the schema, made once before the imports start
    start = threading.Barrier(IMPORTS)
    summaries: list[ImportSummary] = []
    errors: list[BaseException] = []

    def import_once() -> None:
        try:
            with SQLDatabase(url) as database:
                start.wait(timeout=60)
                summaries.append(database.import_jsonl(lines))
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=import_once) for _ in range(IMPORTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    with SQLDatabase(url) as database:
        assert len(database.records(limit=10 * RECORDS)) == RECORDS
    assert sum(s.records_added for s in summaries) == RECORDS
    assert sum(s.records_skipped for s in summaries) == (IMPORTS - 1) * RECORDS
