"""Constant weights laid out the way the tiled loops read them: the derived layout,
its conversion split out of the kernel by every build, the packed and unpacked
kernels against numpy on random data, the generated space and the measurer, and a
whole model whose exported weights are stored packed."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from graph_builder import CONV, GraphBuilder
from hypothesis import given, settings
from hypothesis import strategies as st
from quick_measure import QUICK

import compiler
import db
from compiler import te
from compiler.abi.signature import RuntimeArgumentError
from compiler.graph import GraphModule, optimize
from compiler.ir.layout_free import (
    LAYOUT_REWRITE_ATTR,
    LayoutFreeError,
    layout_free_positions,
    mark_layout_free,
)
from compiler.lower.prepack import pack_functions
from compiler.runtime import Module
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule import Schedule, Trace
from compiler.schedule.default import schedule_by_default
from compiler.schedule.layout_rewrite import rewrite_layout_free
from compiler.schedule.primitives.dataflow import leaf_realizes
from compiler.target.llvm import LLVMTarget
from compiler.topi.reference import conv2d_nchw_im2col
from compiler.tuned.replay import REPLAYS
from compiler.workload.key import workload_key, workload_to_json
from compiler.workload.spec import WorkloadError, workload_from_spec
from tuner.space.generated import GeneratedSpace
from tuner.space_choice import choose_space
from workers.base import Candidate
from workers.compile_candidate import build_candidate
from workers.measure import Measurer

DENSE = {"op": "dense", "args": {"batch": 3, "in_features": 48, "out_features": 40}}


def matmul(m: int, n: int, k: int) -> compiler.ir.PrimFunc:
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def divisors(size: int) -> list[int]:
    return [d for d in range(1, size + 1) if size % d == 0]


@st.composite
def tilings(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """Splits of j (24) in three and k (20) in two, and an order of the six loops."""
    j0 = draw(st.sampled_from(divisors(24)))
    j1 = draw(st.sampled_from(divisors(24 // j0)))
    k0 = draw(st.sampled_from(divisors(20)))
    order = draw(st.permutations(range(6)))
    return [j0, j1, 24 // (j0 * j1)], [k0, 20 // k0], list(order)


@settings(max_examples=25, deadline=None)
@given(tilings())
def test_a_rewritten_weight_computes_what_the_caller_layout_does(tiling) -> None:
    """Whatever the tiling, the weight read in the derived layout (converted by the
    pack function) gives numpy's product; the kernel no longer converts it."""
    j_split, k_split, order = tiling
    sch = Schedule(mark_layout_free(matmul(5, 24, 20), ["B"]))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    loops = [i, *sch.split(j, j_split), *sch.split(k, k_split)]
    sch.reorder(*[loops[p] for p in order])
    rewritten = rewrite_layout_free(sch)
    module = compiler.build(sch.mod)
    assert sorted(module) == sorted(["main", *[f"main__pack_{p}" for p in rewritten]])
    assert_computes_matmul(module, 5, 24, 20)


def assert_computes_matmul(module: Module, m: int, n: int, k: int) -> None:
    """``module``'s ``main``, its weight packed, gives numpy's product on random data."""
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, k)).astype("float32")
    b = rng.uniform(-1, 1, (k, n)).astype("float32")
    arrays = pack_arguments(module, "main", [a, b, np.zeros((m, n), "float32")])
    module["main"](*arrays)
    np.testing.assert_allclose(arrays[2], a @ b, rtol=1e-5, atol=1e-5)


def test_the_layout_follows_the_loops_that_read_the_weight() -> None:
    sch = Schedule(mark_layout_free(matmul(8, 64, 32), ["B"]))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [4, 16])
    k0, k1 = sch.split(k, [8, 4])
    sch.reorder(j0, i, k0, k1, j1)
    assert rewrite_layout_free(sch) == ["B"]
    (rewrite,) = [inst for inst in sch.trace.instructions if inst.kind == "transform_layout"]
    assert rewrite.inputs["index_map"] == "d0, d1 -> d1 // 16, d0, d1 % 16"


