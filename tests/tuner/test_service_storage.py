"""A database whose storage fails under a request: the service answers 503 with a
one-line reason and a Retry-After, never a 500, and stores nothing."""

from __future__ import annotations

import httpx
from service_server import serving

from db import Role, SQLDatabase
from tuner.service import create_app
from tuner.service.errors import RETRY_AFTER_SECONDS

JOB = {"workloads": [{"op": "relu", "args": {"shape": [12, 10]}}], "trials": 2}


def test_a_write_the_storage_refuses_is_503_with_retry_after(tmp_path, caplog) -> None:
    path = tmp_path / "tune.db"
    with SQLDatabase(f"sqlite:///{path}") as writable:
        _, secret = writable.create_token("ci", Role.SUBMIT)
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    with SQLDatabase(read_only) as database, serving(create_app(database)) as url:
        headers = {"Authorization": f"Bearer {secret}"}
        answer = httpx.post(f"{url}/v1/jobs", json=JOB, headers=headers)
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
        detail = answer.json()["detail"]
        assert "read-only" in detail or "readonly" in detail
        assert "\n" not in detail
        assert httpx.get(f"{url}/v1/jobs", headers=headers).json() == []
    assert "Traceback" not in caplog.text
