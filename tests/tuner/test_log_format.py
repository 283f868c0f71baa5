"""``--log-format``: log records on standard output as text or as one JSON object a
line, uvicorn's and the coordinator's alike, checked in this process and on
``tensortune serve`` and ``tensortune coordinator`` running as they do in a container."""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest

from tuner.cli.log_format import logging_as
from tuner.cli.main import main
from tuner.service.jobs import JobRequest, submit

RELU = {"op": "relu", "args": {"shape": [12, 10]}}
WAIT_S = 300


def test_a_json_line_has_time_level_logger_message_extras_and_the_exception(capsys):
    with logging_as("json"):
        try:
            raise ValueError("bad value")
        except ValueError:
            logging.getLogger("tensortune.test").exception("job %d failed", 7, extra={"job": 7})
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"], record["message"]) == (
        "ERROR",
        "tensortune.test",
        "job 7 failed",
    )
    assert record["job"] == 7 and "ValueError: bad value" in record["exc_info"]
    when = datetime.fromisoformat(record["time"])
    assert when.utcoffset() == timedelta(0)


def test_text_looks_as_uvicorn_prints_its_own(capsys):
    with logging_as("text"):
        logging.getLogger("tensortune.test").info("job %d: running %d tasks", 7, 2)
    assert capsys.readouterr().out == "INFO:     job 7: running 2 tasks\n"


def test_the_root_logger_is_as_it_was_after_the_command(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    with logging_as("json"):
        assert len(root.handlers) == len(before[1]) + 1 and root.level == logging.INFO
    assert (root.level, root.handlers) == before


def test_request_logs_of_http_clients_are_left_out(capsys):
    with logging_as("text"):
        logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1/v1/jobs")
        logging.getLogger("httpx").warning("retrying")
    assert capsys.readouterr().out == "WARNING:  retrying\n"


def test_a_bad_format_in_the_environment_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("TENSORTUNE_LOG_FORMAT", "xml")
    with pytest.raises(SystemExit) as exited:
        main(["health", "--db"])
    assert exited.value.code == 2
    assert "'xml' is not a log format (given here or in $TENSORTUNE_LOG_FORMAT)" in (
        capsys.readouterr().err
    )


# the commands of a container ------------------------------------------------------


class JsonLines:
    """A command running in a process of its own, its standard output read as JSON
    lines by a thread, so a test waits for a line with a deadline."""

    def __init__(self, *argv: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        command = [sys.executable, "-m", "tuner.cli.main", "--log-format", "json", *argv]
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.records: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def until(self, message_has: str) -> dict[str, Any]:
        """The first record whose message has ``message_has``; every line up to it
        must be a JSON object."""
        while True:
            line = self._lines.get(timeout=WAIT_S)
            assert line is not None, f"the command ended before logging {message_has!r}"
            record = json.loads(line)
            self.records.append(record)
            if message_has in record["message"]:
                return record

    def stop(self) -> str:
        """Ctrl-C; every line left must be JSON too. Returns standard error."""
        assert self.process.stderr is not None
        self.process.send_signal(signal.SIGINT)
        err = self.process.stderr.read()  # to its end: the process has exited
        self.process.wait(timeout=120)
        while (line := self._lines.get(timeout=WAIT_S)) is not None:
            self.records.append(json.loads(line))
        return err


def test_the_coordinator_logs_json_lines(database):
    job = submit(database, JobRequest((RELU,), trials=2, tuner="random"))
    coordinator = JsonLines("coordinator", "--url", str(database.url))
    try:
        record = coordinator.until(f"job {job.id}: running 1 tasks")
        assert (record["level"], record["logger"]) == ("INFO", "tuner.service.coordinator")
    finally:
        err = coordinator.stop()
    assert coordinator.process.returncode in (0, 130) and "Traceback" not in err


def test_serve_logs_uvicorns_start_and_access_lines_as_json(database, capsys):
    serve = JsonLines("serve", "--port", "0", "--access-log", "--url", str(database.url))
    try:
        started = serve.until("Uvicorn running on http://")
        assert started["logger"] == "uvicorn.error"
        url = started["message"].split("running on ")[1].split()[0]
        assert main(["health", "--server", url]) == 0
        access = serve.until('"GET /healthz HTTP/1.1" 200')
        assert (access["level"], access["logger"]) == ("INFO", "uvicorn.access")
    finally:
        err = serve.stop()
    assert serve.process.returncode in (0, 130) and "Traceback" not in err
    assert any(r["message"].startswith("Finished server process") for r in serve.records)
