"""The contract of ``db.JobStore`` and ``db.JobQueue``, over every implementation: jobs
are stored whole or not at all, numbered and listed newest first, claimed by priority
then age, and their state changes are guarded: a cancel and a coordinator's end never
overwrite each other, a coordinator that lost its job writes nothing, and a job that
ended leaves no task queued or running."""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import pytest
from db_helpers import MATMUL, RELU, SKYLAKE, ZEN, split_trace

from compiler.errors import ErrorKind
from compiler.target.parse import canonical_target
from db import Job, JobStatus, Measurement, Purpose, QuotaError, RecordError, Role

UNFINISHED = (JobStatus.QUEUED, JobStatus.RUNNING)


@pytest.fixture
def key(database) -> str:
    return database.commit_workload(MATMUL).key


def three_task_job(database, key) -> Job:
    return database.create_job(
        {}, [(key, "llvm", 4), (key, "llvm -mcpu=znver4", 4), (key, "llvm -num-cores=1", 4)]
    )


def assert_settled(job: Job, status: JobStatus) -> None:
    assert job.status is status and job.finished_at is not None
    assert not [task for task in job.tasks if task.status in UNFINISHED], job.tasks


def test_a_job_cancelled_while_queued_cancels_its_tasks(database, key) -> None:
    job = three_task_job(database, key)
    assert_settled(database.cancel_job(job.id), JobStatus.CANCELLED)
    assert database.claim_job("coordinator") is None


def test_a_cancel_wins_over_a_later_end_and_loses_to_an_earlier_one(database, key) -> None:
    first, second = three_task_job(database, key), three_task_job(database, key)
    assert database.claim_job("a") is not None and database.claim_job("b") is not None
    database.update_task(first.tasks[0].id, status=JobStatus.DONE)
    assert_settled(database.cancel_job(first.id), JobStatus.CANCELLED)
    assert database.job(first.id).tasks[0].status is JobStatus.DONE  # it ended before
    assert_settled(database.end_job(first.id, "a", JobStatus.DONE), JobStatus.CANCELLED)
    assert_settled(database.end_job(second.id, "b", JobStatus.DONE), JobStatus.DONE)
    assert_settled(database.cancel_job(second.id), JobStatus.DONE)


def test_a_failed_run_closes_the_tasks_and_a_stopped_one_requeues_them(database, key) -> None:
    failed, stopped = three_task_job(database, key), three_task_job(database, key)
    database.claim_job("a")
    database.claim_job("a")
    ended = database.end_job(failed.id, "a", JobStatus.FAILED, error="boom")
    assert_settled(ended, JobStatus.FAILED)
    assert ended.error == "boom"
    database.update_task(stopped.tasks[1].id, status=JobStatus.RUNNING)
    requeued = database.end_job(stopped.id, "a", JobStatus.QUEUED)
    assert requeued.status is JobStatus.QUEUED and requeued.finished_at is None
    assert [task.status for task in requeued.tasks] == [JobStatus.QUEUED] * 3
    with pytest.raises(RecordError, match="done, failed or queued"):
        database.end_job(stopped.id, "a", JobStatus.CANCELLED)


def test_a_coordinator_whose_job_was_taken_over_cannot_end_it(database, key) -> None:
    job = three_task_job(database, key)
    assert database.claim_job("lost").id == job.id
    # "lost" stopped beating: the next claim requeues the job and takes it over.
    taken = database.claim_job("other", stale_after=timedelta(seconds=-1))
    assert taken is not None and taken.id == job.id
    for status in (JobStatus.DONE, JobStatus.FAILED, JobStatus.QUEUED):
        kept = database.end_job(job.id, "lost", status)
        assert (kept.status, kept.coordinator) == (JobStatus.RUNNING, "other")
    assert_settled(database.end_job(job.id, "other", JobStatus.DONE), JobStatus.DONE)


