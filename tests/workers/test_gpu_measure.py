"""The GPU path of the workers: a cuda candidate's artifact (its GPUBinary as bytes),
the measurer that checks and times it, and how the backends isolate it.

Without a GPU: the artifact's round trip, the checks the measurer makes before it
touches a device, and the backends' routing and isolation with the stub measurer
of ``gpu_workers`` (a simulated context fault, a real hang, in real processes; on
Ray, real actors given fake GPUs). On a GPU host, real kernels through the real
runner: checked against the reference, timed, a wrong one, a fault and a hang.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from faulty_workers import TESTS_FOLDER, Fault
from gpu_kernels import N, binary, one_kernel, reverse_workload
from gpu_workers import CUDA_TARGET, GPU_STUB, measured_by, stub_build
from ray_cluster import isolation_unavailable, run_scenarios
from worker_candidates import TEST_CONFIG, kinds, matmul_candidate

import workers
from compiler import Schedule
from compiler.abi.signature import FuncSignature
from compiler.errors import ErrorKind
from compiler.runtime.cuda_driver import cuda_available, device_arch
from compiler.runtime.gpu_binary import BufferSpec, GPUBinary, GPUFunction
from workers import Artifact, BuildResult, Candidate, Workers
from workers.compile_candidate import build_candidate
from workers.gpu_measure import GPUMeasurer, decode_binary, encode_binary, signature_mismatch
from workers.hosts import host_resource

pytest.importorskip(
    "cuda.bindings.nvjitlink", reason="needs the cuda extra: pip install 'tensortune[cuda]'"
)

NO_DEVICE = cuda_available()
needs_gpu = pytest.mark.skipif(
    NO_DEVICE is not None, reason=f"running kernels needs a CUDA GPU: {NO_DEVICE}"
)
# A hang costs a candidate this deadline; long enough for a real check and timing.
GPU_CONFIG = dataclasses.replace(TEST_CONFIG, timeout_s=5.0)
NODE_ENV = {"PYTHONPATH": os.pathsep.join([TESTS_FOLDER, os.environ.get("PYTHONPATH", "")])}
RAY_TIMEOUT_S = 240


def reverse_candidate(arch: str = "sm_80") -> Candidate:
    func = reverse_workload()
    return Candidate.make(func, Schedule(func).trace, target=f"cuda -arch={arch}")


def gpu_build(arch: str = "sm_80", kernel: str = "reverse") -> BuildResult:
    """The reverse workload's candidate with a binary whose "main" runs ``kernel``."""
    candidate = reverse_candidate(arch)
    built = binary(arch)
    chosen = GPUBinary(built.arch, built.ptx, built.cubin, (one_kernel("main", kernel),))
    signature = FuncSignature.from_prim_func("main", "main", reverse_workload()).to_json()
    artifact = Artifact(encode_binary(chosen), "main", json.dumps(signature))
    return BuildResult(candidate, artifact)


# ---- the artifact and the checks before any device work -------------------------------------


def test_a_gpu_artifact_crosses_a_process_as_bytes() -> None:
    build = gpu_build()
    assert build.artifact is not None
    header = json.loads(json.dumps(build.header()))
    again = BuildResult.from_header(header, build.artifact.library)
    assert again == build
    assert decode_binary(build.artifact.library).cubin == binary("sm_80").cubin


def test_the_build_step_makes_a_gpu_artifact() -> None:
    """An unscheduled candidate gets the default GPU schedule: a real binary for the
    candidate's architecture, its launch plan, and the workload's signature."""
    result = build_candidate(reverse_candidate("sm_90"))
    assert result.ok, result.error
    assert result.artifact is not None and result.artifact.function == "main"
    built = decode_binary(result.artifact.library)
    assert built.arch == "sm_90" and built.cubin and ".target sm_90" in built.ptx
    (launch,) = built.function("main").kernels
    assert launch.block[0] > 1
    signature = json.loads(result.artifact.signature)
    assert [p["name"] for p in signature["params"]] == ["A", "B"]


