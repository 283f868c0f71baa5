"""The registered templates: every candidate builds and computes the right result, or is
refused with a ScheduleError, on small odd shapes; and the spaces reach the
schedules known to be fast."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

import compiler
from compiler import te, topi
from compiler.ir.function import PrimFunc
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule import ScheduleError, Trace
from compiler.schedule import primitives as P
from compiler.workload.spec import workload_from_spec
from tuner.space import TemplateSpace

SPECS = {
    "matmul.x86": {"op": "matmul", "args": {"m": 12, "n": 40, "k": 9}},
    "batch_matmul.x86": {"op": "batch_matmul", "args": {"batch": 3, "m": 6, "n": 10, "k": 7}},
    "dense.x86": {
        "op": "dense",
        "args": {"batch": 6, "in_features": 10, "out_features": 12, "activation": "relu"},
    },
    "conv2d_nchw.x86": {
        "op": "conv2d_nchw_bias_relu",
        "args": {
            "batch": 1,
            "in_channels": 6,
            "height": 9,
            "width": 10,
            "out_channels": 8,
            "kernel": 3,
            "padding": 1,
        },
    },
    "depthwise_conv2d_nchw.x86": {
        "op": "depthwise_conv2d_nchw",
        "args": {
            "batch": 1,
            "channels": 6,
            "height": 9,
            "width": 10,
            "kernel": 3,
            "padding": 1,
            "stride": 2,
        },
    },
}
# Output channels that fill whole vectors, and a constant kernel: the channels
# micro-kernel is offered.
CONSTANT_KERNEL_CONV = {
    "op": "conv2d_nchw_bias_relu",
    "args": {
        "batch": 1,
        "in_channels": 5,
        "height": 6,
        "width": 10,
        "out_channels": 32,
        "kernel": 3,
        "padding": 1,
        "stride": 1,
    },
    "constants": ["kernel"],
}
CONFIGS_PER_TEMPLATE = 10
AVX2 = "llvm -mcpu=znver3 -mattr=+avx,+avx2"
AVX512 = "llvm -mcpu=skylake-avx512"
CONV_56 = {
    "op": "conv2d_nchw",
    "args": {
        "batch": 1,
        "in_channels": 64,
        "height": 56,
        "width": 56,
        "out_channels": 64,
        "kernel": 3,
        "padding": 1,
    },
}


def _inputs_and_expected(
    func: PrimFunc, rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray]:
    """Random arguments for ``func`` and the unscheduled build's output on them."""
    args = [
        rng.standard_normal([int(d.value) for d in p.shape]).astype("float32") for p in func.params
    ]
    expected = np.empty_like(args[-1])
    compiler.build(func, default_schedule=False)(*args[:-1], expected)
    return args, expected


@pytest.mark.parametrize("name", sorted(SPECS))
def test_sampled_candidates_compute_the_right_result(name: str) -> None:
    func = workload_from_spec(SPECS[name])
    space = TemplateSpace(func, name)
    args, expected = _inputs_and_expected(func, np.random.default_rng(3))
    picks = random.Random(name)
    built = refused = 0
    while built < CONFIGS_PER_TEMPLATE:
        point = space.random_decisions(picks)
        try:
            candidate = space.candidate(point)
        except ScheduleError:
            refused += 1
            assert refused < 50, f"{name}: nearly every sampled point is illegal"
            continue
        out = np.full_like(expected, np.nan)
        compiler.build(space.program(candidate).func)(*args[:-1], out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(point))
        back = space.candidate_from_trace(Trace.from_json(candidate.trace_json))
        assert back is not None and back.decisions == point
        built += 1


def _matmul_bias_gelu() -> PrimFunc:
    """A model's first feed-forward matmul with its GELU as the graph fuses it: the
    bias add's sum ``h`` read twice, by the divide and by the multiply."""
    a = te.placeholder((12, 9), name="A")
    b = te.placeholder((9, 40), name="B")
    bias = te.placeholder((40,), name="bias")
    product = topi.matmul(a, b)
    h = te.compute((12, 40), lambda i, j: product[i, j] + bias[j], name="T_add")
    scaled = te.compute((12, 40), lambda i, j: h[i, j] / math.sqrt(2), name="T_divide")
    erf = te.compute((12, 40), lambda i, j: te.erf(scaled[i, j]), name="T_erf")
    shifted = te.compute((12, 40), lambda i, j: erf[i, j] + 1.0, name="T_add_1")
    gated = te.compute((12, 40), lambda i, j: h[i, j] * shifted[i, j], name="T_multiply")
    out = te.compute((12, 40), lambda i, j: gated[i, j] * 0.5, name="T_multiply_1")
    return te.create_prim_func([a, b, bias, out])


