"""Event streams against a real server: many watchers of a job that does not move hold
no route thread, a stream stops reading the database once its client leaves, and a
server with watchers still stops when asked."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
from serve_process import serve_process
from service_server import serving

from db import Job, Role, SQLDatabase
from tuner.service import create_app
from tuner.service.app import ROUTE_THREADS
from tuner.service.job_routes import EVENT_POLL_SECONDS

RELU = {"op": "relu", "args": {"shape": [12, 10]}}
WATCHERS = 2 * ROUTE_THREADS


class CountedReads(SQLDatabase):
    """The real database, counting the reads of a job that event streams make."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.job_reads = 0

    def job(self, job_id: int) -> Job:
        self.job_reads += 1
        return super().job(job_id)


@pytest.fixture
def counted(tmp_path) -> Iterator[CountedReads]:
    with CountedReads(f"sqlite:///{tmp_path / 'tune.db'}") as opened:
        yield opened


def headers(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def open_streams(stack: ExitStack, url: str, secret: str, job_id: int) -> None:
    """``WATCHERS`` event streams of the job, each read up to its first event."""
    for _ in range(WATCHERS):
        client = stack.enter_context(httpx.Client(base_url=url, headers=headers(secret)))
        response = stack.enter_context(client.stream("GET", f"/v1/jobs/{job_id}/events"))
        assert response.status_code == 200
        assert next(response.iter_lines()) == "event: job"


def test_watchers_of_a_queued_job_leave_the_other_routes_answering(counted) -> None:
    """Twice as many open streams as route threads (no coordinator: the job stays
    queued); health and the job itself still answer within a second."""
    secret = counted.create_token("admin", Role.ADMIN)[1]
    with serving(create_app(counted)) as url, ExitStack() as streams:
        job = httpx.post(
            f"{url}/v1/jobs", json={"workloads": [RELU], "trials": 2}, headers=headers(secret)
        ).json()
        open_streams(streams, url, secret, job["id"])
        started = time.monotonic()
        health = httpx.get(f"{url}/healthz", timeout=1.0)
        got = httpx.get(f"{url}/v1/jobs/{job['id']}", headers=headers(secret), timeout=1.0)
        assert (health.status_code, got.status_code) == (200, 200)
        assert time.monotonic() - started < 1.0


def test_a_stream_stops_reading_once_its_client_leaves(counted) -> None:
    secret = counted.create_token("admin", Role.ADMIN)[1]
    with serving(create_app(counted)) as url:
        job = httpx.post(
            f"{url}/v1/jobs", json={"workloads": [RELU], "trials": 2}, headers=headers(secret)
        ).json()
        with ExitStack() as streams:
            open_streams(streams, url, secret, job["id"])
            time.sleep(4 * EVENT_POLL_SECONDS)
            assert counted.job_reads > WATCHERS  # each stream polls while it is open
        time.sleep(4 * EVENT_POLL_SECONDS)  # a stream may be between two polls as it ends
        after_leaving = counted.job_reads
        time.sleep(6 * EVENT_POLL_SECONDS)
        assert counted.job_reads == after_leaving


def test_a_server_with_open_streams_stops_on_sigterm(counted) -> None:
    """``tensortune serve`` with watchers of a queued job ends soon after SIGTERM
    instead of waiting for a job that no one runs."""
    secret = counted.create_token("admin", Role.ADMIN)[1]
    with serve_process(str(counted.url), "--no-coordinator") as (running, url):
        job = httpx.post(
            f"{url}/v1/jobs", json={"workloads": [RELU], "trials": 2}, headers=headers(secret)
        ).json()
        with ExitStack() as streams:
            open_streams(streams, url, secret, job["id"])
            running.send_signal(signal.SIGTERM)
            running.wait(timeout=30)
    assert running.returncode in (0, -signal.SIGTERM)