def test_concurrent_cancels_and_ends_settle_every_job_once(database, key) -> None:
    """Each job is cancelled and ended done at the same moment from two threads:
    whichever wins, the job is final with no unfinished task."""
    made = [three_task_job(database, key) for _ in range(6)]
    for _ in made:
        database.claim_job("c")
    start = threading.Barrier(2 * len(made))
    errors: list[BaseException] = []

    def at_once(action) -> None:  # type: ignore[no-untyped-def]
        try:
            start.wait()
            action()
        except BaseException as err:  # reported below, with the others
            errors.append(err)

    threads = [
        threading.Thread(target=at_once, args=(action,))
        for job in made
        for action in (
            lambda job=job: database.cancel_job(job.id),
            lambda job=job: database.end_job(job.id, "c", JobStatus.DONE),
        )
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for job in made:
        settled = database.job(job.id)
        assert_settled(settled, settled.status)
        assert settled.status in (JobStatus.CANCELLED, JobStatus.DONE)


def test_a_job_is_stored_with_its_tasks_numbered_in_order(database, key) -> None:
    relu = database.commit_workload(RELU).key
    first = database.create_job({"op": "matmul", "n": [1, 2]}, [(key, ZEN, 8), (relu, "llvm", 3)])
    second = database.create_job({}, [(key, SKYLAKE, 5)], priority=2)
    assert (first.id, second.id) == (1, 2)
    assert first.status is JobStatus.QUEUED and first.spec == {"op": "matmul", "n": [1, 2]}
    assert first.started_at is None and first.finished_at is None and first.coordinator is None
    assert [(t.workload_key, t.target, t.trials_asked) for t in first.tasks] == [
        (key, canonical_target(ZEN), 8),
        (relu, canonical_target("llvm"), 3),
    ]
    assert [t.id for t in first.tasks + second.tasks] == [1, 2, 3]
    assert all(t.status is JobStatus.QUEUED and t.trials_done == 0 for t in first.tasks)
    assert all(t.best_seconds is None and t.outcomes == {} for t in first.tasks)
    assert (second.priority, second.token_id) == (2, None)
    assert database.job(first.id) == first


@pytest.mark.parametrize(
    "spec, tasks, priority, message",
    [
        ({}, [("nope", "llvm", 4)], 0, r"tasks\[0\]: unknown workload 'nope'"),
        ({}, [("KEY", "llvm", 0)], 0, r"tasks\[0\]: trials must be a positive integer"),
        ({}, [("KEY", "llvm", 2), ("KEY", "cuda -arch=x", 2)], 0, r"tasks\[1\]"),
        ({"x": math.nan}, [("KEY", "llvm", 2)], 0, "spec: must be plain JSON"),
        ([], [("KEY", "llvm", 2)], 0, "spec: must be a JSON object"),
        ({}, [("KEY", "llvm", 2)], "high", "priority: must be an integer"),
    ],
)
def test_a_bad_job_is_refused_naming_the_field_and_nothing_is_stored(
    database, key, spec, tasks, priority, message
) -> None:
    tasks = [(key if k == "KEY" else k, target, trials) for k, target, trials in tasks]
    with pytest.raises(RecordError, match=message):
        database.create_job(spec, tasks, priority=priority)
    assert database.jobs() == [] and database.claim_job("c") is None
    with pytest.raises(RecordError, match="no job with id 1"):
        database.job(1)


def test_jobs_are_listed_newest_first_by_status_and_in_pages(database, key) -> None:
    made = [database.create_job({"n": n}, [(key, "llvm", 1)]) for n in range(5)]
    database.cancel_job(made[1].id)
    database.claim_job("c")
    assert [j.id for j in database.jobs()] == [5, 4, 3, 2, 1]
    assert [j.id for j in database.jobs(limit=2)] == [5, 4]
    assert [j.id for j in database.jobs(limit=2, before_id=4)] == [3, 2]
    assert [j.id for j in database.jobs(JobStatus.QUEUED)] == [5, 4, 3]
    assert [j.id for j in database.jobs(JobStatus.RUNNING)] == [1]
    assert [j.spec["n"] for j in database.jobs(JobStatus.CANCELLED)] == [1]
    assert database.job_counts() == {
        JobStatus.QUEUED: 3,
        JobStatus.RUNNING: 1,
        JobStatus.DONE: 0,
        JobStatus.FAILED: 0,
        JobStatus.CANCELLED: 1,
    }


def test_the_queue_hands_out_the_highest_priority_then_the_oldest(database, key) -> None:
    low = database.create_job({}, [(key, "llvm", 1)], priority=-1)
    old = database.create_job({}, [(key, "llvm", 1)])
    urgent = database.create_job({}, [(key, "llvm", 1)], priority=5)
    young = database.create_job({}, [(key, "llvm", 1)])
    claimed = [database.claim_job(name) for name in "abcd"]
    assert [job.id for job in claimed] == [urgent.id, old.id, young.id, low.id]
    assert [job.coordinator for job in claimed] == list("abcd")
    assert all(job.status is JobStatus.RUNNING for job in claimed)
    assert all(job.started_at is not None and job.heartbeat_at is not None for job in claimed)
    assert database.claim_job("e") is None


def test_only_the_coordinator_running_a_job_beats_for_it(database, key) -> None:
    job = database.create_job({}, [(key, "llvm", 1)])
    assert not database.beat(job.id, "a")  # queued: nobody runs it
    database.claim_job("a")
    assert database.beat(job.id, "a") and not database.beat(job.id, "b")
    database.cancel_job(job.id)
    assert not database.beat(job.id, "a")
    assert not database.beat(99, "a")


def test_a_stale_job_is_requeued_with_its_running_tasks_and_taken_over(database, key) -> None:
    job = three_task_job(database, key)
    database.claim_job("lost")
    database.update_task(job.tasks[0].id, status=JobStatus.DONE)
    database.update_task(job.tasks[1].id, status=JobStatus.RUNNING)
    assert database.claim_job("fresh", stale_after=timedelta(hours=1)) is None
    taken = database.claim_job("other", stale_after=timedelta(seconds=-1))
    assert taken is not None and (taken.id, taken.coordinator) == (job.id, "other")
    statuses = [task.status for task in taken.tasks]
    assert statuses == [JobStatus.DONE, JobStatus.QUEUED, JobStatus.QUEUED]
    assert not database.beat(job.id, "lost")


def test_a_task_reports_its_progress_and_stamps_its_start_and_end(database, key) -> None:
    task = database.create_job({}, [(key, "llvm", 8)]).tasks[0]
    running = database.update_task(task.id, status=JobStatus.RUNNING)
    assert running.status is JobStatus.RUNNING and running.started_at is not None
    assert running.finished_at is None
    progressed = database.update_task(task.id, trials_done=5, best_seconds=2e-4)
    assert (progressed.trials_done, progressed.best_seconds) == (5, 2e-4)
    assert progressed.status is JobStatus.RUNNING and progressed.started_at == running.started_at
    done = database.update_task(task.id, status=JobStatus.DONE, trials_done=8)
    assert (done.status, done.trials_done, done.best_seconds) == (JobStatus.DONE, 8, 2e-4)
    assert done.finished_at is not None
    assert database.job(task.job_id).tasks == (done,)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"trials_done": -1}, "trials_done: must be a non-negative integer"),
        ({"best_seconds": math.inf}, "best_seconds: must be finite and not negative"),
        ({"best_seconds": -1.0}, "best_seconds: must be finite and not negative"),
    ],
)
def test_a_bad_task_update_is_refused_and_changes_nothing(database, key, change, message):
    job = database.create_job({}, [(key, "llvm", 8)])
    with pytest.raises(RecordError, match=message):
        database.update_task(job.tasks[0].id, status=JobStatus.RUNNING, **change)
    assert database.job(job.id) == job
    with pytest.raises(RecordError, match="no task with id 99"):
        database.update_task(99, trials_done=1)