def test_the_matmul_template_takes_an_activation_that_reads_the_bias_add_twice() -> None:
    """Every sampled point is a program (none used to be: the epilogue was folded in
    as a chain) that computes the matmul and its GELU from the register tile."""
    func = _matmul_bias_gelu()
    space = TemplateSpace(func, "matmul.x86")
    args, expected = _inputs_and_expected(func, np.random.default_rng(5))
    picks = random.Random(7)
    for _ in range(6):
        point = space.random_decisions(picks)
        program = space.program(space.candidate(point)).func
        assert {"T_add", "T_erf", "T_multiply_1"}.isdisjoint(P.block_names(program))
        out = np.full_like(expected, np.nan)
        compiler.build(program)(*args[:-1], out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(point))


def _scores() -> PrimFunc:
    """Attention's scores ``Q K^T``: the right operand read as ``K[p, j, k]``."""
    q = te.placeholder((3, 8, 12), name="Q")
    k = te.placeholder((3, 40, 12), name="K")
    return te.create_prim_func([q, k, topi.batch_matmul(q, k, transpose_b=True)])


@pytest.mark.parametrize("pack", ["j0", "k0"])
def test_a_right_operand_read_across_its_rows_is_packed_transposed(pack: str) -> None:
    """The vector loop over ``j`` reads the packed panel contiguously (it gathered
    at a stride of K from a copy in K's own layout), and the results stay right."""
    func = _scores()
    space = TemplateSpace(func, "batch_matmul.x86", target=AVX512)
    args, expected = _inputs_and_expected(func, np.random.default_rng(11))
    picks = random.Random(pack)
    checked = refused = 0
    while checked < 4:
        point = {knob.name: picks.choice(knob.entities) for knob in space.knobs}
        point["pack_b"] = pack
        try:
            candidate = space.candidate(space.decisions_of(point))
        except ScheduleError:
            refused += 1
            assert refused < 50, f"packing at {pack}: nearly every sampled point is illegal"
            continue
        program = space.program(candidate).func
        copy = next(b for b in program.body.block.alloc_buffers if b.name == "K_global")
        assert [int(d.value) for d in copy.shape] == [3, 12, 40]
        out = np.full_like(expected, np.nan)
        compiler.build(program)(*args[:-1], out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(point))
        checked += 1


@pytest.mark.parametrize("workload", ["matmul_bias_gelu", "scores"])
def test_every_order_packing_and_parallel_grain_of_a_product_is_legal(workload: str) -> None:
    """A panel packed at ``j0`` sits in ``j0`` beside the loops under it; parallel
    fusion used to reach past it, and about one random point in eight was refused."""
    func = _matmul_bias_gelu() if workload == "matmul_bias_gelu" else _scores()
    space = TemplateSpace(func, "matmul.x86" if workload == "matmul_bias_gelu" else None)
    knobs = {knob.name: knob.entities for knob in space.knobs}
    picks = random.Random(workload)
    for order, pack, grain in itertools.product(knobs["order"], knobs["pack_b"], knobs["parallel"]):
        point = {name: picks.choice(entities) for name, entities in knobs.items()}
        point.update(order=order, pack_b=pack, parallel=grain)
        space.candidate(space.decisions_of(point))


def test_the_matmul_space_holds_the_hand_schedule_and_its_neighbours() -> None:
    """benchmarks/gemm.py's schedule: row blocks of 4 unrolled, panels of 16 vectorized,
    k blocks of 256, B packed per panel, outer rows in parallel."""
    func = workload_from_spec({"op": "matmul", "args": {"m": 1024, "n": 1024, "k": 1024}})
    space = TemplateSpace(func, "matmul.x86", target=AVX2)
    wanted = {
        "tile_i": (4, 64, 4),
        "tile_j": (64, 16),
        "tile_k": (4, 256),
        "order": (0, 1, 2, 3),
        "pack_b": "j0",
        "parallel": 1,
    }
    script = space.program(space.candidate(space.decisions_of(wanted))).func.script()
    assert "T.parallel(4)" in script and "T.vectorized(16)" in script and "T.unroll(4)" in script
    assert {(2, 128, 4), (4, 32, 8), (8, 128, 1)} <= set(space.knobs[0].entities)
    assert {8, 16, 32, 64} == {e[1] for e in space.knobs[1].entities}


