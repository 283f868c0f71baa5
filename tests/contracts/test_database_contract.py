"""The contract of ``db.Database`` (records and workloads), run the same over every
implementation (``conftest.py``): held in memory, an SQLite file, and a real
PostgreSQL server."""

from __future__ import annotations

import io
import json
import logging
import math
from dataclasses import replace

import pytest
from db_helpers import MATMUL, RELU, SKYLAKE, ZEN, matmul, split_trace

import db
from compiler.errors import ErrorKind
from compiler.schedule.trace import TRACE_FORMAT_VERSION
from compiler.target.parse import canonical_target
from compiler.workload.key import workload_key
from db import (
    DatabaseError,
    Measurement,
    MemoryDatabase,
    Purpose,
    RecordError,
    SQLDatabase,
)


@pytest.fixture
def key(database):
    return database.commit_workload(MATMUL).key


def ok(key, factor, seconds, target=ZEN, **kwargs):
    return Measurement.ok(key, target, split_trace(factor), seconds, **kwargs)


def retime(key, factor, seconds, target=ZEN):
    return ok(key, factor, seconds, target, purpose=Purpose.RETIME)


def everything(database):
    return database.records(limit=10_000)


def test_create_names_the_kinds_for_a_wrong_one(tmp_path):
    assert isinstance(db.create("memory"), MemoryDatabase)
    with db.create(f"sqlite:///{tmp_path / 'a.db'}") as sql:
        assert isinstance(sql, SQLDatabase)
    wrong = r"unknown database 'redis'; give the kind memory or a URL \(sqlite:///"
    with pytest.raises(DatabaseError, match=wrong):
        db.create("redis")


def test_workloads_are_stored_once_under_their_key(database):
    by_spec = database.commit_workload(MATMUL, flop_count=2 * 33 * 17 * 9)
    by_func = database.commit_workload(matmul(), name="another name")
    assert by_spec == by_func
    assert by_spec.key == workload_key(matmul())
    assert by_spec.name == "matmul(m=33, n=17, k=9)"
    assert by_spec.flop_count == 2 * 33 * 17 * 9
    relu = database.commit_workload(RELU)
    assert database.workloads() == [by_spec, relu]
    assert database.workloads([relu.key]) == [relu]
    assert database.workload(relu.key) == relu
    with pytest.raises(RecordError, match="no workload with key 'nope'"):
        database.workload("nope")
    with pytest.raises(RecordError, match="workload spec: op: unknown operator"):
        database.commit_workload({"op": "nope"})


def test_records_round_trip_newest_first_in_pages(database, key):
    database.commit_records(
        [
            ok(key, 2, [3e-4, 1e-4, 2e-4], worker_host="h1"),
            Measurement.failed(key, ZEN, split_trace(3), ErrorKind.CRASHED, "SIGSEGV"),
            *(ok(key, f, [f * 1e-4]) for f in (4, 5, 6)),
        ]
    )
    first = database.records(key, ZEN, limit=2)
    second = database.records(key, ZEN, limit=2, before_id=first[-1].id)
    last = database.records(key, ZEN, limit=2, before_id=second[-1].id)
    assert len(last) == 1
    success, failure = last[0], second[-1]
    assert success.run_times == (3e-4, 1e-4, 2e-4) and success.worker_host == "h1"
    assert success.mean_seconds == pytest.approx(2e-4) and success.min_seconds == 1e-4
    assert success.purpose is Purpose.SEARCH and success.seconds == success.min_seconds
    assert success.trace == split_trace(2).to_json_string() and success.target == canonical_target(
        ZEN
    )
    assert success.to_trace().as_json() == split_trace(2).as_json()
    assert success.trace_version == TRACE_FORMAT_VERSION and success.tensortune_version
    assert success.created_at.tzinfo is not None and not success.stale
    assert failure.error_kind is ErrorKind.CRASHED and failure.error == "SIGSEGV"
    assert failure.run_times == () and failure.mean_seconds is None and failure.seconds is None
    assert [r.id for r in first + second + last] == sorted(
        (r.id for r in everything(database)), reverse=True
    )
    assert database.count() == 5 and database.count(key, ZEN, ErrorKind.CRASHED) == 1
    assert database.count(key, SKYLAKE) == 0 and database.records(key, SKYLAKE) == []


