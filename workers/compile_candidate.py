"""Building one candidate, in whatever process a backend runs it: replay the trace on
the workload, compile, link a shared library, and return its bytes (for a cuda
target, the GPUBinary's JSON).

A builder process builds many candidates of a few workloads, so it parses each
workload's JSON once (``WORKLOADS_KEPT`` of them): a convolution of a model is
62 kB of JSON and milliseconds to parse. The parsed function is never changed (a
schedule makes new functions), so the candidates can share it."""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time

import compiler
from compiler.abi.signature import FuncSignature
from compiler.build import build_cuda, build_llvm
from compiler.errors import CompilerError, ErrorKind
from compiler.ir import IRModule, PrimFunc
from compiler.runtime import Module
from compiler.runtime.cuda_module import entry_name
from compiler.schedule.trace import Trace
from compiler.workload.key import workload_from_json
from workers.base import Artifact, BuildResult, Candidate
from workers.gpu_measure import encode_binary
from workers.hosts import is_gpu_target

WORKLOADS_KEPT = 8


def build_candidate(candidate: Candidate) -> BuildResult:
    """The candidate's artifact, a BUILD_ERROR when the compiler refuses it (any
    ``CompilerError``: an illegal trace, a malformed workload), or an INTERNAL error
    when anything else is raised, which is a bug of tensortune's.

    This is an isolation boundary: any exception becomes the candidate's record,
    because a compiler bug met by one candidate must not take the batch down with it.
    """
    start = time.perf_counter()
    try:
        artifact = _build(candidate)
    except CompilerError as err:
        return _failed(candidate, ErrorKind.BUILD_ERROR, err, start)
    except Exception as err:  # see the docstring
        return _failed(candidate, ErrorKind.INTERNAL, err, start)
    return BuildResult(candidate, artifact, seconds=time.perf_counter() - start)


def _failed(candidate: Candidate, kind: ErrorKind, err: Exception, start: float) -> BuildResult:
    message = f"{type(err).__name__}: {err}"
    return BuildResult.failed(candidate, kind, message, time.perf_counter() - start)


def _build(candidate: Candidate) -> Artifact:
    func = _workload(candidate.workload)
    trace = Trace.from_json(candidate.trace)
    sch = compiler.Schedule(func)
    trace.apply_to_schedule(sch)
    if is_gpu_target(candidate.target):
        return _build_gpu(sch.mod, candidate.target)
    module = build_llvm(sch.mod, target=candidate.target)
    function = module.entry_name
    return Artifact(_library_bytes(module), function, _signature_text(module[function].signature))


@functools.lru_cache(maxsize=WORKLOADS_KEPT)
def _workload(text: str) -> PrimFunc:
    return workload_from_json(text)


def _build_gpu(mod: IRModule, target: str) -> Artifact:
    binary = build_cuda(mod, target=target)
    function = entry_name(binary)
    signature = FuncSignature.from_prim_func(function, function, mod[function])
    return Artifact(encode_binary(binary), function, _signature_text(signature))


def _signature_text(signature: FuncSignature) -> str:
    return json.dumps(signature.to_json(), sort_keys=True, separators=(",", ":"))


def _library_bytes(module: Module) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tensortune-build-") as tmp:
        path = os.path.join(tmp, "candidate.so")
        module.export_library(path)
        with open(path, "rb") as f:
            return f.read()
