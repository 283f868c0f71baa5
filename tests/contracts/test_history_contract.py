"""The contract of ``db.History``, over every implementation: a job's search
measurements oldest first and in pages, the best each job found, the search
measurement of re-timed traces, and how every record ended."""

from __future__ import annotations

import pytest
from db_helpers import MATMUL, SKYLAKE, ZEN, split_trace

from compiler.errors import ErrorKind
from compiler.schedule.trace import canonical_trace, trace_hash
from db import JobBest, Measurement, Purpose


@pytest.fixture
def key(database) -> str:
    return database.commit_workload(MATMUL).key


def digest(factor: int) -> str:
    return trace_hash(canonical_trace(split_trace(factor)))


def ok(key, factor, seconds, **kwargs) -> Measurement:
    return Measurement.ok(key, ZEN, split_trace(factor), seconds, **kwargs)


def test_a_job_s_trials_are_its_search_measurements_oldest_first(database, key) -> None:
    job = database.create_job({}, [(key, ZEN, 8)]).id
    other = database.create_job({}, [(key, ZEN, 8)]).id
    database.commit_records([ok(key, f, [f * 1e-4], job_id=job) for f in (2, 3)])
    database.commit_records([ok(key, 4, [1e-4], job_id=other)])
    database.commit_records([ok(key, 2, [5e-5], job_id=job, purpose=Purpose.RETIME)])
    database.commit_records([ok(key, f, [f * 1e-4], job_id=job) for f in (5, 6)])
    trials = database.job_trials(job)
    assert [r.trace_hash for r in trials] == [digest(f) for f in (2, 3, 5, 6)]
    assert [r.min_seconds for r in trials] == [f * 1e-4 for f in (2, 3, 5, 6)]
    assert [r.id for r in trials] == sorted(r.id for r in trials)
    assert database.job_trials(job, after_id=trials[1].id) == trials[2:]
    assert database.job_trials(job, after_id=trials[0].id, limit=2) == trials[1:3]
    assert database.job_trials(other) == database.records(job_id=other)
    assert database.job_trials(99) == []


def test_the_best_of_each_job_is_its_fastest_successful_search(database, key) -> None:
    first = database.create_job({}, [(key, ZEN, 8)]).id
    second = database.create_job({}, [(key, ZEN, 8)]).id
    database.commit_records([ok(key, 2, [3e-4], job_id=second), ok(key, 3, [2e-4], job_id=first)])
    database.commit_records(
        [
            ok(key, 4, [4e-4], job_id=first),
            ok(key, 3, [1e-5], job_id=first, purpose=Purpose.RETIME),
            Measurement.failed(key, ZEN, split_trace(5), ErrorKind.CRASHED, "x", job_id=second),
            Measurement.ok(key, SKYLAKE, split_trace(6), [1e-6], job_id=second),
            ok(key, 7, [1e-6]),
        ]
    )
    by_first = [r for r in database.records(job_id=first) if r.purpose is Purpose.SEARCH]
    by_second = database.records(key, ZEN, job_id=second)
    assert database.best_by_job(key, ZEN) == [
        JobBest(first, 2e-4, max(r.created_at for r in by_first)),
        JobBest(second, 3e-4, next(r.created_at for r in by_second if r.ok)),
    ]
    assert database.best_by_job(key, "llvm -mcpu=icelake-server") == []


def test_search_seconds_are_the_fastest_search_of_each_trace_asked(database, key) -> None:
    database.commit_records([ok(key, 2, [3e-4]), ok(key, 2, [2e-4]), ok(key, 3, [5e-4])])
    database.commit_records([ok(key, 2, [1e-5], purpose=Purpose.RETIME), ok(key, 4, [1e-4])])
    database.commit_records([Measurement.failed(key, ZEN, split_trace(5), ErrorKind.CRASHED, "x")])
    asked = [digest(f) for f in (2, 3, 5, 6)]
    assert database.search_seconds(key, ZEN, asked) == {digest(2): 2e-4, digest(3): 5e-4}
    assert database.search_seconds(key, SKYLAKE, asked) == {}
    assert database.search_seconds(key, ZEN, []) == {}


def test_record_counts_count_every_status(database, key) -> None:
    database.commit_records(
        [
            ok(key, 2, [1e-4]),
            ok(key, 3, [1e-4]),
            Measurement.failed(key, ZEN, split_trace(4), ErrorKind.TIMEOUT, "slow"),
        ]
    )
    counts = database.record_counts()
    assert counts["ok"] == 2 and counts["timeout"] == 1
    assert set(counts) == {"ok", *(kind.value for kind in ErrorKind)}
    assert sum(counts.values()) == 3