def test_best_is_the_fastest_success_of_that_workload_on_that_target(database, key):
    relu_key = database.commit_workload(RELU).key
    database.commit_records(
        [
            ok(key, 3, [3e-3, 5e-3]),
            ok(key, 5, [2e-3]),
            ok(key, 7, [1e-3], target=SKYLAKE),
            Measurement.failed(key, ZEN, split_trace(11), ErrorKind.TIMEOUT, "took > 10 s"),
            Measurement.ok(relu_key, ZEN, split_trace(2, RELU), [1e-6]),
            ok(key, 9, [4e-3]),
        ]
    )
    best = database.best(key, ZEN, k=10)
    assert [r.seconds for r in best] == [2e-3, 3e-3, 4e-3]
    assert [r.trace for r in best] == [split_trace(f).to_json_string() for f in (5, 3, 9)]
    assert [r.seconds for r in database.best(key, ZEN, k=2)] == [2e-3, 3e-3]
    assert [r.mean_seconds for r in database.best(key, SKYLAKE, 5)] == [1e-3]
    assert database.best(key, "llvm -mcpu=cascadelake") == []
    assert database.best_trace(key, ZEN) == best[0].trace
    assert database.targets(key) == sorted(map(canonical_target, [ZEN, SKYLAKE]))


def test_a_trace_searched_twice_ranks_once_by_its_faster_measurement(database, key):
    """A search confirms its fastest trials with a second search measurement: the
    trace takes one place, its faster time's, whichever record came first."""
    database.commit_records([ok(key, 2, [5e-4]), ok(key, 3, [4e-4]), ok(key, 4, [6e-4])])
    database.commit_records([ok(key, 2, [3e-4]), ok(key, 3, [9e-4])])
    for purpose in (None, Purpose.SEARCH):
        best = database.best(key, ZEN, k=10, purpose=purpose)
        assert [r.trace for r in best] == [split_trace(f).to_json_string() for f in (2, 3, 4)]
        assert [r.seconds for r in best] == [3e-4, 4e-4, 6e-4]
        assert [r.seconds for r in database.best(key, ZEN, k=2, purpose=purpose)] == [3e-4, 4e-4]


def test_a_retiming_is_a_new_record_and_ranks_its_trace(database, key):
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (2, 3, 4, 5)])
    searched = everything(database)
    lucky, second, third, fourth = database.best(key, ZEN, k=4)
    assert database.best(key, ZEN, k=4, purpose=Purpose.RETIME) == []
    database.commit_records([retime(key, 3, [7e-4, 6e-4, 9e-4]), retime(key, 4, [5e-4])])
    best = database.best(key, ZEN, k=4)
    assert [r.trace for r in best] == [third.trace, second.trace, lucky.trace, fourth.trace]
    assert [r.purpose for r in best] == [Purpose.RETIME] * 2 + [Purpose.SEARCH] * 2
    assert [r.seconds for r in best] == [5e-4, 6e-4, lucky.seconds, fourth.seconds]
    assert best[1].run_times == (7e-4, 6e-4, 9e-4) and best[1].min_seconds == 6e-4
    assert database.best(key, ZEN, k=4, purpose=Purpose.SEARCH) == [lucky, second, third, fourth]
    assert [r.trace for r in database.best(key, ZEN, k=1)] == [third.trace]
    assert database.best_trace(key, ZEN) == third.trace
    # a slower re-timing later (a loaded host) does not hide the trace's faster one
    database.commit_records([retime(key, 4, [8e-4])])
    assert [r.trace for r in database.best(key, ZEN, k=2)] == [third.trace, second.trace]
    assert database.best(key, ZEN)[0].seconds == 5e-4
    assert len(database.best(key, ZEN, k=10, purpose=Purpose.RETIME)) == 2
    # the search measurements are exactly as they were
    assert [r for r in everything(database) if r.purpose is Purpose.SEARCH] == searched
    assert len(database.records(key, purpose=Purpose.RETIME)) == 3


def test_records_are_append_only(database, key, make):
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (2, 3)])
    before = everything(database)
    database.commit_records([retime(key, 2, [1e-4]), ok(key, 2, [9e-4])])
    with pytest.raises(RecordError):
        database.commit_records([ok(key, 5, [math.nan])])
    out = io.StringIO()
    database.export_jsonl(out)
    database.import_jsonl(out.getvalue().splitlines())
    after = everything(database)
    assert after[-len(before) :] == before
    assert len(after) == len(before) + 2
    assert len({r.id for r in after}) == len(after)


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
    before = everything(database)
    with pytest.raises(RecordError, match=rf"records\[1\]: .*{message}"):
        database.commit_records([ok(key, 5, [2e-3]), ok(key, 7, times)])
    with pytest.raises(RecordError, match=rf"records\[0\]: .*{message}"):
        database.commit_records([retime(key, 3, times)])
    assert everything(database) == before


