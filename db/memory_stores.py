"""Jobs, API tokens and model files held in this process, for ``MemoryDatabase``.

Each keeps the semantics of its SQL implementation (``db.jobs``, ``db.tokens``,
``db.model_files``) and shares its checks: ids count from 1 in the order things were
stored, jobs page newest first, a run ends its job only while the job is its, and a
token keeps only its secret's digest. One lock orders the changes, so threads racing
to claim a job or register a secret see the outcomes SQL gives them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import IO, Any

from db.errors import RecordError
from db.jobs import (
    STALE_AFTER,
    JobQueue,
    JobStore,
    check_job,
    check_run_end,
    checked_tasks,
    refuse_unknown_jobs,
    task_changes,
)
from db.model_files import (
    ModelFile,
    ModelStore,
    checked_content,
    pieces,
    plain,
    shapes_key_of,
)
from db.queries import now
from db.record import Job, JobStatus, JobTask, Purpose, TuningRecord, WorkloadEntry, status_of
from db.tokens import (
    ApiToken,
    Role,
    TokenStore,
    check_handed_in,
    check_secret,
    check_token,
    digest_of,
    new_secret,
    refuse_over_quota,
)

UNFINISHED = (JobStatus.QUEUED, JobStatus.RUNNING)


class MemoryStores(JobStore, JobQueue, TokenStore, ModelStore):
    """The service's stores over the workloads and records of a ``MemoryDatabase``
    (which a job's tasks name and count their outcomes from)."""

    _workloads: dict[str, WorkloadEntry]
    _records: list[TuningRecord]

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._jobs: dict[int, Job] = {}
        self._tasks: dict[int, JobTask] = {}
        self._tokens: dict[int, ApiToken] = {}
        self._digests: dict[str, int] = {}
        self._models: dict[int, ModelFile] = {}
        self._model_keys: dict[tuple[str, str], int] = {}
        self._contents: dict[int, bytes] = {}

    # jobs ------------------------------------------------------------------------

    def create_job(
        self,
        spec: Mapping[str, Any],
        tasks: Sequence[tuple[str, str, int]],
        *,
        token_id: int | None = None,
        priority: int = 0,
    ) -> Job:
        plain_spec = check_job(spec, priority)
        with self._lock:
            if token_id is not None:
                self._check_quota(token_id)
            checked = checked_tasks(tasks, set(self._workloads))
            created = now()
            job_id = len(self._jobs) + 1
            self._jobs[job_id] = Job(
                id=job_id,
                status=JobStatus.QUEUED,
                spec=plain_spec,
                created_at=created,
                started_at=None,
                finished_at=None,
                error=None,
                token_id=token_id,
                priority=priority,
            )
            for key, target, trials in checked:
                task_id = len(self._tasks) + 1
                self._tasks[task_id] = JobTask(
                    id=task_id,
                    job_id=job_id,
                    workload_key=key,
                    target=target,
                    status=JobStatus.QUEUED,
                    trials_asked=trials,
                    trials_done=0,
                    best_seconds=None,
                    created_at=created,
                    started_at=None,
                    finished_at=None,
                )
            return self.job(job_id)

    def _check_quota(self, token_id: int) -> None:
        token = self._tokens.get(token_id)
        if token is None:
            raise RecordError(f"token {token_id}: no such token")
        unfinished = sum(
            1
            for job in self._jobs.values()
            if job.token_id == token_id and job.status in UNFINISHED
        )
        refuse_over_quota(token.name, token.quota, unfinished)

    def job(self, job_id: int) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise RecordError(f"no job with id {job_id!r}")
            outcomes = self._outcomes(job_id)
            tasks = tuple(
                replace(task, outcomes=outcomes.get((task.workload_key, task.target), {}))
                for task in self._tasks.values()
                if task.job_id == job_id
            )
            return replace(job, tasks=tasks)

    def _outcomes(self, job_id: int) -> dict[tuple[str, str], dict[str, int]]:
        """How many search records the job measured, by (workload key, target) and by
        status."""
        counted = Counter(
            (r.workload_key, r.target, status_of(r.error_kind))
            for r in self._records
            if r.job_id == job_id and r.purpose is Purpose.SEARCH
        )
        found: dict[tuple[str, str], dict[str, int]] = {}
        for (key, target, status), count in counted.items():
            found.setdefault((key, target), {})[status] = count
        return found

    def jobs(
        self,
        status: JobStatus | None = None,
        *,
        limit: int | None = None,
        before_id: int | None = None,
    ) -> list[Job]:
        with self._lock:
            wanted = None if status is None else JobStatus(status)
            ids = [
                job_id
                for job_id in sorted(self._jobs, reverse=True)
                if (wanted is None or self._jobs[job_id].status is wanted)
                and (before_id is None or job_id < before_id)
            ]
            return [self.job(job_id) for job_id in ids[:limit]]

    def job_counts(self) -> dict[JobStatus, int]:
        counted = Counter(job.status for job in self._jobs.values())
        return {status: counted[status] for status in JobStatus}

    def cancel_job(self, job_id: int) -> Job:
        with self._lock:
            job = self.job(job_id)
            if job.status in UNFINISHED:
                self._jobs[job_id] = replace(
                    self._jobs[job_id], status=JobStatus.CANCELLED, finished_at=now()
                )
                self._close_tasks(job_id, JobStatus.CANCELLED)
            return self.job(job_id)

    def _close_tasks(self, job_id: int, status: JobStatus) -> None:
        for task in self._tasks.values():
            if task.job_id == job_id and task.status in UNFINISHED:
                self._tasks[task.id] = replace(task, status=status, finished_at=now())

    def _requeue_tasks(self, job_id: int) -> None:
        for task in self._tasks.values():
            if task.job_id == job_id and task.status is JobStatus.RUNNING:
                self._tasks[task.id] = replace(task, status=JobStatus.QUEUED)

    def _check_jobs_exist(self, job_ids: Collection[int]) -> None:
        refuse_unknown_jobs(job_ids, set(self._jobs) & set(job_ids))

    # the queue -------------------------------------------------------------------

    def claim_job(
        self, coordinator: str = "", *, stale_after: timedelta = STALE_AFTER
    ) -> Job | None:
        with self._lock:
            self._requeue_stale(now() - stale_after)
            queued = [job for job in self._jobs.values() if job.status is JobStatus.QUEUED]
            if not queued:
                return None
            job = min(queued, key=lambda job: (-job.priority, job.id))
            started = now()
            self._jobs[job.id] = replace(
                job,
                status=JobStatus.RUNNING,
                started_at=started,
                coordinator=coordinator,
                heartbeat_at=started,
            )
            return self.job(job.id)

    def _requeue_stale(self, cutoff: datetime) -> None:
        for job in list(self._jobs.values()):
            if job.status is JobStatus.RUNNING and (
                job.heartbeat_at is None or job.heartbeat_at < cutoff
            ):
                self._jobs[job.id] = replace(job, status=JobStatus.QUEUED, coordinator=None)
                self._requeue_tasks(job.id)

    def beat(self, job_id: int, coordinator: str) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.status is not JobStatus.RUNNING or job.coordinator != coordinator:
                return False
            self._jobs[job_id] = replace(job, heartbeat_at=now())
            return True

    def update_task(
        self,
        task_id: int,
        *,
        status: JobStatus | None = None,
        trials_done: int | None = None,
        best_seconds: float | None = None,
    ) -> JobTask:
        changes = task_changes(status, trials_done, best_seconds)
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                raise RecordError(f"no task with id {task_id!r}")
            self._tasks[task_id] = replace(task, **changes)
            return self._tasks[task_id]

    def end_job(
        self, job_id: int, coordinator: str, status: JobStatus, *, error: str | None = None
    ) -> Job:
        status = JobStatus(status)
        check_run_end(status)
        with self._lock:
            job = self.job(job_id)
            if job.status is JobStatus.RUNNING and job.coordinator == coordinator:
                stored = self._jobs[job_id]
                if status is JobStatus.QUEUED:
                    self._jobs[job_id] = replace(
                        stored, status=status, error=error, coordinator=None
                    )
                    self._requeue_tasks(job_id)
                else:
                    self._jobs[job_id] = replace(
                        stored, status=status, error=error, finished_at=now()
                    )
                    self._close_tasks(job_id, status)
            return self.job(job_id)

    # API tokens ------------------------------------------------------------------

    def create_token(
        self, name: str, role: Role, *, quota: int | None = None, upload_limit: int | None = None
    ) -> tuple[ApiToken, str]:
        check_token(name, quota, upload_limit)
        secret = new_secret()
        with self._lock:
            token = self._add_token(name, Role(role), digest_of(secret), quota, upload_limit)
        return token, secret

    def _add_token(
        self, name: str, role: Role, digest: str, quota: int | None, upload_limit: int | None
    ) -> ApiToken:
        token_id = len(self._tokens) + 1
        self._tokens[token_id] = ApiToken(
            id=token_id,
            name=name,
            role=role,
            quota=quota,
            created_at=now(),
            revoked_at=None,
            upload_limit=upload_limit,
        )
        self._digests[digest] = token_id
        return self._tokens[token_id]

    def ensure_token(self, name: str, role: Role, secret: str) -> tuple[ApiToken, bool]:
        check_token(name, None, None)
        check_secret(secret)
        role = Role(role)
        digest = digest_of(secret)
        with self._lock:
            registered = digest not in self._digests
            if registered:
                self._add_token(name, role, digest, None, None)
            token = self._tokens[self._digests[digest]]
        check_handed_in(token, role)
        return token, registered

    def tokens(self) -> list[ApiToken]:
        return list(self._tokens.values())

    def revoke_token(self, token_id: int) -> ApiToken:
        with self._lock:
            token = self._tokens.get(token_id)
            if token is None:
                raise RecordError(f"no token with id {token_id!r}")
            if token.revoked_at is None:
                self._tokens[token_id] = replace(token, revoked_at=now())
            return self._tokens[token_id]

    def token_for_secret(self, secret: str) -> ApiToken | None:
        token_id = self._digests.get(digest_of(secret))
        token = None if token_id is None else self._tokens[token_id]
        return token if token is not None and token.revoked_at is None else None

    # model files -----------------------------------------------------------------

    def commit_model_file(
        self,
        name: str,
        content: bytes | IO[bytes],
        shapes: Mapping[str, Sequence[int]],
        *,
        token_id: int | None = None,
    ) -> tuple[ModelFile, bool]:
        source, digest, size = checked_content(name, content)
        plain_shapes = plain(shapes)
        key = (digest, shapes_key_of(plain_shapes))
        with self._lock:
            if key in self._model_keys:
                return self._models[self._model_keys[key]], False
            model_id = len(self._models) + 1
            self._contents[model_id] = b"".join(pieces(source))
            self._models[model_id] = ModelFile(
                id=model_id,
                name=name,
                digest=digest,
                size=size,
                shapes={given: tuple(dims) for given, dims in plain_shapes.items()},
                created_at=now(),
                token_id=token_id,
            )
            self._model_keys[key] = model_id
            return self._models[model_id], True

    def model_file(self, model_id: int) -> ModelFile:
        found = self._models.get(model_id)
        if found is None:
            raise RecordError(f"no model file with id {model_id!r}")
        return found

    def write_model_content(self, model_id: int, target: IO[bytes]) -> None:
        self.model_file(model_id)
        target.write(self._contents[model_id])
