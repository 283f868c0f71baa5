"""Re-timing a tuned model's finalists side by side.

On a small shared machine a kernel's speed changes for seconds at a time: with a
virtual CPU taken away, a parallel kernel runs at half its speed. A model's tasks are
tuned over many minutes, so two schedules measured minutes apart (a task's default and
its searched best, or a direct convolution and its Winograd form) compare the
machine's moments as much as the schedules. On ResNet-18 (300 trials, 2 vCPUs) the
search's bests differed from a later measurement by up to twice, both ways, and the
model built from them ran slower than on its default schedules.

So once the budget is spent, each task's fastest few search measurements and its
default schedule are measured again, every task's in one batch, in rounds: a round
measures each finalist once, so a slow stretch slows one round of many schedules
rather than every round of one, and each keeps its fastest. The re-timings are stored
as re-timing records, which rank ahead of search measurements (``Database.best``): the
model's build, and its choice between an operator's algorithms, read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiler.workload.key import workload_to_json
from db import Database, Purpose
from tuner.model_tasks import ModelTask
from tuner.tune import default_candidate, retiming, search_records
from workers import Candidate, Workers


@dataclass(frozen=True)
class Finalist:
    """A schedule to re-time: its candidate and its workload's key."""

    workload_key: str
    candidate: Candidate


def finalists(tasks: Sequence[ModelTask], database: Database, top: int) -> list[Finalist]:
    """Each task's ``top`` fastest search measurements and its default schedule (on a
    CPU, where the search measured it and it succeeded)."""
    found: list[Finalist] = []
    for task in tasks:
        traces = [
            record.trace
            for record in database.best(
                task.task.workload_key, task.task.target, k=top, purpose=Purpose.SEARCH
            )
        ]
        default = _stored_default(task, database)
        if default is not None and default not in traces:
            traces.append(default)
        workload = workload_to_json(task.task.func)
        found.extend(
            Finalist(
                task.task.workload_key,
                Candidate(workload, trace, task.task.target, task.task.spec),
            )
            for trace in traces
        )
    return found


def retime_finalists(
    chosen: Sequence[Finalist],
    *,
    database: Database,
    workers: Workers,
    rounds: int,
    job_id: int | None = None,
) -> int:
    """Measure every finalist ``rounds`` more times, all of them in each round (each
    built once), and store each whose every round succeeded as a re-timing record (of
    the job ``job_id``, when one runs it). Returns how many were stored."""
    if not chosen:
        return 0
    builds = workers.build([finalist.candidate for finalist in chosen])
    runs = workers.run([build for _ in range(rounds) for build in builds])
    retimings = []
    for k, finalist in enumerate(chosen):
        own = runs[k :: len(chosen)]
        if own and all(run.seconds is not None for run in own):
            candidate = finalist.candidate
            retimings.append(
                retiming(finalist.workload_key, candidate.target, candidate.trace, own, job_id)
            )
    return database.commit_records(retimings)


def _stored_default(task: ModelTask, database: Database) -> str | None:
    """The trace of the task's default schedule, when the search measured it (the first
    trial of a CPU task) and it succeeded."""
    default = default_candidate(task.task)
    if default is None:
        return None
    for record in search_records(database, task.task):
        if record.trace_hash == default.trace_hash:
            return record.trace if record.seconds is not None else None
    return None
