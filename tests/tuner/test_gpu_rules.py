"""The GPU schedule rules (MetaSchedule's CUDA rules) one at a time, and the space
they generate for a CUDA target: sampled candidates that build and link for sm_80
and sm_90 or are refused with a ScheduleError, and, on tiny shapes, compute in
the GPU simulator what numpy computes. No GPU is needed."""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from generated_cases import inputs
from gpu_simulator import simulate

from compiler.codegen.llvm_types import CodegenError
from compiler.cuda_build import build_cuda_binary
from compiler.ir.function import IRModule, PrimFunc
from compiler.lower.gpu_kernels import lower_gpu
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.schedule import primitives as P
from compiler.target.cuda import CudaTarget
from compiler.topi.reference import NUMPY_REFERENCES
from compiler.workload.spec import normalize_spec, workload_from_normalized_spec
from tuner.space.base import Decisions, TraceCandidate
from tuner.space.generated import MAX_DESIGNS, GeneratedSpace
from tuner.space.rules import (
    AutoBind,
    AutoInline,
    AutoUnroll,
    Chain,
    CrossThreadReduction,
    GPUMultiLevelTiling,
    block_rules,
    root_rule,
)
from tuner.space.rules.gpu_unroll import UNROLL_MAX_STEPS
from tuner.space.rules.parallel_vectorize_unroll import UNROLL

TARGETS = ("cuda -arch=sm_80", "cuda -arch=sm_90")
CAPABILITIES = CudaTarget.parse(TARGETS[0]).capabilities
MAX_THREADS = CAPABILITIES.max_threads_per_block

# The workloads of the issue at the sizes a GPU runs them.
WORKLOADS: dict[str, dict[str, Any]] = {
    "matmul": {"m": 1024, "n": 1024, "k": 1024},
    "dense": {"batch": 128, "in_features": 768, "out_features": 768},
    "conv2d_nchw": {
        "batch": 1,
        "in_channels": 64,
        "height": 56,
        "width": 56,
        "out_channels": 64,
        "kernel": 3,
        "padding": 1,
    },
    "softmax": {"shape": [128, 1024]},
    "layer_norm": {"shape": [128, 768]},
    "sum": {"shape": [1024, 4096], "axis": [1]},
    "relu": {"shape": [2048, 1024]},
}
# The same operators small enough for the simulator, with choices left in them.
TINY: dict[str, dict[str, Any]] = {
    "matmul": {"m": 16, "n": 24, "k": 8},
    "dense": {"batch": 4, "in_features": 8, "out_features": 6},
    "conv2d_nchw": {
        "batch": 1,
        "in_channels": 4,
        "height": 6,
        "width": 6,
        "out_channels": 4,
        "kernel": 3,
        "padding": 1,
    },
    "softmax": {"shape": [3, 40]},
    "layer_norm": {"shape": [4, 32]},
    "sum": {"shape": [4, 40], "axis": [1]},
    "relu": {"shape": [8, 40]},
}
# Candidates drawn per operator: a few in CI, the full draw in the slow run.
SAMPLES = (16, 50)
SIMULATED = 3
# The least fraction of drawn candidates that must build (today's, printed with -s,
# is higher): many tilings drawn uniformly stage more than the shared memory holds,
# as in MetaSchedule, whose search then learns the legal ones; the rest always fit.
# The block tile includes its virtual threads' sub-tiles, so a 1024 x 1024 matmul's
# uniform draws overflow shared memory (or a thread's registers) most often.
MIN_LEGAL = {"matmul": 0.1, "dense": 0.3, "conv2d_nchw": 0.3}
# What code generation, rather than lowering, refuses today: a thread's local
# buffers over 64 KiB are a limit of the target, which lowering does not check yet
# and so does not raise as a ScheduleError (reported with the GPU lowering).
LOCAL_LIMIT = "local buffers take"


def workload(op: str, args: dict[str, Any]) -> tuple[PrimFunc, dict[str, Any]]:
    spec = normalize_spec({"op": op, "args": args})
    return workload_from_normalized_spec(spec), spec


