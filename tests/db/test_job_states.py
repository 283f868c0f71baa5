"""Job state changes are guarded, on SQLite and on PostgreSQL: a cancel and a
coordinator's end never overwrite each other, a coordinator that lost its job writes
nothing, and a job that ended leaves no task queued or running."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from db_helpers import MATMUL

from db import Job, JobStatus, RecordError, jobs

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


def test_a_host_whose_clock_runs_ahead_leaves_a_live_job_alone(database, key, monkeypatch):
    """Heartbeats and the stale cutoff are times of the database's clock: a coordinator
    on a host two hours ahead claims the next job, not one another coordinator beats."""
    live, queued = three_task_job(database, key), three_task_job(database, key)
    assert database.claim_job("a").id == live.id
    assert database.beat(live.id, "a")
    ahead = datetime.now(UTC) + timedelta(hours=2)
    monkeypatch.setattr(jobs, "now", lambda: ahead)
    assert database.claim_job("b", stale_after=timedelta(seconds=60)).id == queued.id
    assert database.job(live.id).coordinator == "a"
    assert database.beat(live.id, "a")


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
