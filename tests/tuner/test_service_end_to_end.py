"""The service end to end on SQLite and on PostgreSQL: a job submitted over HTTP is
followed to its end, its best schedule asked for, and a build with the same database
replays it and computes what numpy does; two coordinators sharing the database never
run the same job."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pg_server import BACKENDS, fresh_url
from quick_measure import QUICK
from service_server import serving

import compiler
import workers
from compiler.ir import IRModule
from compiler.tuned.lookup import apply_best
from compiler.workload.spec import workload_from_spec
from db import Job, JobStatus, Role, SQLDatabase
from tuner.client import Client
from tuner.service import create_app
from tuner.service.coordinator import Coordinator
from tuner.service.jobs import JobRequest, submit

MATMUL = {"op": "matmul", "args": {"m": 24, "n": 16, "k": 8}}
RELU = {"op": "relu", "args": {"shape": [12, 10]}}


@pytest.fixture(params=BACKENDS)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLDatabase]:
    with SQLDatabase(fresh_url(request.param, tmp_path)) as database:
        yield database


def test_submit_watch_best_and_build_with_the_tuned_schedule(shared, backend, rng) -> None:
    _, secret = shared.create_token("ci", Role.SUBMIT)
    coordinator = Coordinator(shared, backend)
    wake = threading.Event()
    running = threading.Thread(target=coordinator.run_until_stopped, args=(wake, 3600.0))
    running.start()
    try:
        with serving(create_app(shared, submitted=wake.set)) as url, Client(url, secret) as api:
            job = api.submit([MATMUL], trials=4, tuner="random")
            updates = list(api.events(job["id"]))
            assert updates[-1]["status"] == "done"
            assert updates[-1]["tasks"][0]["trials_done"] == 4
            (best,) = api.best(MATMUL)
    finally:
        coordinator.stopping.set()
        wake.set()
        running.join()
    func = workload_from_spec(MATMUL)
    tuned, report = apply_best(IRModule({"main": func}), "llvm", shared)
    assert report.tuned == ["main"]
    assert best["trace_hash"] == shared.best(best["workload_key"], "llvm")[0].trace_hash
    a = rng.standard_normal((24, 8)).astype("float32")
    b = rng.standard_normal((8, 16)).astype("float32")
    c = np.zeros((24, 16), dtype="float32")
    compiler.build(func, target="llvm", database=shared)["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert tuned["main"].script() != func.script()


def test_two_coordinators_on_one_database_never_run_the_same_job(shared) -> None:
    made = {
        submit(shared, JobRequest((RELU,), trials=1, tuner="random", seed=n)).id for n in range(6)
    }
    ran: list[tuple[str, int]] = []

    class Noting(Coordinator):
        def _run(self, job: Job) -> Job:
            ran.append((self.name, job.id))
            return super()._run(job)

    # each with workers of its own, as each coordinator process has
    backends = [workers.create("local", config=QUICK) for _ in range(2)]
    coordinators = [Noting(shared, b, name=name) for b, name in zip(backends, "ab", strict=True)]
    start = threading.Barrier(2)

    def run_all(coordinator: Coordinator) -> None:
        start.wait()
        while coordinator.run_next() is not None:
            pass

    threads = [threading.Thread(target=run_all, args=(c,)) for c in coordinators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for own in backends:
        own.close()
    assert sorted(job_id for _, job_id in ran) == sorted(made)  # each job ran once
    assert all(shared.job(job_id).status is JobStatus.DONE for job_id in made)