def test_a_task_counts_the_search_measurements_of_its_job(database, key) -> None:
    job = database.create_job({}, [(key, ZEN, 8), (key, SKYLAKE, 8)])
    database.commit_records(
        [
            Measurement.ok(key, ZEN, split_trace(2), [1e-4], job_id=job.id),
            Measurement.ok(key, ZEN, split_trace(3), [2e-4], job_id=job.id),
            Measurement.failed(key, ZEN, split_trace(4), ErrorKind.CRASHED, "x", job_id=job.id),
            Measurement.ok(key, ZEN, split_trace(2), [1e-4], job_id=job.id, purpose=Purpose.RETIME),
            Measurement.ok(key, ZEN, split_trace(5), [1e-4]),
        ]
    )
    zen, skylake = database.job(job.id).tasks
    assert dict(zen.outcomes) == {"ok": 2, "crashed": 1}
    assert dict(skylake.outcomes) == {}
    with pytest.raises(RecordError, match=r"records name jobs \[7\] that do not exist"):
        database.commit_records([Measurement.ok(key, ZEN, split_trace(6), [1e-4], job_id=7)])
    assert database.count() == 5


def test_a_token_submits_no_more_unfinished_jobs_than_its_quota(database, key) -> None:
    token, _ = database.create_token("ci", Role.SUBMIT, quota=1)
    first = database.create_job({}, [(key, "llvm", 1)], token_id=token.id)
    assert first.token_id == token.id
    with pytest.raises(QuotaError, match="token 'ci' has 1 unfinished jobs, its quota"):
        database.create_job({}, [(key, "llvm", 1)], token_id=token.id)
    assert [job.id for job in database.jobs()] == [first.id]
    database.cancel_job(first.id)
    assert database.create_job({}, [(key, "llvm", 1)], token_id=token.id).id == 2
    with pytest.raises(RecordError, match="token 9: no such token"):
        database.create_job({}, [(key, "llvm", 1)], token_id=9)
    with pytest.raises(RecordError, match="no job with id 9"):
        database.cancel_job(9)
