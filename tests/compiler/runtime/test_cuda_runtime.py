"""The CUDA runtime: GPUBinaries as data, argument checks, the driver layer's errors
everywhere, and, on a host with a GPU, real kernels (llvmlite PTX, nvJitLink cubin)
run and timed against numpy on random inputs.

A kernel that faults poisons its process's CUDA context, so the fault tests run in
worker processes (tests/workers/test_gpu_measure.py), never in this one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gpu_kernels import BLOCK, N, binary, one_kernel, triple

import compiler.runtime.cuda_driver as cu
from compiler.abi.signature import RuntimeArgumentError
from compiler.runtime.cuda_module import CudaModule, check_arguments, entry_name
from compiler.runtime.gpu_binary import GPUBinary
from compiler.runtime.profiling import ProfileResult

pytest.importorskip(
    "cuda.bindings.nvjitlink", reason="needs the cuda extra: pip install 'tensortune[cuda]'"
)

NO_DEVICE = cu.cuda_available()
needs_gpu = pytest.mark.skipif(
    NO_DEVICE is not None, reason=f"running kernels needs a CUDA GPU: {NO_DEVICE}"
)


def device_arch() -> str:
    return cu.device_arch(0)


def reversed_doubled(a: np.ndarray) -> np.ndarray:
    """What kernel ``reverse`` computes: each block's chunk reversed, times two."""
    return (a.reshape(-1, BLOCK)[:, ::-1] * 2).reshape(a.shape)


# ---- without a device ----------------------------------------------------------------------


def test_a_gpu_binary_survives_json() -> None:
    original = binary("sm_80")
    copy = GPUBinary.from_json(json.loads(json.dumps(original.to_json())))
    assert copy == original
    assert copy.function("triple").workspace[0].name == "W"


def test_entry_is_main_or_the_only_function() -> None:
    base = binary("sm_80")
    assert entry_name(base) == "main"
    only = GPUBinary(base.arch, base.ptx, base.cubin, (triple(),))
    assert entry_name(only) == "triple"
    several = GPUBinary(base.arch, base.ptx, base.cubin, (triple(), one_kernel("other", "add")))
    with pytest.raises(KeyError, match="none is 'main'"):
        entry_name(several)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (lambda a, b: [a], r"main takes 2 arguments \(A, B\), got 1"),
        (lambda a, b: [a, b.astype(np.float64)], r"'B' must have dtype float32, got float64"),
        (lambda a, b: [a, b[:10]], r"'B' must have shape \(1024,\), got \(10,\)"),
        (lambda a, b: [a.tolist(), b], r"'A' must be a numpy array, got list"),
        (lambda a, b: [np.tile(a, 2)[::2], b], r"'A' must be C-contiguous"),
        (lambda a, b: [a, np.broadcast_to(b, b.shape)], r"'B' is read-only.*copied back"),
        (lambda a, b: [a, a], r"'A' and 'B' share memory"),
    ],
)
def test_arguments_are_checked_before_any_device_work(
    arrays: Callable[[np.ndarray, np.ndarray], list[Any]], message: str
) -> None:
    a = np.ones(N, np.float32)
    b = np.zeros(N, np.float32)
    with pytest.raises(RuntimeArgumentError, match=message):
        check_arguments(one_kernel("main", "reverse"), arrays(a, b))
    check_arguments(one_kernel("main", "reverse"), [a, b])


def test_errors_that_poison_the_context_are_told_apart() -> None:
    fault = cu.CudaError("x", call="cuStreamSynchronize", result="CUDA_ERROR_ILLEGAL_ADDRESS")
    refused = cu.CudaError("x", call="cuLaunchKernel", result="CUDA_ERROR_INVALID_VALUE")
    assert fault.context_lost and not refused.context_lost
    assert isinstance(fault, RuntimeError)


@pytest.mark.skipif(NO_DEVICE is None, reason="this host has a usable GPU")
def test_without_a_device_each_use_says_why() -> None:
    assert isinstance(NO_DEVICE, str) and NO_DEVICE
    with pytest.raises(cu.CudaError) as caught:
        CudaModule(binary("sm_80"))
    assert str(caught.value) == NO_DEVICE


def test_missing_bindings_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import cuda.bindings

    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    monkeypatch.delattr(cuda.bindings, "driver")
    cu._driver.cache_clear()
    cu._init.cache_clear()
    try:
        reason = cu.cuda_available()
    finally:
        cu._driver.cache_clear()
        cu._init.cache_clear()
    assert reason is not None and "pip install 'tensortune[cuda]'" in reason


# ---- on a GPU ------------------------------------------------------------------------------


@needs_gpu
def test_a_kernel_with_shared_memory_and_a_barrier_computes_what_numpy_does(
    rng: np.random.Generator,
) -> None:
    a = rng.standard_normal(N).astype(np.float32)
    b = np.full(N, np.nan, np.float32)
    with CudaModule(binary(device_arch())) as module:
        module(a, b)
    np.testing.assert_array_equal(b, reversed_doubled(a))


@needs_gpu
def test_kernels_run_in_order_through_the_workspace(rng: np.random.Generator) -> None:
    a = rng.standard_normal(N).astype(np.float32)
    b = np.zeros(N, np.float32)
    with CudaModule(binary(device_arch())) as module:
        module["triple"](a, b)
        again = np.zeros(N, np.float32)
        module["triple"](a, again)
    np.testing.assert_allclose(b, 3 * a, rtol=1e-6)
    np.testing.assert_array_equal(again, b)


@needs_gpu
def test_time_evaluator_times_the_kernels_on_the_device(rng: np.random.Generator) -> None:
    a = rng.standard_normal(N).astype(np.float32)
    b = np.zeros(N, np.float32)
    with CudaModule(binary(device_arch())) as module:
        timing = module.time_evaluator("triple", number=5, repeat=3)(a, b)
        grown = module.time_evaluator("main", number=1, repeat=2, min_repeat_ms=2.0)(a, b)
    assert isinstance(timing, ProfileResult)
    assert timing.number == 5 and len(timing.results) == 3
    assert all(0 < t < 1e-2 for t in timing.results)
    assert grown.number > 1 and len(grown.results) == 2
    assert grown.number * grown.min >= 2e-3 * 0.5


@needs_gpu
def test_a_device_call_is_timed_with_the_cache_flushed(rng: np.random.Generator) -> None:
    a = rng.standard_normal(N).astype(np.float32)
    b = np.zeros(N, np.float32)
    with CudaModule(binary(device_arch())) as module, module["main"].bind([a, b]) as call:
        cold = call.time(3, 2, 0.0, warmup=0, flush_bytes=1 << 20)
        call.read_back([a, b])
    assert len(cold.results) == 2 and all(t > 0 for t in cold.results)
    np.testing.assert_array_equal(b, reversed_doubled(a))


@needs_gpu
def test_a_binary_for_another_architecture_is_refused() -> None:
    other = "sm_90" if device_arch().startswith("sm_8") else "sm_80"
    with pytest.raises(cu.CudaError, match=f"built for {other}.*cuda -arch="):
        CudaModule(binary(other))


@needs_gpu
def test_close_frees_the_device_memory_and_is_idempotent(rng: np.random.Generator) -> None:
    module = CudaModule(binary(device_arch()))
    a = rng.standard_normal(N).astype(np.float32)
    call = module["triple"].bind([a, np.zeros(N, np.float32)])
    assert len(module._state.allocations) == 3
    call.close()
    assert not module._state.allocations
    module.close()
    module.close()
