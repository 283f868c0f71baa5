"""transform_layout: intermediates and parameters of matmul, conv2d (NCHW to NCHW[x]c)
and an elementwise chain take new layouts, further scheduling of the conversion
blocks keeps the results equal to numpy (interpreter and LLVM), illegal maps are
refused without changing the schedule, and traces replay from JSON to the same
structural hash."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import run_func
from schedule_checks import assert_refused, assert_replays
from workloads import matmul

import compiler
from compiler import te
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import LAYOUT_REWRITE_ATTR
from compiler.lower.prepack import PrepackError
from compiler.schedule import IndexMap, Schedule
from compiler.topi.nn.conv2d import conv2d_nchw
from compiler.topi.reference import conv2d_nchw_im2col

NCHWC = "n, c, h, w -> n, c // {f}, h, w, c % {f}"
OIHW_IO = "o, i, h, w -> o // {f}, i // {f}, h, w, i % {f}, o % {f}"


def chain(m: int, n: int) -> PrimFunc:
    """B = A * 2; C = B + 1: an elementwise chain with an intermediate."""
    a = te.placeholder((m, n), name="A")
    b = te.compute((m, n), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((m, n), lambda i, j: b[i, j] + 1.0, name="C")
    return te.create_prim_func([a, c])


def conv(channels: int, out_channels: int, size: int) -> PrimFunc:
    data = te.placeholder((1, channels, size, size), name="data")
    kernel = te.placeholder((out_channels, channels, 3, 3), name="kernel")
    return te.create_prim_func([data, kernel, conv2d_nchw(data, kernel, padding=1)])


def random_arrays(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def assert_computes(sch: Schedule, inputs: list[np.ndarray], expected: np.ndarray) -> None:
    """The interpreter and the LLVM build of the schedule both give ``expected``."""
    for run in (lambda *a: run_func(sch.mod["main"], *a), compiler.build(sch.mod)["main"]):
        out = np.full(expected.shape, np.nan, dtype="float32")
        run(*[x.copy() for x in inputs], out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


# matmul ----------------------------------------------------------------------------------


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 5), k=st.integers(1, 6), n_blocks=st.integers(1, 3), seed=st.integers())
def test_matmul_weight_blocked_and_its_conversion_scheduled(
    m: int, k: int, n_blocks: int, seed: int
) -> None:
    """B [K, N] -> [N/4, K, 4]; the conversion, over the new shape, is reordered,
    vectorized and computed under the matmul's outer loop."""
    n = 4 * n_blocks
    workload = matmul(m, n, k)
    sch = Schedule(workload)
    block = sch.get_block("C")
    convert = sch.transform_layout(block, ("read", 2), "k, n -> n // 4, k, n % 4")
    assert convert is not None
    laid_out = sch.mod["main"].root_block.alloc_buffers[-1]
    assert [d.value for d in laid_out.shape] == [n_blocks, k, 4]
    ax0, ax1, ax2 = sch.get_loops(convert)
    sch.reorder(ax1, ax0, ax2)
    sch.vectorize(ax2)
    sch.compute_at(convert, sch.get_loops(block)[0])
    a, b = random_arrays((m, k), (k, n), seed=seed % 1000)
    assert_computes(sch, [a, b], a @ b)
    assert_replays(sch, workload)


def test_matmul_intermediate_output_and_accumulator_layouts() -> None:
    """The output C in blocks of columns, then the reduction decomposed; laying out
    after decompose_reduction is refused (the init shares the update's loop nest)."""
    workload = matmul(6, 8, 5)
    sch = Schedule(workload)
    block = sch.get_block("C")
    back = sch.transform_layout(block, ("write", 0), "i, j -> j // 2, i, j % 2")
    sch.decompose_reduction(block, sch.get_loops(block)[2])
    assert back is not None
    assert LAYOUT_REWRITE_ATTR not in sch.get(back).annotations
    a, b = random_arrays((6, 5), (5, 8))
    assert_computes(sch, [a, b], a @ b)
    assert_replays(sch, workload)
    decomposed = Schedule(workload)
    block = decomposed.get_block("C")
    decomposed.decompose_reduction(block, decomposed.get_loops(block)[2])
    assert_refused(
        decomposed, decomposed.transform_layout, block, "C", "i, j -> j, i", match="same loop nest"
    )


# conv2d NCHW -> NCHW[x]c -----------------------------------------------------------------


