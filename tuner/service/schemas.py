"""What the API answers, as pydantic models: they validate each response and make
the OpenAPI schema that clients (and schema-driven tests) read."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, Field

from db.validate import INT64_MAX

# Every id is a positive signed 64-bit integer, what the database stores.
JobId = Annotated[int, Path(ge=1, le=INT64_MAX, description="the job's id")]


class Health(BaseModel):
    status: str = Field(description="'ok' when the database answers and the workers work")
    database: str = Field(description="'ok', or why the database does not answer")
    workers: str = Field(description="'ok', what is wrong with them, or that they run apart")


class Workload(BaseModel):
    key: str = Field(description="the hash of the workload's canonical JSON")
    name: str
    flop_count: int | None = Field(description="floating-point operations per call")


class Record(BaseModel):
    """One measurement of one trace of a workload on a target."""

    id: int
    workload_key: str
    target: str
    trace: dict[str, Any] = Field(description="the schedule as a trace (JSON)")
    trace_hash: str
    purpose: str = Field(description="'search' (measured by a search) or 'retime'")
    seconds: float | None = Field(description="the run time that ranks it; null on failure")
    run_times: list[float]
    gflops: float | None
    error_kind: str | None
    error: str | None
    worker_host: str
    job_id: int | None
    created_at: datetime


class BestSchedule(Record):
    """A record among a workload's fastest, with its trace as Python too."""

    python: str = Field(description="the trace as the Python schedule code that replays it")
    retimed: bool = Field(description="ranked by a careful re-timing, not a search measurement")
    search_gflops: float | None = Field(
        description="as the search measured the trace (for a re-timed one, its search record)"
    )


class LoopNest(BaseModel):
    record_id: int
    loop_nest: str = Field(description="the workload with the record's trace applied, as text")


class Trial(BaseModel):
    """One measurement of a job's search, as a point of its progress."""

    id: int
    task_id: int | None = Field(description="the job's task it belongs to")
    at: datetime = Field(description="when it was stored")
    seconds: float | None = Field(description="null when it failed")
    gflops: float | None
    error_kind: str | None


class JobBestOfWorkload(BaseModel):
    """The fastest search measurement one job made of a workload on a target."""

    job_id: int
    best_seconds: float
    best_gflops: float | None
    last_at: datetime = Field(description="when the job's last measurement of it was stored")


class BestQuery(BaseModel):
    """The best ``k`` schedules of the workload that an operator spec names, on ``target``."""

    workload: dict[str, Any] = Field(
        description='an operator spec, e.g. {"op": "matmul", "args": {"m": 64, "n": 64, "k": 64}}'
    )
    target: str = Field("llvm", min_length=1, max_length=256)
    k: int = Field(1, ge=1, le=100)


class ErrorDetail(BaseModel):
    detail: str


NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorDetail, "description": "no such workload"}
}
NO_JOB: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorDetail, "description": "no such job"}
}


class JobSubmission(BaseModel):
    """A tuning job: each workload tuned on the target (or on each of ``targets``) for
    ``trials`` trials; or the tasks of a stored ``model`` (POST /v1/models), which
    share ``trials`` as the task ``scheduler`` decides."""

    workloads: list[dict[str, Any]] = Field(
        [],
        max_length=256,
        description='operator specs, e.g. {"op": "matmul", "args": {"m": 64, "n": 64, "k": 64}}',
    )
    model: int | None = Field(
        None, ge=1, le=INT64_MAX, description="a stored model's id, instead of workloads"
    )
    scheduler: Literal["gradient", "round-robin"] = Field(
        "gradient", description="how a model job shares its trials among its tasks"
    )
    target: str = Field("llvm", min_length=1, max_length=256)
    targets: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        [],
        max_length=16,
        description="tune every workload on each of these targets instead of on target",
    )
    trials: int = Field(64, ge=1, le=100_000, description="trials per workload and target")
    tuner: str = Field("auto", min_length=1, max_length=32, description="a search strategy")
    space: Literal["auto", "template", "generated"] = "auto"
    seed: int = Field(0, ge=0, le=2**31 - 1)
    priority: int = Field(
        0, ge=-1000, le=1000, description="queued jobs of a higher priority run first"
    )


class JobTask(BaseModel):
    id: int
    workload_key: str
    target: str
    status: str
    trials_asked: int
    trials_done: int
    best_seconds: float | None
    best_gflops: float | None
    measured: int = Field(description="trials this job measured (not those it resumed from)")
    errors: dict[str, int] = Field(description="this job's failed trials by error kind")
    seconds_left: float | None = Field(
        description="estimated from the job's pace so far; null before it has one"
    )


class Job(BaseModel):
    id: int
    status: str = Field(description="queued, running, done, failed or cancelled")
    priority: int
    request: dict[str, Any] = Field(description="the job as submitted")
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    seconds_left: float | None = Field(description="the sum over its tasks, when each has one")
    tasks: list[JobTask]


class ModelTaskView(BaseModel):
    workload_key: str
    kind: str = Field(description="the operators fused into it, e.g. conv2d_add_relu")
    weight: int = Field(description="how many times the model runs it")
    flop_count: int = Field(description="FLOPs of one run")
    worth_tuning: bool


class ModelView(BaseModel):
    id: int
    name: str
    digest: str = Field(description="SHA-256 of the file")
    size: int
    created_at: datetime
    stored_now: bool = Field(description="false when the same file was stored before")
    inputs: dict[str, list[int]]
    tasks: list[ModelTaskView]


ModelId = Annotated[int, Path(ge=1, le=INT64_MAX, description="the model's id")]
NO_MODEL: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorDetail, "description": "no such model"}
}
