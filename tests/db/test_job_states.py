"""Job state changes that lean on SQL's clock, on SQLite and on PostgreSQL (the
guarded transitions every implementation keeps are in
``tests/contracts/test_job_store_contract.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from db_helpers import MATMUL

from db import Job, sql_jobs


@pytest.fixture
def key(database) -> str:
    return database.commit_workload(MATMUL).key


def three_task_job(database, key) -> Job:
    return database.create_job(
        {}, [(key, "llvm", 4), (key, "llvm -mcpu=znver4", 4), (key, "llvm -num-cores=1", 4)]
    )


def test_a_host_whose_clock_runs_ahead_leaves_a_live_job_alone(database, key, monkeypatch):
    """Heartbeats and the stale cutoff are times of the database's clock: a coordinator
    on a host two hours ahead claims the next job, not one another coordinator beats."""
    live, queued = three_task_job(database, key), three_task_job(database, key)
    assert database.claim_job("a").id == live.id
    assert database.beat(live.id, "a")
    ahead = datetime.now(UTC) + timedelta(hours=2)
    monkeypatch.setattr(sql_jobs, "now", lambda: ahead)
    assert database.claim_job("b", stale_after=timedelta(seconds=60)).id == queued.id
    assert database.job(live.id).coordinator == "a"
    assert database.beat(live.id, "a")
