"""Jobs from submission to their end: checked whole when submitted, claimed by one
coordinator, run with real local workers on a real SQLite database, cancelled,
stopped and resumed, and finished by another coordinator when theirs is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import numpy as np
import pytest

import compiler
from compiler.runtime.cuda_driver import cuda_available
from compiler.target.parse import canonical_target
from compiler.workload.key import workload_key
from compiler.workload.spec import workload_from_spec
from db import JobStatus, Purpose
from tuner.client import Client
from tuner.service.coordinator import Coordinator
from tuner.service.jobs import JobRequest, JobRequestError, submit

MATMUL = {"op": "matmul", "args": {"m": 24, "n": 16, "k": 8}}
RELU = {"op": "relu", "args": {"shape": [12, 10]}}
# A second task with more distinct programs than a long job's trials: the relu's space
# makes 8 (parallel or not, vectorized or not, unrolled or not).
SQUARE_MATMUL = {"op": "matmul", "args": {"m": 16, "n": 16, "k": 16}}


def test_a_job_runs_every_workload_and_its_best_schedule_builds(database, backend, rng) -> None:
    job = submit(database, JobRequest((MATMUL, RELU), trials=4, tuner="random"))
    assert job.status is JobStatus.QUEUED and len(job.tasks) == 2
    done = Coordinator(database, backend).run_next()
    assert done is not None and done.id == job.id and done.status is JobStatus.DONE
    assert [t.status for t in done.tasks] == [JobStatus.DONE, JobStatus.DONE]
    assert all(t.trials_done == 4 and t.best_seconds for t in done.tasks)
    func = workload_from_spec(MATMUL)
    a = rng.standard_normal((24, 8)).astype("float32")
    b = rng.standard_normal((8, 16)).astype("float32")
    c = np.zeros((24, 16), dtype="float32")
    compiler.build(func, target="llvm", database=database)["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_job_of_several_targets_tunes_each_workload_on_each(database, backend) -> None:
    targets = ("llvm", "llvm -mcpu=haswell")
    job = submit(database, JobRequest((MATMUL, RELU), targets=targets, tuner="random", trials=2))
    keys = [workload_key(workload_from_spec(spec)) for spec in (MATMUL, RELU)]
    assert [(t.workload_key, t.target) for t in job.tasks] == [
        (key, canonical_target(target)) for target in targets for key in keys
    ]
    done = Coordinator(database, backend).run_next()
    assert done is not None and done.status is JobStatus.DONE
    assert all(task.trials_done == 2 for task in done.tasks)
    for key in keys:
        for target in targets:
            assert database.count(key, canonical_target(target), ok=True) >= 2


@pytest.mark.skipif(cuda_available() is None, reason="this host has a GPU")
def test_a_gpu_task_on_workers_without_that_gpu_fails_the_job_saying_where_to_measure(
    database, backend
) -> None:
    targets = ("llvm", "cuda -arch=sm_80")
    job = submit(database, JobRequest((RELU,), targets=targets, tuner="random", trials=2))
    done = Coordinator(database, backend).run_next()
    assert done is not None and done.status is JobStatus.FAILED
    assert "cannot measure for 'cuda -arch=sm_80'" in str(done.error)
    assert "ray-node --target 'cuda -arch=sm_80'" in str(done.error)
    key = workload_key(workload_from_spec(RELU))
    assert database.count(key, canonical_target("llvm"), ok=True) >= 2
    assert database.count(key, "cuda -arch=sm_80") == 0
    assert done.tasks[0].status is JobStatus.DONE
    assert job.id == done.id


def test_a_job_is_claimed_once_and_the_queue_then_is_empty(database, backend) -> None:
    submit(database, JobRequest((RELU,), trials=2, tuner="random"))
    assert database.claim_job() is not None
    assert database.claim_job() is None
    assert Coordinator(database, backend).run_next() is None


def test_a_cancelled_job_is_not_run(database, backend) -> None:
    job = submit(database, JobRequest((RELU,), trials=2, tuner="random"))
    assert database.cancel_job(job.id).status is JobStatus.CANCELLED
    assert Coordinator(database, backend).run_next() is None
    assert database.job(job.id).tasks[0].trials_done == 0


def test_cancelling_a_running_job_stops_it_after_the_current_batch(
    database, backend, monkeypatch
) -> None:
    """The cancel arrives as the first batch's progress is written, as one from the
    API would while the job runs."""
    submit(database, JobRequest((MATMUL,), trials=64, tuner="random"))
    coordinator = Coordinator(database, backend)
    asks = coordinator._cancelled

    def cancel_once_measuring(job_id: int) -> bool:
        if database.job(job_id).tasks[0].trials_done > 0:
            database.cancel_job(job_id)
        return asks(job_id)

    monkeypatch.setattr(coordinator, "_cancelled", cancel_once_measuring)
    ended = coordinator.run_next()
    assert ended is not None and ended.status is JobStatus.CANCELLED
    (task,) = ended.tasks
    assert task.status is JobStatus.CANCELLED and 0 < task.trials_done < 64
    assert database.count(task.workload_key) == task.trials_done  # every measurement kept


def test_a_stopped_coordinator_requeues_its_job_and_the_next_resumes_it(
    database, backend, monkeypatch
) -> None:
    job = submit(database, JobRequest((SQUARE_MATMUL, MATMUL), trials=24, tuner="random"))
    first = Coordinator(database, backend)
    asks = first._should_stop

    def stop_during_the_second_task(job_id: int) -> bool:
        if database.job(job_id).tasks[1].trials_done > 0:
            first.stopping.set()
        return asks(job_id)

    monkeypatch.setattr(first, "_should_stop", stop_during_the_second_task)
    stopped = first.run_next()
    assert stopped is not None and stopped.status is JobStatus.QUEUED
    square, matmul = stopped.tasks
    assert square.status is JobStatus.DONE and matmul.status is JobStatus.QUEUED
    assert 0 < matmul.trials_done < 24
    resumed = Coordinator(database, backend).run_next()
    assert resumed is not None and resumed.id == job.id and resumed.status is JobStatus.DONE
    assert [t.trials_done for t in resumed.tasks] == [24, 24]
    for task in resumed.tasks:  # nothing measured twice, nothing lost
        searched = database.records(task.workload_key, purpose=Purpose.SEARCH, limit=1000)
        assert len(searched) == 24 == len({r.trace_hash for r in searched})


# A coordinator in a process of its own, for a test to kill.
DOOMED_COORDINATOR = """
import sys
import workers
from db import SQLDatabase
from quick_measure import QUICK
from tuner.service.coordinator import Coordinator
with SQLDatabase(sys.argv[1]) as database, workers.create("local", config=QUICK) as backend:
    Coordinator(database, backend, name="doomed").run_next()