def test_a_function_that_does_not_take_the_workloads_arguments_is_named() -> None:
    signature = FuncSignature.from_prim_func("main", "main", reverse_workload())
    assert signature_mismatch(one_kernel("main", "reverse"), signature) is None
    short = GPUFunction("main", (BufferSpec("A", (N,), "float32"),), (), ())
    assert "takes 1 parameters and the workload has 2" in str(signature_mismatch(short, signature))
    wide = dataclasses.replace(
        one_kernel("main", "reverse"),
        params=(BufferSpec("A", (N,), "float32"), BufferSpec("out", (N,), "float64")),
    )
    problem = signature_mismatch(wide, signature)
    assert problem is not None and "'out' as float64" in problem and "'B' is float32" in problem


def test_the_measurer_refuses_a_binary_that_cannot_fit_before_using_a_device() -> None:
    measurer = GPUMeasurer(host="here")
    wrong_arch = dataclasses.replace(gpu_build("sm_90"), candidate=reverse_candidate("sm_80"))
    result = measurer.measure(wrong_arch, GPU_CONFIG)
    assert result.error_kind is ErrorKind.RUN_ERROR
    assert "built for sm_90" in str(result.error) and CUDA_TARGET in str(result.error)
    build = gpu_build()
    assert build.artifact is not None
    other = GPUBinary("sm_80", "", b"", (GPUFunction("main", (), (), ()),))
    unfit = dataclasses.replace(
        build, artifact=dataclasses.replace(build.artifact, library=encode_binary(other))
    )
    result = measurer.measure(unfit, GPU_CONFIG)
    assert result.error_kind is ErrorKind.RUN_ERROR and "takes 0 parameters" in str(result.error)


@pytest.mark.skipif(NO_DEVICE is None, reason="this host has a usable GPU")
def test_without_a_device_a_gpu_candidate_is_a_run_error_saying_why() -> None:
    result = GPUMeasurer(host="here").measure(gpu_build(), GPU_CONFIG)
    assert result.error_kind is ErrorKind.RUN_ERROR
    assert str(NO_DEVICE) in str(result.error)


# ---- routing and isolation on the local backend, with the stub measurer ---------------------


@pytest.fixture(scope="module")
def stub_local() -> Iterator[Workers]:
    """Local workers whose GPU runner process runs the stub measurer."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", NODE_ENV["PYTHONPATH"])
        backend = workers.create("local", max_workers=1, config=GPU_CONFIG, gpu_measurer=GPU_STUB)
    with backend:
        yield backend


def gpu_candidate(seed: int = 0, fault: Fault | None = None) -> Candidate:
    return dataclasses.replace(matmul_candidate(seed, fault), target=CUDA_TARGET)


def test_cuda_candidates_go_to_a_gpu_process_of_their_own(stub_local: Workers) -> None:
    cpu = stub_local.builder.build([matmul_candidate(0)])
    builds = [stub_build(gpu_candidate(1)), *cpu, stub_build(gpu_candidate(2))]
    results = stub_local.runner.run(builds)
    assert kinds(results) == [None, None, None], [r.error for r in results]
    assert results[1].worker_host == socket.gethostname()  # the CPU runner: no stub
    assert measured_by(results[0])[0] == measured_by(results[2])[0] != os.getpid()


def test_a_faulted_gpu_context_costs_one_record_and_its_process(stub_local: Workers) -> None:
    candidates = [gpu_candidate(0), gpu_candidate(1, Fault.CRASH), gpu_candidate(2)]
    results = stub_local.runner.run([stub_build(c) for c in candidates])
    assert kinds(results) == [None, ErrorKind.CRASHED, None]
    first, faulted, after = (measured_by(r)[0] for r in results)
    assert first == faulted != after


def test_a_hung_gpu_kernel_times_out_and_the_next_runs(stub_local: Workers) -> None:
    candidates = [gpu_candidate(0), gpu_candidate(1, Fault.HANG), gpu_candidate(2)]
    results = stub_local.runner.run([stub_build(c) for c in candidates])
    assert kinds(results) == [None, ErrorKind.TIMEOUT, None]
    assert f"{GPU_CONFIG.timeout_s:g} s" in str(results[1].error)
    assert measured_by(results[0])[0] != measured_by(results[2])[0]


@pytest.mark.skipif(NO_DEVICE is None, reason="this host has a usable GPU")
def test_without_a_device_the_gpu_runner_process_says_why() -> None:
    with workers.create("local", max_workers=1, config=GPU_CONFIG) as backend:
        (result,) = backend.runner.run([gpu_build()])
    assert result.error_kind is ErrorKind.RUN_ERROR and "driver" in str(result.error)


# ---- on Ray: one actor per GPU, each holding it ---------------------------------------------


def gpu_runners_hold_one_gpu_each(cluster: Any) -> None:
    """Ray on one node with two (fake) GPUs, marked as a host of CUDA_TARGET: two GPU
    runners, one per GPU, each holding it and half the node's host-kind resource; a
    faulted context ends its actor's process and the batch goes on."""
    import ray

    resource = host_resource(CUDA_TARGET)
    ray.init(num_cpus=2, num_gpus=2, resources={resource: 1}, include_dashboard=False)
    try:
        backend = workers.create(
            "ray", route_by_target=True, config=GPU_CONFIG, gpu_measurer=GPU_STUB
        )
        candidates = [gpu_candidate(s) for s in range(4)]
        candidates.insert(2, gpu_candidate(9, Fault.CRASH))
        with backend:
            results = backend.runner.run([stub_build(c) for c in candidates])
            hosts = backend.runner.hosts  # type: ignore[attr-defined]
            available = ray.available_resources()
    finally:
        ray.shutdown()
    assert kinds(results) == [None, None, ErrorKind.CRASHED, None, None], [r.error for r in results]
    assert sorted(host[-5:] for host in hosts) == ["/gpu0", "/gpu1"]
    assert {measured_by(r)[1] for r in results} == {"0", "1"}
    assert available.get("GPU", 0) == 0 and available.get(resource, 0) == 0
    faulted = measured_by(results[2])[0]
    deadline = time.monotonic() + 30
    while _alive(faulted):
        assert time.monotonic() < deadline, "the faulted actor's process still runs"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_on_ray_each_gpu_runner_holds_one_gpu() -> None:
    reason = isolation_unavailable()
    if reason is not None:
        pytest.skip(f"Ray tests need a private network namespace: {reason}")
    outcomes = run_scenarios(
        __file__, "gpu_runners_", worker_nodes=None, timeout_s=RAY_TIMEOUT_S, env=NODE_ENV
    )
    log = outcomes["_log"]
    outcome = outcomes.get("gpu_runners_hold_one_gpu_each")
    assert outcome is not None, f"the scenario did not run\n{log['stdout']}\n{log['stderr']}"
    assert outcome["ok"], outcome["error"]


