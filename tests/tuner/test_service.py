"""The service's API, over HTTP to a real uvicorn server and a real SQLite database:
what it answers about workloads and their best schedules, and the 4xx it gives for
bad requests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from db_helpers import MATMUL, ZEN, split_trace
from service_server import serving

from compiler.schedule.tuned import canonical_target
from db import Measurement, SQLDatabase, WorkloadEntry
from tuner.commands import _parser
from tuner.service import create_app

# (split factor, seconds): the schedules stored, the fastest last.
STORED = ((3, 3e-3), (11, 2e-3), (5, 1e-3))
FLOPS = 2 * 33 * 17 * 9  # of MATMUL, as a tuning run stores it


@pytest.fixture
def database(tmp_path) -> Iterator[SQLDatabase]:
    with SQLDatabase(f"sqlite:///{tmp_path / 'service.db'}") as opened:
        yield opened


@pytest.fixture
def matmul(database) -> WorkloadEntry:
    entry = database.commit_workload(MATMUL, flop_count=FLOPS)
    database.commit_records(
        Measurement.ok(entry.key, ZEN, split_trace(factor), [seconds]) for factor, seconds in STORED
    )
    return entry


@pytest.fixture
def client(database) -> Iterator[httpx.Client]:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=30) as opened:
        yield opened


def test_health_says_the_database_answers(client) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok"}


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
    assert any(field in error["loc"] for error in answer.json()["detail"])


def test_a_target_the_database_cannot_read_is_422_saying_why(client, matmul) -> None:
    answer = client.get(f"/v1/workloads/{matmul.key}/best", params={"target": "cuda -foo"})
    assert answer.status_code == 422
    assert "unknown target 'cuda -foo'" in answer.json()["detail"]


def test_the_openapi_schema_describes_the_routes(client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/healthz", "/v1/workloads", "/v1/workloads/{key}/best"} <= set(paths)


def test_serve_is_a_command_with_a_loopback_default() -> None:
    args = _parser().parse_args(["serve", "--port", "0"])
    assert (args.host, args.port) == ("127.0.0.1", 0)
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--port", "70000"])
