"""flop_count: exact counts for the formulas everyone knows, every op countable,
symbolic shapes refused, and the count of a schedule never below the workload's."""

from __future__ import annotations

import pytest
from op_examples import EXAMPLES

from compiler import te
from compiler.ir import expr as E
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule
from compiler.workload.flops import FlopCountError, expr_flops, flop_count
from compiler.workload.spec import workload_from_spec


def spec(op: str, **args: object) -> PrimFunc:
    return workload_from_spec({"op": op, "args": args})


@pytest.mark.parametrize(("m", "n", "k"), [(5, 7, 3), (128, 768, 3072), (1, 1, 1)])
def test_matmul_is_two_m_n_k(m: int, n: int, k: int) -> None:
    assert flop_count(spec("matmul", m=m, n=n, k=k)) == 2 * m * n * k
    assert flop_count(spec("batch_matmul", batch=3, m=m, n=n, k=k)) == 3 * 2 * m * n * k


@pytest.mark.parametrize(
    ("args", "out_hw"),
    [
        ({"height": 56, "width": 56, "kernel": 3, "padding": 1}, (56, 56)),
        ({"height": 9, "width": 7, "kernel": [3, 1], "stride": 2, "padding": 0}, (4, 4)),
        ({"height": 9, "width": 7, "kernel": 3, "padding": 1, "groups": 4}, (9, 7)),
    ],
)
def test_conv2d_is_two_n_o_oh_ow_c_kh_kw(args: dict[str, object], out_hw: tuple[int, int]) -> None:
    n, c, o = 2, 8, 12
    kernel = args["kernel"]
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel  # type: ignore[misc]
    groups = int(args.get("groups", 1))  # type: ignore[call-overload]
    expected = 2 * n * o * out_hw[0] * out_hw[1] * (c // groups) * kh * kw
    full = {"batch": n, "in_channels": c, "out_channels": o, **args}
    assert flop_count(spec("conv2d_nchw", **full)) == expected
    assert flop_count(spec("conv2d_nhwc", **full)) == expected
    # the fused epilogue adds a bias add and a relu max per output element
    epilogue = 2 * n * o * out_hw[0] * out_hw[1]
    assert flop_count(spec("conv2d_nchw_bias_relu", **full)) == expected + epilogue


def test_elementwise_add_is_one_per_element() -> None:
    assert flop_count(spec("add", shape_a=[3, 1, 5], shape_b=[4, 1])) == 3 * 4 * 5
    assert flop_count(spec("relu", shape=[7, 9])) == 63


def test_layouts_and_padding_count_nothing() -> None:
    for op in ("transpose", "reshape", "pad", "concatenate"):
        assert flop_count(spec(op, **EXAMPLES[op])) == 0


def test_softmax_and_dense_with_their_epilogues() -> None:
    # max (1), x - max and exp (2), sum (1), divide (1)
    assert flop_count(spec("softmax", shape=[3, 5])) == 5 * 15
    # 2 x M x N x K, then + bias per output element
    assert flop_count(spec("dense", batch=3, in_features=5, out_features=7)) == 2 * 105 + 21
    # gelu: x * c, erf, 1 + ., 0.5 * x, (.) * (.)
    assert flop_count(spec("gelu", shape=[4])) == 5 * 4


def test_init_counts_once_per_output_element() -> None:
    a = te.placeholder((6, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    total = te.compute((6,), lambda i: te.sum(a[i, k] * 2.0, axis=k), name="S")
    func = te.create_prim_func([a, total])
    assert flop_count(func) == 6 * 4 * 2


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_every_op_counts_and_a_schedule_never_counts_less(op: str) -> None:
    func = workload_from_spec({"op": op, "args": EXAMPLES[op]})
    count = flop_count(func)
    assert count >= 0
    sch = Schedule(func)
    for block in sch.get_child_blocks(sch.get_block("root")):
        loops = sch.get_loops(block)
        if loops:  # a scalar output (mean over every axis) has none
            sch.split(loops[-1], [None, 4])
    assert flop_count(sch.mod["main"]) >= count


def test_a_dividing_split_keeps_the_count() -> None:
    func = spec("matmul", m=6, n=8, k=5)
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_matmul"))
    sch.split(j, [2, 4])
    sch.reorder(i, k)
    assert flop_count(sch.mod["main"]) == flop_count(func) == 2 * 6 * 8 * 5


def test_symbolic_shapes_are_refused_with_the_fix() -> None:
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    with pytest.raises(FlopCountError, match="symbolic extent n; counting needs constant shapes"):
        flop_count(te.create_prim_func([a, b]))


def test_integer_arithmetic_is_not_counted() -> None:
    i = E.Var("i")
    index = i * 4 + 1
    assert expr_flops(index) == 0
    x = E.Var("x", "float32")
    assert expr_flops(E.Call("exp", (x * 2.0 + 1.0,), "float32")) == 3
    assert expr_flops(E.Max(x, E.const(0.0)) - E.Cast("float32", index)) == 2
