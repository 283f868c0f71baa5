"""The GPU knob templates (matmul, batch matmul, dense, conv2d and depthwise conv2d for
CUDA): sampled configurations lower and link for sm_80 and sm_90, compute in the GPU
simulator what numpy computes, hold the known-good SGEMM schedule, and stay within
the target's limits by construction, which verification otherwise enforces by
refusing, naming the limit. No GPU is needed."""

from __future__ import annotations

import multiprocessing
import random
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pytest
from gpu_simulator import simulate

from compiler.cuda_build import build_cuda_binary
from compiler.ir.function import IRModule
from compiler.lower.gpu_kernels import lower_gpu
from compiler.runtime.gpu_binary import GPUBinary
from compiler.schedule import ScheduleError
from compiler.target.cuda import CudaTarget
from compiler.topi.reference import numpy_function
from compiler.workload.spec import normalize_spec, workload_from_normalized_spec
from tuner.space import TemplateSpace
from tuner.space.base import Decisions
from tuner.space.templates import gpu_gemm

TARGETS = ("cuda -arch=sm_80", "cuda -arch=sm_90")
CAPABILITIES = CudaTarget.parse(TARGETS[0]).capabilities
# Configurations that must link per template: a few in CI, more in the slow run.
BUILT = (8, 25)
# At most this many refusals per template (the spaces are dense in legal points).
MOST_REFUSED = 5
SIMULATED = 3

CONV = {"batch": 1, "in_channels": 64, "height": 56, "width": 56, "out_channels": 64}
# The sizes a GPU runs them at (the conv2d among them): what the builds check.
BUILD_SPECS: dict[str, dict[str, Any]] = {
    "matmul.cuda": {"op": "matmul", "args": {"m": 1024, "n": 1024, "k": 1024}},
    "batch_matmul.cuda": {"op": "batch_matmul", "args": {"batch": 8, "m": 512, "n": 512, "k": 512}},
    "dense.cuda": {
        "op": "dense",
        "args": {"batch": 512, "in_features": 768, "out_features": 768, "activation": "relu"},
    },
    "conv2d_nchw.cuda": {"op": "conv2d_nchw", "args": {**CONV, "kernel": 3, "padding": 1}},
    "depthwise_conv2d_nchw.cuda": {
        "op": "depthwise_conv2d_nchw",
        "args": {"batch": 1, "channels": 64, "height": 56, "width": 56, "kernel": 3, "padding": 1},
    },
}
# Small enough for the simulator, with epilogues, strides and a batch where the op has them.
TINY_SPECS: dict[str, dict[str, Any]] = {
    "matmul.cuda": {"op": "matmul", "args": {"m": 16, "n": 24, "k": 12}},
    "batch_matmul.cuda": {"op": "batch_matmul", "args": {"batch": 2, "m": 8, "n": 12, "k": 6}},
    "dense.cuda": {
        "op": "dense",
        "args": {"batch": 6, "in_features": 10, "out_features": 16, "activation": "relu"},
    },
    "conv2d_nchw.cuda": {
        "op": "conv2d_nchw_bias_relu",
        "args": {
            "batch": 2,
            "in_channels": 4,
            "height": 7,
            "width": 6,
            "out_channels": 8,
            "kernel": 3,
            "padding": 1,
            "stride": 2,
        },
    },
    "depthwise_conv2d_nchw.cuda": {
        "op": "depthwise_conv2d_nchw",
        "args": {
            "batch": 2,
            "channels": 4,
            "height": 9,
            "width": 8,
            "kernel": 3,
            "padding": 1,
            "stride": 2,
        },
    },
}
TEMPLATES = sorted(BUILD_SPECS)


def template_space(name: str, spec: dict[str, Any], target: str = TARGETS[0]) -> TemplateSpace:
    func = workload_from_normalized_spec(normalize_spec(spec))
    return TemplateSpace(func, name, target=target)


