"""The service's clients, the Python one and the command line, against a real server,
database and local workers: submit, list, follow a job's events to its end, cancel,
and the service's refusals as errors."""

from __future__ import annotations

import pytest

from db import Role
from tuner.cli.main import main
from tuner.client import Client, ServiceError
from tuner.service.coordinator import Coordinator

RELU = {"op": "relu", "args": {"shape": [12, 10]}}


def test_a_job_submitted_by_the_client_is_followed_to_its_end(
    server, admin, database, backend
) -> None:
    with Client(server, admin) as service:
        job = service.submit([RELU], trials=3, tuner="random")
        assert [j["id"] for j in service.jobs("queued")] == [job["id"]]
        Coordinator(database, backend).run_next()
        updates = list(service.events(job["id"]))
        assert updates[-1]["status"] == "done"
        assert updates[-1]["tasks"][0]["trials_done"] == 3
        best = service.best(updates[-1]["tasks"][0]["workload_key"])
        assert "sch." in best[0]["python"]
        assert service.best(RELU) == best


def test_refusals_are_service_errors_with_the_status(server, database) -> None:
    _, reader = database.create_token("dashboard", Role.READ)
    with Client(server, reader) as service:
        with pytest.raises(ServiceError, match="'submit'") as refused:
            service.submit([RELU])
        assert refused.value.status == 403
        with pytest.raises(ServiceError) as missing:
            service.job(999)
        assert missing.value.status == 404
    with Client("http://127.0.0.1:9") as nowhere, pytest.raises(ServiceError) as down:
        nowhere.jobs()
    assert down.value.status == 0


def test_the_command_line_submits_lists_watches_and_cancels(
    server, admin, database, backend, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("TENSORTUNE_SERVER", server)
    monkeypatch.setenv("TENSORTUNE_TOKEN", admin)
    assert main(["submit", "relu", "--shape", "12", "10", "--trials", "2"]) == 0
    assert "job 1 queued" in capsys.readouterr().out
    assert main(["submit", "relu", "--shape", "8", "8", "--trials", "2"]) == 0
    assert main(["cancel", "2"]) == 0
    assert "job 2: cancelled" in capsys.readouterr().out
    Coordinator(database, backend).run_next()
    assert main(["watch", "1"]) == 0
    captured = capsys.readouterr()
    assert "job 1: done" in captured.out and "2/2 trials" in captured.err
    assert main(["jobs"]) == 0
    listing = capsys.readouterr().out
    assert "done" in listing and "cancelled" in listing and "relu" in listing
    assert main(["jobs", "--limit", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"{2:>6}  cancelled  {'0/2':>13}  {'-':>12}  relu",
        "more: --before 2",
    ]
    assert main(["best", "relu", "--shape", "12", "10"]) == 0
    printed = capsys.readouterr().out
    assert "sch.get_block" in printed and "GFLOP/s" in printed
    key = database.jobs(limit=1, before_id=2)[0].tasks[0].workload_key
    assert main(["best", key, "--json"]) == 0
    assert '"instructions"' in capsys.readouterr().out
    assert main(["best", key[:12]]) == 2
    assert "whole key" in capsys.readouterr().err


def test_the_command_line_names_what_is_missing(monkeypatch, capsys) -> None:
    monkeypatch.delenv("TENSORTUNE_SERVER", raising=False)
    assert main(["jobs"]) == 2
    assert "TENSORTUNE_SERVER" in capsys.readouterr().err
    assert main(["jobs", "--server", "http://127.0.0.1:9"]) == 1
