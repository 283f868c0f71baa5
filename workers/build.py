"""Building one candidate, in whatever process a backend runs it: replay the trace on
the workload, compile, link a shared library, and return its bytes."""

from __future__ import annotations

import json
import os
import tempfile
import time

import compiler
from compiler.runtime import Module
from compiler.schedule.trace import Trace
from compiler.workload_key import workload_from_json
from workers.base import Artifact, BuildResult, Candidate, ErrorKind
from workers.faults import BUILD_FAULTS, requested_fault, trigger


def build_candidate(candidate: Candidate, *, faults: bool = False) -> BuildResult:
    """The candidate's artifact, or a BUILD_ERROR naming what failed.

    This is an isolation boundary: any exception, not only ScheduleError or
    WorkloadError, becomes the candidate's record, because a compiler bug met by
    one candidate must not take the batch down with it. ``faults`` enables the
    test-only hook of ``workers.faults``.
    """
    start = time.perf_counter()
    try:
        artifact = _build(candidate, faults)
    except Exception as err:  # noqa: BLE001 - see the docstring
        message = f"{type(err).__name__}: {err}"
        return BuildResult.failed(
            candidate, ErrorKind.BUILD_ERROR, message, time.perf_counter() - start
        )
    return BuildResult(candidate, artifact, seconds=time.perf_counter() - start)


def _build(candidate: Candidate, faults: bool) -> Artifact:
    func = workload_from_json(candidate.workload)
    trace = Trace.from_json(candidate.trace)
    sch = compiler.Schedule(func)
    trace.apply_to_schedule(sch)
    if faults:
        fault = requested_fault(candidate.trace)
        if fault in BUILD_FAULTS:
            trigger(fault)
    module = compiler.build(sch.mod, target=candidate.target)
    function = module.entry_name
    signature = module[function].signature.to_json()
    signature_text = json.dumps(signature, sort_keys=True, separators=(",", ":"))
    return Artifact(_library_bytes(module), function, signature_text)


def _library_bytes(module: Module) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tensortune-build-") as tmp:
        path = os.path.join(tmp, "candidate.so")
        module.export_library(path)
        with open(path, "rb") as f:
            return f.read()
