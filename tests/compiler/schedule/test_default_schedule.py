"""The default schedule: the same results as the naive build for every operator, the
moves it is meant to make, no move where a primitive refuses, and how
compiler.build decides that a function comes with no schedule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ir_interpreter import run_func
from op_examples import EXAMPLES

import compiler
from compiler import te, topi
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.layout_free import mark_layout_free
from compiler.ir.node import Node, visit
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterKind,
    IterVar,
    true_predicate,
)
from compiler.ir.structural import structural_equal
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule import Schedule
from compiler.schedule.default import (
    apply_default_schedule,
    default_schedule,
    is_unscheduled,
    schedule_by_default,
)
from compiler.schedule.schedule import SCHEDULED_ATTR
from compiler.workload.spec import workload_from_spec

ROOT = Path(__file__).resolve().parents[3]
AVX2 = "llvm -mcpu=znver3 -num-cores=2"  # 8 float32 lanes, two threads, on any x86-64 host


def spec(op: str, **args: Any) -> PrimFunc:
    return workload_from_spec({"op": op, "args": args})


def shape_of(buffer: Buffer) -> tuple[int, ...]:
    return tuple(int(d) for d in buffer.shape)


def inputs_for(func: PrimFunc, seed: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 2.0, shape_of(p)).astype(p.dtype) for p in func.params[:-1]]


def run(lib: Any, func: PrimFunc, arrays: list[np.ndarray]) -> np.ndarray:
    out = np.full(shape_of(func.params[-1]), np.nan, dtype=func.params[-1].dtype)
    lib(*arrays, out)
    return out


def loops(func: PrimFunc) -> list[For]:
    found: list[For] = []

    def collect(n: Node) -> None:
        if isinstance(n, For):
            found.append(n)

    visit(func.body, collect)
    return found


def kinds(func: PrimFunc) -> list[ForKind]:
    return [loop.kind for loop in loops(func)]


# ---- every operator: the same answer ---------------------------------------------------


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_every_op_computes_what_the_naive_build_computes(op: str) -> None:
    func = spec(op, **EXAMPLES[op])
    arrays = inputs_for(func)
    naive = run(compiler.build(func, default_schedule=False), func, arrays)
    assert np.isfinite(naive).all()
    default = run(compiler.build(func), func, arrays)
    np.testing.assert_allclose(default, naive, rtol=1e-5, atol=1e-5)
    # every move allowed: 8 lanes, two threads, parallel whatever the size
    forced = default_schedule(func, target=AVX2, min_parallel_work=1)
    assert ForKind.PARALLEL in kinds(forced) or op in ("sum", "max", "min", "mean")
    np.testing.assert_allclose(run(compiler.build(forced, AVX2), func, arrays), naive, rtol=1e-5)
    # the interpreter shares no code with LLVM and checks every access is in bounds
    interpreted = np.full_like(naive, np.nan)
    run_func(forced, *[a.copy() for a in arrays], interpreted)
    np.testing.assert_allclose(interpreted, naive, rtol=1e-5, atol=1e-5)


ODD_SHAPES = [
    ("matmul", {"m": 37, "n": 53, "k": 29}, lambda a, b: a @ b),
    ("batch_matmul", {"batch": 3, "m": 17, "n": 41, "k": 19}, lambda a, b: a @ b),
    ("min", {"shape": [67, 1001], "axis": 0}, lambda x: x.min(axis=0)),
    ("relu", {"shape": [100003]}, lambda x: np.maximum(x, 0)),
    ("add", {"shape_a": [3, 5003], "shape_b": [5003]}, lambda a, b: a + b),
    ("softmax", {"shape": [5, 131]}, None),
    (
        "conv2d_nchw",
        {
            "batch": 1,
            "in_channels": 5,
            "height": 23,
            "width": 19,
            "out_channels": 7,
            "kernel": 3,
            "stride": 2,
            "padding": 1,
        },
        None,
    ),
]


@pytest.mark.parametrize(("op", "args", "reference"), ODD_SHAPES, ids=[c[0] for c in ODD_SHAPES])
@pytest.mark.parametrize("target", ["llvm", AVX2])
def test_odd_sizes_with_guards_and_reorders(
    op: str, args: dict[str, Any], reference: Any, target: str
) -> None:
    func = spec(op, **args)
    arrays = inputs_for(func)
    want = (
        reference(*arrays)
        if reference
        else run(compiler.build(func, default_schedule=False), func, arrays)
    )
    scheduled = default_schedule(func, target=target, min_parallel_work=1)
    got = run(compiler.build(scheduled, target), func, arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- the moves -------------------------------------------------------------------------


def test_matmul_runs_a_register_tile_of_rows_by_two_vectors_rows_in_parallel() -> None:
    """Each k step loads two vectors of B for four rows of A: eight accumulators."""
    func = default_schedule(spec("matmul", m=64, n=96, k=80), target=AVX2)
    names = [loop.loop_var.name for loop in loops(func)]
    assert names[:7] == ["i_0", "j_0", "i_1_init", "j_1_init", "k", "i_1", "j_1"]
    assert kinds(func)[:7] == [
        ForKind.PARALLEL,
        ForKind.SERIAL,
        ForKind.SERIAL,
        ForKind.VECTORIZED,
        ForKind.SERIAL,
        ForKind.UNROLLED,
        ForKind.VECTORIZED,
    ]
    assert [int(loop.extent) for loop in loops(func)][4:7] == [80, 4, 16]
    assert 'T.block("T_matmul_init")' in func.script()


def test_a_row_reduction_keeps_its_reduction_innermost() -> None:
    """softmax's sums read a row along the reduction: a column innermost would gather."""
    func = default_schedule(spec("softmax", shape=[12, 128, 128]), target=AVX2)
    script = func.script()
    max_nest = script.split('T.block("T_softmax_maxelem")')[0].rsplit("T.parallel", 1)[1]
    assert "k2 in T.serial(128)" in max_nest
    assert kinds(func).count(ForKind.PARALLEL) == 4
    assert kinds(func).count(ForKind.VECTORIZED) == 2  # exp and norm; not the sums


