"""A coordinator outlives an outage of its PostgreSQL server (a server of its own,
stopped and started again on its port): it waits out failed claims, puts the job the
outage interrupted back in the queue, and runs it to its end once the server is back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from pg_server import PostgresServer, bin_dir

from db import JobStatus, SQLDatabase
from tuner.service.coordinator import Coordinator
from tuner.service.jobs import JobRequest, submit

RELU = {"op": "relu", "args": {"shape": [12, 10]}}
# A job long enough to meet an outage: more distinct programs than its 40 trials (the
# relu's space makes 8).
MATMUL = {"op": "matmul", "args": {"m": 24, "n": 16, "k": 8}}
OUTAGE_SECONDS = 3.0


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    binaries = bin_dir()
    if binaries is None:
        pytest.skip("no PostgreSQL binaries; install them with scripts/install_system_deps.sh")
    started = PostgresServer(binaries)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def wait_for(condition, what: str, running: threading.Thread, seconds: float = 300) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert running.is_alive(), f"the coordinator died waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.1)


def test_the_coordinator_outlives_an_outage_during_a_job_and_between_jobs(server, backend) -> None:
    with SQLDatabase(server.new_database()) as database:
        coordinator = Coordinator(database, backend, retry_max_seconds=1.0)
        wake = threading.Event()
        running = threading.Thread(target=coordinator.run_until_stopped, args=(wake, 0.2))
        job = submit(database, JobRequest((MATMUL,), trials=40, tuner="random"))
        running.start()
        try:
            wait_for(lambda: database.job(job.id).tasks[0].trials_done >= 2, "trials", running)
            server.halt()  # during the job
            time.sleep(OUTAGE_SECONDS)
            server.resume()
            wait_for(lambda: database.job(job.id).status is JobStatus.DONE, "job done", running)
            server.halt()  # while the coordinator waits for jobs
            time.sleep(OUTAGE_SECONDS)
            assert running.is_alive()
            server.resume()
            second = submit(database, JobRequest((RELU,), trials=2, tuner="random"))
            wake.set()
            wait_for(lambda: database.job(second.id).status is JobStatus.DONE, "2nd job", running)
        finally:
            coordinator.stopping.set()
            wake.set()
            running.join()
        assert coordinator.failure is None
        done = database.job(job.id)
        assert done.tasks[0].status is JobStatus.DONE and done.tasks[0].trials_done == 40
