"""The default schedule's register tile for reductions with a short vector loop (a
blocked convolution's channel block): its structure, and results equal to numpy's
over random shapes, strides and channel blocks, odd ones included."""

from __future__ import annotations

import numpy as np
import onnxruntime
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx_models import make_model, node, weight

import compiler
from compiler import te, topi
from compiler.graph import GraphModule, import_onnx, optimize
from compiler.graph.blocked_layout import input_block
from compiler.ir.layout_free import mark_layout_free
from compiler.ir.node import visit
from compiler.ir.stmt import For, ForKind
from compiler.runtime.prepacked import pack_arguments
from compiler.schedule.default import schedule_by_default
from compiler.schedule.schedule import SCHEDULED_ATTR
from compiler.target.llvm import LLVMTarget
from compiler.topi.reference import conv2d_nchw_im2col

AVX2 = "llvm -mcpu=haswell -num-cores=2"
# 32 vector registers: schedules are made for it and built for AVX2, which every x86-64
# host this runs on has.
AVX512 = "llvm -mcpu=skylake-avx512 -num-cores=2"


def blocked_conv(
    channels: int, size: int, out_channels: int, kernel: int, stride: int, in_block: int, block: int
):
    data = te.placeholder((1, channels // in_block, size, size, in_block), "float32", name="data")
    weights = te.placeholder(
        (out_channels // block, channels // in_block, kernel, kernel, in_block, block),
        "float32",
        name="kernel",
    )
    out = topi.conv2d_nchwc(data, weights, stride=stride, padding=kernel // 2)
    return mark_layout_free(te.create_prim_func([data, weights, out]), ["kernel"])


def to_blocked(x: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def kinds_by_name(sch) -> list[str]:
    return [inst.kind for inst in sch.trace.instructions]


def unrolled_extents(sch) -> list[int]:
    """The extents of the unrolled loops, outermost first."""
    found: list[int] = []

    def collect(n) -> None:
        if isinstance(n, For) and n.kind is ForKind.UNROLLED:
            found.append(int(n.extent))

    visit(sch.mod["main"].body, collect)
    return found


def test_a_blocked_convolution_accumulates_four_columns_of_two_vectors_in_registers() -> None:
    sch = schedule_by_default(blocked_conv(16, 8, 32, 3, 1, 8, 16), target=AVX2)
    kinds = kinds_by_name(sch)
    assert {"cache_write", "reverse_compute_at", "decompose_reduction", "unroll"} <= set(kinds)
    split = next(i for i in sch.trace.instructions if i.kind == "split")
    # at most 6 columns of 2 vectors fit 16 registers; 8 columns split by 4
    assert split.inputs["factors"] == [None, 4]
    text = sch.mod["main"].script()
    assert "T.unroll(4)" in text and "T.vectorized(16)" in text


def test_columns_that_do_not_split_by_four_take_one_vector_and_more_columns() -> None:
    sch = schedule_by_default(blocked_conv(16, 7, 32, 3, 1, 8, 16), target=AVX2)
    text = sch.mod["main"].script()
    assert "T.unroll(7)" in text and "T.vectorized(8)" in text


def test_avx512_fills_its_32_registers_with_one_vector_a_column() -> None:
    """One output channel block: no second tile dimension, so the columns fill the
    registers (28 accumulators, a weight vector and a broadcast value)."""
    assert LLVMTarget.parse(AVX512).vector_registers == 32
    sch = schedule_by_default(blocked_conv(16, 28, 16, 3, 1, 16, 16), target=AVX512)
    assert unrolled_extents(sch)[:1] == [28]


def test_avx512_tiles_channel_blocks_by_columns() -> None:
    """Two output channel blocks: the tile spans both, by 14 columns, so each broadcast
    input value feeds two multiply-adds and each weight vector 14 (28 accumulators,
    two weight vectors and a broadcast value: 31 of the 32 registers). The blocks run
    inside the columns, so the weight vectors are what stays in registers. With AVX2's
    16 registers a channel tile loads its weights more often than columns alone do:
    columns only."""
    func = blocked_conv(16, 28, 32, 3, 1, 16, 16)
    assert unrolled_extents(schedule_by_default(func, target=AVX512))[:2] == [14, 2]
    assert unrolled_extents(schedule_by_default(func, target=AVX2))[:1] == [4]


def matmul(m: int, k: int, n: int):
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def test_a_long_vector_loop_is_split_into_a_register_tile_of_two_vectors() -> None:
    """A matmul's row of 256 elements: left whole, each of its vectors was loaded for
    one multiply-add. The tile keeps two vectors of it by rows that fill the
    registers, the rest of the row outside the reduction."""
    sch = schedule_by_default(matmul(64, 64, 256), target=AVX2)
    assert "cache_write" in kinds_by_name(sch)
    assert "T.vectorized(16)" in sch.mod["main"].script()
    assert unrolled_extents(sch)[:1] == [4]  # 4 rows of 2 vectors: 8 accumulators


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 40),
    k=st.integers(1, 70),
    n=st.sampled_from([8, 16, 40, 64, 96, 256]),
    seed=st.integers(0, 2**16),
    scheduled_for=st.sampled_from([AVX2, AVX512]),
)
def test_register_tiled_matmuls_compute_what_numpy_does(
    m: int, k: int, n: int, seed: int, scheduled_for: str
) -> None:
    func = schedule_by_default(matmul(m, k, n), target=scheduled_for).mod["main"]
    lib = compiler.build(func, target=AVX2, default_schedule=False)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.zeros((m, n), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@settings(max_examples=16, deadline=None)
@given(
    channels=st.sampled_from([3, 8, 16]),
    size=st.integers(5, 17),
    out_blocks=st.integers(1, 3),
    block=st.sampled_from([4, 8, 16]),
    kernel=st.sampled_from([1, 3, 5]),
    stride=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
    scheduled_for=st.sampled_from([AVX2, AVX512]),
)
def test_register_tiled_blocked_convolutions_compute_what_numpy_does(
    channels, size, out_blocks, block, kernel, stride, seed, scheduled_for
) -> None:
    in_block = channels if channels < block else block
    if channels % in_block:
        in_block = channels
    out_channels = out_blocks * block
    func = blocked_conv(channels, size, out_channels, kernel, stride, in_block, block)
    scheduled = schedule_by_default(func, target=scheduled_for).mod["main"]
    module = compiler.build(scheduled.with_attr(SCHEDULED_ATTR, True), AVX2)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, channels, size, size)).astype("float32")
    w = rng.standard_normal((out_channels, channels, kernel, kernel)).astype("float32")
    w_blocked = np.ascontiguousarray(
        w.reshape(out_blocks, block, channels // in_block, in_block, kernel, kernel).transpose(
            0, 2, 4, 5, 3, 1
        )
    )
    out_shape = tuple(int(d) for d in func.params[-1].shape)
    result = np.zeros(out_shape, "float32")
    args = pack_arguments(module, "main", [to_blocked(x, in_block), w_blocked, result])
    module["main"](*args)
    expected = conv2d_nchw_im2col(x, w, stride, kernel // 2)
    np.testing.assert_allclose(result, to_blocked(expected, block), rtol=1e-4, atol=1e-4)


def test_an_images_first_convolution_runs_blocked_with_all_its_channels_a_block(rng) -> None:
    """3 input channels do not split into blocks of 16: the input block is all three,
    so the first convolution of an image runs blocked (and register-tiled) too."""
    assert [input_block(c, 16) for c in (3, 12, 24, 32)] == [3, 12, 8, 16]
    model = make_model(
        [
            node("Conv", ["image", "w"], ["y"], strides=[2, 2], pads=[3, 3, 3, 3]),
            node("Relu", ["y"], ["out"]),
        ],
        {"image": [1, 3, 20, 20]},
        ["out"],
        {"w": weight(rng, 16, 3, 7, 7, fan_in=3 * 49)},
    )
    graph = import_onnx(model)
    optimized, _ = optimize(graph, conv_block=16)
    (conv,) = [n for n in optimized.nodes if n.op == "conv2d_nchwc"]
    assert optimized.types[conv.inputs[0]].shape == (1, 1, 20, 20, 3)
    image = rng.standard_normal((1, 3, 20, 20)).astype("float32")
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = session.run(None, {"image": image})
    (ours,) = GraphModule(graph).run(image=image).values()
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)


def test_a_blocked_depthwise_window_goes_outside_its_register_tile() -> None:
    """A 3x3 window is a short reduction, which stays innermost in NCHW; blocked, the
    channel block moves inside it, under a tile of columns held in registers."""
    data = te.placeholder((1, 2, 12, 12, 16), "float32", name="data")
    kernel = te.placeholder((2, 3, 3, 16), "float32", name="kernel")
    out = topi.depthwise_conv2d_nchwc(data, kernel, stride=1, padding=1)
    func = mark_layout_free(te.create_prim_func([data, kernel, out]), ["kernel"])
    text = schedule_by_default(func, target=AVX2).mod["main"].script()
    window = text.index("for ry, rx in T.grid(3, 3)")
    assert text.index("T.unroll(", window) < text.index("T.vectorized(16)", window)


def test_a_register_tile_leaves_the_threads_their_iterations() -> None:
    """A 5x3 by 3x7 matmul: a tile of all 5 rows would leave one thread idle."""
    a = te.placeholder((5, 3), "float32", name="A")
    b = te.placeholder((3, 7), "float32", name="B")
    k = te.reduce_axis((0, 3), name="k")
    c = te.compute((5, 7), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = schedule_by_default(te.create_prim_func([a, b, c]), target=AVX2, min_parallel_work=1)
    assert "T.parallel" in sch.mod["main"].script()