def gpu_space(op: str, args: dict[str, Any]) -> GeneratedSpace:
    return GeneratedSpace(workload(op, args)[0], target=TARGETS[0])


def thread_bindings(func: PrimFunc, block: str) -> list[str]:
    return [loop.thread_binding or "" for loop in P.loops_above(func, block)]


def first_sample(space: GeneratedSpace, design: int, seed: int = 0) -> TraceCandidate:
    """The first legal candidate of ``design`` drawn with ``seed``."""
    rng = random.Random(seed)
    for _ in range(64):
        values = tuple(rng.choice(d.values) for d in space.decision_domains(design))
        try:
            return space.candidate(Decisions(design, values))
        except ScheduleError:
            continue
    raise AssertionError(f"no legal candidate of design {design} in 64 draws")


# multi-level tiling -----------------------------------------------------------------------


def test_the_tiling_of_a_matmul_binds_blocks_and_threads_and_stages_its_inputs() -> None:
    func, _ = workload("matmul", WORKLOADS["matmul"])
    sch = Schedule(func)
    (tiled,) = GPUMultiLevelTiling().apply(sch, sch.get_block("T_matmul"))
    main = tiled.mod["main"]
    # S0 on blocks, S1 on virtual threads, S2 on threads, then R0
    assert thread_bindings(main, "T_matmul")[:5] == [
        "blockIdx.y",
        "blockIdx.x",
        "vthread.x",
        "threadIdx.x",
        "",
    ]
    assert P.block_names(main) == [
        "T_matmul_init",
        "B_shared",
        "A_shared",
        "T_matmul",
        "T_matmul_local",
    ]
    assert '"local"' in main.script() and '"shared"' in main.script()
    tiles = [i for i in tiled.trace.instructions if i.kind == "sample_perfect_tile"]
    assert [t.inputs["n"] for t in tiles] == [5, 5, 3]
    lanes = [i for i in tiled.trace.instructions if i.kind == "sample_categorical"]
    assert len(lanes) == 2  # one vector length per staged input


@pytest.mark.parametrize(("op", "cap"), [("matmul", 2), ("conv2d_nchw", 2)])
def test_the_virtual_thread_tiles_stay_within_what_a_thread_interleaves(op: str, cap: int) -> None:
    """The spatial tiles' second factors are fused and bound to ``vthread.x``: capped in
    their domains (2 per loop for two or three loops longer than 1: at most 8), so no
    drawn point is refused for its virtual threads; uncapped, most of a matmul's were."""
    space = gpu_space(op, WORKLOADS[op])
    spatial = [
        domain
        for design in range(len(space.design_traces()))
        for domain in space.decision_domains(design)
        if domain.kind == "sample_perfect_tile" and len(domain.values[0]) == 5
    ]
    assert spatial
    assert all(max(tile[1] for tile in domain.values) <= cap for domain in spatial)
    assert any(max(tile[1] for tile in domain.values) == cap for domain in spatial)
    rng = random.Random(5)
    for _ in range(24):
        try:
            space.candidate(space.random_decisions(rng))
        except ScheduleError as refused:
            assert "virtual threads" not in str(refused)


def test_a_cooperative_fetch_runs_on_the_threads_of_the_compute() -> None:
    func, _ = workload("matmul", WORKLOADS["matmul"])
    sch = Schedule(func, seed=3)
    (tiled,) = GPUMultiLevelTiling().apply(sch, sch.get_block("T_matmul"))
    main = tiled.mod["main"]

    def threads(block: str) -> int:
        bound = [lp for lp in P.loops_above(main, block) if lp.thread_binding == "threadIdx.x"]
        return int(bound[-1].extent.value)  # a fetch's own, inside the compute's

    assert threads("A_shared") == threads("B_shared") == threads("T_matmul")