def legal_draws(space: TemplateSpace, count: int, seed: int) -> list[Decisions]:
    """The first ``count`` points drawn with ``seed`` that the space does not refuse."""
    rng = random.Random(seed)
    legal: list[Decisions] = []
    for _ in range(count + MOST_REFUSED):
        point = space.random_decisions(rng)
        try:
            space.candidate(point)
        except ScheduleError:
            continue
        legal.append(point)
        if len(legal) == count:
            return legal
    raise AssertionError(f"{space}: more than {MOST_REFUSED} draws refused")


def build(space: TemplateSpace, point: Decisions) -> GPUBinary:
    """The point's program, lowered and linked for the space's target."""
    program = space.program(space.candidate(point)).func
    return build_cuda_binary(IRModule({"main": program}), str(space.target))


def build_sampled(name: str, target: str, built: int) -> Counter[str]:
    """Draw points (the same ones for every target) until ``built`` have linked for
    ``target`` or more than MOST_REFUSED were refused; counts both, and each refusal
    by its message. Runs in a worker process."""
    space = template_space(name, BUILD_SPECS[name], target)
    rng = random.Random(18)
    tally: Counter[str] = Counter()
    while tally["built"] < built and tally["refused"] <= MOST_REFUSED:
        point = space.random_decisions(rng)
        try:
            build(space, point)
        except ScheduleError as err:
            tally["refused"] += 1
            tally[str(err)] += 1
            continue
        tally["built"] += 1
    return tally


