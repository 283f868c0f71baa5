"""The local backend: a pool of builder processes and one runner process.

Builders run in parallel, one child process per core; the runner is a single
child that measures one candidate at a time, so candidates do not disturb each
other's timings (candidates of a cuda target go to a second one, started at the
first of them, that holds the GPU). Children start in the background when the
backend is made (it returns in milliseconds); a child that crashes or passes its
deadline is killed and replaced, and the candidate it held gets one record saying
so. So is a runner that reports a CRASHED candidate itself: a GPU kernel that
faulted has left its process's CUDA context unusable.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque
from collections.abc import Iterator, Sequence
from multiprocessing.connection import wait

from compiler.errors import ErrorKind
from workers.base import (
    BUILD_FUNCTION,
    GPU_MEASURER,
    MEASURER,
    RUNNER_ENV,
    Builder,
    BuildResult,
    Candidate,
    MeasureConfig,
    Runner,
    RunResult,
    Workers,
    WorkersError,
    load_hook,
)
from workers.hosts import is_gpu_target
from workers.process import Died, Reply, TimedOut, WorkerProcess


def create_local(
    *,
    max_workers: int | None = None,
    build_timeout_s: float = 30.0,
    config: MeasureConfig | None = None,
    candidates_per_process: int = 500,
    build_function: str = BUILD_FUNCTION,
    measurer: str = MEASURER,
    gpu_measurer: str = GPU_MEASURER,
) -> Workers:
    """``max_workers`` builder processes (default: one per core), each build bounded by
    ``build_timeout_s``; one runner measuring as ``config`` says, replaced after
    ``candidates_per_process`` candidates. ``build_function``, ``measurer`` and
    ``gpu_measurer`` name the code the processes run (see ``workers.base.load_hook``)."""
    builder = LocalBuilder(
        max_workers=max_workers, timeout_s=build_timeout_s, build_function=build_function
    )
    runner = LocalRunner(
        config=config,
        candidates_per_process=candidates_per_process,
        measurer=measurer,
        gpu_measurer=gpu_measurer,
    )
    return Workers(builder, runner)


class LocalBuilder(Builder):
    """``max_workers`` builder processes (default: one per core); ``timeout_s`` bounds
    each candidate's build, including a fresh process's start-up; ``build_function``
    names what the processes call on each candidate."""

    def __init__(
        self,
        *,
        max_workers: int | None = None,
        timeout_s: float = 30.0,
        build_function: str = BUILD_FUNCTION,
    ) -> None:
        count = max_workers if max_workers is not None else (os.cpu_count() or 1)
        if count < 1:
            raise ValueError(f"LocalBuilder: max_workers must be at least 1, got {count}")
        if not timeout_s > 0:
            raise ValueError(f"LocalBuilder: timeout_s must be positive, got {timeout_s}")
        load_hook(build_function)
        self.timeout_s = timeout_s
        self._workers = [WorkerProcess("build", build_function) for _ in range(count)]

    def stream(self, candidates: Sequence[Candidate]) -> Iterator[tuple[int, BuildResult]]:
        pending = deque(enumerate(candidates))
        busy: dict[WorkerProcess, tuple[int, float]] = {}
        try:
            while pending or busy:
                for worker in self._workers:
                    if worker not in busy and pending:
                        index, candidate = pending.popleft()
                        request = {"op": "build", "candidate": candidate.to_json()}
                        if not worker.send(request):
                            worker.replace()
                            worker.send(request)
                        busy[worker] = (index, time.monotonic() + self.timeout_s)
                yield from self._collect(busy, candidates)
        finally:
            for worker in busy:
                worker.replace()

    def _collect(
        self, busy: dict[WorkerProcess, tuple[int, float]], candidates: Sequence[Candidate]
    ) -> Iterator[tuple[int, BuildResult]]:
        """Wait for the first reply or deadline; yield what finished and free its worker."""
        now = time.monotonic()
        timeout = max(0.0, min(deadline for _, deadline in busy.values()) - now)
        ready = set(wait([w.connection for w in busy], timeout))
        for worker in list(busy):
            index, deadline = busy[worker]
            candidate = candidates[index]
            if worker.connection in ready:
                outcome = worker.receive()
                if isinstance(outcome, Reply):
                    result = BuildResult.from_header(outcome.header, outcome.payload)
                else:
                    worker.replace()
                    message = f"the builder process died ({outcome.how}) building this candidate"
                    result = BuildResult.failed(candidate, ErrorKind.CRASHED, message)
            elif time.monotonic() >= deadline:
                worker.replace()
                message = (
                    f"building took longer than {self.timeout_s:g} s; the builder was replaced"
                )
                result = BuildResult.failed(candidate, ErrorKind.TIMEOUT, message)
            else:
                continue
            del busy[worker]
            yield index, result

    def close(self) -> None:
        for worker in self._workers:
            worker.close()


class LocalRunner(Runner):
    """One runner process that checks and times candidates one at a time. It is
    replaced after ``candidates_per_process`` candidates, since a process keeps
    every library it has loaded mapped until it ends. ``measurer`` names the class
    that measures in the process; ``gpu_measurer`` the one of the process that
    measures candidates of a cuda target, on the first GPU it sees."""

    def __init__(
        self,
        *,
        config: MeasureConfig | None = None,
        candidates_per_process: int = 500,
        measurer: str = MEASURER,
        gpu_measurer: str = GPU_MEASURER,
    ) -> None:
        if candidates_per_process < 1:
            raise ValueError(
                f"LocalRunner: candidates_per_process must be at least 1, got "
                f"{candidates_per_process}"
            )
        self.config = config or MeasureConfig()
        self.candidates_per_process = candidates_per_process
        load_hook(measurer)
        load_hook(gpu_measurer)
        self._worker = WorkerProcess("run", measurer, RUNNER_ENV)
        self._gpu_measurer = gpu_measurer
        self._gpu_env = {**os.environ, **RUNNER_ENV}  # the GPU process starts later
        self._gpu_worker: WorkerProcess | None = None

    def stream(self, builds: Sequence[BuildResult]) -> Iterator[tuple[int, RunResult]]:
        for index, build in enumerate(builds):
            yield index, self._measure(build)

    def _measure(self, build: BuildResult) -> RunResult:
        if not build.ok:
            return RunResult.from_build(build)
        config = self.config.to_json()
        candidate = build.candidate
        worker = self._worker_for(candidate)
        if worker.served >= self.candidates_per_process:
            worker.replace()
        worker.served += 1
        if candidate.reference_key not in worker.prepared:
            request = {"op": "prepare", "candidate": candidate.to_json(), "config": config}
            outcome = worker.call(request, None, self.config.reference_timeout_s)
            if not isinstance(outcome, Reply):
                return _fault_result(candidate, outcome, "computing the workload's reference")
            worker.prepared.add(candidate.reference_key)
        request = {"op": "measure", "build": build.header(), "config": config}
        assert build.artifact is not None
        outcome = worker.call(request, build.artifact.library, self.config.timeout_s)
        if not isinstance(outcome, Reply):
            return _fault_result(candidate, outcome, "running the candidate")
        result = RunResult.from_json(outcome.header)
        if result.error_kind is ErrorKind.CRASHED:
            worker.replace()
        return result

    def check_target(self, target: str) -> None:
        """A cuda target needs the cuda extra and its GPU architecture on this host
        (device 0 of those ``CUDA_VISIBLE_DEVICES`` leaves visible)."""
        if not is_gpu_target(target):
            return
        from compiler.runtime import cuda_driver
        from compiler.target.cuda import CudaTarget

        wanted = CudaTarget.parse(target).arch
        cuda_driver.require_bindings()
        reason = cuda_driver.cuda_available()
        if reason is None:
            found = cuda_driver.device_arch(0)
            if found == wanted:
                return
            reason = f"its GPU is {found}"
        raise WorkersError(
            f"the local workers cannot measure for {target!r}: {reason.rstrip('.')}; tune on "
            f"a host with an {wanted} GPU, or with --workers ray on a cluster with one "
            f"(tensortune ray-node --target 'cuda -arch={wanted}' --num-gpus 1)"
        )

    def _worker_for(self, candidate: Candidate) -> WorkerProcess:
        if not is_gpu_target(candidate.target):
            return self._worker
        if self._gpu_worker is None:
            self._gpu_worker = WorkerProcess("run", self._gpu_measurer, self._gpu_env)
        return self._gpu_worker

    def close(self) -> None:
        self._worker.close()
        if self._gpu_worker is not None:
            self._gpu_worker.close()


def _fault_result(candidate: Candidate, outcome: Died | TimedOut, step: str) -> RunResult:
    if isinstance(outcome, TimedOut):
        message = f"{step} took longer than {outcome.seconds:g} s; the runner process was replaced"
        return RunResult.failed(candidate, ErrorKind.TIMEOUT, message, socket.gethostname())
    message = f"the runner process died ({outcome.how}) {step}; it was replaced"
    return RunResult.failed(candidate, ErrorKind.CRASHED, message, socket.gethostname())