def test_conv2d_space_has_packing_vector_width_and_parallel_choices() -> None:
    space = TemplateSpace(workload_from_spec(CONV_56), target=AVX2)
    knobs = {k.name: k for k in space.knobs}
    assert knobs["pack_data"].entities == ("none", "rc0")
    assert knobs["pad"].entities == ("inline", "root")
    assert 8 in {e[1] for e in knobs["tile_x"].entities}
    assert max(e[2] for e in knobs["tile_o"].entities) == 8
    assert space.size > 100_000


def test_unit_tiles_are_legal() -> None:
    """Splits with factors of 1 leave loops of extent 1 beside real ones; cache_write and
    decompose_reduction must still see that the tiles cover the domain exactly."""
    func = workload_from_spec(SPECS["matmul.x86"])
    space = TemplateSpace(func, "matmul.x86", target=AVX2)
    a = np.random.default_rng(0).standard_normal((12, 9)).astype("float32")
    b = np.random.default_rng(1).standard_normal((9, 40)).astype("float32")
    for rows, reduction in (((2, 6, 1), (9, 1)), ((4, 1, 3), (3, 3)), ((12, 1, 1), (1, 9))):
        wanted = {
            "tile_i": rows,
            "tile_j": (5, 8),
            "tile_k": reduction,
            "order": (1, 0, 3, 2),
            "pack_b": "none",
            "parallel": 1,
        }
        candidate = space.candidate(space.decisions_of(wanted))
        out = np.zeros((12, 40), "float32")
        compiler.build(space.program(candidate).func)(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride", [1, 2])
def test_the_channels_micro_kernel_computes_the_right_result(stride: int) -> None:
    """Output channels in vectors, the kernel stored once in the tiles' order and the
    accumulator channels-last, written back to NCHW with the bias and ReLU: random
    tiles and reduction orders against the unscheduled convolution."""
    spec = {**CONSTANT_KERNEL_CONV, "args": {**CONSTANT_KERNEL_CONV["args"], "stride": stride}}
    func = workload_from_spec(spec)
    space = TemplateSpace(func, "conv2d_nchw.x86", target=AVX2)
    knobs = {k.name: k for k in space.knobs}
    assert knobs["vector"].entities == ("columns", "channels")
    args, expected = _inputs_and_expected(func, np.random.default_rng(stride))
    picks = random.Random(stride)
    for _ in range(6):
        wanted = {knob.name: picks.choice(knob.entities) for knob in space.knobs}
        wanted["vector"] = "channels"
        candidate = space.candidate(space.decisions_of(wanted))
        built = compiler.build(space.program(candidate).func)
        packed = pack_arguments(
            built, built.entry_name, [*args[:-1], np.full_like(expected, np.nan)]
        )
        built[built.entry_name](*packed)
        np.testing.assert_allclose(packed[-1], expected, rtol=1e-4, atol=1e-4, err_msg=str(wanted))


def test_the_channels_micro_kernel_needs_a_constant_kernel_and_whole_vectors() -> None:
    """Without a constant kernel (it could not be stored in the tiles' order) or with
    output channels that do not fill whole vectors, only the columns micro-kernel is
    offered."""
    args = CONSTANT_KERNEL_CONV["args"]
    for spec in (
        {"op": "conv2d_nchw_bias_relu", "args": args},
        {**CONSTANT_KERNEL_CONV, "args": {**args, "out_channels": 12}},
    ):
        space = TemplateSpace(workload_from_spec(spec), "conv2d_nchw.x86", target=AVX2)
        assert "vector" not in {k.name for k in space.knobs}


def test_the_channels_micro_kernel_keeps_its_tile_in_vector_registers() -> None:
    """The tile onnxruntime's convolution uses at 56x56: two vectors of channels by
    seven columns, vectorized over the channels, with the accumulator channels-last."""
    func = workload_from_spec({**CONV_56, "constants": ["kernel"]})
    space = TemplateSpace(func, "conv2d_nchw.x86", target=AVX512)
    tiles = {k.name: k for k in space.knobs}["channel_tile"].entities
    sizes = [[int(size) for size in tile.split("x")] for tile in tiles]
    assert "2x1x7" in tiles and all(b * r * c <= 16 for b, r, c in sizes)
    wanted = {knob.name: knob.entities[0] for knob in space.knobs}
    wanted.update(vector="channels", channel_tile="2x1x7")
    script = space.program(space.candidate(space.decisions_of(wanted))).func.script()
    assert "T.vectorized(16)" in script and "T.unroll(7)" in script
    assert 'T.alloc_buffer((1, 56, 56, 64), "float32", scope="local")' in script
