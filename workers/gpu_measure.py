"""Checking and timing a candidate built for a CUDA target, on the GPU of its process.

Where a CPU candidate's artifact carries a shared library, a cuda candidate's
carries its GPUBinary as JSON (``encode_binary``), and ``GPUMeasurer`` stands in
for ``workers.measure.Measurer``: the same references (inputs, expected outputs,
tolerances), the same steps (load, run once and check, then time with a cutoff and
a deadline), with the kernels timed by CUDA events on the device.

One process serves one GPU: device 0 of those it sees (Ray sets
``CUDA_VISIBLE_DEVICES`` for an actor that holds a GPU; set it yourself for the
local runner). A kernel that faults (an illegal address, a failed launch) poisons
the process's CUDA context for good, so the measurer records it as CRASHED, and a
runner that gets a CRASHED result replaces the process before the next candidate.
A kernel that hangs is the runner's deadline, as on the CPU.
"""

from __future__ import annotations

import json
import time
from functools import partial

from compiler.abi.signature import FuncSignature
from compiler.errors import ErrorKind
from compiler.runtime.cuda_driver import PrimaryContext, device_arch, lost_context
from compiler.runtime.cuda_module import CudaModule
from compiler.runtime.gpu_binary import GPUBinary, GPUFunction
from compiler.target.cuda import CudaTarget
from workers.base import BuildResult, Candidate, MeasureConfig, RunResult
from workers.check import Reference
from workers.measure import REFERENCE_BYTES, TIMING_SHARE, Measurer, time_in_steps


def encode_binary(binary: GPUBinary) -> bytes:
    """The bytes a cuda candidate's artifact carries in place of a shared library."""
    return json.dumps(binary.to_json(), sort_keys=True, separators=(",", ":")).encode()


def decode_binary(data: bytes) -> GPUBinary:
    return GPUBinary.from_json(json.loads(data))


def signature_mismatch(function: GPUFunction, signature: FuncSignature) -> str | None:
    """Why ``function`` cannot run on the arguments of ``signature`` (the workload's
    reference), or None: the same number of parameters, each of the same shape and
    dtype, in the same order."""
    expected = [(p.name, tuple(p.shape), p.dtype) for p in signature.params]
    got = [(p.name, p.shape, p.dtype) for p in function.params]
    if len(got) != len(expected):
        return (
            f"the GPU function {function.name!r} takes {len(got)} parameters and the "
            f"workload has {len(expected)}"
        )
    for (name, shape, dtype), spec in zip(expected, function.params, strict=True):
        if (spec.shape, spec.dtype) != (shape, dtype):
            return (
                f"the GPU function {function.name!r} takes {spec.name!r} as {spec.dtype} "
                f"{spec.shape}; the workload's parameter {name!r} is {dtype} {shape}"
            )
    return None


class GPUMeasurer(Measurer):
    """Measures cuda candidates on GPU ``device`` (default 0) of this process.

    The device's primary context is kept from the first candidate on, so each
    candidate costs loading its module, not creating a context."""

    def __init__(
        self, *, host: str, reference_bytes: int = REFERENCE_BYTES, device: int = 0
    ) -> None:
        super().__init__(host=host, reference_bytes=reference_bytes)
        self.device = device
        self._context: PrimaryContext | None = None

    def measure(self, build: BuildResult, config: MeasureConfig) -> RunResult:
        """Decode the binary, check that it fits the workload and this GPU, then run
        it, check it and time it (``_run``)."""
        started = time.monotonic()
        candidate = build.candidate
        reference = self.reference_for(build, config)
        if isinstance(reference, RunResult):
            return reference
        assert build.artifact is not None
        try:
            binary = decode_binary(build.artifact.library)
            function = binary.function(build.artifact.function)
            unfit = self._unfit(candidate.target, binary, function, reference)
            if unfit is not None:
                return self._failed(candidate, ErrorKind.RUN_ERROR, unfit)
            deadline = started + TIMING_SHARE * config.timeout_s
            return self._run(candidate, binary, function.name, reference, config, deadline)
        except Exception as err:  # one candidate's failure is its record
            return self._raised(candidate, err)

    def _run(
        self,
        candidate: Candidate,
        binary: GPUBinary,
        name: str,
        reference: Reference,
        config: MeasureConfig,
        deadline: float,
    ) -> RunResult:
        """Run once and check the outputs, then time as ``Measurer.measure`` does, except
        that a cutoff is judged on a second, warm run: the first may pay for loading
        the kernels."""
        arrays = reference.fresh_arguments()
        with CudaModule(binary, self.device) as module, module[name].bind(arrays) as call:
            check_seconds = call.run()
            call.read_back(arrays)
            mismatch = reference.mismatch(arrays, config.tolerance)
            if mismatch is not None:
                return self._failed(candidate, ErrorKind.WRONG_RESULT, mismatch)
            cutoff = candidate.cutoff_seconds
            if cutoff is not None and check_seconds > cutoff and (warm := call.run()) > cutoff:
                return RunResult(candidate, (warm,), 1, worker_host=self.host)
            flush_bytes = config.flush_bytes if config.flush_cache else 0
            loops = partial(call.time, flush_bytes=flush_bytes)
            timing = time_in_steps(loops, config, cutoff, deadline=deadline)
        return RunResult(candidate, timing.results, timing.number, worker_host=self.host)

    def _raised(self, candidate: Candidate, err: Exception) -> RunResult:
        """The record of a candidate that raised: CRASHED when it poisoned the context
        (the runner then replaces this process), else RUN_ERROR."""
        lost = lost_context()
        if lost is None:
            return self._failed(candidate, ErrorKind.RUN_ERROR, f"{type(err).__name__}: {err}")
        message = (
            f"the kernel faulted the GPU context ({lost}); the context cannot be used again, "
            "so the runner process is replaced"
        )
        return self._failed(candidate, ErrorKind.CRASHED, message)

    def _unfit(
        self, target: str, binary: GPUBinary, function: GPUFunction, reference: Reference
    ) -> str | None:
        """Why the binary must not run here, or None: built for another architecture
        than its target, not taking the workload's arguments, or this GPU not being
        of the target's kind (a time is never taken on the wrong kind of host)."""
        arch = CudaTarget.parse(target).arch
        if binary.arch != arch:
            return (
                f"the binary is built for {binary.arch}, but the candidate's target is {target!r}"
            )
        mismatch = signature_mismatch(function, reference.signature)
        if mismatch is not None:
            return mismatch
        present = self._device_arch()
        if present != arch:
            return (
                f"this runner's GPU {self.device} is {present}, not {arch}: measure the "
                f"candidate on a host of its kind (Ray with route_by_target and a node started "
                f"with --target 'cuda -arch={arch}', or CUDA_VISIBLE_DEVICES naming such a GPU)"
            )
        return None

    def _device_arch(self) -> str:
        if self._context is None:
            self._context = PrimaryContext(self.device)
        return device_arch(self.device)
