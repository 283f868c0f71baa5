"""Lowering passes: block removal, simplification, flattening, the pass pipeline."""

from __future__ import annotations

import io
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func

import compiler
from compiler import te
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import IntImm, PrimExpr, Range, Var
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.node import Node, visit
from compiler.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
)
from compiler.lower import PASS_NAMES, lower_func
from compiler.lower.flatten_buffers import flat_index, flatten_buffers
from compiler.lower.lower_blocks import lower_blocks
from compiler.lower.pipeline import PASSES
from compiler.lower.simplify import is_empty, simplify, simplify_node
from compiler.schedule import Schedule


def matmul(m: int, k: int, n: int, k_start: int = 0) -> PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((k_start, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def mm_relu(m: int, k: int, n: int) -> PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    d = te.compute((m, n), lambda i, j: te.max(c[i, j], 0.0), name="D")
    return te.create_prim_func([a, b, d])


def nodes_of(node: Node, cls: type) -> list[Node]:
    found: list[Node] = []
    visit(node, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def same_results(before: PrimFunc, after: PrimFunc, seed: int = 0) -> None:
    """Both functions, run by the reference interpreter, write the same outputs."""
    args = random_args(before, seed=seed)
    expected = [a.copy() for a in args]
    run_func(before, *expected)
    run_func(after, *args)
    for got, want in zip(args, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


# --- lower_blocks --------------------------------------------------------------------


def test_lower_blocks_leaves_loops_and_guards_the_init():
    func = mm_relu(5, 7, 3)
    lowered = lower_blocks(func)
    assert not nodes_of(lowered.body, (Block, BlockRealize))
    allocs = nodes_of(lowered.body, Allocate)
    assert [a.buffer.name for a in allocs] == ["C"]
    assert lowered.body is allocs[0]
    guards = [s for s in nodes_of(lowered.body, IfThenElse) if isinstance(s.then_case, BufferStore)]
    assert len(guards) == 1
    assert "k == 0" in str(guards[0].condition)
    same_results(func, lowered)


def test_init_runs_at_the_domain_start_of_a_nonzero_reduce_axis():
    func = matmul(4, 9, 5, k_start=3)
    lowered = lower_blocks(func)
    (guard,) = nodes_of(lowered.body, IfThenElse)
    assert "== 3" in str(guard.condition)
    same_results(func, lowered)


def test_init_is_right_for_any_loop_order():
    """With the reduce loop outermost the init still runs once per output element."""
    sch = Schedule(matmul(4, 6, 5))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i, j)
    func = sch.mod["main"]
    same_results(func, lower_blocks(func))


def test_predicate_of_a_non_dividing_split_becomes_a_condition():
    sch = Schedule(matmul(10, 10, 3))
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [None, 4])
    func = sch.mod["main"]
    lowered = simplify(lower_blocks(func))
    conditions = [str(s.condition) for s in nodes_of(lowered.body, IfThenElse)]
    assert any("< 10" in c for c in conditions)
    same_results(func, lowered)


# --- simplify -------------------------------------------------------------------------

x, y = Var("x"), Var("y")


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (x + 0, "x"),
        (0 + x, "x"),
        (x - 0, "x"),
        (x * 1, "x"),
        (1 * x, "x"),
        (x * 0, "0"),
        (x // 1, "x"),
        (x % 1, "0"),
        ((x + 3) + 4, "x + 7"),
        ((x + 3) - 5, "x - 2"),
        ((x - 3) + 3, "x"),
        ((x * 2) * 3, "x * 6"),
        (E.const(-7) // 2, "-4"),
        (E.const(-7) % 2, "1"),
        (E.const(7) % -2, "-1"),
        (E.Div(E.const(-7), E.const(2)), "-3"),
        (E.Min(E.const(4), E.const(-2)), "-2"),
        (E.Max(E.const(4), E.const(-2)), "4"),
        (E.const(3) < 4, "True"),
        (E.And(E.const(3) < 4, x < y), "x < y"),
        (E.Or(E.const(3) < 4, x < y), "True"),
        (E.Select(E.const(1) == 2, x, y), "y"),
        (x // 0, "x // 0"),
        (E.Cast("int32", x), "x"),
    ],
    ids=str,
)
def test_simplify_rules(expr, expected):
    assert str(simplify_node(expr)) == expected


def test_simplify_keeps_float_arithmetic_exact():
    f = Var("f", "float32")
    assert str(simplify_node(f + 0.0)) == str(f + 0.0)  # -0.0 + 0.0 is 0.0
    assert simplify_node(f * 1.0) is f
    assert isinstance(simplify_node(E.const(0.1) + E.const(0.2)), E.Add)


def test_simplify_folds_overflowing_constants_never():
    big = E.const(2**31 - 1) + E.const(1)
    assert isinstance(simplify_node(big), E.Add)


def test_simplify_statements():
    buf = Buffer("A", (E.const(4),))
    i = Var("i")
    unit = For(i, E.const(2), E.const(1), ForKind.SERIAL, BufferStore(buf, E.const(1.0), (i + 1,)))
    assert str(simplify_node(unit)) == "A[3] = T.float32(1.0)"
    never = IfThenElse(E.const(1) > 2, BufferStore(buf, E.const(1.0), (i,)))
    assert is_empty(simplify_node(never))
    empty_loop = For(i, E.const(0), E.const(8), ForKind.SERIAL, SeqStmt((never,)))
    assert is_empty(simplify_node(empty_loop))


def _int_exprs() -> st.SearchStrategy[PrimExpr]:
    leaves = st.one_of(
        st.sampled_from([x, y]), st.integers(-9, 9).map(lambda v: IntImm(v, "int32"))
    )
    ops = st.sampled_from(
        [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Min, E.Max, "select"]
    )

    def extend(children: st.SearchStrategy[PrimExpr]) -> st.SearchStrategy[PrimExpr]:
        def make(op, a, b, c):
            if op == "select":
                return E.Select(E.LT(a, b), c, a)
            return op(a, b)

        return st.builds(make, ops, children, children, children)

    return st.recursive(leaves, extend, max_leaves=12)


def _evaluate(e: PrimExpr, env: dict[Var, int]) -> int:
    """The IR's integer semantics: floor // and %, truncating Div."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, E.Select):
        return _evaluate(e.true_value if _evaluate(e.condition, env) else e.false_value, env)
    a, b = _evaluate(e.a, env), _evaluate(e.b, env)
    if isinstance(e, E.Div):
        quotient = abs(a) // abs(b)
        return quotient if (a < 0) == (b < 0) else -quotient
    table = {
        E.Add: operator.add,
        E.Sub: operator.sub,
        E.Mul: operator.mul,
        E.FloorDiv: operator.floordiv,
        E.FloorMod: operator.mod,
        E.Min: min,
        E.Max: max,
        E.LT: operator.lt,
    }
    return table[type(e)](a, b)


@settings(max_examples=300, deadline=None)
@given(_int_exprs(), st.integers(-20, 20), st.integers(-20, 20))
def test_simplify_never_changes_a_value(expr, x_value, y_value):
    env = {x: x_value, y: y_value}
    try:
        before = _evaluate(expr, env)
    except ZeroDivisionError:
        return
    assert _evaluate(simplify_node(expr), env) == before


# --- simplify under the ranges of the enclosing loops ----------------------------------


def packed_gemm(m: int, n: int, k: int, panel: int) -> PrimFunc:
    """benchmarks/gemm.py's packed workload: B stored as column panels of width ``panel``."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    panels = te.compute(
        (n // panel, k, panel), lambda p, kk, c: b[kk, p * panel + c], name="B_packed"
    )
    c = te.compute(
        (m, n),
        lambda i, j: te.sum(a[i, r] * panels[j // panel, r, j % panel], axis=r),
        name="C",
    )
    return te.create_prim_func([a, b, c])


def gemm_hand_schedule(func: PrimFunc, rows: int, panel: int, k_block: int) -> Schedule:
    """The hand schedule of benchmarks/gemm.py with its tile sizes as parameters."""
    sch = Schedule(func)
    p, _, c = sch.get_loops(sch.get_block("B_packed"))
    sch.parallel(p)
    sch.vectorize(c)
    gemm = sch.get_block("C")
    i, j, k = sch.get_loops(gemm)
    i_outer, i_inner = sch.split(i, [None, rows])
    j_outer, j_inner = sch.split(j, [None, panel])
    k_outer, k_inner = sch.split(k, [None, k_block])
    sch.reorder(i_outer, j_outer, k_outer, k_inner, i_inner, j_inner)
    write_back = sch.cache_write(gemm, 0, "local")
    sch.reverse_compute_at(write_back, j_outer)
    sch.decompose_reduction(gemm, k_outer)
    sch.unroll(i_inner)
    sch.vectorize(j_inner)
    sch.parallel(i_outer)
    return sch


def without_flatten(func: PrimFunc) -> PrimFunc:
    """Every lowering pass up to simplify: n-d accesses that the interpreter can check."""
    return lower_func(func, passes=[p for p in PASSES if p.name != "flatten_buffers"])


def test_packed_gemm_index_loses_its_division_and_modulo():
    """``(j_0 * 16 + j_1) // 16`` is ``j_0`` and ``% 16`` is ``j_1`` while j_1 < 16."""
    sch = gemm_hand_schedule(packed_gemm(10, 48, 20, 16), rows=4, panel=16, k_block=4)
    func = sch.mod["main"]
    text = compiler.lower(sch.mod, simple_mode=True).script()
    assert "B_packed[j_0 * 320 + k_0 * 64 + k_1 * 16 + j_1]" in text
    assert "//" not in text and "%" not in text
    assert "if i_0 * 4 + i_1 < 10:" in text  # the ranges do not decide the split's guard
    same_results(func, without_flatten(func))
    a, b, c = random_args(func, seed=3)
    compiler.build(sch.mod)["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_packed_gemm_index_as_written_by_the_workload():
    """Unscheduled, the panel index keeps ``j // 16``: j runs over all of [0, 48)."""
    text = compiler.lower(packed_gemm(5, 48, 3, 16), simple_mode=True).script()
    assert "B_packed[j // 16 * 48 + k * 16 + j % 16]" in text


def test_conditions_the_loop_ranges_decide_disappear():
    buf = Buffer("A", (E.const(8),))
    i = Var("i")
    store = BufferStore(buf, E.Select(i >= 0, E.const(1.0), E.const(2.0)), (E.Min(i, E.const(7)),))
    loop = For(i, E.const(0), E.const(8), ForKind.SERIAL, IfThenElse(i < 10, store))
    assert str(simplify_node(loop)) == "for i in T.serial(8):\n    A[i] = T.float32(1.0)"
    never = For(i, E.const(0), E.const(8), ForKind.SERIAL, IfThenElse(i * 2 > 14, store))
    assert is_empty(simplify_node(never))


def test_a_loop_range_starts_at_the_loop_min_and_holds_only_inside_the_loop():
    buf = Buffer("A", (E.const(8),))
    i = Var("i")
    inside = BufferStore(buf, E.const(1.0), (i // 8 + i % 8,))
    outside = BufferStore(buf, E.const(2.0), (i // 8 + i % 8,))
    loop = For(i, E.const(3), E.const(5), ForKind.SERIAL, inside)
    lowered = simplify_node(SeqStmt((loop, outside)))
    assert isinstance(lowered, SeqStmt)
    assert str(lowered.seq[0].body) == "A[i] = T.float32(1.0)"  # type: ignore[attr-defined]
    assert str(lowered.seq[1]) == "A[i // 8 + i % 8] = T.float32(2.0)"
    assert str(simplify_node(outside, {i: Range(E.const(0), E.const(8))})).startswith("A[i] =")


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 9),
    panels=st.integers(1, 3),
    k=st.integers(1, 9),
    panel=st.integers(2, 5),
    rows=st.integers(2, 4),
    k_block=st.integers(2, 4),
)
def test_range_aware_simplify_keeps_every_gemm_schedule_exact(m, panels, k, panel, rows, k_block):
    """Tile sizes that divide the extents or not: lowering keeps what the schedule computes."""
    sch = gemm_hand_schedule(packed_gemm(m, panels * panel, k, panel), rows, panel, k_block)
    func = sch.mod["main"]
    same_results(func, without_flatten(func), seed=m * 100 + k)


# --- flatten_buffers ---------------------------------------------------------------


def test_flat_index_is_row_major_with_symbolic_shapes():
    n, m = Var("n"), Var("m")
    buf = Buffer("A", (n, E.const(5), m))
    i, j, k = Var("i"), Var("j"), Var("k")
    assert str(flat_index(buf, (i, j, k))) == "(i * 5 + j) * m + k"
    assert str(flat_index(buf, (E.const(0), E.const(0), k))) == "k"


def test_flatten_buffers_leaves_one_index_per_access():
    func = flatten_buffers(lower_blocks(mm_relu(3, 4, 5)))
    for node in nodes_of(func.body, (E.BufferLoad, BufferStore)):
        assert len(node.indices) == 1
    assert "C[i * 5 + j]" in func.script()


# --- the pipeline ------------------------------------------------------------------


def test_dump_after_prints_the_named_passes():
    out = io.StringIO()
    lower_func(matmul(3, 4, 5), dump_after=["lower_blocks", "flatten_buffers"], out=out)
    text = out.getvalue()
    assert "# IR after lower_blocks" in text and "# IR after flatten_buffers" in text
    assert "# IR after simplify" not in text
    out = io.StringIO()
    lower_func(matmul(3, 4, 5), dump_after="all", out=out)
    assert all(f"# IR after {name}" in out.getvalue() for name in PASS_NAMES)
    out = io.StringIO()
    lower_func(matmul(3, 4, 5), dump_after="simplify", out=out)
    assert out.getvalue().count("# IR after") == 1
    with pytest.raises(ValueError, match="lower_blocks"):
        lower_func(matmul(3, 4, 5), dump_after=["lower_block"])


def test_compiler_lower_shows_loops():
    func = mm_relu(6, 7, 8).with_attr("note", "shown only without simple_mode")
    mod = compiler.lower(func, simple_mode=True)
    assert isinstance(mod, IRModule)
    assert mod["main"].attrs == {}
    text = mod.script()
    assert "for " in text and "T.block" not in text
    assert "C[i * 8 + j]" in text


def test_compiler_lower_accepts_a_te_schedule():
    a = te.placeholder((12,), name="A")
    b = te.compute((12,), lambda i: a[i] + 1.0, name="B")
    s = te.create_schedule(b.op)
    s[b].split(b.op.axis[0], factor=4)
    text = compiler.lower(s, [a, b], simple_mode=True).script()
    assert "for i_0, i_1 in T.grid(3, 4)" in text
