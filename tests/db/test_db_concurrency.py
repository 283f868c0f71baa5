"""Eight worker processes commit 1,000 records each into one database at the same time.

The workers are forked, not spawned: they start in milliseconds instead of importing
everything again, and they run no OpenMP code, the one thing a fork could leave broken.
A barrier releases them together; each commits in batches of ten, as workers would.
"""

from __future__ import annotations

import multiprocessing
import time

import pytest
from db_helpers import MATMUL, ZEN, split_trace
from pg_server import BACKENDS, fresh_url

from compiler.errors import ErrorKind
from db import Measurement, SQLDatabase

WORKERS = 8
RECORDS = 1000
BATCH = 10
FACTORS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11)


def seconds_of(worker: int, index: int) -> float:
    """A distinct run time for each record, scattered over the workers."""
    return 1e-3 * (1 + ((worker * RECORDS + index) * 7919 % (WORKERS * RECORDS)) / 1000)


def commit_from_worker(url: str, key: str, worker: int, start: multiprocessing.Barrier) -> None:
    traces = [split_trace(f) for f in FACTORS]
    host = f"worker-{worker}"
    measurements = []
    for index in range(RECORDS):
        trace = traces[index % len(traces)]
        if index % 100 == 99:
            failure = Measurement.failed(key, ZEN, trace, ErrorKind.TIMEOUT, "over 10 s")
            measurements.append(failure)
        else:
            measurements.append(
                Measurement.ok(key, ZEN, trace, [seconds_of(worker, index)], worker_host=host)
            )
    with SQLDatabase(url) as db:
        start.wait(timeout=60)
        for first in range(0, RECORDS, BATCH):
            db.commit_records(measurements[first : first + BATCH])


@pytest.mark.parametrize("backend", BACKENDS)
def test_eight_processes_commit_at_once(backend, tmp_path):
    url = fresh_url(backend, tmp_path)
    with SQLDatabase(url) as db:
        key = db.commit_workload(MATMUL).key
    context = multiprocessing.get_context("fork")
    start = context.Barrier(WORKERS)
    workers = [
        context.Process(target=commit_from_worker, args=(url, key, w, start))
        for w in range(WORKERS)
    ]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    print(f"{backend}: {WORKERS} x {RECORDS} records in {time.perf_counter() - began:.1f} s")
    assert [w.exitcode for w in workers] == [0] * WORKERS

    # best() ranks each trace once, by its fastest record.
    fastest: dict[int, float] = {}
    for w in range(WORKERS):
        for i in range(RECORDS):
            if i % 100 != 99:
                factor = i % len(FACTORS)
                fastest[factor] = min(fastest.get(factor, 1.0), seconds_of(w, i))
    expected = sorted(fastest.values())
    with SQLDatabase(url) as db:
        assert db.count() == WORKERS * RECORDS
        assert db.count(key, ZEN, ErrorKind.TIMEOUT) == WORKERS * RECORDS // 100
        best = db.best(key, ZEN, k=20)
        assert [r.mean_seconds for r in best] == expected
        assert len(db.records(key, ZEN, limit=RECORDS * WORKERS)) == WORKERS * RECORDS