"""


def test_a_job_whose_coordinator_is_killed_is_requeued_and_finished(database, backend) -> None:
    job = submit(database, JobRequest((MATMUL,), trials=48, tuner="random"))
    url = str(database.url)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    doomed = subprocess.Popen(
        [sys.executable, "-c", DOOMED_COORDINATOR, url], env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 300
        while database.job(job.id).tasks[0].trials_done < 16:  # it has measured a batch
            assert doomed.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(doomed.pid, signal.SIGKILL)  # the coordinator and its workers, mid-job
        doomed.wait()
    orphan = database.job(job.id)
    assert orphan.status is JobStatus.RUNNING and orphan.coordinator == "doomed"
    survivor = Coordinator(database, backend, stale_after=timedelta(0))
    finished = survivor.run_next()
    assert finished is not None and finished.id == job.id and finished.status is JobStatus.DONE
    (task,) = finished.tasks
    searched = database.records(task.workload_key, purpose=Purpose.SEARCH, limit=1000)
    assert task.trials_done == len(searched) == len({r.trace_hash for r in searched}) == 48


def test_a_finished_job_stays_finished_when_cancelled(database, backend) -> None:
    job = submit(database, JobRequest((RELU,), trials=2, tuner="random"))
    Coordinator(database, backend).run_next()
    assert database.cancel_job(job.id).status is JobStatus.DONE


@pytest.mark.parametrize(
    ("request_", "named"),
    [
        (JobRequest(()), "workloads"),
        (JobRequest(({"op": "matmul", "args": {"m": -1, "n": 2, "k": 2}},)), "workloads[0]"),
        (JobRequest(({"op": "nope"},)), "workloads[0]"),
        (JobRequest((RELU,), trials=0), "trials"),
        (JobRequest((RELU,), space="mymodule:fn"), "space"),
        (JobRequest((RELU,), space="template"), "workloads[0]"),
    ],
)
def test_a_bad_request_is_refused_whole_naming_the_field(database, request_, named) -> None:
    with pytest.raises(JobRequestError, match=named.replace("[", r"\[")):
        submit(database, request_)
    assert database.jobs() == [] and database.workloads() == []


def test_the_coordinator_command_runs_the_queue_and_stops_on_ctrl_c(database) -> None:
    job = submit(database, JobRequest((RELU,), trials=2, tuner="random"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "tuner.cli.main", "coordinator", "--url", str(database.url)]
    running = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while database.job(job.id).status is not JobStatus.DONE:
            assert running.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        running.send_signal(signal.SIGINT)
        _, err = running.communicate(timeout=120)
    assert running.returncode in (0, 130)
    assert "running the queued jobs" in err and "Traceback" not in err


def test_serve_alone_is_a_working_service(database, admin) -> None:
    """One command: the API, its coordinator and local workers; the URL it prints
    answers, says its workers are fine, and runs what is submitted to it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "tuner.cli.main", "serve", "--url", str(database.url)]
    running = subprocess.Popen(
        [*command, "--port", "0"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert running.stdout is not None
        url = None
        for line in running.stdout:  # uvicorn logs through tensortune's handler, on stdout
            if "running on http://" in line:
                url = line.split("running on ")[1].split()[0]
                break
        assert url is not None, "serve printed no URL"
        with Client(url, admin) as service:
            health = httpx.get(f"{url}/healthz").json()
            assert health == {"status": "ok", "database": "ok", "workers": "ok"}
            job = service.submit([RELU], trials=2, tuner="random")
            finished = list(service.events(job["id"]))[-1]
            assert finished["status"] == "done" and finished["tasks"][0]["measured"] == 2
    finally:
        running.send_signal(signal.SIGINT)
        running.communicate(timeout=120)
    assert running.returncode in (0, 130)