@settings(max_examples=4, deadline=None)
@given(blocks=st.integers(1, 2), factor=st.sampled_from([2, 4]), size=st.integers(3, 6))
def test_conv2d_to_nchwc(blocks: int, factor: int, size: int) -> None:
    """Data, padded data, kernel and output all blocked by channel; the output channel
    block is the innermost loop and vectorized."""
    channels = out_channels = blocks * factor
    workload = conv(channels, out_channels, size)
    sch = Schedule(workload)
    pad = sch.get_block("PadInput")
    block = sch.get_block("conv2d_nchw")
    sch.transform_layout(pad, ("read", 0), NCHWC.format(f=factor))
    sch.transform_layout(pad, ("write", 0), NCHWC.format(f=factor))
    weight = sch.transform_layout(block, "kernel", OIHW_IO.format(f=factor))
    assert weight is not None
    assert sch.get(weight).annotations == {LAYOUT_REWRITE_ATTR: "kernel"}
    sch.transform_layout(block, ("write", 0), NCHWC.format(f=factor))
    n, o, y, x, rc, ry, rx = sch.get_loops(block)
    o_outer, o_inner = sch.split(o, [None, factor])
    rc_outer, rc_inner = sch.split(rc, [None, factor])
    sch.reorder(n, o_outer, y, rc_outer, ry, rx, rc_inner, x, o_inner)
    sch.vectorize(o_inner)
    data, kernel = random_arrays((1, channels, size, size), (out_channels, channels, 3, 3))
    assert_computes(sch, [data, kernel], conv2d_nchw_im2col(data, kernel, padding=1))
    assert_replays(sch, workload)


# elementwise chain -----------------------------------------------------------------------


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), perm=st.booleans())
def test_elementwise_chain_every_buffer(m: int, n: int, perm: bool) -> None:
    workload = chain(m, n)
    sch = Schedule(workload)
    b, c = sch.get_block("B"), sch.get_block("C")
    sch.transform_layout(b, "B", "i, j -> j, i" if perm else "i, j -> i * 1, j")
    convert = sch.transform_layout(b, "A", "i, j -> j, i")
    sch.transform_layout(c, "C", f"i, j -> i * {n} + j")
    assert convert is not None
    sch.compute_at(convert, sch.get_loops(b)[1])
    (a,) = random_arrays((m, n))
    assert_computes(sch, [a], a * 2.0 + 1.0)
    assert_replays(sch, workload)


def chain3(shape: tuple[int, int, int]) -> PrimFunc:
    a = te.placeholder(shape, name="A")
    b = te.compute(shape, lambda i, j, k: a[i, j, k] * 2.0, name="B")
    c = te.compute(shape, lambda i, j, k: b[i, j, k] + 1.0, name="C")
    return te.create_prim_func([a, c])


@st.composite
def layouts(draw: st.DrawFn, shape: tuple[int, int, int]) -> str:
    """A permutation of three dimensions, one of them perhaps split by a divisor."""
    names = ["i", "j", "k"]
    outputs = draw(st.permutations(names))
    dim = draw(st.sampled_from(range(3)))
    factor = draw(st.sampled_from([d for d in range(1, shape[dim] + 1) if shape[dim] % d == 0]))
    if factor > 1:
        at = outputs.index(names[dim])
        outputs[at : at + 1] = [f"{names[dim]} // {factor}"]
        outputs.insert(draw(st.integers(0, len(outputs))), f"{names[dim]} % {factor}")
    return f"i, j, k -> {', '.join(outputs)}"


@settings(max_examples=10, deadline=None)
@given(shape=st.tuples(*[st.sampled_from([1, 2, 3, 4, 6]) for _ in range(3)]), data=st.data())
def test_random_layouts_of_input_intermediate_and_output(
    shape: tuple[int, int, int], data: st.DataObject
) -> None:
    workload = chain3(shape)
    sch = Schedule(workload)
    b, c = sch.get_block("B"), sch.get_block("C")
    for block, buffer in [(b, "A"), (b, "B"), (c, "C")]:
        if data.draw(st.booleans()):
            sch.transform_layout(block, buffer, data.draw(layouts(shape)))
    (a,) = random_arrays(shape)
    assert_computes(sch, [a], a * 2.0 + 1.0)
    assert_replays(sch, workload)


