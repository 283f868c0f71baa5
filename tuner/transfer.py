"""Transfer: what the database knows of similar workloads, for a model-based search
to learn from before it measures anything (AutoTVM's transfer learning).

A similar workload is another stored workload that the task's kind of space fits
(a matmul of another shape, for the ``matmul.x86`` template), with records on the
same target: its candidates fill in the same design, so its measurements say
which decisions are good. A caller that knows the task's siblings (a model's tasks
whose spaces share the task's points) has their records come first.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from compiler.ir.function import PrimFunc
from compiler.workload.key import workload_from_json
from db import Database, Purpose
from tuner.space import Space
from tuner.task import TuneTask

# Stored workloads kept read (``_stored_workload``): a few models' tasks.
STORED_WORKLOADS = 256


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
    siblings: Sequence[Space] = (),
    max_workloads: int = 8,
    records_each: int = 512,
) -> Iterator[SimilarWorkload]:
    """The ``siblings`` (spaces of other workloads) that have current-format records
    on the task's target, then up to ``max_workloads`` other stored workloads than
    the task's that the same kind of space as ``space`` fits and that have such
    records, newest workload first; each with its ``records_each`` newest records
    (failures included: they teach what not to try)."""
    for sibling in siblings:
        if sibling.workload_key == task.workload_key:
            continue
        records = _records(database, sibling.workload_key, task, records_each)
        if records:
            yield SimilarWorkload(sibling, records)
    skipped = {task.workload_key, *(sibling.workload_key for sibling in siblings)}
    found = 0
    for entry in reversed(database.workloads()):
        if found >= max_workloads:
            return
        if entry.key in skipped:
            continue
        other = space.for_workload(_stored_workload(entry.json))
        if other is None:
            continue
        records = _records(database, entry.key, task, records_each)
        if not records:
            continue
        found += 1
        yield SimilarWorkload(other, records)


@functools.lru_cache(maxsize=STORED_WORKLOADS)
def _stored_workload(document: str) -> PrimFunc:
    """The workload a stored document describes, read once per process: a model's
    tuning looks through the database's workloads every round, and reading them took
    ResNet-18's tuning 13 s of its search in 600 trials."""
    return workload_from_json(document)


def _records(
    database: Database, key: str, task: TuneTask, limit: int
) -> tuple[tuple[str, float | None], ...]:
    """The ``limit`` newest current-format search records of workload ``key`` on the
    task's target: (trace JSON, seconds or None)."""
    stored = database.records(key, task.target, purpose=Purpose.SEARCH, limit=limit)
    return tuple((r.trace, r.seconds) for r in stored if not r.stale)
