"""A GPU measurer that needs no GPU, for the tests of how the workers route and
isolate candidates of a cuda target; the backends run it in place of
``workers.gpu_measure.GPUMeasurer`` (its folder on PYTHONPATH where they run).

It answers as GPUMeasurer does without touching a device: a candidate annotated
with ``Fault.CRASH`` gets the CRASHED record of a kernel that faulted the GPU
context, one with ``Fault.HANG`` never returns (as a hung kernel's synchronize),
any other is measured at 1 ms. Each result's ``worker_host`` names the process and
the GPUs it was given, so a test sees which process measured what.
"""

from __future__ import annotations

import os
import re

from faulty_workers import Fault, hang, requested

from compiler.errors import ErrorKind
from workers.base import Artifact, BuildResult, Candidate, MeasureConfig, RunResult
from workers.gpu_measure import GPUMeasurer

GPU_STUB = "gpu_workers:StubGPUMeasurer"
CUDA_TARGET = "cuda -arch=sm_80"
_WHO = re.compile(r"pid=(\d+) gpus=(\S*)")


class StubGPUMeasurer(GPUMeasurer):
    def measure(self, build: BuildResult, config: MeasureConfig) -> RunResult:
        fault, _ = requested(build.candidate)
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        host = f"{self.host} pid={os.getpid()} gpus={gpus}"
        if fault is Fault.HANG:
            hang()
        if fault is Fault.CRASH:
            message = "the kernel faulted the GPU context (simulated)"
            return RunResult.failed(build.candidate, ErrorKind.CRASHED, message, host)
        return RunResult(build.candidate, (1e-3,), 1, worker_host=host)


def stub_build(candidate: Candidate) -> BuildResult:
    """A build of ``candidate`` whose artifact only the stub measurer accepts."""
    return BuildResult(candidate, Artifact(b"{}", "main", "{}"))


def measured_by(result: RunResult) -> tuple[int, str]:
    """The process id and CUDA_VISIBLE_DEVICES of the stub that measured ``result``."""
    found = _WHO.search(result.worker_host)
    assert found is not None, result
    return int(found[1]), found[2]