def test_a_short_reduction_stays_innermost() -> None:
    """A 3x3 window is unrolled by LLVM; moving the row inside it only costs reloads."""
    func = default_schedule(
        spec("depthwise_conv2d_nchw", batch=1, channels=16, height=56, width=56, kernel=3)
    )
    assert [loop.loop_var.name for loop in loops(func)][-2:] == ["ry", "rx"]


def test_a_fused_transpose_read_is_seen_through_its_divisions() -> None:
    """An attention product ``P @ V`` whose ``V`` a fused reshape and transpose reads
    at ``v[pos // 64 % 128, pos // 8192 % 12 * 64 + pos % 64]`` of the flat position
    ``pos``: under the loops' ranges that is ``v[k, p * 64 + j]``, which streams along
    ``j``, so ``j`` goes innermost and vector (it stayed outside the reduction: 14x
    slower in a BERT layer)."""
    probs = te.placeholder((12, 32, 128), name="probs")
    v = te.placeholder((128, 768), name="v")
    k = te.reduce_axis((0, 128), name="k")

    def v_heads(p: Any, kk: Any, j: Any) -> Any:
        pos = p * 8192 + kk * 64 + j
        return v[pos // 64 % 128, pos // 8192 % 12 * 64 + pos % 64]

    out = te.compute(
        (12, 32, 64), lambda p, i, j: te.sum(probs[p, i, k] * v_heads(p, k, j), axis=k)
    )
    func = te.create_prim_func([probs, v, out])
    scheduled = default_schedule(func, target=AVX2)
    names = [loop.loop_var.name for loop in loops(scheduled)]
    at = names.index("k")  # then the register tile: rows, and two vectors of j
    assert names[at : at + 3] == ["k", "i_1", "j_1"]
    assert kinds(scheduled)[at + 2] is ForKind.VECTORIZED
    arrays = inputs_for(func)
    want = np.einsum("pik,pkj->pij", arrays[0], arrays[1].reshape(128, 12, 64).transpose(1, 0, 2))
    got = run(compiler.build(scheduled, AVX2), func, arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_a_product_of_two_rows_sums_in_vectors_of_partial_sums() -> None:
    """``C[p, i, j] = sum_k A[p, i, k] * B[p, j, k]`` (an attention score, ``Q @ K^T``):
    no spatial loop can go inside ``k`` without a column read, so ``k`` is split by
    the lanes and its inner piece factored out and vectorized; the lanes are added
    after (the sum ran as a chain of scalar multiply-adds)."""
    a = te.placeholder((4, 24, 64), name="A")
    b = te.placeholder((4, 40, 64), name="B")
    k = te.reduce_axis((0, 64), name="k")
    c = te.compute((4, 24, 40), lambda p, i, j: te.sum(a[p, i, k] * b[p, j, k], axis=k))
    func = te.create_prim_func([a, b, c])
    scheduled = default_schedule(func, target=AVX2, min_parallel_work=1)
    names = [loop.loop_var.name for loop in loops(scheduled)]
    assert names[:5] == ["p_i_fused", "j", "k_0", "k_1", "k_1_wb"]
    assert kinds(scheduled)[:4] == [
        ForKind.PARALLEL,
        ForKind.SERIAL,
        ForKind.SERIAL,
        ForKind.VECTORIZED,
    ]
    arrays = inputs_for(func)
    got = run(compiler.build(scheduled, AVX2), func, arrays)
    want = np.einsum("pik,pjk->pij", arrays[0], arrays[1])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_one_dimensional_loops_split_into_parallel_chunks_of_whole_vectors() -> None:
    func = default_schedule(spec("relu", shape=[400000]), target=AVX2)
    outer, inner = loops(func)
    assert (outer.kind, inner.kind) == (ForKind.PARALLEL, ForKind.VECTORIZED)
    chunk = int(inner.extent)
    assert chunk % 8 == 0 and 400000 % chunk == 0 and int(outer.extent) >= 2


def test_a_row_that_no_whole_vector_chunk_divides_splits_by_a_divisor_unguarded() -> None:
    """1004 outputs (4 x 251) split by 8 lanes would leave a guard in the vector loop
    that tests every element against the end; chunks of 251 need none."""
    func = mark_layout_free(spec("dense", batch=1, in_features=300, out_features=1004), ["W"])
    scheduled = default_schedule(func, target=AVX2)
    vector = [loop for loop in loops(scheduled) if loop.kind is ForKind.VECTORIZED]
    assert vector and all(1004 % int(loop.extent) == 0 for loop in vector)
    assert "T.where" not in scheduled.script()
    arrays = inputs_for(func)
    module = compiler.build(scheduled, AVX2)
    got = np.full((1, 1004), np.nan, "float32")
    module["main"](*pack_arguments(module, "main", [*arrays, got]))
    np.testing.assert_allclose(got, arrays[0] @ arrays[1].T + arrays[2], rtol=1e-5)


def test_an_elementwise_chain_after_a_reduction_becomes_one_pass(rng) -> None:
    """matmul -> + bias -> clip: the add is inlined into the clip; the matmul (a
    reduction) and a value read across a window stay blocks of their own, and the clip
    is computed where the matmul's register tile is copied out."""
    a = te.placeholder((48, 40), "float32", name="A")
    b = te.placeholder((40, 64), "float32", name="B")
    bias = te.placeholder((64,), "float32", name="bias")
    k = te.reduce_axis((0, 40), name="k")
    c = te.compute((48, 64), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    added = te.compute((48, 64), lambda i, j: c[i, j] + bias[j], name="Added")
    clipped = te.compute(
        (48, 64), lambda i, j: te.min(te.max(added[i, j], te.const(0.0)), te.const(6.0)), "Clip"
    )
    pair = te.compute((48, 63), lambda i, j: te.max(clipped[i, j], clipped[i, j + 1]), "Pair")
    func = te.create_prim_func([a, b, bias, pair])
    sch = schedule_by_default(func, target=AVX2)
    inlined = [i.inputs["block"] for i in sch.trace.instructions if i.kind == "compute_inline"]
    assert [block.name for block in inlined] == ["Added"]
    remaining = {block.name for block in sch.get_child_blocks(sch.get_block("root"))}
    assert {"C", "Pair"} <= remaining and "Clip" not in remaining
    arrays = [rng.standard_normal(shape_of(p)).astype("float32") for p in func.params[:-1]]
    scheduled = sch.mod["main"].with_attr(SCHEDULED_ATTR, True)
    got = run(compiler.build(scheduled, AVX2), func, arrays)
    clip = np.clip(arrays[0] @ arrays[1] + arrays[2], 0, 6)
    np.testing.assert_allclose(got, np.maximum(clip[:, :-1], clip[:, 1:]), rtol=1e-5, atol=1e-5)


def _blocked_pointwise_conv(residual: bool) -> PrimFunc:
    """A 1x1 convolution in NCHW[16]c, then + bias and a clip, or + bias + a residual
    of the output's shape."""
    data = te.placeholder((1, 2, 12, 28, 16), "float32", name="data")
    weight = te.placeholder((3, 2, 1, 1, 16, 16), "float32", name="weight")
    bias = te.placeholder((3, 16), "float32", name="bias")
    conv = topi.conv2d_nchwc(data, weight)
    shape = (1, 3, 12, 28, 16)
    if residual:
        other = te.placeholder(shape, "float32", name="other")
        added = te.compute(
            shape,
            lambda n, oo, y, x, oi: conv[n, oo, y, x, oi] + bias[oo, oi] + other[n, oo, y, x, oi],
            name="Residual",
        )
        return te.create_prim_func([data, weight, bias, other, added])
    clipped = te.compute(
        shape,
        lambda n, oo, y, x, oi: te.min(
            te.max(conv[n, oo, y, x, oi] + bias[oo, oi], te.const(0.0)), te.const(6.0)
        ),
        name="Clip",
    )
    return te.create_prim_func([data, weight, bias, clipped])


@pytest.mark.parametrize("residual", [False, True])
def test_a_register_tiles_epilogue_is_folded_into_its_write_back_unless_residual(
    rng, residual: bool
) -> None:
    """conv -> + bias -> clip: the clip computes from the register tile as it is written
    back, so the convolution's output is never a buffer; a residual add (another tensor
    of the output's size) stays a pass of its own. Both compute what numpy does."""
    func = _blocked_pointwise_conv(residual)
    sch = schedule_by_default(func, target=AVX2)
    folded = [
        i.inputs["block"].name for i in sch.trace.instructions if i.kind == "reverse_compute_inline"
    ]
    blocks = {block.name for block in sch.get_child_blocks(sch.get_block("root"))}
    allocated = {b.name for b in sch.mod["main"].root_block.alloc_buffers}
    if residual:
        assert folded == [] and "Residual" in blocks and "conv2d_nchwc" in allocated
    else:
        assert folded == ["Clip"] and "Clip" not in blocks and "conv2d_nchwc" not in allocated
    arrays = [rng.standard_normal(shape_of(p)).astype("float32") for p in func.params[:-1]]
    scheduled = sch.mod["main"].with_attr(SCHEDULED_ATTR, True)
    got = run(compiler.build(scheduled, AVX2), func, arrays)
    data, weight, bias = arrays[:3]
    conv = np.einsum("ncyxi,ocij->noyxj", data, weight[:, :, 0, 0])
    expected = conv + bias[None, :, None, None, :]
    expected = expected + arrays[3] if residual else np.clip(expected, 0, 6)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_small_nests_stay_serial() -> None:
    func = default_schedule(spec("add", shape_a=[16, 48], shape_b=[48]), target=AVX2)
    assert kinds(func) == [ForKind.SERIAL, ForKind.VECTORIZED]


def test_gathers_and_libm_calls_are_not_forced_into_vectors() -> None:
    transpose = default_schedule(spec("transpose", shape=[64, 256], axes=[1, 0]), target=AVX2)
    assert ForKind.VECTORIZED not in kinds(transpose)
    gelu = default_schedule(spec("gelu", shape=[128, 3072]), target=AVX2)
    assert kinds(gelu) == [ForKind.PARALLEL, ForKind.SERIAL]


def test_symbolic_sizes() -> None:
    n, m = te.var("n"), te.var("m")
    x = te.placeholder((n, m), name="X")
    s = te.placeholder((n,), name="S")
    out = te.compute((n, m), lambda i, j: x[i, j] * s[i], name="Out")
    func = default_schedule(te.create_prim_func([x, s, out]), target=AVX2)
    assert kinds(func) == [ForKind.PARALLEL, ForKind.VECTORIZED]
    lib = compiler.build(func, AVX2)
    rng = np.random.default_rng(1)
    for rows, cols in [(1, 1), (3, 17), (33, 100)]:
        a = rng.standard_normal((rows, cols)).astype("float32")
        b = rng.standard_normal(rows).astype("float32")
        c = np.zeros((rows, cols), "float32")
        lib(a, b, c)
        np.testing.assert_allclose(c, a * b[:, None], rtol=1e-6)


def overlapping_updates() -> PrimFunc:
    """Y[v] = sum_k X[v, k] with v bound to i // 2: iterations 2v and 2v + 1 both
    compute element v, so loop i must not run in parallel."""
    x = Buffer("X", (E.const(4), E.const(3)))
    y = Buffer("Y", (E.const(4),))
    i, kk, v, k = E.Var("i"), E.Var("kk"), E.Var("v"), E.Var("k")
    block = Block(
        "Y",
        (
            IterVar(v, E.Range.from_min_extent(0, 4), IterKind.SPATIAL),
            IterVar(k, E.Range.from_min_extent(0, 3), IterKind.REDUCE),
        ),
        BufferStore(y, y[v] + x[v, k], (v,)),
        init=BufferStore(y, E.const(0.0), (v,)),
    )
    realize = BlockRealize((i // 2, kk), true_predicate(), block)
    nest = For(
        i,
        E.const(0),
        E.const(8),
        ForKind.SERIAL,
        For(kk, E.const(0), E.const(3), ForKind.SERIAL, realize),
    )
    root = BlockRealize((), true_predicate(), Block("root", (), nest))
    return PrimFunc((x, y), root, {"global_symbol": "main"})


def test_a_move_the_primitives_refuse_is_not_made() -> None:
    func = overlapping_updates()
    scheduled = default_schedule(func, target=AVX2, min_parallel_work=1)
    assert kinds(scheduled) == [ForKind.SERIAL, ForKind.SERIAL]
    x = np.random.default_rng(2).uniform(1, 2, (4, 3)).astype("float32")
    y = np.zeros(4, "float32")
    compiler.build(scheduled, AVX2)(x, y)
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-6)


def test_the_trace_replays_the_default_schedule() -> None:
    func = spec(
        "conv2d_nchw_bias_relu",
        batch=1,
        in_channels=8,
        height=30,
        width=30,
        out_channels=16,
        kernel=3,
        padding=1,
    )
    sch = schedule_by_default(func)
    replay = Schedule(func)
    sch.trace.apply_to_schedule(replay)
    assert structural_equal(replay.mod, sch.mod)
    assert structural_equal(default_schedule(func), sch.mod["main"].with_attr(SCHEDULED_ATTR, True))


# ---- what compiler.build does ------------------------------------------------------------


def test_build_schedules_a_bare_function_and_not_a_scheduled_one() -> None:
    func = spec("matmul", m=64, n=96, k=80)
    default = compiler.build(func).get_source()
    naive = compiler.build(func, default_schedule=False).get_source()
    assert "GOMP_parallel" in default and "GOMP_parallel" not in naive
    sch = Schedule(func)
    _i, j, _k = sch.get_loops(sch.get_block("T_matmul"))
    sch.split(j, [None, 4])
    assert (
        compiler.build(sch.mod).get_source()
        == compiler.build(sch.mod, default_schedule=False).get_source()
    )
    assert "GOMP_parallel" not in compiler.build(sch).get_source()


def test_what_counts_as_unscheduled() -> None:
    func = spec("relu", shape=[300, 500])
    assert is_unscheduled(func)
    sch = Schedule(func)
    assert SCHEDULED_ATTR not in sch.mod["main"].attrs  # no primitive yet
    sch.get_loops(sch.get_block("T_relu"))
    assert SCHEDULED_ATTR not in sch.mod["main"].attrs  # lookups change nothing
    sch.reorder(*reversed(sch.get_loops(sch.get_block("T_relu"))))
    assert sch.mod["main"].attrs[SCHEDULED_ATTR] is True
    assert not is_unscheduled(sch.mod["main"])
    hand_set = PrimFunc(func.params, _with_first_loop_parallel(func.body), func.attrs)
    assert not is_unscheduled(hand_set)
    assert not is_unscheduled(default_schedule(func))
    mod = apply_default_schedule(IRModule({"bare": func, "done": sch.mod["main"]}))
    assert mod["done"] is sch.mod["main"]
    assert ForKind.PARALLEL in kinds(mod["bare"])


def _with_first_loop_parallel(body: Any) -> Any:
    from compiler.ir.node import transform_pre

    def swap(n: Node) -> Node | None:
        if isinstance(n, For):
            return For(n.loop_var, n.min, n.extent, ForKind.PARALLEL, n.body)
        return None

    return transform_pre(body, swap)


def test_the_benchmark_runs_quick_and_prints_json_last() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ops.py"), "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    document = json.loads(result.stdout.strip().splitlines()[-1])
    rows = document["rows"]
    assert {row["op"] for row in rows} >= set(EXAMPLES)
    for row in rows:
        assert set(row) == {"op", "shape", "numpy_s", "naive_s", "default_s"}
        assert row["default_s"] > 0
        assert row["naive_s"] is None or row["naive_s"] > 0
        assert row["numpy_s"] is None or row["numpy_s"] > 0
