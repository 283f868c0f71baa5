"""The schedule rules of the generated space, one at a time, and the postprocessing
step that realises the sampled parallel, vector and unroll sizes."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from generated_cases import SHAPES, expected, inputs, workload
from workloads import mm_relu, softmax

import compiler
from compiler import te, topi
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, visit
from compiler.ir.stmt import For, ForKind
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule import Schedule, ScheduleError
from compiler.schedule import primitives as P
from compiler.workload.flops import flop_count
from compiler.workload.spec import normalize_spec, workload_from_spec
from tuner.space.base import Decisions
from tuner.space.generated import GeneratedSpace
from tuner.space.rules import (
    AddRFactor,
    AutoInline,
    MultiLevelTiling,
    ParallelVectorizeUnroll,
    RandomComputeLocation,
)
from tuner.space.rules.analysis import iterations
from tuner.space.rules.parallel_vectorize_unroll import SERIAL_MAX_FLOPS, UNROLL_MAX_STEPS


def loops(func: PrimFunc) -> list[For]:
    found: list[For] = []

    def collect(n: Node) -> None:
        if isinstance(n, For):
            found.append(n)

    visit(func.body, collect)
    return found


def elementwise_chain(expensive: bool) -> PrimFunc:
    a = te.placeholder((8, 16), name="A")
    b = te.compute((8, 16), lambda i, j: te.exp(a[i, j]) if expensive else a[i, j] + 1.0, name="B")
    c = te.compute((8, 16), lambda i, j: b[i, j] * 2.0, name="C")
    d = te.compute((8, 16), lambda i, j: c[i, j] - 3.0, name="D")
    return te.create_prim_func([a, d])


def apply(rule: object, sch: Schedule, name: str) -> list[Schedule]:
    assert isinstance(rule, (AutoInline, AddRFactor, MultiLevelTiling, RandomComputeLocation))
    return rule.apply(sch, sch.get_block(name))


# auto-inline ------------------------------------------------------------------------


def test_auto_inline_folds_an_elementwise_chain_into_one_nest() -> None:
    sch = Schedule(elementwise_chain(expensive=False))
    for name in ("D", "C", "B"):
        if name in P.block_names(sch.mod["main"]):
            (sch,) = apply(AutoInline(), sch, name)
    assert P.block_names(sch.mod["main"]) == ["B"]  # D folded into C, C into B


def test_auto_inline_moves_an_expensive_producer_into_its_one_reader() -> None:
    sch = Schedule(elementwise_chain(expensive=True))
    (after,) = apply(AutoInline(), sch, "B")  # C reads exp(A) once: nothing recomputed
    assert "B" not in P.block_names(after.mod["main"])


@pytest.mark.parametrize("readers", ["one reading twice", "two"])
def test_auto_inline_does_not_recompute_an_expensive_producer(readers: str) -> None:
    a = te.placeholder((8, 16), name="A")
    b = te.compute((8, 16), lambda i, j: te.exp(a[i, j]), name="B")
    if readers == "two":
        c = te.compute((8, 16), lambda i, j: b[i, j] * 2.0, name="C")
        d = te.compute((8, 16), lambda i, j: b[i, j] - c[i, j], name="D")
    else:
        d = te.compute((8, 16), lambda i, j: b[i, j] * b[i, j], name="D")
    sch = Schedule(te.create_prim_func([a, d]))
    (after,) = apply(AutoInline(), sch, "B")
    assert after is sch and "B" in P.block_names(after.mod["main"])


def test_auto_inline_leaves_a_producer_of_a_reduction_alone() -> None:
    func, _ = workload("conv2d_nchw")
    sch = Schedule(func)
    (after,) = apply(AutoInline(), sch, "PadInput")
    assert after is sch


# multi-level tiling -------------------------------------------------------------------


def test_the_tiling_of_a_matmul_runs_ssrsrs() -> None:
    func, _ = workload("matmul")
    forks = apply(MultiLevelTiling(), Schedule(func), "T_matmul")
    # plain, accumulator written back after level 1 or 2, and each of those with B packed
    assert len(forks) == 5
    plain = forks[0].mod["main"]
    names = [lp.loop_var.name for lp in P.loops_above(plain, "T_matmul")]
    assert names == ["i_0", "j_0", "i_1", "j_1", "k_0", "i_2", "j_2", "k_1", "i_3", "j_3"]
    assert "T_matmul_init" in P.block_names(plain)
    tiles = [i for i in forks[0].trace.instructions if i.kind == "sample_perfect_tile"]
    assert [t.inputs["n"] for t in tiles] == [4, 4, 2]
    assert all(t.decision[-1] <= 64 for t in tiles)
    for cached in forks[1:]:
        assert '"local"' in cached.mod["main"].script()


def blocked_conv() -> PrimFunc:
    data = te.placeholder((1, 2, 6, 6, 16), "float32", name="data")
    kernel = te.placeholder((4, 2, 3, 3, 16, 16), "float32", name="kernel")
    return te.create_prim_func([data, kernel, topi.conv2d_nchwc(data, kernel, padding=1)])


def test_the_register_tile_of_a_blocked_convolution_runs_its_channel_blocks_inside() -> None:
    """The output channel blocks index only the weight, read as vectors: they run
    innermost in the register tile, inside the rows and columns that the input's
    broadcast values move with, in every fork."""
    forks = apply(MultiLevelTiling(), Schedule(blocked_conv()), "conv2d_nchwc")
    assert len(forks) == 5  # plain, accumulator after level 1 or 2, each with W packed
    for fork in forks:
        names = [lp.loop_var.name for lp in P.loops_above(fork.mod["main"], "conv2d_nchwc")]
        assert names[-5:] == ["n_3", "y_3", "x_3", "oo_3", "oi_3"]


def test_the_tiling_packs_the_operand_read_as_vectors_at_level_1() -> None:
    func, _ = workload("matmul")
    forks = apply(MultiLevelTiling(), Schedule(func), "T_matmul")
    for packed in forks[3:]:
        main = packed.mod["main"]
        assert P.block_names(main)[0] == "B_global"  # B[k, j]: read as vectors along j
        loops = [lp.loop_var.name for lp in P.loops_above(main, "B_global")]
        assert loops[:2] == ["i_0", "j_0"] and "i_1" not in loops  # reused by the rows


def test_the_tiling_packs_a_weight_read_across_its_rows_transposed() -> None:
    func, _ = workload("dense")  # T_dense[i, j] += X[i, k] * W[j, k]: j is vectorized
    forks = apply(MultiLevelTiling(), Schedule(func), "T_dense")
    packed = [f.mod["main"] for f in forks if "W_global" in P.block_names(f.mod["main"])]
    assert len(packed) == 2
    for main in packed:
        assert "W_global[v1, v0] = W[v0, v1]" in main.script()  # laid out k, j


def test_the_tiling_forks_over_where_an_epilogue_runs() -> None:
    forks = apply(MultiLevelTiling(), Schedule(mm_relu(16, 24, 32)), "Y")
    assert len(forks) == 7  # plain, 2 accumulators, 2 epilogue places, 2 packed
    fused = forks[3].mod["main"]
    assert P.loops_above(fused, "C")[0] is P.loops_above(fused, "Y")[0]


def test_the_tiling_leaves_a_reduction_without_reuse_alone() -> None:
    sch = Schedule(softmax(16, 40))
    assert apply(MultiLevelTiling(), sch, "S") == [sch]


AVX2_BITS = 256  # 8 float lanes
CONSTANT_KERNEL_CONV = {
    "op": "conv2d_nchw",
    "args": {**SHAPES["conv2d_nchw"], "out_channels": 16},
    "constants": ["kernel"],
}


def broadcast_forks(spec: dict[str, Any]) -> list[Schedule]:
    """The forks that only a rule knowing the vector width offers: those past the
    ones the rule without it makes."""
    func = workload_from_spec(spec)
    with_vectors = apply(MultiLevelTiling(vector_bits=AVX2_BITS), Schedule(func), "conv2d_nchw")
    without = apply(MultiLevelTiling(), Schedule(func), "conv2d_nchw")
    return with_vectors[len(without) :]


def test_the_tiling_vectorizes_an_nchw_convolutions_channels_into_a_channels_last_tile() -> None:
    """10 columns fill no whole 8-lane vector, 16 output channels fill two: the
    channels are split into vectors run innermost, the accumulator written back
    after level 1 or 2 is channels-last, and the weight is read along the vector."""
    forks = broadcast_forks(CONSTANT_KERNEL_CONV)
    assert len(forks) == 2
    for fork in forks:
        main = fork.mod["main"]
        inner = P.loops_above(main, "conv2d_nchw")[-1]
        assert inner.kind is ForKind.VECTORIZED and inner.extent.value == 8
        assert 'T.alloc_buffer((1, 10, 10, 16), "float32", scope="local")' in main.script()


def test_the_broadcast_micro_kernel_computes_what_numpy_computes() -> None:
    func = workload_from_spec(CONSTANT_KERNEL_CONV)
    space = GeneratedSpace(func, target="llvm -mcpu=znver3 -mattr=+avx,+avx2")
    broadcast = [
        design
        for design, trace in enumerate(space.design_traces())
        if any(i.kind == "transform_layout" for i in trace.instructions)
    ]
    assert len(broadcast) == 2
    arrays = inputs(func, "conv2d_nchw")
    want = expected(normalize_spec(CONSTANT_KERNEL_CONV), arrays)
    rng = random.Random(3)
    built = 0
    for design in broadcast:
        for _ in range(6):
            domains = space.decision_domains(design)
            point = Decisions(design, tuple(rng.choice(d.values) for d in domains))
            try:
                candidate = space.candidate(point)
            except ScheduleError:
                continue  # a sampled vector width no loop takes
            sch = Schedule(func)
            candidate.trace.apply_to_schedule(sch)
            module = compiler.build(sch.mod["main"])
            out = np.full(want.shape, np.nan, dtype=np.float32)
            module["main"](*pack_arguments(module, "main", [*arrays, out]))
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
            built += 1
    assert built >= 4


@pytest.mark.parametrize(
    "spec",
    [
        {**CONSTANT_KERNEL_CONV, "constants": []},  # the kernel could not be stored for it
        {**CONSTANT_KERNEL_CONV, "args": {**CONSTANT_KERNEL_CONV["args"], "out_channels": 12}},
        {**CONSTANT_KERNEL_CONV, "args": {**CONSTANT_KERNEL_CONV["args"], "width": 16}},
    ],
    ids=["variable kernel", "12 channels", "whole vectors of columns"],
)
def test_the_broadcast_micro_kernel_is_offered_only_where_it_fits(spec: dict[str, Any]) -> None:
    assert broadcast_forks(spec) == []


# rfactor ------------------------------------------------------------------------------


def test_rfactor_forks_a_row_reduction_over_either_piece() -> None:
    sch = Schedule(softmax(16, 40))
    forks = apply(AddRFactor(max_spatial=32), sch, "S")
    assert forks[0] is sch and len(forks) == 3
    for fork in forks[1:]:
        assert any(name.endswith("rf") for name in P.block_names(fork.mod["main"]))


def test_rfactor_gives_a_large_output_only_vector_partials() -> None:
    sch = Schedule(softmax(64, 40))
    forks = apply(AddRFactor(max_spatial=32), sch, "S")
    assert forks[0] is sch and len(forks) == 2
    partial = forks[1].mod["main"]
    rf = next(name for name in P.block_names(partial) if name.endswith("rf"))
    assert P.loops_above(partial, rf)[-1].extent.value <= 64


def test_rfactor_leaves_a_large_output_with_a_short_reduction_alone() -> None:
    sch = Schedule(softmax(64, 16))
    assert apply(AddRFactor(max_spatial=32), sch, "S") == [sch]


# random compute location ---------------------------------------------------------------


def test_the_padding_of_a_convolution_gets_a_sampled_location() -> None:
    func, _ = workload("conv2d_nchw")
    space = GeneratedSpace(func)
    domains = [d for d in space.decision_domains(0) if d.kind == "sample_compute_location"]
    assert len(domains) == 1
    assert {-2, -1, 0} <= set(domains[0].values)


def test_an_expensive_block_is_never_offered_inline() -> None:
    space = GeneratedSpace(softmax(16, 40))
    design = space.design_traces()[0]
    sampled = sorted(design.decisions)
    exp = [
        space.decision_domains(0)[k]
        for k, i in enumerate(sampled)
        if design.instructions[i].kind == "sample_compute_location"
        and design.instructions[i].inputs["block"].name == "E"
    ]
    assert len(exp) == 1 and -2 not in exp[0].values and -1 in exp[0].values


def test_an_output_block_keeps_its_place() -> None:
    sch = Schedule(softmax(16, 40))
    assert apply(RandomComputeLocation(), sch, "O") == [sch]


# sampled sizes and their postprocessing -------------------------------------------------


def test_the_sampled_sizes_become_loop_kinds() -> None:
    func, _ = workload("relu")  # 16 x 40
    space = GeneratedSpace(func)
    # decisions index the candidates: parallel (0, 2, 8, 32) x 2 threads, lanes
    # (0, 4, 8, 16, 32, 64), unroll steps (0, 16, 64)
    made = space.candidate(Decisions(0, (1, 5, 0)))
    kinds = [lp.kind for lp in loops(space.program(made).func)]
    assert kinds == [ForKind.PARALLEL, ForKind.VECTORIZED]
    with pytest.raises(ScheduleError, match="vector width 4 cannot be realised"):
        space.candidate(Decisions(0, (0, 1, 0)))  # a row of 40 in 4 lanes


def test_unrolled_loops_stay_within_the_sampled_steps() -> None:
    func, _ = workload("matmul")
    space = GeneratedSpace(func)
    rng = random.Random(0)
    for _ in range(12):
        candidate = space.sample(rng)
        limit = UNROLL_MAX_STEPS[candidate.decisions.values[-1]]
        for loop in loops(space.program(candidate).func):
            if loop.kind is ForKind.UNROLLED:
                assert iterations(loop) <= limit


def test_the_root_rule_samples_three_sizes() -> None:
    sch = Schedule(softmax(4, 8))
    (annotated,) = ParallelVectorizeUnroll(threads=2).apply(sch, sch.get_block("root"))
    sizes = annotated.get(annotated.get_block("root")).annotations
    assert set(sizes) == {"tensortune.parallel", "tensortune.vectorize", "tensortune.unroll"}
    assert sizes["tensortune.parallel"] in (0, 2, 8, 32)
    assert sizes["tensortune.unroll"] in UNROLL_MAX_STEPS


def parallel_candidates(func: PrimFunc, threads: int) -> list[int]:
    sch = Schedule(func)
    (annotated,) = ParallelVectorizeUnroll(threads=threads).apply(sch, sch.get_block("root"))
    (sampled,) = [i for i in annotated.trace.instructions if i.kind == "sample_categorical"][:1]
    return list(sampled.inputs["candidates"])


def test_a_large_program_is_not_offered_a_serial_run_on_several_threads() -> None:
    small = mm_relu(64, 64, 64)  # 2^19 multiply-adds: a serial run may win
    large = mm_relu(256, 256, 256)  # 2^25: at least about 100 us on one core
    assert flop_count(small) <= SERIAL_MAX_FLOPS < flop_count(large)
    assert parallel_candidates(small, threads=2) == [0, 2, 8, 32]
    assert parallel_candidates(large, threads=2) == [2, 8, 32]
    assert parallel_candidates(large, threads=1) == [0, 1, 4, 16]