def test_a_fused_map_gives_a_flat_buffer() -> None:
    sch = Schedule(chain(3, 4))
    sch.transform_layout(sch.get_block("B"), "B", "i, j -> i * 4 + j")
    alloc = sch.mod["main"].root_block.alloc_buffers[0]
    assert [d.value for d in alloc.shape] == [12]


# refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buffer", "index_map", "match"),
    [
        ("B", "i, j -> i // 4, j, i % 4", "padding is not supported"),
        ("B", "i -> i", "takes 1 indices but the buffer has 2"),
        ("B", "i, j -> i", "two elements would share one"),
        ("B", "i, j -> i + 1, j", "starts at 1, not 0"),
        ("B", "i, j -> i // j, j", "needs a positive integer"),
        ("B", "i, j -> j, i; print(1)", "unexpected character"),
        ("B", "i, i -> i, i", "appears twice"),
        ("X", "i, j -> j, i", "uses no buffer 'X'"),
        (("read", 3), "i, j -> j, i", "read buffer index 3 is out of range"),
        (("written", 0), "i, j -> j, i", "buffer kind 'written' is not one of read, write"),
        (("read",), "i, j -> j, i", "must be \\('read', k\\)"),
    ],
)
def test_illegal_maps_are_refused_and_change_nothing(
    buffer: object, index_map: str, match: str
) -> None:
    sch = Schedule(chain(6, 4))
    sch.get_loops(sch.get_block("C"))
    assert_refused(sch, sch.transform_layout, sch.get_block("B"), buffer, index_map, match=match)


def test_a_map_given_as_an_object_is_refused() -> None:
    sch = Schedule(chain(2, 2))
    block = sch.get_block("B")
    assert_refused(
        sch,
        sch.transform_layout,
        block,
        "B",
        IndexMap.parse("i, j -> j, i"),
        match="an index map is text",
    )


def test_an_output_not_proven_whole_is_refused() -> None:
    """The copy back writes every element, so the writer must provably write them
    all; the proof does not follow fuse's // and %, so this is refused."""
    workload = chain(4, 4)
    sch = Schedule(workload)
    c = sch.get_block("C")
    sch.fuse(*sch.get_loops(c))
    assert_refused(
        sch, sch.transform_layout, c, "C", "i, j -> j, i", match="cannot prove it writes all of C"
    )


def test_the_map_prints_as_it_parses() -> None:
    text = "n, c, h, w -> n, c // 16, h, w, c % 16"
    assert str(IndexMap.parse(text)) == text
    assert str(IndexMap.parse(str(IndexMap.parse("a,b->(a+b)*2-b, a")))) == (
        "a, b -> (a + b) * 2 - b, a"
    )


# prepacked weights -----------------------------------------------------------------------


def test_a_prepacked_weight_is_converted_once_and_gives_the_same_result() -> None:
    """build(prepack=["kernel"]) splits the kernel's conversion out: the conv takes the
    converted kernel, and main__pack_kernel converts it."""
    workload = conv(8, 8, 5)
    sch = Schedule(workload)
    block = sch.get_block("conv2d_nchw")
    sch.transform_layout(block, "kernel", OIHW_IO.format(f=4))
    module = compiler.build(sch.mod, prepack=["kernel"])
    pack, main = module["main__pack_kernel"], module["main"]
    assert [p.name for p in main.signature.params] == ["data", "kernel_layout", "conv2d_nchw"]
    data, kernel = random_arrays((1, 8, 5, 5), (8, 8, 3, 3))
    packed = np.zeros((2, 2, 3, 3, 4, 4), dtype="float32")
    pack(kernel, packed)
    np.testing.assert_array_equal(
        packed, kernel.reshape(2, 4, 2, 4, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    )
    out = np.zeros((1, 8, 5, 5), dtype="float32")
    main(data, packed, out)
    np.testing.assert_allclose(
        out, conv2d_nchw_im2col(data, kernel, padding=1), rtol=1e-4, atol=1e-4
    )


def test_prepack_of_a_parameter_without_a_conversion_is_refused() -> None:
    sch = Schedule(conv(4, 4, 3))
    sch.transform_layout(sch.get_block("conv2d_nchw"), "kernel", OIHW_IO.format(f=2))
    with pytest.raises(PrepackError, match="with a layout conversion are \\['kernel'\\]"):
        compiler.build(sch.mod, prepack=["data"])
