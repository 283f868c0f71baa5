"""Winograd's F(2x2, 3x3) and F(4x4, 3x3) convolutions: their results against
numpy's direct convolution, the kernel transform run once at build time, the tile
transforms unrolled, and a model taking Winograd where it measured faster."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from graph_builder import CONV, GraphBuilder
from hypothesis import example, given, settings
from hypothesis import strategies as st
from quick_measure import QUICK

import compiler
import db
from compiler import te, topi
from compiler.codegen.llvm_module import scalar_copy_loops
from compiler.graph import GraphModule, optimize
from compiler.graph.algorithms import alternatives, choose
from compiler.ir.layout_free import mark_layout_free
from compiler.ir.node import visit
from compiler.ir.stmt import For, ForKind
from compiler.lower.pipeline import lower_func
from compiler.lower.prepack import pack_functions, split_layout_free
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule.default import default_schedule
from compiler.topi.errors import OperatorError
from compiler.topi.reference import conv2d_nchw_im2col
from compiler.workload.flops import flop_count
from compiler.workload.key import workload_key, workload_to_json
from compiler.workload.spec import workload_from_spec
from tuner.space.generated import GeneratedSpace
from workers.base import Candidate
from workers.compile_candidate import build_candidate
from workers.measure import Measurer


def winograd_function(shape, out_channels, padding, tile, *, constant=True):
    data = te.placeholder(shape, name="data")
    kernel = te.placeholder((out_channels, shape[1], 3, 3), name="kernel")
    out = topi.nn.conv2d_winograd_nchw(data, kernel, padding, tile)
    func = te.create_prim_func([data, kernel, out])
    return mark_layout_free(func, ["kernel"]) if constant else func


def run(module, arrays):
    entry = module.entry_name
    packed = pack_arguments(module, entry, arrays)
    module[entry](*packed)
    return packed[-1]


def relative_error(ours, expected) -> float:
    return float(np.abs(ours - expected).max() / np.abs(expected).max())


@settings(max_examples=6, deadline=None)
@given(
    batch=st.integers(1, 2),
    channels=st.integers(1, 6),
    out_channels=st.integers(1, 6),
    height=st.integers(3, 11),
    width=st.integers(3, 11),
    padding=st.sampled_from([0, 1, (1, 0, 2, 1)]),
    tile=st.sampled_from([2, 4]),
    seed=st.integers(0, 2**16),
)
def test_winograd_matches_the_direct_convolution(
    batch, channels, out_channels, height, width, padding, tile, seed
) -> None:
    """Random shapes, odd sizes whose last tile hangs over the image included."""
    rng = np.random.default_rng(seed)
    shape = (batch, channels, height, width)
    module = compiler.build(winograd_function(shape, out_channels, padding, tile), "llvm")
    data = rng.standard_normal(shape).astype("float32")
    kernel = rng.standard_normal((out_channels, channels, 3, 3)).astype("float32")
    expected = conv2d_nchw_im2col(data.astype("float64"), kernel.astype("float64"), 1, padding)
    out = run(module, [data, kernel, np.zeros(expected.shape, "float32")])
    assert relative_error(out, expected) < 1e-3


@pytest.mark.parametrize("tile", [2, 4])
def test_a_resnet_shaped_winograd_is_within_1e_3_of_numpy(tile, rng) -> None:
    shape = (1, 32, 14, 14)
    module = compiler.build(winograd_function(shape, 32, 1, tile), "llvm")
    data = rng.standard_normal(shape).astype("float32")
    kernel = rng.standard_normal((32, 32, 3, 3)).astype("float32")
    expected = conv2d_nchw_im2col(data.astype("float64"), kernel.astype("float64"), 1, 1)
    out = run(module, [data, kernel, np.zeros(expected.shape, "float32")])
    assert relative_error(out, expected) < 1e-3


def test_the_kernel_transform_runs_once_at_build_time() -> None:
    """A constant kernel: the build splits its transform into a pack function, and the
    kernel the caller times takes the transformed (4, 4, C, O) weight."""
    module = compiler.build(winograd_function((1, 4, 8, 8), 6, 1, 2), "llvm")
    packs = pack_functions(module, module.entry_name)
    assert list(packs) == ["kernel"]
    params = {p.name: p.shape for p in module[module.entry_name].signature.params}
    assert params["kernel_pack"] == (4, 4, 4, 6)
    # The transform computes: LLVM optimizes its loops in full (scalar, it ran up to 20x
    # longer in every measurement), unlike a weight's copy into a new layout.
    _, packs = split_layout_free(default_schedule(winograd_function((1, 4, 8, 8), 6, 1, 2)))
    assert scalar_copy_loops(lower_func(packs["kernel"])) == set()
    # Unmarked, the kernel is transformed in every call: no pack function.
    plain = compiler.build(winograd_function((1, 4, 8, 8), 6, 1, 2, constant=False), "llvm")
    assert not pack_functions(plain, plain.entry_name)


def test_the_default_schedule_unrolls_the_tile_transforms() -> None:
    func = default_schedule(winograd_function((1, 8, 14, 14), 8, 1, 4))
    unrolled = []

    def collect(n) -> None:
        if isinstance(n, For) and n.kind is ForKind.UNROLLED:
            unrolled.append(n.loop_var.name)

    visit(func.body, collect)
    # data_pack: e, u and the 6x6 input tile; the output: 4x4 pixels and the 6x6 tile;
    # bgemm: the rows of its register tile (8 output channels are one vector)
    assert len(unrolled) == 9 and "p_1" in unrolled


def test_a_blocked_output_transform_vectorizes_its_channel_block_below_the_tile() -> None:
    """NCHW[x]c: the output's channel block is contiguous in the output and in the
    batched GEMM's result, so it runs innermost, vectorized, under the unrolled 4x4
    pixels and 6x6 tile, summing into a local tile (summed in the output, the kernel
    took seconds to build); the loops over tiles run in parallel."""
    data = te.placeholder((1, 2, 8, 8, 16), name="data")
    kernel = te.placeholder((2, 2, 3, 3, 16, 16), name="kernel")
    out = topi.nn.conv2d_winograd_nchwc(data, kernel, 1, 4)
    func = mark_layout_free(te.create_prim_func([data, kernel, out]), ["kernel"])
    scheduled = default_schedule(func, target="llvm -mcpu=skylake-avx512 -num-cores=2")
    nest = [n for n in loops_in(scheduled) if n.loop_var.name in _OUTPUT_LOOPS]
    assert [(n.loop_var.name, n.kind) for n in nest[-5:]] == [
        ("y_1", ForKind.UNROLLED),
        ("x_1", ForKind.UNROLLED),
        ("ea", ForKind.UNROLLED),
        ("eb", ForKind.UNROLLED),
        ("c", ForKind.VECTORIZED),
    ]
    assert nest[0].kind is ForKind.PARALLEL
    assert 'T.alloc_buffer((1, 2, 8, 8, 16), "float32", scope="local")' in scheduled.script()


_OUTPUT_LOOPS = {"n_cb_y_0_x_0_fused", "y_1", "x_1", "ea", "eb", "c"}


def loops_in(func) -> list[For]:
    found: list[For] = []
    visit(func.body, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def test_winograd_counts_the_direct_convolutions_flops() -> None:
    spec = {
        "op": "conv2d_winograd_nchw",
        "args": {
            "batch": 1,
            "in_channels": 16,
            "height": 14,
            "width": 14,
            "out_channels": 8,
            "padding": 1,
        },
    }
    direct = {**spec, "op": "conv2d_nchw", "args": {**spec["args"], "kernel": 3}}
    assert flop_count(workload_from_spec(spec)) == flop_count(workload_from_spec(direct))
    assert flop_count(workload_from_spec(direct)) == 2 * 16 * 8 * 14 * 14 * 9


@pytest.mark.parametrize(
    ("kernel_shape", "tile", "message"),
    [
        ((4, 4, 5, 5), 2, "3x3 kernel"),
        ((4, 2, 3, 3), 2, "all 4 input channels"),
        ((4, 4, 3, 3), 3, "tile_size 3"),
    ],
)
def test_a_convolution_winograd_cannot_compute_is_refused(kernel_shape, tile, message) -> None:
    data = te.placeholder((1, 4, 8, 8), name="data")
    kernel = te.placeholder(kernel_shape, name="kernel")
    with pytest.raises(OperatorError, match=message):
        topi.nn.conv2d_winograd_nchw(data, kernel, 1, tile)


@pytest.mark.parametrize("tile", [2, 4])
def test_generated_candidates_pass_the_check_against_numpy(tile) -> None:
    """Tuned schedules of the Winograd workload (its kernel transform left plain,
    converted by the measurer before the timed calls) compute the convolution."""
    spec = {
        "op": "conv2d_winograd_nchw",
        "args": {
            "batch": 1,
            "in_channels": 8,
            "height": 9,
            "width": 9,
            "out_channels": 8,
            "padding": 1,
            "tile_size": tile,
        },
        "constants": ["kernel"],
    }
    func = workload_from_spec(spec)
    space = GeneratedSpace(func, target="llvm")
    rng = random.Random(tile)
    for _ in range(2):
        trace = space.sample(rng).trace_json
        candidate = Candidate(workload_to_json(func), trace, "llvm", spec=json.dumps(spec))
        build = build_candidate(candidate)
        assert build.ok, build.error
        result = Measurer(host="here").measure(build, QUICK)
        assert result.ok, result.error


def two_convolutions(rng: np.random.Generator):
    weights = {
        "w1": rng.standard_normal((8, 4, 3, 3)).astype("float32"),
        "w2": rng.standard_normal((8, 8, 3, 3)).astype("float32"),
    }
    b = GraphBuilder()
    b.input("x", (1, 4, 10, 10))
    for name, array in weights.items():
        b.constant(name, array)
    b.node("conv2d", "x", "w1", out="c1", **CONV)
    b.node("relu", "c1", out="r1")
    b.node("conv2d", "r1", "w2", out="y", **{**CONV, "stride": (2, 2)})
    return b.returns("y"), weights


def test_only_a_3x3_stride_1_convolution_has_winograd_alternatives(rng) -> None:
    graph, _ = two_convolutions(rng)
    optimized, groups = optimize(graph, conv_block=0)
    names = [[a.name for a in alternatives(group, optimized)] for group in groups]
    # 10x10 outputs: F(2x2) and F(4x4) both fit; the strided one has none.
    assert names == [
        ["conv2d_relu", "conv2d_relu[winograd2]", "conv2d_relu[winograd4]"],
        ["conv2d"],
    ]


def test_a_model_runs_the_algorithm_that_measured_fastest_and_exports_it(rng, tmp_path) -> None:
    """In NCHW (``test_a_blocked_model_offers_winograd...`` below: blocked)."""
    graph, weights = two_convolutions(rng)
    optimized, groups = optimize(graph, conv_block=0)
    options = alternatives(groups[0], optimized)
    database = db.create("memory")
    for option, seconds in zip(options, [3e-3, 2e-3, 1e-3], strict=True):
        func = option.group.prim_func(optimized)
        database.commit_workload(func)
        trace = GeneratedSpace(func, target="llvm").sample(random.Random(0)).trace_json
        key = workload_key(func)
        database.commit_records([db.Measurement.ok(key, "llvm", trace, [seconds])])

    # Untuned, a small image takes F(2x2), whose default schedule beats the direct one.
    untuned = GraphModule(graph, conv_block=0)
    tuned = GraphModule(graph, database=database, conv_block=0)
    assert [s.kind for s in untuned.plan.steps] == ["conv2d_relu[winograd2]", "conv2d"]
    assert [s.kind for s in tuned.plan.steps] == ["conv2d_relu[winograd4]", "conv2d"]

    x = rng.standard_normal((1, 4, 10, 10)).astype("float32")
    hidden = np.maximum(conv2d_nchw_im2col(x, weights["w1"], 1, 1), 0)
    expected = conv2d_nchw_im2col(hidden, weights["w2"], 2, 1)
    for module in (untuned, tuned):
        np.testing.assert_allclose(module.run(x=x)["y"], expected, rtol=1e-4, atol=1e-4)

    tuned.export(tmp_path / "model")
    with np.load(tmp_path / "model" / "weights.npz") as stored:
        transformed = [stored[name].shape for name in stored.files if name.startswith("w1@")]
    assert transformed == [(6, 6, 4, 8)]  # the weight is stored transformed
    loaded = GraphModule.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.run(x=x)["y"], tuned.run(x=x)["y"])


@pytest.mark.parametrize(
    ("seconds", "runs"),
    [
        ([1.0e-3, 0.95e-3, 2e-3], "conv2d_relu"),  # 5 % faster: within the edge
        ([1.0e-3, 0.85e-3, 2e-3], "conv2d_relu[winograd2]"),
    ],
)
def test_a_winograd_form_is_taken_only_when_faster_by_a_margin(
    rng, seconds: list[float], runs: str
) -> None:
    """Its records flatter it more than the direct form's do (``WINOGRAD_EDGE``)."""
    graph, _ = two_convolutions(rng)
    optimized, groups = optimize(graph, conv_block=0)
    database = db.create("memory")
    for option, best in zip(alternatives(groups[0], optimized), seconds, strict=True):
        func = option.group.prim_func(optimized)
        database.commit_workload(func)
        trace = GeneratedSpace(func, target="llvm").sample(random.Random(0)).trace_json
        database.commit_records([db.Measurement.ok(workload_key(func), "llvm", trace, [best])])
    chosen, _ = choose(groups[0], optimized, "llvm", database)
    assert chosen.name == runs


