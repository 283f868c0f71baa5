"""A token's quota under concurrent submissions, on SQLite and on PostgreSQL: the
count of its unfinished jobs and the new job are one transaction, so no two
submissions both see room for one more."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from pg_server import BACKENDS, fresh_url
from service_server import serving

from db import Role, SQLDatabase
from tuner.service import create_app

JOB = {"workloads": [{"op": "relu", "args": {"shape": [12, 10]}}], "trials": 2}
SUBMISSIONS = 10


@pytest.fixture(params=BACKENDS)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLDatabase]:
    with SQLDatabase(fresh_url(request.param, tmp_path)) as database:
        yield database


def test_concurrent_submissions_pass_a_quota_of_one_once(shared) -> None:
    _, secret = shared.create_token("ci", Role.SUBMIT, quota=1)
    with serving(create_app(shared)) as url, ThreadPoolExecutor(SUBMISSIONS) as pool:

        def submit(_: int) -> httpx.Response:
            headers = {"Authorization": f"Bearer {secret}"}
            return httpx.post(f"{url}/v1/jobs", json=JOB, headers=headers, timeout=60)

        answers = list(pool.map(submit, range(SUBMISSIONS)))
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [201] + [429] * (SUBMISSIONS - 1), [a.text for a in answers]
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert "quota" in refused.json()["detail"]
    assert len(shared.jobs()) == 1