def test_bad_input_is_a_record_error_naming_it_and_stores_nothing(database, key):
    database.commit_records([ok(key, 3, [1e-3])])
    before = everything(database)
    failed_retime = Measurement.failed(key, ZEN, split_trace(3), ErrorKind.TIMEOUT, "x")
    cases = [
        (Measurement.ok("0" * 64, ZEN, split_trace(3), [1e-3]), "unknown workload '000"),
        (Measurement.ok(key, ZEN, split_trace(2, RELU), [1e-3]), "does not replay on workload"),
        (Measurement.ok(key, ZEN, "{not json", [1e-3]), "does not replay.*does not parse"),
        (Measurement.failed(key, ZEN, split_trace(3), ErrorKind.TIMEOUT, ""), "error message"),
        (Measurement(key, ZEN, "{}", None, (1.0,), "boom"), "has no error message"),
        (Measurement(key, ZEN, "{}", "slow", (1.0,)), "must be an ErrorKind \\(BUILD_ERROR"),
        (ok(key, 3, [1e-3], target="opencl"), "unknown target 'opencl'"),
        (ok(key, 3, [1e-3], target="cuda"), "'cuda' names no single GPU architecture"),
        (ok(key, 3, [1e-3], job_id="7"), r"records\[1\].job_id: must be a job's id"),
        (ok(key, 3, [1e-3], purpose="retime"), r"records\[1\].purpose: must be a Purpose"),
        (replace(failed_retime, purpose=Purpose.RETIME), "a re-timing is stored only when"),
        ((key, ZEN, "{}", [1.0]), "expected a Measurement, got tuple"),
    ]
    for measurement, message in cases:
        with pytest.raises(RecordError, match=message):
            database.commit_records([ok(key, 5, [1e-3]), measurement])
    for call, message in [
        (lambda: database.best(key, ZEN, k=0), "k: must be an integer from 1 to"),
        (lambda: database.best(key, ZEN, k=2**64), "k: must be an integer from 1 to"),
        (lambda: database.records(before_id=10**23), "before_id: must be a record's id"),
        (lambda: database.records(limit=0), "limit: must be an integer from 1 to 10000"),
        (lambda: database.records(before_id="9"), "before_id: must be a record's id"),
        (lambda: database.export_jsonl(io.StringIO(), best_k=0), "k: must be an integer"),
        (lambda: database.commit_workload(MATMUL, flop_count=10**30), "flop_count: must be"),
        (lambda: database.import_jsonl([]), "the stream is empty"),
    ]:
        with pytest.raises(RecordError, match=message):
            call()
    assert issubclass(RecordError, DatabaseError)
    assert everything(database) == before


def test_a_built_success_is_trusted_by_its_hash_and_a_built_failure_is_replayed(database, key):
    """A tuning loop's workers built each success on its workload, which replayed its
    trace: the database does not replay it again. The trace here does not replay on
    the workload, so only a skipped replay stores it."""
    foreign = split_trace(2, RELU)
    with pytest.raises(RecordError, match="does not replay on workload"):
        database.commit_records([Measurement.ok(key, ZEN, foreign, [1e-3])])
    failure = Measurement.failed(key, ZEN, foreign, ErrorKind.BUILD_ERROR, "no")
    with pytest.raises(RecordError, match=r"records\[0\]: the trace does not replay"):
        database.commit_records([failure], built=True)
    assert database.commit_records([Measurement.ok(key, ZEN, foreign, [1e-3])], built=True) == 1
    assert [r.run_times for r in everything(database)] == [(1e-3,)]


def _comparable(records):
    return [(r.workload_key, r.target, r.trace_hash, r.purpose, r.error_kind, r.run_times,
             r.min_seconds, r.error, r.worker_host, r.created_at, r.trace_version,
             r.tensortune_version) for r in records]  # fmt: skip