def to_blocked(x: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


@settings(max_examples=6, deadline=None)
# One 2x2 tile of four channels in and out: LLVM reordered the loads and stores of the
# batched GEMM's accumulator once its tile loop was marked parallel (NaN out).
@example(blocks=1, out_blocks=1, block=4, out_block=4, height=3, width=3, padding=0, tile=2, seed=0)
@given(
    blocks=st.integers(1, 2),
    out_blocks=st.integers(1, 2),
    block=st.sampled_from([2, 4]),
    out_block=st.sampled_from([2, 4]),
    height=st.integers(3, 11),
    width=st.integers(3, 11),
    padding=st.sampled_from([0, 1]),
    tile=st.sampled_from([2, 4]),
    seed=st.integers(0, 2**16),
)
def test_blocked_winograd_matches_the_direct_convolution(
    blocks, out_blocks, block, out_block, height, width, padding, tile, seed
) -> None:
    """NCHW[x]c in and out, input and output blocks of their own sizes."""
    rng = np.random.default_rng(seed)
    channels, out_channels = blocks * block, out_blocks * out_block
    data = te.placeholder((1, blocks, height, width, block), name="data")
    kernel = te.placeholder((out_blocks, blocks, 3, 3, block, out_block), name="kernel")
    out = topi.nn.conv2d_winograd_nchwc(data, kernel, padding, tile)
    func = mark_layout_free(te.create_prim_func([data, kernel, out]), ["kernel"])
    module = compiler.build(func, "llvm")
    x = rng.standard_normal((1, channels, height, width)).astype("float32")
    w = rng.standard_normal((out_channels, channels, 3, 3)).astype("float32")
    w_blocked = np.ascontiguousarray(
        w.reshape(out_blocks, out_block, blocks, block, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    )
    expected = conv2d_nchw_im2col(x.astype("float64"), w.astype("float64"), 1, padding)
    result = np.zeros(tuple(int(d) for d in out.shape), "float32")
    ours = run(module, [to_blocked(x, block), w_blocked, result])
    assert relative_error(ours, to_blocked(expected, out_block)) < 1e-3


def test_a_blocked_model_offers_winograd_and_runs_it_where_it_measured_fastest(rng) -> None:
    graph, weights = two_convolutions(rng)
    optimized, groups = optimize(graph, conv_block=4)
    names = [[a.name for a in alternatives(group, optimized)] for group in groups]
    first = "layout_transform_conv2d_nchwc_relu"  # reads the NCHW input in place
    assert names[0] == [first, f"{first}[winograd2]", f"{first}[winograd4]"]
    assert [len(n) for n in names[1:]] == [1] * (len(names) - 1)  # stride 2: direct only
    database = db.create("memory")
    for option, seconds in zip(alternatives(groups[0], optimized), [3e-3, 1e-3, 2e-3], strict=True):
        func = option.group.prim_func(optimized)
        database.commit_workload(func)
        trace = GeneratedSpace(func, target="llvm").sample(random.Random(0)).trace_json
        database.commit_records([db.Measurement.ok(workload_key(func), "llvm", trace, [seconds])])

    untuned = GraphModule(graph, conv_block=4)
    tuned = GraphModule(graph, database=database, conv_block=4)
    assert "[" not in "".join(s.kind for s in untuned.plan.steps)  # direct, register-tiled
    assert tuned.plan.steps[0].kind == f"{first}[winograd2]"
    x = rng.standard_normal((1, 4, 10, 10)).astype("float32")
    hidden = np.maximum(conv2d_nchw_im2col(x, weights["w1"], 1, 1), 0)
    expected = conv2d_nchw_im2col(hidden, weights["w2"], 2, 1)
    for module in (untuned, tuned):
        np.testing.assert_allclose(module.run(x=x)["y"], expected, rtol=1e-4, atol=1e-4)