def test_a_weight_copied_into_its_layout_is_compiled_rolled_and_scalar(tmp_path) -> None:
    """The pack function runs once per weight: LLVM is told to leave its copy loops
    rolled and scalar, a short compile (unrolled and vectorized, a permuted copy cost
    up to 235 ms of a build), and the weight it packs still gives numpy's product."""
    sch = Schedule(mark_layout_free(matmul(8, 64, 32), ["B"]))
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [4, 16])
    k0, k1 = sch.split(k, [8, 4])
    sch.reorder(j0, i, k0, j1, k1)
    assert rewrite_layout_free(sch) == ["B"]
    module = compiler.build(sch.mod, dump_ir=tmp_path)
    (optimized,) = tmp_path.glob("*-llvm-optimized.ll")
    bodies = {
        name: body
        for name, body in re.findall(r"define [^@]*@(\w+)(\(.*?\n}\n)", optimized.read_text(), re.S)
    }
    assert set(bodies) >= {"tensortune_main", "tensortune_main__pack_B"}
    assert "x float>" not in bodies["tensortune_main__pack_B"]
    assert_computes_matmul(module, 8, 64, 32)


def test_an_unmarked_weight_and_an_unchanged_layout_are_left_alone() -> None:
    unmarked = Schedule(matmul(8, 16, 8))
    assert rewrite_layout_free(unmarked) == [] and len(unmarked.trace.instructions) == 0
    in_order = Schedule(mark_layout_free(matmul(8, 16, 8), ["B"]))
    i, j, k = in_order.get_loops(in_order.get_block("C"))
    in_order.reorder(i, k, j)
    assert rewrite_layout_free(in_order) == []  # the loops already read B[k, j] in order
    assert list(compiler.build(in_order.mod)) == ["main"]


def test_the_mark_is_part_of_the_workload_and_names_a_wrong_parameter() -> None:
    plain = workload_from_spec(DENSE)
    marked = workload_from_spec({**DENSE, "constants": ["W"]})
    assert layout_free_positions(marked) == (1,) and layout_free_positions(plain) == ()
    assert workload_key(marked) != workload_key(plain)
    listing = r"\['X', 'W', 'bias', 'T_dense_bias'\]"
    with pytest.raises(WorkloadError, match=rf"constants: .*'V'.*{listing}"):
        workload_from_spec({**DENSE, "constants": ["V"]})
    with pytest.raises(LayoutFreeError, match="output"):
        mark_layout_free(plain, ["T_dense_bias"])


def rewrites(trace: str, param: str) -> bool:
    """Whether ``trace`` lays out the parameter ``param``."""
    return any(
        inst.kind == "transform_layout" and inst.inputs["buffer"] == param
        for inst in Trace.from_json(trace).instructions
    )


CONV2D = {
    "op": "conv2d_nchw",
    "args": {
        "batch": 1,
        "in_channels": 8,
        "height": 10,
        "width": 10,
        "out_channels": 16,
        "kernel": 3,
        "padding": 1,
    },
}
CONSTANT_WEIGHT = {
    "dense": ({**DENSE, "constants": ["W"]}, "W"),
    "conv2d": ({**CONV2D, "constants": ["kernel"]}, "kernel"),
}


def rewriting_candidate(space, param: str, seed: int) -> str:
    """The trace of a candidate of ``space`` that rewrites the layout of ``param``."""
    rng = random.Random(seed)
    for _ in range(200):
        candidate = space.sample(rng)
        if rewrites(candidate.trace_json, param):
            return candidate.trace_json
    raise AssertionError(f"no candidate of 200 rewrote the layout of {param}")


