"""A soak of the service: mixed clients (submit, watch, cancel, best, upload) against
one server and two coordinators on PostgreSQL for ``TENSORTUNE_SOAK_SECONDS`` (30
minutes unless told). It must end with no 5xx answer, no record lost or measured
twice, and every job done or cancelled with no unfinished task.

Slow (``pytest -m slow``); ``TENSORTUNE_SOAK_SECONDS=120 pytest -m slow -k soak`` runs
a short one."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import httpx
import numpy as np
import pytest
from onnx_models import mlp
from pg_server import fresh_url
from quick_measure import QUICK
from service_server import serving

import workers
from db import JobStatus, Purpose, Role, SQLDatabase
from db.jobs import FINAL
from tuner.service import create_app
from tuner.service.coordinator import Coordinator

SOAK_SECONDS = float(os.environ.get("TENSORTUNE_SOAK_SECONDS", "1800"))
WORKLOADS = [{"op": "relu", "args": {"shape": [8 + n, 10]}} for n in range(4)] + [
    {"op": "matmul", "args": {"m": 16, "n": 8 + 8 * n, "k": 8}} for n in range(3)
]
QUOTA = 4

pytestmark = pytest.mark.slow


@pytest.fixture
def shared(tmp_path) -> Iterator[SQLDatabase]:
    with SQLDatabase(fresh_url("postgresql", tmp_path)) as database:
        yield database


class Clients:
    """Client threads that run one action after another until told to stop, counting
    the answers by status."""

    def __init__(self, url: str, secret: str) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {secret}"}
        self.statuses: Counter[int] = Counter()
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.job_ids: list[int] = []
        self._lock = threading.Lock()

    def answered(self, response: httpx.Response) -> httpx.Response:
        with self._lock:
            self.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.failures.append(f"{response.request.url}: {response.text[:300]}")
        return response

    def loop(self, action: Callable[[httpx.Client, random.Random], None], seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=60) as client:
            while not self.stop.is_set():
                action(client, rng)

    def some_job(self, rng: random.Random) -> int | None:
        with self._lock:
            return rng.choice(self.job_ids) if self.job_ids else None

    def submit(self, client: httpx.Client, rng: random.Random) -> None:
        body = {
            "workloads": rng.sample(WORKLOADS, rng.randint(1, 2)),
            "trials": rng.randint(2, 6),
            "tuner": "random",
            "seed": rng.randint(0, 3),
        }
        answer = self.answered(client.post("/v1/jobs", json=body))
        if answer.status_code == 201:
            with self._lock:
                self.job_ids.append(answer.json()["id"])
        time.sleep(rng.uniform(0.2, 1.0))

    def watch(self, client: httpx.Client, rng: random.Random) -> None:
        job_id = self.some_job(rng)
        if job_id is None:
            time.sleep(0.2)
            return
        deadline = time.monotonic() + rng.uniform(0.5, 5.0)
        with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
            self.answered(stream)
            for line in stream.iter_lines():
                if line == "event: end" or time.monotonic() > deadline:
                    break

    def cancel(self, client: httpx.Client, rng: random.Random) -> None:
        job_id = self.some_job(rng)
        if job_id is not None and rng.random() < 0.3:
            self.answered(client.post(f"/v1/jobs/{job_id}/cancel"))
        time.sleep(rng.uniform(0.5, 2.0))

    def read(self, client: httpx.Client, rng: random.Random) -> None:
        spec = rng.choice(WORKLOADS)
        self.answered(client.post("/v1/best", json={"workload": spec, "target": "llvm", "k": 3}))
        self.answered(client.get("/v1/jobs", params={"limit": 20}))
        self.answered(client.get("/healthz"))
        time.sleep(rng.uniform(0.05, 0.3))

    def upload(self, client: httpx.Client, rng: random.Random) -> None:
        content = mlp(np.random.default_rng(rng.randint(0, 2))).SerializeToString()
        answer = client.post(
            "/v1/models",
            params={"name": "mlp"},
            content=content,
            headers={"Content-Type": "application/octet-stream"},
        )
        self.answered(answer)
        if answer.status_code == 200:
            self.answered(client.get(f"/v1/models/{answer.json()['id']}"))
        time.sleep(rng.uniform(1.0, 3.0))


def test_mixed_clients_against_one_server_and_two_coordinators(shared) -> None:
    _, secret = shared.create_token("soak", Role.SUBMIT, quota=QUOTA)
    stopping = threading.Event()
    wake = threading.Event()
    coordinators = []
    backends = [workers.create("local", config=QUICK, max_workers=1) for _ in range(2)]
    for k, backend in enumerate(backends):
        coordinator = Coordinator(shared, backend, stopping, name=f"soak-{k}")
        thread = threading.Thread(target=coordinator.run_until_stopped, args=(wake, 0.5))
        coordinators.append((coordinator, thread))
        thread.start()
    try:
        with serving(create_app(shared, submitted=wake.set)) as url:
            clients = Clients(url, secret)
            actions = [clients.submit, clients.submit, clients.watch, clients.watch]
            actions += [clients.watch, clients.cancel, clients.read, clients.upload]
            threads = [
                threading.Thread(target=clients.loop, args=(action, seed))
                for seed, action in enumerate(actions)
            ]
            for thread in threads:
                thread.start()
            time.sleep(SOAK_SECONDS)
            clients.stop.set()
            for thread in threads:
                thread.join()
            settle_by = time.monotonic() + 600
            while any(job.status not in FINAL for job in shared.jobs(limit=10_000)):
                assert time.monotonic() < settle_by, "jobs still unfinished 10 min after the soak"
                assert all(thread.is_alive() for _, thread in coordinators)
                time.sleep(0.5)
    finally:
        stopping.set()
        wake.set()
        for _, thread in coordinators:
            thread.join()
        for backend in backends:
            backend.close()
    assert clients.failures == [], clients.failures[:5]
    assert clients.statuses[201] > 0 and clients.statuses[200] > 0, clients.statuses
    assert all(coordinator.failure is None for coordinator, _ in coordinators)
    stored = shared.jobs(limit=10_000)
    ended = Counter(job.status.value for job in stored)
    print(f"soak of {SOAK_SECONDS:g} s: jobs {dict(ended)}, answers {dict(clients.statuses)}")
    assert {job.id for job in stored} == set(clients.job_ids)
    for job in stored:
        assert job.status in (JobStatus.DONE, JobStatus.CANCELLED), (job.id, job.error)
        assert not [t for t in job.tasks if t.status in (JobStatus.QUEUED, JobStatus.RUNNING)]
        for task in job.tasks:
            if job.status is JobStatus.DONE:
                assert task.trials_done >= task.trials_asked, (job.id, task)
                measured = shared.measured_hashes(task.workload_key, task.target)
                assert len(measured) >= task.trials_asked, (job.id, task)
    for entry in shared.workloads():
        for target in shared.targets(entry.key):
            searched = shared.records(entry.key, target, purpose=Purpose.SEARCH, limit=10_000)
            hashes = [record.trace_hash for record in searched]
            assert len(hashes) == len(set(hashes)), f"a trace of {entry.key} measured twice"
