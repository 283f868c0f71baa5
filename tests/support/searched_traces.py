"""How many traces a task's search measured, checked against its stored records."""

from __future__ import annotations

from collections import Counter

from db import Database, Purpose
from tuner.task import TuneTask


def searched_traces(database: Database, task: TuneTask) -> int:
    """The traces of the task's search records; asserts that none was measured more
    than twice (a trial and its confirmation)."""
    key, target = task.workload_key, task.target
    stored = database.records(key, target, purpose=Purpose.SEARCH, limit=1000)
    times = Counter(r.trace_hash for r in stored)
    assert max(times.values(), default=1) <= 2, times.most_common(3)
    assert set(times) == database.measured_hashes(key, target)
    return len(times)
