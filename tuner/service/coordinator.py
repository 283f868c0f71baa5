"""The coordinator: claims queued jobs from the database and runs them with the
tuning loop on its workers, writing each task's progress where the API reads it.

A job's failure (a spec that no longer builds, a worker backend that broke) is the
job's status and message; the coordinator goes on with the next job. A cancelled job
stops after its current batch, its measurements kept. So does the running job when
the coordinator is told to stop: it goes back to the queue, and whoever claims it
next resumes it from its stored records (its finished tasks are not run again).

A failure of the database itself (``TRANSIENT``: its storage or its server gone) is
not the job's: the coordinator stops the job where it is, waits (doubling the wait
from ``RETRY_FIRST_SECONDS`` up to ``retry_max_seconds``) and tries again, first to
put that job back in the queue, then to claim the next. It never dies of an outage;
only an error of another kind ends its loop, kept as ``failure``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from db import ConnectError, Job, JobQueue, JobStatus, JobTask, TuningStore
from db.errors import StorageError
from db.jobs import STALE_AFTER
from tuner.model_tune import ModelTuneOptions, ModelTuneResult, tune_model
from tuner.progress import Progress
from tuner.scheduler import TaskState
from tuner.service.jobs import JobRequest
from tuner.service.model_files import model_tasks
from tuner.space_choice import choose_space
from tuner.task import TuneTask
from tuner.tune import tune
from workers import Workers

logger = logging.getLogger(__name__)

# Errors of the database's storage or connection, which pass: retried, never the job's.
TRANSIENT = (StorageError, ConnectError)
# The first wait after a database failure; each failure in a row doubles it.
RETRY_FIRST_SECONDS = 0.5


class CoordinatorError(RuntimeError):
    """A coordinator's loop ended on an error it could not retry."""


