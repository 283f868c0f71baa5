"""A blocked convolution whose weights are smaller than its activations splits its
rows across threads, not its channel blocks (``compiler.schedule.partition``), in the
default schedule and the generated space, and computes what it did; one whose weights
outweigh its activations, or a function without constant weights, keeps its loops."""

from __future__ import annotations

import random

import numpy as np
import pytest

import compiler
from compiler import te, topi
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import mark_layout_free
from compiler.ir.node import Node, visit
from compiler.ir.stmt import For, ForKind
from compiler.runtime.module import Module
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule import Schedule, Trace
from compiler.schedule.default import default_schedule
from compiler.schedule.partition import rows_outside_channels
from tests.support.host_targets import runnable_here
from tuner.space.generated import GeneratedSpace

AVX512 = "llvm -mcpu=skylake-avx512 -num-cores=2"
RUNS_HERE = runnable_here(AVX512)  # where the AVX-512 schedules are built to check them


def blocked_conv(channels: int, size: int, constant: bool = True) -> PrimFunc:
    """A 3x3 convolution (padding 1) in NCHW[16]c, then a ReLU."""
    blocks = channels // 16
    data = te.placeholder((1, blocks, size, size, 16), "float32", name="data")
    weight = te.placeholder((blocks, blocks, 3, 3, 16, 16), "float32", name="weight")
    conv = topi.conv2d_nchwc(data, weight, padding=1)
    relu = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu")
    func = te.create_prim_func([data, weight, relu])
    return mark_layout_free(func, ["weight"]) if constant else func


def loop_names(sch: Schedule, block: str, count: int) -> list[str]:
    return [sch.get(rv).loop_var.name for rv in sch.get_loops(sch.get_block(block))[:count]]


def parallel_loops(func: PrimFunc) -> list[str]:
    found: list[str] = []

    def collect(node: Node) -> bool | None:
        if isinstance(node, For) and node.kind is ForKind.PARALLEL:
            found.append(node.loop_var.name)
        return None

    visit(func.body, collect)
    return found


def test_the_rows_go_outside_the_channel_blocks_of_the_convolution_and_its_padding() -> None:
    # Weights 2 x 2 x 9 x 16 x 16 floats (36.9 KB) against a padded input of 115 KB.
    sch = Schedule(blocked_conv(32, 28))
    conv = sch.get_loops(sch.get_block("conv2d_nchwc"))[:3]
    assert [sch.get(rv).loop_var.name for rv in rows_outside_channels(sch, conv)] == [
        "n",
        "y",
        "oo",
    ]
    assert loop_names(sch, "conv2d_nchwc", 3) == ["n", "y", "oo"]
    pad = sch.get_loops(sch.get_block("PadInput"))[:3]
    rows_outside_channels(sch, pad)
    assert loop_names(sch, "PadInput", 3) == ["i0", "i2", "i1"]


@pytest.mark.parametrize(
    "func",
    [blocked_conv(64, 4), blocked_conv(32, 28, constant=False)],
    ids=["weights_outweigh_the_activations", "no_constant_weights"],
)
def test_the_loops_stay_where_the_weights_are_large_or_unknown(func: PrimFunc) -> None:
    sch = Schedule(func)
    loops = sch.get_loops(sch.get_block("conv2d_nchwc"))[:3]
    assert rows_outside_channels(sch, loops) is loops
    assert loop_names(sch, "conv2d_nchwc", 3) == ["n", "oo", "y"]
    assert all(step.kind != "reorder" for step in sch.trace.instructions)


def run(func: PrimFunc, module: Module) -> np.ndarray:
    """``module`` on random inputs of ``func``'s shapes, its weights converted as it
    takes them."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in p.shape]).astype("float32") for p in func.params]
    arrays[-1][:] = np.nan
    packed = pack_arguments(module, "main", arrays)
    module["main"](*packed)
    return packed[-1]


def rows_first(name: str) -> bool:
    """A fused parallel loop's name lists its loops in order: the rows before the
    output channel blocks."""
    parts = name.split("_")
    return "y" not in parts or "oo" not in parts or parts.index("y") < parts.index("oo")


def test_the_default_schedule_splits_a_small_convolution_by_rows() -> None:
    func = blocked_conv(32, 28)
    scheduled = default_schedule(func, target=AVX512)
    loops = parallel_loops(scheduled)
    assert loops and all(rows_first(name) for name in loops), loops
    assert any("y" in name.split("_") for name in loops), loops
    want = run(func, compiler.build(func, target=RUNS_HERE, default_schedule=False))
    np.testing.assert_allclose(
        run(func, compiler.build(scheduled, target=RUNS_HERE)), want, rtol=1e-4
    )


def test_generated_candidates_split_a_small_convolution_by_rows() -> None:
    func = blocked_conv(32, 28)
    want = run(func, compiler.build(func, target=RUNS_HERE, default_schedule=False))
    space = GeneratedSpace(func, target=AVX512)
    rng = random.Random(4)
    candidates = [space.sample(rng) for _ in range(4)]
    programs = [space.program(candidate).func for candidate in candidates]
    loops = [name for program in programs for name in parallel_loops(program)]
    assert all(rows_first(name) for name in loops) and any("y" in n.split("_") for n in loops)
    sch = Schedule(func)
    Trace.from_json(candidates[0].trace_json).apply_to_schedule(sch)
    got = run(func, compiler.build(sch.mod["main"], target=RUNS_HERE))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