@pytest.mark.parametrize("space_kind", ["generated", "template"])
@pytest.mark.parametrize("op", sorted(CONSTANT_WEIGHT))
def test_the_measurer_converts_the_weight_once_outside_the_timed_calls(op, space_kind) -> None:
    """Candidates of both spaces that store the weight in their own layout pass the
    check against numpy: the measurer calls the pack function before the kernel."""
    spec, param = CONSTANT_WEIGHT[op]
    func = workload_from_spec(spec)
    space = choose_space(space_kind, func, target="llvm")
    for seed in range(2):
        trace = rewriting_candidate(space, param, seed)
        candidate = Candidate(workload_to_json(func), trace, "llvm", spec=json.dumps(spec))
        build = build_candidate(candidate)
        assert build.ok, build.error
        result = Measurer(host="here").measure(build, QUICK)
        assert result.ok, result.error


def conv_relu_graph(rng: np.random.Generator) -> tuple[GraphBuilder, dict[str, np.ndarray]]:
    weights = {"w1": rng.standard_normal((8, 4, 3, 3)), "w2": rng.standard_normal((8, 8, 1, 1))}
    b = GraphBuilder()
    b.input("x", (1, 4, 10, 10))
    for name, array in weights.items():
        b.constant(name, array)
    b.node("conv2d", "x", "w1", out="c1", **CONV)
    b.node("relu", "c1", out="r1")
    b.node("conv2d", "r1", "w2", out="y", **{**CONV, "padding": (0, 0, 0, 0)})
    return b, {k: v.astype("float32") for k, v in weights.items()}


def database_with_rewritten_convolutions(graph) -> db.Database:
    """A database whose best record for each convolution rewrites its weight."""
    database = db.create("memory")
    optimized, groups = optimize(graph, conv_block=0)
    for group in groups:
        func = group.prim_func(optimized)
        space = GeneratedSpace(func, target="llvm")
        rng = random.Random(3)
        trace = next(
            c.trace_json
            for c in (space.sample(rng) for _ in range(50))
            if rewrites(c.trace_json, func.params[1].name)
        )
        database.commit_workload(func)
        database.commit_records([db.Measurement.ok(workload_key(func), "llvm", trace, [1e-3])])
    return database


def test_a_model_runs_and_exports_its_weights_packed(rng, tmp_path) -> None:
    b, weights = conv_relu_graph(rng)
    graph = b.returns("y")
    # NCHW, whose weights the tuned schedules rewrite (a blocked model's are blocked
    # once, by the graph pass)
    module = GraphModule(graph, database=database_with_rewritten_convolutions(graph), conv_block=0)
    packed = [v for step in module.plan.steps for v in step.inputs if "@" in v]
    assert len(packed) == 2
    assert all(pack_functions(module.module, step.function) for step in module.plan.steps)

    x = rng.standard_normal((1, 4, 10, 10)).astype("float32")
    hidden = np.maximum(conv2d_nchw_im2col(x, weights["w1"], 1, 1), 0)
    expected = conv2d_nchw_im2col(hidden, weights["w2"], 1, 0)
    np.testing.assert_allclose(module.run(x=x)["y"], expected, rtol=1e-4, atol=1e-4)

    module.export(tmp_path / "model")
    with np.load(tmp_path / "model" / "weights.npz") as stored:
        assert sorted(stored.files) == sorted(packed)  # the caller's layouts are not kept
        shapes = {name: stored[name].shape for name in stored.files}
    assert all(shape != weights[name.split("@")[0]].shape for name, shape in shapes.items())
    loaded = GraphModule.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.run(x=x)["y"], module.run(x=x)["y"])


def test_features_and_lowering_see_the_kernel_without_the_conversion() -> None:
    """The replay cache's kernel (what the cost model reads, what a build runs) takes
    the converted weight and holds no conversion; the scheduled function still does."""
    spec, param = CONSTANT_WEIGHT["dense"]
    func = workload_from_spec(spec)
    trace = rewriting_candidate(choose_space("generated", func, target="llvm"), param, 0)
    program = REPLAYS.replayed(func, trace)
    assert conversions(program.func) == ["W"] and conversions(program.kernel) == []
    assert program.kernel.params[1].shape != func.params[1].shape
    assert [p.name for p in program.lowered.params] == [p.name for p in program.kernel.params]