def test_export_and_import_round_trip(database, key, make):
    database.commit_records([ok(key, f, [f * 1e-4], worker_host="h") for f in (2, 3, 4)])
    database.commit_records([retime(key, 3, [1e-4, 2e-4])])
    database.commit_records(
        [Measurement.failed(key, SKYLAKE, split_trace(5), ErrorKind.BUILD_ERROR, "no")]
    )
    out = io.StringIO()
    assert database.export_jsonl(out) == 5
    other = make()
    summary = other.import_jsonl(out.getvalue().splitlines())
    assert (summary.workloads_added, summary.records_added, summary.records_skipped) == (1, 5, 0)
    assert other.workloads() == database.workloads()
    assert _comparable(everything(other)) == _comparable(everything(database))
    assert _comparable(other.best(key, ZEN, 3)) == _comparable(database.best(key, ZEN, 3))
    again = other.import_jsonl(out.getvalue().splitlines())
    assert (again.workloads_added, again.records_added, again.records_skipped) == (0, 0, 5)
    best_only = io.StringIO()
    assert database.export_jsonl(best_only, best_k=1) == 2
    best_lines = [json.loads(line) for line in best_only.getvalue().splitlines()]
    assert {d["purpose"] for d in best_lines if d.get("kind") == "record"} == {"search", "retime"}


