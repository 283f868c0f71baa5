"""The service's API, over HTTP to a real uvicorn server, a real SQLite database and
real local workers: jobs from submission to their best schedule, what it answers
about workloads, and the 4xx it gives for bad requests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from db_helpers import MATMUL, ZEN, split_trace
from service_server import serving

from compiler.errors import ErrorKind
from compiler.target.parse import canonical_target
from db import Job, JobStatus, Measurement, Role, WorkloadEntry
from tuner.cli.commands import build_parser
from tuner.cli.main import main
from tuner.service import create_app, metrics
from tuner.service.access import TOKEN_FRESH_SECONDS
from tuner.service.app import NO_WORKERS
from tuner.service.coordinator import Coordinator

# (split factor, seconds): the schedules stored, the fastest last.
STORED = ((3, 3e-3), (11, 2e-3), (5, 1e-3))
FLOPS = 2 * 33 * 17 * 9  # of MATMUL, as a tuning run stores it


@pytest.fixture
def matmul(database) -> WorkloadEntry:
    entry = database.commit_workload(MATMUL, flop_count=FLOPS)
    database.commit_records(
        Measurement.ok(entry.key, ZEN, split_trace(factor), [seconds]) for factor, seconds in STORED
    )
    return entry


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def client(server, admin) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30, headers=bearer(admin)) as opened:
        yield opened


def test_health_says_the_database_answers(client) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok", "workers": NO_WORKERS}


def test_health_is_503_saying_what_is_wrong_with_the_workers(database) -> None:
    problems = iter(["ok", "no Ray node is alive"])
    with serving(create_app(database, workers_health=lambda: next(problems))) as url:
        assert httpx.get(f"{url}/healthz").json()["workers"] == "ok"
        down = httpx.get(f"{url}/healthz")
    assert down.status_code == 503
    assert down.json() == {
        "status": "unavailable",
        "database": "ok",
        "workers": "no Ray node is alive",
    }


def test_the_workloads_stored_are_listed_with_their_flop_count(client, matmul) -> None:
    listed = client.get("/v1/workloads").json()
    assert listed == [{"key": matmul.key, "name": matmul.name, "flop_count": FLOPS}]
    assert client.get(f"/v1/workloads/{matmul.key}").json() == listed[0]
    assert client.get(f"/v1/workloads/{matmul.key}/targets").json() == [canonical_target(ZEN)]


def test_best_gives_the_fastest_schedules_as_trace_and_python(client, database, matmul) -> None:
    answer = client.get(f"/v1/workloads/{matmul.key}/best", params={"target": ZEN, "k": 2})
    assert answer.status_code == 200
    best = answer.json()
    assert [b["seconds"] for b in best] == [1e-3, 2e-3]
    stored = database.best(matmul.key, ZEN, 2)
    assert [b["id"] for b in best] == [r.id for r in stored]
    assert best[0]["trace"] == split_trace(5).as_json()
    assert "sch.split(" in best[0]["python"] and "5]" in best[0]["python"]
    assert best[0]["gflops"] == pytest.approx(FLOPS / 1e-3 / 1e9)
    assert best[0]["retimed"] is False and best[0]["purpose"] == "search"


def test_records_come_newest_first_page_by_page(client, matmul) -> None:
    url = f"/v1/workloads/{matmul.key}/records"
    first = client.get(url, params={"limit": 2}).json()
    assert [r["seconds"] for r in first] == [1e-3, 2e-3]
    rest = client.get(url, params={"limit": 2, "before_id": first[-1]["id"]}).json()
    assert [r["seconds"] for r in rest] == [3e-3]


def test_an_unknown_workload_is_404_naming_the_key(client) -> None:
    for path in ("", "/targets", "/best", "/records"):
        answer = client.get(f"/v1/workloads/{'f' * 64}{path}")
        assert answer.status_code == 404
        assert "f" * 64 in answer.json()["detail"]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"k": 0}, "k"), ({"k": 101}, "k"), ({"k": "two"}, "k"), ({"target": ""}, "target")],
)
def test_a_bad_query_is_422_naming_the_parameter(client, matmul, params, field) -> None:
    answer = client.get(f"/v1/workloads/{matmul.key}/best", params=params)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(f"query.{field}: ")


def test_a_target_the_database_cannot_read_is_422_saying_why(client, matmul) -> None:
    answer = client.get(f"/v1/workloads/{matmul.key}/best", params={"target": "opencl -foo"})
    assert answer.status_code == 422
    assert "unknown target 'opencl -foo'" in answer.json()["detail"]


def test_the_openapi_schema_describes_the_routes(client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/healthz", "/v1/workloads", "/v1/workloads/{key}/best"} <= set(paths)


def test_serve_is_a_command_with_a_loopback_default() -> None:
    args = build_parser().parse_args(["serve", "--port", "0"])
    assert (args.host, args.port) == ("127.0.0.1", 0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--port", "70000"])


# jobs -----------------------------------------------------------------------------------

RELU = {"op": "relu", "args": {"shape": [12, 10]}}


def test_a_submitted_job_runs_and_its_best_schedule_is_served(client, database, backend) -> None:
    answer = client.post("/v1/jobs", json={"workloads": [RELU], "trials": 3, "tuner": "random"})
    assert answer.status_code == 201
    job = answer.json()
    assert job["status"] == "queued" and job["request"]["workloads"] == [RELU]
    assert [t["trials_asked"] for t in job["tasks"]] == [3]
    assert [j["id"] for j in client.get("/v1/jobs", params={"status": "queued"}).json()] == [
        job["id"]
    ]
    Coordinator(database, backend).run_next()
    done = client.get(f"/v1/jobs/{job['id']}").json()
    assert done["status"] == "done" and done["finished_at"] is not None
    (task,) = done["tasks"]
    assert task["trials_done"] == 3 and task["best_gflops"] > 0
    assert task["measured"] == 3 and task["errors"] == {} and done["seconds_left"] == 0
    best = client.get(f"/v1/workloads/{task['workload_key']}/best").json()
    assert len(best) == 1 and best[0]["workload_key"] == task["workload_key"]
    assert client.post("/v1/best", json={"workload": RELU}).json() == best
    records = client.get(f"/v1/workloads/{task['workload_key']}/records").json()
    assert {r["job_id"] for r in records if r["purpose"] == "search"} == {job["id"]}
    trials = client.get(f"/v1/jobs/{job['id']}/trials").json()
    assert len(trials) == 3 and {t["task_id"] for t in trials} == {task["id"]}
    assert [t["id"] for t in trials] == sorted(t["id"] for t in trials)
    later = client.get(f"/v1/jobs/{job['id']}/trials", params={"after_id": trials[0]["id"]})
    assert later.json() == trials[1:]
    (by_job,) = client.get(f"/v1/workloads/{task['workload_key']}/history").json()
    assert by_job["job_id"] == job["id"]
    assert by_job["best_gflops"] == pytest.approx(max(t["gflops"] or 0 for t in trials))
    assert best[0]["retimed"] and best[0]["search_gflops"] > 0
    nest = client.get(f"/v1/records/{best[0]['id']}/loop-nest").json()
    assert nest["record_id"] == best[0]["id"] and "for " in nest["loop_nest"]
    assert client.get("/v1/records/999999/loop-nest").status_code == 404


def test_best_by_spec_names_a_bad_spec_and_an_untuned_workload(client, matmul) -> None:
    bad = client.post("/v1/best", json={"workload": {"op": "relu", "args": {"shape": [0]}}})
    assert bad.status_code == 422 and "workload" in bad.json()["detail"]
    untuned = client.post("/v1/best", json={"workload": RELU})
    assert untuned.status_code == 404 and "no workload" in untuned.json()["detail"]


def test_jobs_page_newest_first_and_run_by_priority(client, database) -> None:
    ids = [
        client.post("/v1/jobs", json={"workloads": [RELU], "trials": 1, "priority": p}).json()["id"]
        for p in (0, 7, 0)
    ]
    page = client.get("/v1/jobs", params={"limit": 2}).json()
    assert [j["id"] for j in page] == ids[:0:-1] and [j["priority"] for j in page] == [0, 7]
    rest = client.get("/v1/jobs", params={"before_id": page[-1]["id"]}).json()
    assert [j["id"] for j in rest] == ids[:1]
    claimed = database.claim_job()
    assert claimed is not None and claimed.id == ids[1]


def test_a_running_task_shows_its_errors_and_an_estimate_of_the_time_left(client, database) -> None:
    job = client.post("/v1/jobs", json={"workloads": [RELU], "trials": 10}).json()
    (task,) = job["tasks"]
    assert job["seconds_left"] is None  # no pace yet
    database.claim_job()
    database.update_task(task["id"], status=JobStatus.RUNNING, trials_done=4)
    trace = split_trace(2, RELU)
    database.commit_records(
        [
            Measurement.failed(
                task["workload_key"], task["target"], trace, kind, "x", job_id=job["id"]
            )
            for kind in (ErrorKind.BUILD_ERROR, ErrorKind.BUILD_ERROR, ErrorKind.TIMEOUT)
        ]
        + [Measurement.ok(task["workload_key"], task["target"], trace, [1e-3], job_id=job["id"])]
    )
    running = client.get(f"/v1/jobs/{job['id']}").json()
    (task,) = running["tasks"]
    assert task["measured"] == 4 and task["errors"] == {"build_error": 2, "timeout": 1}
    assert task["seconds_left"] is not None and task["seconds_left"] >= 0
    assert running["seconds_left"] == task["seconds_left"]


def test_a_coordinator_thread_runs_what_the_api_submits(
    database, backend, admin, monkeypatch
) -> None:
    coordinator = Coordinator(database, backend)
    ended = threading.Event()
    run_next = coordinator.run_next

    def noting_the_end() -> Job | None:
        job = run_next()
        if job is not None:
            ended.set()
        return job

    monkeypatch.setattr(coordinator, "run_next", noting_the_end)
    wake = threading.Event()
    thread = threading.Thread(target=coordinator.run_until_stopped, args=(wake, 3600.0))
    thread.start()
    try:
        with serving(create_app(database, submitted=wake.set)) as url:
            body = {"workloads": [RELU], "trials": 2, "tuner": "random"}
            submitted = httpx.post(f"{url}/v1/jobs", json=body, headers=bearer(admin))
            assert submitted.status_code == 201
            job = submitted.json()
            assert ended.wait(timeout=300)  # woken by the submission, not by the hour
            answer = httpx.get(f"{url}/v1/jobs/{job['id']}", headers=bearer(admin))
            assert answer.json()["status"] == "done"
    finally:
        coordinator.stopping.set()
        wake.set()
        thread.join()


def test_cancel_takes_a_queued_job_out_of_the_queue(client, database) -> None:
    job = client.post("/v1/jobs", json={"workloads": [RELU], "trials": 2}).json()
    cancelled = client.post(f"/v1/jobs/{job['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert database.claim_job() is None


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"workloads": []}, "workloads"),
        ({"workloads": [RELU], "trials": 0}, "trials"),
        ({"workloads": [RELU], "space": "mymodule:fn"}, "space"),
        ({"workloads": [{"op": "relu", "args": {"shape": [0]}}]}, "workloads[0]"),
        ({"workloads": [RELU], "tuner": "simulated-magic"}, "tuner"),
        ({"workload": [RELU]}, "workloads"),
        ({"workloads": [RELU], "target": "llvm", "targets": ["llvm"]}, "targets"),
        ({"workloads": [RELU], "targets": ["llvm", "llvm"]}, "targets"),
        ({"workloads": [RELU], "targets": ["llvm", "cuda"]}, "workloads[0]"),
    ],
)
def test_a_bad_job_is_422_naming_the_field_and_stores_nothing(
    client, database, body, named
) -> None:
    answer = client.post("/v1/jobs", json=body)
    assert answer.status_code == 422
    assert named in json.dumps(answer.json()["detail"])
    assert database.jobs() == []


def test_an_unknown_job_is_404(client) -> None:
    assert client.get("/v1/jobs/12345").status_code == 404
    assert client.post("/v1/jobs/12345/cancel").status_code == 404


# access -----------------------------------------------------------------------------------

JOB = {"workloads": [RELU], "trials": 2}


def test_without_a_token_only_health_and_the_schema_answer(server) -> None:
    assert httpx.get(f"{server}/healthz").status_code == 200
    assert httpx.get(f"{server}/openapi.json").status_code == 200
    for answer in (httpx.get(f"{server}/v1/workloads"), httpx.post(f"{server}/v1/jobs", json=JOB)):
        assert answer.status_code == 401
        assert "tensortune token create" in answer.json()["detail"]


def test_anonymous_reads_open_the_reads_only(database) -> None:
    with serving(create_app(database, anonymous_reads=True)) as url:
        assert httpx.get(f"{url}/v1/workloads").status_code == 200
        assert httpx.post(f"{url}/v1/jobs", json=JOB).status_code == 401


def test_a_role_below_the_route_is_403_and_a_revoked_token_401(server, database) -> None:
    reader, secret = database.create_token("dashboard", Role.READ)
    assert httpx.get(f"{server}/v1/jobs", headers=bearer(secret)).status_code == 200
    refused = httpx.post(f"{server}/v1/jobs", json=JOB, headers=bearer(secret))
    assert refused.status_code == 403 and "'submit'" in refused.json()["detail"]
    database.revoke_token(reader.id)
    time.sleep(TOKEN_FRESH_SECONDS)  # the server trusts a token it has seen that long
    assert httpx.get(f"{server}/v1/jobs", headers=bearer(secret)).status_code == 401
    assert httpx.get(f"{server}/v1/jobs", headers=bearer("tt_made_up")).status_code == 401


def test_only_its_submitter_or_an_admin_cancels_a_job(server, database, admin) -> None:
    _, alice = database.create_token("alice", Role.SUBMIT)
    _, bob = database.create_token("bob", Role.SUBMIT)
    job = httpx.post(f"{server}/v1/jobs", json=JOB, headers=bearer(alice)).json()
    cancel = f"{server}/v1/jobs/{job['id']}/cancel"
    assert httpx.post(cancel, headers=bearer(bob)).status_code == 403
    assert httpx.post(cancel, headers=bearer(alice)).json()["status"] == "cancelled"
    other = httpx.post(f"{server}/v1/jobs", json=JOB, headers=bearer(bob)).json()
    answer = httpx.post(f"{server}/v1/jobs/{other['id']}/cancel", headers=bearer(admin))
    assert answer.json()["status"] == "cancelled"


def test_a_quota_bounds_the_unfinished_jobs_of_a_token(server, database) -> None:
    _, secret = database.create_token("ci", Role.SUBMIT, quota=1)
    first = httpx.post(f"{server}/v1/jobs", json=JOB, headers=bearer(secret))
    assert first.status_code == 201
    over = httpx.post(f"{server}/v1/jobs", json=JOB, headers=bearer(secret))
    assert over.status_code == 429 and "quota" in over.json()["detail"]
    httpx.post(f"{server}/v1/jobs/{first.json()['id']}/cancel", headers=bearer(secret))
    assert httpx.post(f"{server}/v1/jobs", json=JOB, headers=bearer(secret)).status_code == 201
    assert len(database.jobs()) == 2


def test_an_oversized_body_is_413_and_stores_nothing(client, database) -> None:
    huge = {"workloads": [RELU] * 40_000}  # 1.8 MB
    answer = client.post("/v1/jobs", json=huge)
    assert answer.status_code == 413
    body = json.dumps(huge).encode()
    chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))  # no Content-Length
    streamed = client.post("/v1/jobs", content=chunks, headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413 and "over 1048576 bytes" in streamed.json()["detail"]
    assert database.jobs() == []


def test_an_unknown_query_parameter_is_422_naming_it(client) -> None:
    answer = client.get("/v1/jobs", params={"stauts": "done"})
    assert answer.status_code == 422
    assert "unknown parameter stauts" in answer.json()["detail"]
    assert "status" in answer.json()["detail"]


def test_a_method_the_path_lacks_is_405_naming_those_it_has(client) -> None:
    answer = client.delete("/v1/jobs")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, POST"


def test_tokens_are_made_listed_and_revoked_from_the_command_line(database, capsys) -> None:
    url = str(database.url)
    made = ["token", "create", "--role", "submit", "--quota", "2", "--upload-limit-mib", "3"]
    assert main([*made, "--url", url]) == 0
    secret = capsys.readouterr().out.strip()
    token = database.token_for_secret(secret)
    assert token is not None
    assert (token.role, token.quota, token.upload_limit) == (Role.SUBMIT, 2, 3 << 20)
    assert all(secret not in str(t) for t in database.tokens())  # only a digest is kept
    assert main(["token", "list", "--url", url]) == 0
    assert "submit" in capsys.readouterr().out
    assert main(["token", "revoke", str(token.id), "--url", url]) == 0
    assert database.token_for_secret(secret) is None


def test_metrics_count_jobs_records_and_requests(client, database, matmul) -> None:
    job = client.post("/v1/jobs", json=JOB).json()
    client.post(f"/v1/jobs/{job['id']}/cancel")
    text = httpx.get(f"{client.base_url}/metrics").text
    assert 'tensortune_jobs{status="cancelled"} 1.0' in text
    assert 'tensortune_jobs{status="queued"} 0.0' in text
    assert 'tensortune_records{outcome="ok"} 3.0' in text
    assert 'tensortune_records{outcome="wrong_result"} 0.0' in text
    assert 'tensortune_request_seconds_count{method="POST",route="/v1/jobs"} 1.0' in text


def test_metrics_counts_are_read_anew_only_once_they_are_old(database, matmul, monkeypatch) -> None:
    monkeypatch.setattr(metrics, "COUNTS_FRESH_SECONDS", 0.5)
    with serving(create_app(database)) as url:
        assert 'tensortune_records{outcome="ok"} 3.0' in httpx.get(f"{url}/metrics").text
        database.commit_records([Measurement.ok(matmul.key, ZEN, split_trace(7), [4e-3])])
        assert 'tensortune_records{outcome="ok"} 3.0' in httpx.get(f"{url}/metrics").text
        time.sleep(0.6)
        assert 'tensortune_records{outcome="ok"} 4.0' in httpx.get(f"{url}/metrics").text


def test_with_metrics_token_metrics_need_a_live_token(database) -> None:
    reader = database.create_token("scraper", Role.READ)[1]
    with serving(create_app(database, metrics_token=True)) as url:
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert httpx.get(f"{url}/metrics", headers=bearer("tt_unknown")).status_code == 401
        scraped = httpx.get(f"{url}/metrics", headers=bearer(reader))
        assert scraped.status_code == 200 and "tensortune_jobs" in scraped.text
        assert httpx.get(f"{url}/healthz").status_code == 200
