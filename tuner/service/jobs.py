"""A tuning job as the service takes it: one or more operator specs, a target (or
several: a cluster with hosts of several kinds tunes each workload for each), a trial
budget per task and the search options, checked whole before anything is stored, and
kept as the job's spec (plain JSON) for the coordinator that runs it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from compiler.target.errors import TargetError
from db import Job, RecordError, TuningStore
from tuner import scheduler
from tuner.service.model_files import ModelFileError, model_tasks
from tuner.space_choice import choose_space
from tuner.task import TuneTask
from tuner.tune import TuneOptions, check_search

# The spaces a job may name: a "module:function" space would import code named by a
# request, which the service never does.
SPACES = ("auto", "template", "generated")


class JobRequestError(ValueError):
    """A job request that cannot run: the message names the field and the fix."""


@dataclass(frozen=True)
class JobRequest:
    workloads: tuple[dict[str, Any], ...]
    target: str = "llvm"
    trials: int = 64
    tuner: str = "auto"
    space: str = "auto"
    seed: int = 0
    priority: int = 0
    targets: tuple[str, ...] = ()
    model: int | None = None
    scheduler: str = "gradient"

    def task_specs(self) -> list[tuple[dict[str, Any], str]]:
        """(spec, target) of each task, in the order of the job's tasks: every workload
        on ``targets`` one target after another, or on ``target`` when none are given."""
        return [
            (spec, target) for target in self.targets or (self.target,) for spec in self.workloads
        ]

    def tasks(self) -> list[TuneTask]:
        """The tuning task of each workload on each target; raises JobRequestError for a
        bad spec or target."""
        found = []
        for k, (spec, target) in enumerate(self.task_specs()):
            try:
                found.append(TuneTask.from_spec(spec, target))
            except ValueError as err:
                raise JobRequestError(f"workloads[{k % len(self.workloads)}]: {err}") from None
        return found

    def options(self, trials: int) -> TuneOptions:
        return TuneOptions(trials=trials, tuner=self.tuner, seed=self.seed)

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["workloads"] = list(self.workloads)
        document["targets"] = list(self.targets)
        return document

    @staticmethod
    def from_json(document: Mapping[str, Any]) -> JobRequest:
        return JobRequest(
            **{
                **document,
                "workloads": tuple(document["workloads"]),
                "targets": tuple(document.get("targets", ())),
            }
        )


def submit(database: TuningStore, request: JobRequest, *, token_id: int | None = None) -> Job:
    """Check ``request`` whole (every spec, the options, the space of each workload)
    and store it as a queued job with one task per workload, submitted by the token
    ``token_id``. A job of a stored ``model`` gets one task per task of the model worth
    tuning, which share its trials."""
    if request.model is not None:
        return _submit_model(database, request, request.model, token_id)
    if not request.workloads:
        raise JobRequestError("workloads: give at least one operator spec, or a model")
    repeated = sorted({t for t in request.targets if request.targets.count(t) > 1})
    if repeated:
        raise JobRequestError(f"targets: {', '.join(map(repr, repeated))} given more than once")
    if request.space not in SPACES:
        raise JobRequestError(f"space: {request.space!r} is not one of {', '.join(SPACES)}")
    try:
        options = request.options(request.trials)
    except ValueError as err:
        raise JobRequestError(str(err)) from None
    tasks = request.tasks()
    for k, task in enumerate(tasks):
        k %= len(request.workloads)
        try:
            space = choose_space(request.space, task.func, target=task.target, seed=request.seed)
        except ValueError as err:
            raise JobRequestError(f"workloads[{k}]: {err}") from None
        try:
            check_search(space, options)
        except ValueError as err:
            raise JobRequestError(f"tuner: {err}") from None
    for task in tasks:
        database.commit_workload(task.func, name=task.name, flop_count=task.flop_count)
    return database.create_job(
        request.to_json(),
        [(t.workload_key, t.target, request.trials) for t in tasks],
        token_id=token_id,
        priority=request.priority,
    )


def _submit_model(
    database: TuningStore, request: JobRequest, model_id: int, token_id: int | None
) -> Job:
    """A model job: its tasks on the target, each row's ``trials_asked`` the model's
    budget, the most one task may get (the task scheduler shares it out)."""
    if request.workloads or request.targets:
        raise JobRequestError("model: a model job names no workloads and one target")
    if request.scheduler not in scheduler.KINDS:
        raise JobRequestError(
            f"scheduler: {request.scheduler!r} is not one of {', '.join(scheduler.KINDS)}"
        )
    try:
        request.options(request.trials)
    except ValueError as err:
        raise JobRequestError(str(err)) from None
    try:
        stored = database.model_file(model_id)
        tasks = [t for t in model_tasks(database, stored.id, request.target) if t.worth_tuning]
    except (RecordError, ModelFileError, TargetError) as err:
        raise JobRequestError(f"model: {err}") from None
    if not tasks:
        raise JobRequestError(f"model: {stored.name!r} has no task worth tuning")
    for task in tasks:
        database.commit_workload(
            task.task.func, name=f"{stored.name}: {task.kind}", flop_count=task.task.flop_count
        )
    return database.create_job(
        request.to_json(),
        [(t.task.workload_key, t.task.target, request.trials) for t in tasks],
        token_id=token_id,
        priority=request.priority,
    )
