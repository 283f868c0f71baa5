"""What ``SQLDatabase`` does besides the contracts (``tests/contracts``): canonical
target spelling, version 1 streams, merge, prune and jobs; on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import threading

import llvmlite.binding as llvm
import pytest
from db_helpers import MATMUL, RELU, SKYLAKE, ZEN, split_trace

from compiler.errors import ErrorKind
from compiler.target.parse import canonical_target
from db import (
    JobStatus,
    Measurement,
    Purpose,
    RecordError,
    SQLDatabase,
)


@pytest.fixture
def key(database):
    return database.commit_workload(MATMUL).key


def ok(key, factor, seconds, target=ZEN, **kwargs):
    return Measurement.ok(key, target, split_trace(factor), seconds, **kwargs)


def test_the_host_target_is_stored_under_its_canonical_spelling(database, key):
    host = f"llvm -mcpu={llvm.get_host_cpu_name()}"
    database.commit_records([ok(key, 3, [1e-3], target="llvm")])
    stored = database.best(key, host)[0].target
    assert stored.startswith(f"{host} -mattr=+") and stored == canonical_target("llvm")
    assert database.best(key, "llvm") == database.best(key, host)


def test_a_resumed_job_sees_what_was_measured(database, key):
    database.commit_records([ok(key, 3, [1e-3])])
    digest = database.records(key)[0].trace_hash
    assert database.measured_hashes(key, ZEN) == {digest}
    assert database.measured_hashes(key, SKYLAKE) == set()


def test_a_version_1_export_still_imports(database, key, tmp_path):
    database.commit_records([ok(key, 3, [1e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    _header, *lines = out.getvalue().splitlines()
    old = [json.dumps({"format": "tensortune.records", "version": 1})]
    for line in lines:
        doc = json.loads(line)
        if doc["kind"] != "end":
            doc.pop("purpose", None)
            old.append(json.dumps(doc))
    other = SQLDatabase(f"sqlite:///{tmp_path / 'other.db'}")
    assert other.import_jsonl(old).records_added == 1
    assert other.best(key, ZEN)[0].purpose is Purpose.SEARCH


def test_merge_adds_the_other_database_and_keeps_targets_apart(database, key, tmp_path):
    other = SQLDatabase(f"sqlite:///{tmp_path / 'other.db'}")
    other.commit_workload(MATMUL)
    other.commit_records([ok(key, 3, [1e-4], target=SKYLAKE), ok(key, 5, [5e-3])])
    database.commit_records([ok(key, 7, [1e-3])])
    summary = database.merge(other)
    assert (summary.records_added, summary.records_skipped) == (2, 0)
    assert [r.mean_seconds for r in database.best(key, ZEN, 5)] == [1e-3, 5e-3]
    assert [r.mean_seconds for r in database.best(key, SKYLAKE, 5)] == [1e-4]
    assert database.merge(other).records_added == 0


def test_export_of_the_best_only_and_prune(database, key):
    relu_key = database.commit_workload(RELU).key
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (2, 3, 4, 5)])
    database.commit_records([ok(key, f, [f * 1e-5], target=SKYLAKE) for f in (2, 3, 4)])
    database.commit_records([Measurement.ok(relu_key, ZEN, split_trace(2, RELU), [1e-6])])
    database.commit_records(
        [Measurement.failed(key, ZEN, split_trace(6), ErrorKind.RUN_ERROR, "bad")]
    )
    database.commit_records([ok(key, 5, [1e-4], purpose=Purpose.RETIME)])
    out = io.StringIO()
    # matmul on ZEN: trace 5 (search + re-timing) and trace 2; SKYLAKE: 2; relu: 1
    assert database.export_jsonl(out, best_k=2) == 6
    assert database.prune(keep=2) == 4
    assert database.count(key, ZEN) == 3 and database.count(key, SKYLAKE) == 2
    assert [r.seconds for r in database.best(key, ZEN, 5)] == pytest.approx([1e-4, 2e-4])
    assert database.count(relu_key) == 1


def test_the_oldest_queued_job_is_claimed_once(database, key):
    first = database.create_job({"n": 1}, [(key, "llvm", 4)])
    second = database.create_job({"n": 2}, [(key, "llvm", 4)])
    database.cancel_job(first.id)
    claimed = database.claim_job()
    assert claimed is not None and claimed.id == second.id
    assert claimed.status is JobStatus.RUNNING and claimed.started_at is not None
    assert database.claim_job() is None


def test_a_higher_priority_is_claimed_first_then_the_oldest(database, key):
    made = [database.create_job({}, [(key, "llvm", 1)], priority=p).id for p in (0, 5, 5, -1)]
    claimed = [database.claim_job() for _ in made]
    assert [job.id for job in claimed if job] == [made[1], made[2], made[0], made[3]]
    assert [job.priority for job in claimed if job] == [5, 5, 0, -1]


def test_jobs_are_listed_newest_first_page_by_page(database, key):
    made = [database.create_job({"n": n}, [(key, "llvm", 1)]).id for n in range(5)]
    database.cancel_job(made[3])
    first = database.jobs(limit=2)
    assert [job.id for job in first] == made[:-3:-1]
    rest = database.jobs(limit=10, before_id=first[-1].id)
    assert [job.id for job in rest] == made[2::-1]
    queued = database.jobs(JobStatus.QUEUED, limit=3)
    assert [job.id for job in queued] == [made[4], made[2], made[1]]


def test_a_task_counts_its_jobs_measurements_by_outcome(database, key):
    job = database.create_job({}, [(key, ZEN, 8), (key, SKYLAKE, 8)])
    other = database.create_job({}, [(key, ZEN, 8)])
    database.commit_records(
        [
            ok(key, 3, [1e-3], job_id=job.id),
            ok(key, 5, [1e-3], job_id=job.id),
            Measurement.failed(key, ZEN, split_trace(7), ErrorKind.TIMEOUT, "slow", job_id=job.id),
            ok(key, 9, [1e-3], job_id=other.id),
            ok(key, 11, [1e-3]),
            ok(key, 3, [1e-3], job_id=job.id, purpose=Purpose.RETIME),
        ]
    )
    zen, skylake = database.job(job.id).tasks
    assert dict(zen.outcomes) == {"ok": 2, "timeout": 1}
    assert dict(skylake.outcomes) == {}
    assert dict(database.job(other.id).tasks[0].outcomes) == {"ok": 1}


def test_two_coordinators_claiming_at_once_never_get_the_same_job(database, key):
    made = {database.create_job({"n": n}, [(key, "llvm", 1)]).id for n in range(24)}
    claimed: dict[str, list[int]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def claim_all(name: str) -> None:
        start.wait()
        while (job := database.claim_job(name)) is not None:
            assert job.coordinator == name
            claimed[name].append(job.id)

    threads = [threading.Thread(target=claim_all, args=(name,)) for name in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not set(claimed["a"]) & set(claimed["b"])
    assert set(claimed["a"]) | set(claimed["b"]) == made  # neither gave up while jobs were left


def test_jobs_and_tasks_track_progress_and_own_records(database, key):
    job = database.create_job({"workload": MATMUL, "trials": 64}, [(key, "llvm", 64)])
    assert job.status is JobStatus.QUEUED and job.spec["trials"] == 64
    (task,) = job.tasks
    assert task.trials_asked == 64 and task.trials_done == 0 and task.best_seconds is None
    running = database.claim_job("coordinator")
    assert running is not None and running.id == job.id
    assert running.started_at is not None and running.finished_at is None
    database.commit_records([ok(key, 3, [1e-3], job_id=job.id), ok(key, 5, [2e-3])])
    updated = database.update_task(task.id, trials_done=1, best_seconds=1e-3)
    assert (updated.trials_done, updated.best_seconds) == (1, 1e-3)
    assert [r.mean_seconds for r in database.records(job_id=job.id)] == [1e-3]
    done = database.end_job(job.id, "coordinator", JobStatus.DONE)
    assert done.finished_at is not None and database.jobs(JobStatus.DONE) == [done]
    with pytest.raises(RecordError, match="unknown workload"):
        database.create_job({}, [("f" * 64, "llvm", 1)])
    with pytest.raises(RecordError, match="no job with id 999"):
        database.job(999)