@pytest.fixture(scope="module")
def builders() -> Iterator[ProcessPoolExecutor]:
    """A process per target, so that the two targets' builds run side by side."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(TARGETS), mp_context=context) as pool:
        yield pool


@pytest.mark.parametrize("built", [BUILT[0], pytest.param(BUILT[1], marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", TEMPLATES)
def test_sampled_configurations_link_for_sm_80_and_sm_90(
    name: str, built: int, builders: ProcessPoolExecutor
) -> None:
    """A point the space or the build refuses (a ScheduleError) is skipped, as the
    search skips it, and counted: the spaces are dense in legal points."""
    futures = [builders.submit(build_sampled, name, target, built) for target in TARGETS]
    sm_80, sm_90 = (future.result() for future in futures)
    print(f"{name}: {dict(sm_80)}")
    assert sm_80 == sm_90  # the two architectures have the same limits
    assert sm_80["built"] == built, sm_80


def richest(space: TemplateSpace) -> Decisions:
    """The point with the most threads and virtual threads on every tiled axis and the
    last value of every other knob (widest fetch, unrolled): the most of each
    feature in one schedule."""
    entities: dict[str, Any] = {}
    for knob in space.knobs:
        if knob.kind == "split" and len(knob.entities[0]) == 4:
            entities[knob.name] = max(knob.entities, key=lambda t: (t[2], t[1], t[3]))
        else:
            entities[knob.name] = knob.entities[-1]
    return space.decisions_of(entities)


@pytest.mark.parametrize("name", TEMPLATES)
def test_configurations_compute_what_numpy_computes_in_the_simulator(name: str) -> None:
    spec = normalize_spec(TINY_SPECS[name])
    space = template_space(name, spec)
    rng = np.random.default_rng(0)
    inputs = [
        rng.uniform(-1.0, 1.0, size=[int(d.value) for d in p.shape]).astype(p.dtype)
        for p in space.func.params[:-1]
    ]
    want = numpy_function(spec)(*inputs)
    drawn = legal_draws(space, SIMULATED - 1, seed=3)
    for point in [richest(space), *drawn]:
        program = lower_gpu(space.program(space.candidate(point)).func, "main", CAPABILITIES)
        got = np.full(want.shape, np.nan, dtype=want.dtype)
        simulate(program, [*inputs, got])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(point))


def test_the_matmul_space_holds_the_known_good_sgemm_schedule() -> None:
    """128 x 128 block tiles, 8 x 8 per thread on 16 x 16 threads, interleaved: each
    thread's 8 x 8 is 2 x 2 virtual threads of 4 x 4, 64 rows (columns) apart; steps
    of 8 staged in shared memory once by all 256 threads, four floats each, the step
    unrolled."""
    space = template_space(
        "matmul.cuda", {"op": "matmul", "args": {"m": 4096, "n": 4096, "k": 4096}}
    )
    wanted = {
        "tile_y": (32, 2, 16, 4),
        "tile_x": (32, 2, 16, 4),
        "tile_k": (512, 8),
        "fetch_vector": 4,
        "unroll_k": True,
    }
    binary = build(space, space.decisions_of(wanted))
    (kernel,) = binary.functions[0].kernels
    assert (kernel.grid, kernel.block) == ((32, 32, 1), (16, 16, 1))
    assert kernel.shared_bytes == 2 * 128 * 8 * 4  # one staging for the virtual threads
    assert binary.ptx.count("fma.rn.f32") == 8 * 8 * 8  # the step unrolled, once
    assert ".local" not in binary.ptx  # the accumulators in registers
    # 128-bit accesses: the fetch from global memory, the register tile's reads of the
    # shared tiles (8 x 8 FMAs from 4 vector loads per step), the write-back
    assert binary.ptx.count("ld.global.nc.v4") == 2
    assert binary.ptx.count("ld.shared.v4") == 4 * 8
    assert "ld.shared.b32" not in binary.ptx
    assert "st.global.v4" in binary.ptx
    assert {16} <= {e[1] for e in space.knobs[2].entities}


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_configuration_fits_the_threads_of_a_block(name: str) -> None:
    space = template_space(name, BUILD_SPECS[name])
    tiles = [k for k in space.knobs if k.kind == "split" and len(k.entities[0]) == 4]
    most = np.prod([max(t[2] for t in knob.entities) for knob in tiles])
    assert most <= CAPABILITIES.max_threads_per_block


def test_matmul_tiles_and_steps_fit_shared_memory_by_construction() -> None:
    space = template_space("matmul.cuda", BUILD_SPECS["matmul.cuda"])
    tile_y, tile_x, tile_k = space.knobs[:3]
    most = max(t[1] * t[2] * t[3] for t in tile_y.entities)
    most += max(t[1] * t[2] * t[3] for t in tile_x.entities)
    assert most * max(t[1] for t in tile_k.entities) * 4 <= CAPABILITIES.max_shared_bytes_per_block


def test_thread_tiles_over_the_limit_are_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without its per-axis caps the matmul space holds 64 x 32 threads, which the GPU
    verification refuses by the threads per block."""
    monkeypatch.setattr(gpu_gemm, "axis_thread_limits", lambda target, axes: [64, 64])
    space = template_space("matmul.cuda", BUILD_SPECS["matmul.cuda"])
    point = {
        "tile_y": (16, 1, 64, 1),
        "tile_x": (32, 1, 32, 1),
        "tile_k": (128, 8),
        "fetch_vector": 1,
        "unroll_k": False,
    }
    with pytest.raises(ScheduleError, match=r"2048 threads per block .* target's 1024"):
        build(space, space.decisions_of(point))


def test_shared_tiles_over_the_limit_are_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the bound on its reduction step the matmul space holds steps of 256 on
    128 x 128 tiles (256 KiB of shared tiles), which verification refuses."""
    monkeypatch.setattr(gpu_gemm, "shared_step_limit", lambda *args: 1024)
    space = template_space("matmul.cuda", BUILD_SPECS["matmul.cuda"])
    point = {
        "tile_y": (8, 1, 16, 8),
        "tile_x": (8, 1, 16, 8),
        "tile_k": (4, 256),
        "fetch_vector": 1,
        "unroll_k": False,
    }
    with pytest.raises(ScheduleError, match=r"262144 bytes of shared memory .* target's 49152"):
        build(space, space.decisions_of(point))