class Coordinator:
    """Runs jobs of ``database`` on ``workers`` (its own: one Workers serves one
    coordinator at a time); ``stopping``, once set, ends the running job after its
    current batch and puts it back in the queue.

    While it runs a job it beats every ``HEARTBEAT`` (from a thread of its own, so a
    long batch does not stop the beats); a job whose coordinator stopped beating for
    ``stale_after`` (it was killed, its host lost) is requeued by the next claim of
    any coordinator and resumed from its stored records."""

    HEARTBEAT = timedelta(seconds=10)

    def __init__(
        self,
        database: TuningStore,
        workers: Workers,
        stopping: threading.Event | None = None,
        *,
        name: str | None = None,
        stale_after: timedelta = STALE_AFTER,
        retry_max_seconds: float = 30.0,
    ) -> None:
        self.database = database
        self.workers = workers
        self.stopping = stopping or threading.Event()
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.stale_after = stale_after
        self.retry_max_seconds = retry_max_seconds
        self.failure: Exception | None = None
        self._lost = threading.Event()
        self._interrupted: int | None = None  # a job a database failure stopped

    def run_until_stopped(self, wake: threading.Event, idle_seconds: float) -> None:
        """Run queued jobs one after another until ``stopping`` is set; with none
        queued, wait ``idle_seconds`` or until ``wake`` is set (by a submission). A
        database failure is waited out; any other error ends the loop (``failure``)."""
        wait = 0.0
        while not self.stopping.is_set():
            try:
                ran = self.run_next()
            except TRANSIENT as err:
                wait = min(self.retry_max_seconds, max(RETRY_FIRST_SECONDS, 2 * wait))
                reason = str(err).splitlines()[0]
                logger.warning("the database failed (%s); trying again in %.1f s", reason, wait)
                self.stopping.wait(wait)
                continue
            except Exception as err:
                logger.exception("the coordinator stops on an error it cannot retry")
                self.failure = err
                return
            wait = 0.0
            if ran is None:
                wake.wait(idle_seconds)
                wake.clear()

    def run_next(self) -> Job | None:
        """Claim the oldest queued job and run it to its end; returns it as it ended,
        or None when no job was queued. A job that a database failure stopped goes back
        to the queue first, to be claimed again and resumed."""
        if self._interrupted is not None:
            self.database.end_job(self._interrupted, self.name, JobStatus.QUEUED)
            self._interrupted = None
        job = self.database.claim_job(self.name, stale_after=self.stale_after)
        if job is None:
            return None
        logger.info("job %d: running %d tasks", job.id, len(job.tasks))
        with self._beating(job.id):
            try:
                return self._run(job)
            except TRANSIENT:
                self._interrupted = job.id
                raise

    def _run(self, job: Job) -> Job:
        try:
            request = JobRequest.from_json(job.spec)
            if request.model is None:
                self._run_workloads(job, request)
            else:
                self._run_model(job, request, request.model)
        except TRANSIENT:
            raise  # the database's failure, not the job's
        except Exception as err:  # the job's failure is its status; the next job runs
            logger.exception("job %d failed", job.id)
            return self._end(job, JobStatus.FAILED, error=f"{type(err).__name__}: {err}")
        if self.stopping.is_set() or self._lost.is_set():
            logger.info("job %d: back in the queue, unless it ended or was taken over", job.id)
            return self._end(job, JobStatus.QUEUED)
        return self._end(job, JobStatus.DONE)

    def _end(self, job: Job, status: JobStatus, *, error: str | None = None) -> Job:
        """End this coordinator's run of the job; a job cancelled or taken over in the
        meantime keeps the state that others gave it (``JobQueue.end_job`` writes
        nothing then)."""
        return self.database.end_job(job.id, self.name, status, error=error)

    def _run_workloads(self, job: Job, request: JobRequest) -> None:
        """A job of operator specs: its tasks one after another, the finished skipped."""
        for row, (spec, _) in zip(job.tasks, request.task_specs(), strict=True):
            if self._should_stop(job.id):
                return
            if row.status is not JobStatus.DONE:
                self._run_task(job.id, row, TuneTask.from_spec(spec, row.target), request)

    def _run_task(self, job_id: int, row: JobTask, task: TuneTask, request: JobRequest) -> None:
        self.database.update_task(row.id, status=JobStatus.RUNNING)
        space = choose_space(request.space, task.func, target=task.target, seed=request.seed)
        result = tune(
            task,
            database=self.database,
            workers=self.workers,
            options=request.options(row.trials_asked),
            progress=_TaskProgress(self.database, row, task),
            space=space,
            should_stop=lambda: self._should_stop(job_id),
            job_id=job_id,
        )
        ended = JobStatus.DONE
        if result.stop_reason == "cancelled":
            ended = JobStatus.CANCELLED if self._cancelled(job_id) else JobStatus.QUEUED
        top = result.best[0] if result.best else None
        best = None if top is None else top.seconds or top.search_seconds
        self.database.update_task(
            row.id,
            status=ended,
            trials_done=result.restored + result.measured,
            best_seconds=best,
        )

    def _run_model(self, job: Job, request: JobRequest, model_id: int) -> None:
        """A model job: its tasks share the budget in rounds (``tuner.model_tune``), each
        round's outcome written to the task rows."""
        rows = {(row.workload_key, row.target): row for row in job.tasks}
        tasks = model_tasks(self.database, model_id, job.tasks[0].target)
        tuned = [task for task in tasks if (task.task.workload_key, task.task.target) in rows]
        for row in job.tasks:
            self.database.update_task(row.id, status=JobStatus.RUNNING)

        written: dict[int, TaskState] = {}

        def record(progress: ModelTuneResult) -> None:
            """Write the rows of the tasks that changed (a round changes one)."""
            for task in progress.tasks:
                row = rows[(task.task.task.workload_key, task.task.task.target)]
                if written.get(row.id) == task.state:
                    continue
                written[row.id] = task.state
                self.database.update_task(
                    row.id, trials_done=task.state.trials, best_seconds=task.state.best_seconds
                )

        options = ModelTuneOptions(
            trials=request.trials,
            scheduler=request.scheduler,
            tuner=request.tuner,
            seed=request.seed,
        )
        record(
            tune_model(
                tuned,
                database=self.database,
                workers=self.workers,
                options=options,
                on_round=record,
                should_stop=lambda: self._should_stop(job.id),
                job_id=job.id,
            )
        )
        if not self._should_stop(job.id):
            for row in job.tasks:
                self.database.update_task(row.id, status=JobStatus.DONE)

    @contextmanager
    def _beating(self, job_id: int) -> Iterator[None]:
        """Beat for the job until the block ends; a refused beat (the job was
        cancelled or taken over) marks it lost, which stops the run. So do beats that
        fail for half of ``stale_after``, before another coordinator may take the job
        over; a beat that fails once is tried again at the next."""
        done = threading.Event()
        self._lost.clear()

        def beat() -> None:
            beaten = time.monotonic()
            while not done.wait(self.HEARTBEAT.total_seconds()):
                try:
                    alive = self.database.beat(job_id, self.name)
                except TRANSIENT as err:
                    logger.warning("job %d: a heartbeat failed: %s", job_id, err)
                    alive = time.monotonic() - beaten < self.stale_after.total_seconds() / 2
                else:
                    beaten = time.monotonic() if alive else beaten
                if not alive:
                    self._lost.set()
                    return

        beating = threading.Thread(target=beat, name=f"heartbeat of job {job_id}", daemon=True)
        beating.start()
        try:
            yield
        finally:
            done.set()
            beating.join()

    def _should_stop(self, job_id: int) -> bool:
        return self.stopping.is_set() or self._lost.is_set() or self._cancelled(job_id)

    def _cancelled(self, job_id: int) -> bool:
        return self.database.job(job_id).status is JobStatus.CANCELLED


class _TaskProgress(Progress):
    """Progress written to the task's row instead of a terminal."""

    def __init__(self, database: JobQueue, row: JobTask, task: TuneTask) -> None:
        super().__init__(row.trials_asked, label=repr(task))
        self.database = database
        self.row = row
        self.flop_count = task.flop_count

    def update(self, done: int, best_gflops: float | None, errors: int) -> None:
        self.done, self.best_gflops, self.errors = done, best_gflops, errors
        best = None if not best_gflops else self.flop_count / (best_gflops * 1e9)
        self.database.update_task(self.row.id, trials_done=done, best_seconds=best)

    def finish(self) -> None:
        """Nothing to end: no line was drawn."""
