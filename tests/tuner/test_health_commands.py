"""``tensortune health``: a container's health check against a real server and a real
database; one line per check, exit 0 when all pass, 1 when one fails, 2 when asked
for nothing."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from service_server import serving

from tuner.cli.main import main
from tuner.service import create_app


@pytest.fixture
def silent_server() -> Iterator[str]:
    """The URL of a server that takes connections and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_healthy_server_and_database_pass(server, database, capsys):
    assert main(["health", "--server", server, "--db", "--url", str(database.url)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"ok: {server}/healthz answered 200",
        f"ok: the tuning database {database.url} answers",
    ]


def test_an_unavailable_server_fails_with_what_it_said(database, capsys):
    app = create_app(database, workers_health=lambda: "no Ray node is alive")
    with serving(app) as url:
        assert main(["health", "--server", url + "/"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"failed: {url}/healthz answered 503: ")
    assert '"workers":"no Ray node is alive"' in captured.out
    assert captured.err == "tensortune: 1 of 1 health checks failed\n"


def test_a_server_not_there_fails(capsys):
    url = f"http://127.0.0.1:{closed_port()}"
    assert main(["health", "--server", url]) == 1
    assert capsys.readouterr().out.startswith(f"failed: cannot reach {url}/healthz: ")


def test_a_server_that_does_not_answer_fails_after_the_timeout(silent_server, capsys):
    assert main(["health", "--server", silent_server, "--timeout", "0.2"]) == 1
    expected = f"failed: {silent_server}/healthz did not answer within 0.2 s\n"
    assert capsys.readouterr().out == expected


def test_a_missing_database_fails_and_is_not_made(tmp_path, capsys):
    missing = tmp_path / "none.db"
    assert main(["health", "--db", "--url", f"sqlite:///{missing}"]) == 1
    assert capsys.readouterr().out.startswith("failed: no tuning database at ")
    assert not missing.exists()


def test_every_check_runs_when_one_fails(database, capsys):
    url = f"http://127.0.0.1:{closed_port()}"
    assert main(["health", "--server", url, "--db", "--url", str(database.url)]) == 1
    captured = capsys.readouterr()
    assert [line.split(":")[0] for line in captured.out.splitlines()] == ["failed", "ok"]
    assert "1 of 2 health checks failed" in captured.err


def test_a_health_check_of_nothing_is_a_usage_error(capsys):
    assert main(["health"]) == 2
    assert "tensortune health: error: give --server URL, --db, or both" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["health", "--server", "localhost:8000"], "give an http:// or https:// URL"),
        (["health", "--db", "--timeout", "0"], "above 0 and at most 300"),
    ],
)
def test_a_bad_flag_is_a_usage_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