def test_the_tiling_folds_a_bias_into_the_write_back() -> None:
    func, _ = workload("dense", WORKLOADS["dense"])
    sch = Schedule(func)
    for name in ("T_dense_bias", "T_dense"):
        for rule in block_rules(CudaTarget.parse(TARGETS[0])):
            if name in P.block_names(sch.mod["main"]):
                (sch, *_) = rule.apply(sch, sch.get_block(name))
    names = P.block_names(sch.mod["main"])
    assert "T_dense_bias" not in names and "T_dense_local" in names


def test_the_tiling_leaves_reductions_without_reuse_and_bound_blocks_alone() -> None:
    func, _ = workload("softmax", TINY["softmax"])
    sch = Schedule(func)
    assert GPUMultiLevelTiling().apply(sch, sch.get_block("T_softmax_expsum")) == [sch]
    matmul, _ = workload("matmul", TINY["matmul"])
    sch = Schedule(matmul)
    (tiled,) = GPUMultiLevelTiling().apply(sch, sch.get_block("T_matmul"))
    assert GPUMultiLevelTiling().apply(tiled, tiled.get_block("T_matmul")) == [tiled]


# cross-thread reduction -------------------------------------------------------------------


def test_a_row_reduction_is_shared_by_the_threads_of_a_block() -> None:
    func, _ = workload("sum", WORKLOADS["sum"])
    sch = Schedule(func)
    shared, plain = CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_sum"))
    assert plain is sch
    main = shared.mod["main"]
    assert thread_bindings(main, "T_sum") == ["", "threadIdx.x", ""]
    (extent,) = [i for i in shared.trace.instructions if i.kind == "sample_categorical"]
    assert set(extent.inputs["candidates"]) == {4, 8, 16, 32, 64, 128, 256, 512}
    ptx = build_cuda_binary(shared.mod, TARGETS[0]).ptx  # the threads' sums meet in shuffles
    assert "shfl.sync.bfly" in ptx


def test_thread_counts_divide_the_reduction() -> None:
    func, _ = workload("softmax", TINY["softmax"])  # rows of 40
    sch = Schedule(func)
    (shared, _) = CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_softmax_maxelem"))
    (extent,) = [i for i in shared.trace.instructions if i.kind == "sample_categorical"]
    assert extent.inputs["candidates"] == [4, 8]


def test_a_reduction_is_computed_in_the_kernel_of_its_consumer() -> None:
    func, _ = workload("softmax", TINY["softmax"])
    sch = Schedule(func)
    (fused, _) = CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_softmax_expsum"))
    main = fused.mod["main"]
    row = P.loops_above(main, "T_softmax_norm")[0]
    assert P.loops_above(main, "T_softmax_expsum")[0] is row
    assert thread_bindings(main, "T_softmax_norm")[-1] == "threadIdx.x"


def test_reductions_fused_into_one_kernel_share_one_thread_count() -> None:
    space = gpu_space("layer_norm", WORKLOADS["layer_norm"])
    design = space.design_traces()[0]
    counts = [i for i in design.instructions if i.kind == "sample_categorical"]
    assert len(counts) == 2  # the threads of the row's kernel and the unroll steps
    main = space.program(first_sample(space, 0)).func
    extents = {
        int(lp.extent.value)
        for name in P.block_names(main)
        for lp in P.loops_above(main, name)
        if lp.thread_binding == "threadIdx.x"
    }
    assert len(extents) == 1


