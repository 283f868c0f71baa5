"""The Database API, run the same against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import io
import json
import logging
import math

import llvmlite.binding as llvm
import pytest
from db_helpers import MATMUL, RELU, SKYLAKE, ZEN, matmul, split_trace
from pg_server import BACKENDS, fresh_url

from compiler.errors import ErrorKind
from compiler.schedule.trace import TRACE_FORMAT_VERSION
from compiler.workload_key import workload_key
from db import (
    Database,
    JobStatus,
    Measurement,
    RecordError,
)


@pytest.fixture(params=BACKENDS)
def database(request, tmp_path):
    db = Database(fresh_url(request.param, tmp_path))
    yield db
    db.close()


@pytest.fixture
def key(database):
    return database.commit_workload(MATMUL).key


def ok(key, factor, seconds, target=ZEN, **kwargs):
    return Measurement.ok(key, target, split_trace(factor), seconds, **kwargs)


def test_workloads_are_stored_once_under_their_key(database):
    by_spec = database.commit_workload(MATMUL, flop_count=2 * 33 * 17 * 9)
    by_func = database.commit_workload(matmul(), name="another name")
    assert by_spec == by_func
    assert by_spec.key == workload_key(matmul())
    assert by_spec.name == "matmul(m=33, n=17, k=9)"
    assert by_spec.flop_count == 2 * 33 * 17 * 9
    assert database.workloads() == [by_spec]
    with pytest.raises(RecordError, match="no workload with key 'nope'"):
        database.workload("nope")
    with pytest.raises(RecordError, match="workload spec: op: unknown operator"):
        database.commit_workload({"op": "nope"})


def test_best_is_the_fastest_success_of_that_workload_on_that_target(database, key):
    relu_key = database.commit_workload(RELU).key
    stored = database.commit_records(
        [
            ok(key, 3, [3e-3, 5e-3]),
            ok(key, 5, [2e-3]),
            ok(key, 7, [1e-3], target=SKYLAKE),
            Measurement.failed(key, ZEN, split_trace(11), ErrorKind.TIMEOUT, "took > 10 s"),
            Measurement.failed(key, ZEN, split_trace(2), ErrorKind.WRONG_RESULT, "max err 3"),
            Measurement.ok(relu_key, ZEN, split_trace(2, RELU), [1e-6]),
        ]
    )
    assert stored == 6
    best = database.best(key, ZEN, k=10)
    assert [r.mean_seconds for r in best] == [2e-3, 4e-3]
    assert best[0].trace == split_trace(5).to_json_string()
    assert best[1].run_times == (3e-3, 5e-3)
    assert all(r.ok and not r.stale for r in best)
    assert [r.mean_seconds for r in database.best(key, SKYLAKE, 5)] == [1e-3]
    assert database.best(key, "llvm -mcpu=cascadelake") == []
    assert database.best_trace(key, ZEN) == best[0].trace
    assert database.count(key) == 5
    assert database.count(key, ZEN, ErrorKind.TIMEOUT) == 1


def test_failures_are_stored_with_their_status_and_no_time(database, key):
    database.commit_records(
        [Measurement.failed(key, ZEN, split_trace(3), ErrorKind.CRASHED, "SIGSEGV")]
    )
    (record,) = database.records(key, ZEN)
    assert record.error_kind is ErrorKind.CRASHED
    assert record.error == "SIGSEGV"
    assert record.mean_seconds is None and record.run_times == ()
    assert database.best(key, ZEN) == []
    assert database.best_trace(key, ZEN) is None


def test_the_host_target_is_stored_under_its_canonical_spelling(database, key):
    host = f"llvm -mcpu={llvm.get_host_cpu_name()}"
    database.commit_records([ok(key, 3, [1e-3], target="llvm")])
    assert database.best(key, host)[0].target == host
    assert database.best(key, "llvm") == database.best(key, host)


def test_records_come_newest_first_in_pages(database, key):
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (2, 3, 4, 5, 6)])
    first = database.records(key, ZEN, limit=2)
    second = database.records(key, ZEN, limit=2, before_id=first[-1].id)
    last = database.records(key, ZEN, limit=2, before_id=second[-1].id)
    seconds = [r.mean_seconds for r in first + second + last]
    assert seconds == pytest.approx([6e-4, 5e-4, 4e-4, 3e-4, 2e-4])
    assert all(r.tensortune_version and r.trace_version == TRACE_FORMAT_VERSION for r in last)
    assert all(r.created_at.tzinfo is not None for r in last)


def test_a_resumed_job_sees_what_was_measured(database, key):
    database.commit_records([ok(key, 3, [1e-3])])
    assert database.is_measured(key, ZEN, split_trace(3))
    assert database.is_measured(key, ZEN, split_trace(3).as_json())
    assert not database.is_measured(key, ZEN, split_trace(5))
    assert not database.is_measured(key, SKYLAKE, split_trace(3))


@pytest.mark.parametrize(
    "times, message",
    [
        ([-1e-3], "is not a run time"),
        ([math.nan], "is not a run time"),
        ([math.inf], "is not a run time"),
        ([], "needs at least one run time"),
        (["fast"], "must be a number of seconds"),
    ],
)
def test_bad_run_times_are_refused_and_nothing_is_stored(database, key, times, message):
    database.commit_records([ok(key, 3, [1e-3])])
    batch = [ok(key, 5, [2e-3]), ok(key, 7, times)]
    with pytest.raises(RecordError, match=rf"records\[1\]: .*{message}"):
        database.commit_records(batch)
    assert database.count() == 1


def test_bad_records_are_refused_naming_the_problem(database, key):
    replays_elsewhere = Measurement.ok(key, ZEN, split_trace(2, RELU), [1e-3])
    cases = [
        (Measurement.ok("0" * 64, ZEN, split_trace(3), [1e-3]), "unknown workload '000"),
        (replays_elsewhere, "does not replay on workload"),
        (Measurement.ok(key, ZEN, "{not json", [1e-3]), "does not replay.*does not parse"),
        (Measurement.failed(key, ZEN, split_trace(3), ErrorKind.TIMEOUT, ""), "error message"),
        (Measurement(key, ZEN, "{}", None, (1.0,), "boom"), "has no error message"),
        (Measurement(key, ZEN, "{}", "slow", (1.0,)), "must be an ErrorKind \\(BUILD_ERROR"),
        (ok(key, 3, [1e-3], target="cuda"), "unknown target 'cuda'"),
        (ok(key, 3, [1e-3], job_id=12345), r"jobs \[12345\] that do not exist"),
        (ok(key, 3, [1e-3], job_id="7"), r"records\[0\].job_id: must be a job's id"),
        ((key, ZEN, "{}", [1.0]), "expected a Measurement, got tuple"),
    ]
    for measurement, message in cases:
        with pytest.raises(RecordError, match=message):
            database.commit_records([measurement])
    assert database.count() == 0


def test_a_retimed_record_ranks_by_its_retiming_ahead_of_lucky_ones(database, key):
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (2, 3, 4, 5)])
    lucky, second, third, _ = database.best_measured(key, ZEN, k=4)
    assert [r.retimed_seconds for r in database.best(key, ZEN, 4)] == [None] * 4
    retimed = database.commit_retiming(second.id, [7e-4, 6e-4, 9e-4])
    assert retimed.retime_times == (7e-4, 6e-4, 9e-4) and retimed.retimed_seconds == 7e-4
    assert retimed.retimed_at is not None and retimed.mean_seconds == second.mean_seconds
    database.commit_retiming(third.id, [5e-4])
    best = database.best(key, ZEN, k=4)
    assert [r.id for r in best] == [third.id, second.id, lucky.id, best[3].id]
    assert [r.seconds for r in best[:3]] == [5e-4, 7e-4, lucky.mean_seconds]
    assert [r.id for r in database.best(key, ZEN, k=1)] == [third.id]
    assert [r.id for r in database.best_measured(key, ZEN, k=2)] == [lucky.id, second.id]
    assert database.best_trace(key, ZEN) == third.trace
    database.commit_retiming(third.id, [8e-4])
    assert [r.id for r in database.best(key, ZEN, k=2)] == [second.id, third.id]


def test_a_retiming_is_refused_for_a_failure_or_bad_times(database, key):
    database.commit_records(
        [
            ok(key, 3, [1e-3]),
            Measurement.failed(key, ZEN, split_trace(5), ErrorKind.TIMEOUT, "x"),
        ]
    )
    success, failure = sorted(database.records(key), key=lambda r: not r.ok)
    with pytest.raises(RecordError, match=f"record {failure.id} is a failure \\(timeout\\)"):
        database.commit_retiming(failure.id, [1e-3])
    with pytest.raises(RecordError, match="no record with id 999"):
        database.commit_retiming(999, [1e-3])
    with pytest.raises(RecordError, match=f"record {success.id}: run_times\\[1\\]"):
        database.commit_retiming(success.id, [1e-3, math.nan])
    with pytest.raises(RecordError, match="needs at least one run time"):
        database.commit_retiming(success.id, [])
    assert all(r.retimed_seconds is None for r in database.records(key))


def test_export_and_import_move_records_keeping_versions(database, key, tmp_path):
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (2, 3, 4)])
    database.commit_retiming(database.best(key, ZEN)[0].id, [3e-4, 4e-4])
    database.commit_records(
        [Measurement.failed(key, SKYLAKE, split_trace(5), ErrorKind.BUILD_ERROR, "no")]
    )
    out = io.StringIO()
    assert database.export_jsonl(out) == 4
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    summary = other.import_jsonl(out.getvalue().splitlines())
    assert (summary.workloads_added, summary.records_added, summary.records_skipped) == (1, 4, 0)
    assert _comparable(other.records(key)) == _comparable(database.records(key))
    again = other.import_jsonl(out.getvalue().splitlines())
    assert (again.workloads_added, again.records_added, again.records_skipped) == (0, 0, 4)
    assert other.count() == 4


def _comparable(records):
    return [(r.workload_key, r.target, r.trace_hash, r.error_kind, r.run_times, r.created_at,
             r.trace_version, r.tensortune_version, r.retime_times, r.retimed_seconds,
             r.retimed_at) for r in records]  # fmt: skip


def test_a_version_1_export_still_imports(database, key, tmp_path):
    database.commit_records([ok(key, 3, [1e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    header, *lines = out.getvalue().splitlines()
    assert json.loads(header) == {"format": "tensortune.records", "version": 2}
    old = [json.dumps({"format": "tensortune.records", "version": 1})]
    for line in lines:
        doc = json.loads(line)
        for field in ("retime_times", "retimed_at"):
            doc.pop(field, None)
        old.append(json.dumps(doc))
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    assert other.import_jsonl(old).records_added == 1
    assert other.best(key, ZEN)[0].retimed_seconds is None
    with pytest.raises(RecordError, match="versions 1, 2 are read"):
        other.import_jsonl([json.dumps({"format": "tensortune.records", "version": 3})])


def test_merge_adds_the_other_database_and_keeps_targets_apart(database, key, tmp_path):
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
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
    slowest = database.best_measured(key, ZEN, 4)[-1]
    database.commit_retiming(slowest.id, [4e-4])
    out = io.StringIO()
    assert database.export_jsonl(out, best_k=2) == 5
    assert database.prune(keep=2) == 4
    assert database.count(key, ZEN) == 2 and database.count(key, SKYLAKE) == 2
    assert [r.seconds for r in database.best(key, ZEN, 5)] == pytest.approx([4e-4, 2e-4])
    assert database.count(relu_key) == 1


def _stale_stream(database, key):
    """An export whose records say they were written in an older trace format."""
    out = io.StringIO()
    database.export_jsonl(out)
    lines = out.getvalue().splitlines()
    stale = []
    for line in lines:
        doc = json.loads(line)
        if doc.get("kind") == "record":
            doc.update(trace_version=TRACE_FORMAT_VERSION - 1, tensortune_version="0.0.1")
            doc["run_times"] = [t / 100 for t in doc["run_times"]]
        stale.append(json.dumps(doc))
    return stale


def test_stale_records_are_reported_never_applied(database, key, tmp_path, caplog):
    database.commit_records([ok(key, 3, [1e-3])])
    stream = _stale_stream(database, key)
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    other.commit_workload(MATMUL)
    other.commit_records([ok(key, 5, [2e-3])])
    other.import_jsonl(stream)
    (stale,) = [r for r in other.records(key) if r.stale]
    assert stale.mean_seconds == pytest.approx(1e-5) and stale.tensortune_version == "0.0.1"
    assert [r.mean_seconds for r in other.best(key, ZEN, 5)] == [2e-3]
    with caplog.at_level(logging.WARNING, logger="db.database"):
        assert other.best_trace(key, ZEN) == split_trace(5).to_json_string()
    assert "1 faster records are stale" in caplog.text


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(trace_hash="0" * 64), "trace_hash does not match"),
        (lambda d: d.update(run_times=[-1.0]), "is not a run time"),
        (lambda d: d.update(created_at="2024-01-01T00:00:00"), "needs its zone"),
        (lambda d: d.pop("worker_host"), r"fields missing \['worker_host'\]"),
        (lambda d: d.update(workload="f" * 64), "unknown workload"),
        (lambda d: d.update(retime_times=[1e-3]), "retime_times and retimed_at go together"),
        (
            lambda d: d.update(retime_times=[], retimed_at="2026-01-01T00:00:00+00:00"),
            "at least one run time",
        ),
    ],
)
def test_import_refuses_a_bad_line_and_stores_nothing(database, key, edit, message):
    database.commit_records([ok(key, 3, [1e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    lines = out.getvalue().splitlines()
    doc = json.loads(lines[-1])
    edit(doc)
    lines[-1] = json.dumps(doc)
    with pytest.raises(RecordError, match=message):
        database.import_jsonl(lines)
    with pytest.raises(RecordError, match="line 1: expected the header"):
        database.import_jsonl(lines[1:])
    assert database.count() == 1


def test_jobs_and_tasks_track_progress_and_own_records(database, key):
    job = database.create_job({"workload": MATMUL, "trials": 64}, [(key, "llvm", 64)])
    assert job.status is JobStatus.QUEUED and job.spec["trials"] == 64
    (task,) = job.tasks
    assert task.trials_asked == 64 and task.trials_done == 0 and task.best_seconds is None
    running = database.set_job_status(job.id, JobStatus.RUNNING)
    assert running.started_at is not None and running.finished_at is None
    database.commit_records([ok(key, 3, [1e-3], job_id=job.id), ok(key, 5, [2e-3])])
    updated = database.update_task(task.id, trials_done=1, best_seconds=1e-3)
    assert (updated.trials_done, updated.best_seconds) == (1, 1e-3)
    assert [r.mean_seconds for r in database.records(job_id=job.id)] == [1e-3]
    done = database.set_job_status(job.id, JobStatus.DONE)
    assert done.finished_at is not None and database.jobs(JobStatus.DONE) == [done]
    with pytest.raises(RecordError, match="unknown workload"):
        database.create_job({}, [("f" * 64, "llvm", 1)])
    with pytest.raises(RecordError, match="no job with id 999"):
        database.job(999)