# ---- on a GPU: real kernels through the real runner -----------------------------------------


@needs_gpu
def test_gpu_candidates_are_checked_timed_and_isolated() -> None:
    arch = device_arch(0)
    builds = [
        gpu_build(arch),
        gpu_build(arch, "double"),
        gpu_build(arch, "fault"),
        gpu_build(arch),
        gpu_build(arch, "hang"),
        gpu_build(arch),
    ]
    cut = dataclasses.replace(
        builds[0], candidate=dataclasses.replace(builds[0].candidate, cutoff_seconds=1e-12)
    )
    with workers.create("local", max_workers=1, config=GPU_CONFIG) as backend:
        results = backend.runner.run([*builds, cut])
    expected = [
        None,
        ErrorKind.WRONG_RESULT,
        ErrorKind.CRASHED,
        None,
        ErrorKind.TIMEOUT,
        None,
        None,
    ]
    assert kinds(results) == expected, [r.error for r in results]
    for ok in (results[0], results[3], results[5]):
        assert len(ok.run_times) == GPU_CONFIG.repeat and all(0 < t < 1e-2 for t in ok.run_times)
    assert "output 'B'" in str(results[1].error)
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in str(results[2].error)
    assert len(results[6].run_times) == 1  # past the cutoff at the run that checked it
    assert np.isfinite(results[6].run_times[0])


@pytest.mark.skipif(NO_DEVICE is None, reason="this host has a GPU")
def test_tuning_for_a_gpu_without_one_stops_before_any_record() -> None:
    """Without the target's GPU the local workers refuse the run up front, naming the
    reason and where to measure instead, and the database stays empty."""
    import db
    from tuner.tune_function import tune_tir

    database = db.create("memory")
    with pytest.raises(workers.WorkersError, match=r"cannot measure for 'cuda -arch=sm_80'.*ray"):
        tune_tir(reverse_workload(), trials=4, target="cuda -arch=sm_80", database=database)
    assert database.workloads() == []