def test_a_version_2_stream_reads_its_retimings_as_records(database, key, make):
    database.commit_records([ok(key, 3, [1e-3]), ok(key, 5, [2e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    header, *lines = out.getvalue().splitlines()
    assert json.loads(header) == {"format": "tensortune.records", "version": 4}
    old = [json.dumps({"format": "tensortune.records", "version": 2})]
    for line in lines:
        doc = json.loads(line)
        if doc["kind"] == "end":
            continue
        if doc["kind"] == "record":
            doc.pop("purpose")
            retimed = doc["trace"] == split_trace(5).to_json_string()
            doc["retime_times"] = [4e-4, 5e-4, 9e-4] if retimed else None
            doc["retimed_at"] = "2026-01-02T03:04:05+00:00" if retimed else None
        old.append(json.dumps(doc))
    other = make()
    assert other.import_jsonl(old).records_added == 3
    (best,) = other.best(key, ZEN)
    assert best.purpose is Purpose.RETIME and best.seconds == 4e-4
    assert best.trace == split_trace(5).to_json_string()
    assert other.best(key, ZEN, 2, purpose=Purpose.SEARCH)[0].mean_seconds == 1e-3
    assert other.import_jsonl(old).records_added == 0
    with pytest.raises(RecordError, match="versions 1, 2, 3, 4 are read"):
        other.import_jsonl([json.dumps({"format": "tensortune.records", "version": 5})])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(trace_hash="0" * 64), "trace_hash does not match"),
        (lambda d: d.update(run_times=[-1.0]), "is not a run time"),
        (lambda d: d.update(created_at="2024-01-01T00:00:00"), "needs its zone"),
        (lambda d: d.pop("worker_host"), r"fields missing \['worker_host'\]"),
        (lambda d: d.update(workload="f" * 64), "unknown workload"),
        (lambda d: d.update(purpose="again"), "purpose: 'again' is not one of search, retime"),
    ],
)
def test_import_refuses_a_bad_line_and_stores_nothing(database, key, edit, message):
    database.commit_records([ok(key, 3, [1e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    lines = out.getvalue().splitlines()
    doc = json.loads(lines[-2])
    edit(doc)
    lines[-2] = json.dumps(doc)
    before = everything(database)
    with pytest.raises(RecordError, match=message):
        database.import_jsonl(lines)
    with pytest.raises(RecordError, match="line 1: expected the header"):
        database.import_jsonl(lines[1:])
    assert everything(database) == before


def test_stale_records_are_reported_never_applied(database, key, make, caplog):
    database.commit_records([ok(key, 3, [1e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    stale = []
    for line in out.getvalue().splitlines():
        doc = json.loads(line)
        if doc.get("kind") == "record":
            doc.update(trace_version=TRACE_FORMAT_VERSION - 1, tensortune_version="0.0.1")
            doc["run_times"] = [t / 100 for t in doc["run_times"]]
        stale.append(json.dumps(doc))
    other = make()
    other.commit_workload(MATMUL)
    other.commit_records([ok(key, 5, [2e-3])])
    other.import_jsonl(stale)
    (old,) = [r for r in everything(other) if r.stale]
    assert old.mean_seconds == pytest.approx(1e-5) and old.tensortune_version == "0.0.1"
    assert [r.mean_seconds for r in other.best(key, ZEN, 5)] == [2e-3]
    assert other.count(key, ZEN, stale=True) == 1 and other.count(stale=False) == 1
    with caplog.at_level(logging.WARNING, logger="db.base"):
        assert other.best_trace(key, ZEN) == split_trace(5).to_json_string()
    assert "1 records are stale" in caplog.text


def test_a_noisy_retiming_never_flips_the_ranking_and_every_timing_is_kept(database, key):
    database.commit_records([ok(key, 3, [70e-6]), ok(key, 5, [90e-6])])
    database.commit_records([retime(key, 3, [64e-6, 66e-6]), retime(key, 5, [80e-6])])
    database.commit_records([retime(key, 3, [2.2e-3, 2.4e-3])])
    best = database.best(key, ZEN, 2)
    assert [r.trace for r in best] == [split_trace(f).to_json_string() for f in (3, 5)]
    assert [r.seconds for r in best] == [64e-6, 80e-6]
    assert database.best(key, ZEN, 1, purpose=Purpose.RETIME)[0].seconds == 64e-6
    timings = [r.run_times for r in database.records(key, purpose=Purpose.RETIME)]
    assert timings == [(2.2e-3, 2.4e-3), (80e-6,), (64e-6, 66e-6)]


def test_equal_measurements_in_one_batch_stay_two_through_export_and_import(database, key, make):
    twice = [ok(key, 3, [1e-3], worker_host="h"), ok(key, 3, [1e-3], worker_host="h")]
    database.commit_records(twice)
    out = io.StringIO()
    assert database.export_jsonl(out) == 2
    other = make()
    assert other.import_jsonl(out.getvalue().splitlines()).records_added == 2
    assert other.count(key, ZEN) == 2
    again = other.import_jsonl(out.getvalue().splitlines())
    assert (again.records_added, again.records_skipped) == (0, 2)
    assert other.count(key, ZEN) == 2


@pytest.mark.parametrize(
    "cut, message",
    [
        (lambda lines: lines[:-1], "ends without its trailer"),
        (lambda lines: [*lines[:-2], lines[-1]], "the stream holds 1 and 1: it is damaged"),
        (lambda lines: [*lines, lines[-2]], "a line after the stream's end"),
    ],
)
def test_a_cut_or_padded_export_is_refused_whole(database, key, make, cut, message):
    database.commit_records([ok(key, 3, [1e-3]), ok(key, 5, [2e-3])])
    out = io.StringIO()
    database.export_jsonl(out)
    other = make()
    with pytest.raises(RecordError, match=message):
        other.import_jsonl(cut(out.getvalue().splitlines()))
    assert other.workloads() == [] and other.count() == 0


def test_a_best_only_export_keeps_the_best_traces_in_commit_order(database, key):
    database.commit_records([ok(key, f, [f * 1e-4]) for f in (5, 2, 4, 3)])
    database.commit_records([ok(key, 6, [1e-5], target=SKYLAKE)])
    database.commit_records(
        [Measurement.failed(key, ZEN, split_trace(7), ErrorKind.CRASHED, "SIGSEGV")]
    )
    out = io.StringIO()
    assert database.export_jsonl(out, best_k=2) == 3
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    kept = [(d["trace_hash"], d["target"]) for d in lines if d.get("kind") == "record"]
    newest_first = everything(database)
    by_factor = {f: newest_first[i] for i, f in enumerate((7, 6, 3, 4, 2, 5))}
    assert kept == [(by_factor[f].trace_hash, by_factor[f].target) for f in (2, 3, 6)]
    assert lines[-1] == {"kind": "end", "workloads": 1, "records": 3}


def test_a_record_is_found_by_its_id_and_counted_by_its_outcome(database, key):
    database.commit_records(
        [
            ok(key, 2, [2e-4]),
            Measurement.failed(key, ZEN, split_trace(3), ErrorKind.CRASHED, "SIGSEGV"),
            ok(key, 4, [1e-4], target=SKYLAKE),
        ]
    )
    newest_first = everything(database)
    assert [database.record(r.id) for r in newest_first] == newest_first
    for missing in (0, newest_first[0].id + 1, -3):
        with pytest.raises(RecordError, match=f"no record with id {missing}"):
            database.record(missing)
    assert (database.count(ok=True), database.count(ok=False)) == (2, 1)
    assert database.count(key, ZEN, ok=True) == 1 and database.count(key, SKYLAKE) == 1
    assert database.count(error_kind=ErrorKind.CRASHED) == 1
    assert database.count(error_kind=ErrorKind.TIMEOUT) == 0
    assert (database.count(stale=True), database.count(stale=False)) == (0, 3)
