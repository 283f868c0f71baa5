"""Transfer: what the database knows of similar workloads, for a model-based search
to learn from before it measures anything (AutoTVM's transfer learning).

A similar workload is another stored workload that the task's kind of space fits
(a matmul of another shape, for the ``matmul.x86`` template), with records on the
same target: its candidates fill in the same design, so its measurements say
which decisions are good.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compiler.workload.key import workload_from_json
from db import Database, Purpose
from tuner.space import Space
from tuner.task import TuneTask


@dataclass(frozen=True)
class SimilarWorkload:
    """Another workload's space and its newest records: (trace JSON, seconds or None)."""

    space: Space
    records: tuple[tuple[str, float | None], ...]


def similar_workloads(
    database: Database,
    task: TuneTask,
    space: Space,
    *,
    max_workloads: int = 8,
    records_each: int = 512,
) -> Iterator[SimilarWorkload]:
    """Up to ``max_workloads`` stored workloads other than the task's that the same
    kind of space as ``space`` fits and that have current-format records on the
    task's target, newest workload first, each with its ``records_each`` newest
    records (failures included: they teach what not to try)."""
    found = 0
    for entry in reversed(database.workloads()):
        if found >= max_workloads:
            return
        if entry.key == task.workload_key:
            continue
        other = space.for_workload(workload_from_json(entry.json))
        if other is None:
            continue
        stored = database.records(
            entry.key, task.target, purpose=Purpose.SEARCH, limit=records_each
        )
        records = tuple((r.trace, r.seconds) for r in stored if not r.stale)
        if not records:
            continue
        found += 1
        yield SimilarWorkload(other, records)