def test_a_large_output_with_reuse_is_left_to_the_tiling() -> None:
    func, _ = workload("matmul", WORKLOADS["matmul"])
    sch = Schedule(func)
    assert CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_matmul")) == [sch]
    gemv, _ = workload("dense", {"batch": 1, "in_features": 1024, "out_features": 256})
    sch = Schedule(gemv)
    assert len(CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_dense"))) == 2


# auto-bind and unroll ---------------------------------------------------------------------


def test_auto_bind_spreads_an_elementwise_nest_over_blocks_and_threads() -> None:
    func, _ = workload("relu", TINY["relu"])  # 320 elements
    sch = Schedule(func)
    (bound,) = AutoBind(MAX_THREADS).apply(sch, sch.get_block("root"))
    assert thread_bindings(bound.mod["main"], "T_relu") == ["blockIdx.x", "threadIdx.x"]
    (threads,) = [i for i in bound.trace.instructions if i.kind == "sample_categorical"]
    assert threads.inputs["candidates"] == [32, 64, 128, 256]


def test_auto_bind_strides_a_long_nest_over_a_bounded_grid() -> None:
    func, _ = workload("relu", WORKLOADS["relu"])
    sch = Schedule(func)
    (bound,) = AutoBind(MAX_THREADS).apply(sch, sch.get_block("root"))
    loops = P.loops_above(bound.mod["main"], "T_relu")
    assert [lp.thread_binding or "" for lp in loops] == ["blockIdx.x", "threadIdx.x", ""]
    assert [int(lp.extent.value) for lp in loops] == [256, MAX_THREADS, 8]


def test_auto_bind_gives_a_thread_bound_block_its_grid_and_leaves_a_scalar_alone() -> None:
    func, _ = workload("sum", {"shape": [4, 40]})  # a full sum: no spatial loop
    sch = Schedule(func)
    (shared, _) = CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_sum"))
    (bound,) = AutoBind(MAX_THREADS).apply(shared, shared.get_block("root"))
    main = bound.mod["main"]
    assert thread_bindings(main, "T_sum") == ["threadIdx.x", ""]  # one block of threads
    rows, _ = workload("sum", TINY["sum"])
    sch = Schedule(rows)
    (shared, _) = CrossThreadReduction(MAX_THREADS).apply(sch, sch.get_block("T_sum"))
    (bound,) = AutoBind(MAX_THREADS).apply(shared, shared.get_block("root"))
    assert thread_bindings(bound.mod["main"], "T_sum")[:2] == ["blockIdx.x", "threadIdx.x"]


def test_the_unroll_steps_are_sampled_on_the_root_with_their_role() -> None:
    func, _ = workload("relu", TINY["relu"])
    sch = Schedule(func)
    (annotated,) = AutoUnroll().apply(sch, sch.get_block("root"))
    assert annotated.get(annotated.get_block("root")).annotations[UNROLL] in UNROLL_MAX_STEPS
    space = gpu_space("relu", TINY["relu"])
    assert [d.role for d in space.decision_domains(0)] == ["", "unroll"]


def test_a_cuda_target_gets_the_gpu_rules() -> None:
    target = CudaTarget.parse(TARGETS[0])
    kinds = [type(rule) for rule in block_rules(target)]
    assert kinds == [AutoInline, CrossThreadReduction, GPUMultiLevelTiling]
    final = root_rule(target)
    assert isinstance(final, Chain)
    assert [type(rule) for rule in final.rules] == [AutoBind, AutoUnroll]


# the generated space ----------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(WORKLOADS))
def test_every_design_trace_replays_from_its_json(op: str) -> None:
    space = gpu_space(op, WORKLOADS[op])
    assert 1 <= space.design_count <= MAX_DESIGNS
    for design in space.design_traces():
        replayed = Schedule(space.func)
        Trace.from_json(design.to_json_string()).apply_to_schedule(replayed)
        assert replayed.trace.structural_hash == design.structural_hash


@pytest.mark.parametrize("op", ["matmul", "softmax"])
def test_a_stored_trace_replays_the_same_program_and_reads_back(op: str) -> None:
    space = gpu_space(op, WORKLOADS[op])
    candidate = first_sample(space, 0, seed=5)
    replayed = Schedule(space.func)
    Trace.from_json(candidate.trace_json).apply_to_schedule(replayed)
    assert replayed.mod["main"].script() == space.program(candidate).func.script()
    read = gpu_space(op, WORKLOADS[op]).candidate_from_trace(candidate.trace_json)
    assert read is not None and read.decisions == candidate.decisions


@dataclass
class Tally:
    """What became of the candidates drawn from one space: built for every target,
    refused (a ScheduleError when replayed or built), refused by code generation."""

    drawn: int = 0
    built: int = 0
    refused: int = 0
    refused_by_codegen: int = 0

    @property
    def legal(self) -> float:
        return self.built / self.drawn


def outcomes(op: str, target: str, points: list[Decisions]) -> list[str]:
    """Replay and build each point of ``op``'s space for ``target`` (in a process of
    its own, one per target): "built", "refused" (a ScheduleError), or
    "refused_by_codegen"."""
    space = gpu_space(op, WORKLOADS[op])
    found = []
    for decisions in points:
        try:
            program = space.program(space.candidate(decisions)).func
            build_cuda_binary(IRModule({"main": program}), target)
            found.append("built")
        except ScheduleError:
            found.append("refused")
        except CodegenError as err:
            assert LOCAL_LIMIT in str(err), err
            found.append("refused_by_codegen")
    return found


@pytest.fixture(scope="module")
def builders() -> Iterator[ProcessPoolExecutor]:
    """A process per target, so that the two builds of a candidate run side by side."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(TARGETS), mp_context=context) as pool:
        yield pool


@pytest.mark.parametrize("samples", [SAMPLES[0], pytest.param(SAMPLES[1], marks=pytest.mark.slow)])
@pytest.mark.parametrize("op", sorted(WORKLOADS))
def test_sampled_candidates_build_for_sm_80_and_sm_90_or_are_refused(
    op: str, samples: int, builders: ProcessPoolExecutor
) -> None:
    space = gpu_space(op, WORKLOADS[op])
    rng = random.Random(7)
    drawn = [space.random_decisions(rng) for _ in range(samples)]
    points = list(dict.fromkeys(drawn))
    per_target = [builders.submit(outcomes, op, target, points) for target in TARGETS]
    sm_80, sm_90 = (future.result() for future in per_target)
    assert sm_80 == sm_90  # the two architectures have the same limits
    outcome = dict(zip(points, sm_80, strict=True))
    tally = Tally()
    for decisions in drawn:
        tally.drawn += 1
        setattr(tally, outcome[decisions], getattr(tally, outcome[decisions]) + 1)
    print(f"{op}: {tally.built} of {tally.drawn} drawn build ({tally.legal:.0%}); {tally}")
    assert tally.legal >= MIN_LEGAL.get(op, 1.0), tally


# the simulator ----------------------------------------------------------------------------


def simulated(op: str, candidate: TraceCandidate, space: GeneratedSpace, seed: int) -> None:
    """Run the candidate in the GPU simulator and compare with numpy."""
    func, spec = workload(op, TINY[op])
    arrays = inputs(func, op, seed)
    out = func.params[-1]
    got = np.full(tuple(int(d) for d in out.shape), np.nan, dtype=out.dtype)
    program = lower_gpu(space.program(candidate).func, "main", CAPABILITIES)
    simulate(program, [*arrays, got])
    want = NUMPY_REFERENCES[op].compute(*arrays, **spec["args"])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(candidate.trace))


def simulated_designs(op: str) -> list[int]:
    """Up to SIMULATED designs, the most transformed first; layer norm's first is
    left to its own test below."""
    count = gpu_space(op, TINY[op]).design_count
    first = 1 if op == "layer_norm" else 0
    return list(range(first, count))[:SIMULATED]


@pytest.mark.parametrize("op", sorted(TINY))
def test_sampled_candidates_compute_what_numpy_computes_in_the_simulator(op: str) -> None:
    space = gpu_space(op, TINY[op])
    designs = simulated_designs(op)
    for k in range(SIMULATED):
        design = designs[k % len(designs)]
        simulated(op, first_sample(space, design, seed=k), space, seed=k)


def test_layer_norm_in_one_kernel_computes_what_numpy_computes() -> None:
    space = gpu_space("layer_norm", TINY["layer_norm"])
    simulated("layer_norm", first_sample(space, 0), space, seed=0)