def conversions(func: compiler.ir.PrimFunc) -> list[str]:
    return [
        str(realize.block.annotations[LAYOUT_REWRITE_ATTR])
        for realize in leaf_realizes(func.body)
        if LAYOUT_REWRITE_ATTR in realize.block.annotations
    ]


def test_the_default_schedule_stores_a_dense_weight_the_way_its_loops_read_it(rng) -> None:
    """Dense reads ``W[j, k]`` across its vector loop over ``j``; with W constant the
    default schedule moves ``j`` innermost anyway and stores W as ``W[k, j]``."""
    spec, _ = CONSTANT_WEIGHT["dense"]
    func = workload_from_spec(spec)
    sch = schedule_by_default(func, target="llvm")
    (rewrite,) = [i for i in sch.trace.instructions if i.kind == "transform_layout"]
    assert rewrite.inputs["index_map"] == "d0, d1 -> d1, d0"
    module = compiler.build(func)
    assert sorted(module) == ["main", "main__pack_W"]
    x = rng.standard_normal((3, 48)).astype("float32")
    w = rng.standard_normal((40, 48)).astype("float32")
    bias = rng.standard_normal(40).astype("float32")
    arrays = pack_arguments(module, "main", [x, w, bias, np.zeros((3, 40), "float32")])
    module["main"](*arrays)
    np.testing.assert_allclose(arrays[-1], x @ w.T + bias, rtol=1e-5, atol=1e-5)


def test_the_default_schedule_reads_a_large_weight_in_panels_that_fit_the_cache(rng) -> None:
    """B (768 x 768) is larger than half the L2 cache: its columns are split into
    panels, the panels run outermost, and B is stored panel by panel."""
    func = workload_from_spec(
        {"op": "matmul", "args": {"m": 16, "n": 768, "k": 768}, "constants": ["B"]}
    )
    target = LLVMTarget.parse("llvm")
    sch = schedule_by_default(func, target=target)
    (rewrite,) = [i for i in sch.trace.instructions if i.kind == "transform_layout"]
    match = re.fullmatch(r"d0, d1 -> d1 // (\d+), d0, d1 % (\d+)", rewrite.inputs["index_map"])
    assert match is not None and match.group(1) == match.group(2)
    panel = int(match.group(1))
    lanes = target.vector_bits // 32
    assert panel % lanes == 0 and 768 % panel == 0
    assert panel * 768 * 4 <= target.capabilities.l2_bytes // 2
    module = compiler.build(func, target=target)
    a = rng.standard_normal((16, 768)).astype("float32")
    b = rng.standard_normal((768, 768)).astype("float32")
    arrays = pack_arguments(module, "main", [a, b, np.zeros((16, 768), "float32")])
    module["main"](*arrays)
    np.testing.assert_allclose(arrays[-1], a @ b, rtol=1e-4, atol=1e-3)


def test_a_loop_of_one_iteration_does_not_stop_the_rewrite() -> None:
    """j split [2, 1, 32]: the unit loop has the same coefficient as the inner piece."""
    sch = Schedule(mark_layout_free(matmul(8, 64, 32), ["B"]))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1, j2 = sch.split(j, [2, 1, 32])
    sch.reorder(j0, i, j1, k, j2)
    assert rewrite_layout_free(sch) == ["B"]
    (rewrite,) = [inst for inst in sch.trace.instructions if inst.kind == "transform_layout"]
    assert rewrite.inputs["index_map"] == "d0, d1 -> d1 // 32, d0, d1 % 32"


def test_calling_the_module_whole_with_unconverted_weights_says_what_to_do() -> None:
    spec, _ = CONSTANT_WEIGHT["dense"]
    module = compiler.build(workload_from_spec(spec))
    arrays = [np.ones((3, 48), "float32"), np.ones((40, 48), "float32")]
    with pytest.raises(RuntimeArgumentError, match=r"pack_arguments\(module, 'main', arrays\)"):
        module(*arrays, np.ones(40, "float32"), np.zeros((3, 40), "float32"))
