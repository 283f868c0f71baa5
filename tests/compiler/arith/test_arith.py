"""Bound analysis and simplification of integer index expressions (compiler.arith).

The property tests evaluate random expressions at every point of small variable
ranges: bounds must enclose every value (and be attained for affine expressions),
simplification must not change any value.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.arith import (
    Interval,
    Simplifier,
    bound,
    can_prove,
    const_bound,
    dense_image,
    normalize,
    simplify,
)
from compiler.ir import expr as E
from compiler.ir.expr import IntImm, PrimExpr, Range, Var, const


def evaluate(e: PrimExpr, env: Mapping[Var, int]) -> int:
    """Python's value of an integer expression (floor division and modulo, as the IR)."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, E.Select):
        cond = evaluate(e.condition, env)
        return evaluate(e.true_value if cond else e.false_value, env)
    if isinstance(e, E.Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, E.Cast):
        return evaluate(e.value, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)  # type: ignore[attr-defined]
    ops = {
        E.Add: lambda: a + b,
        E.Sub: lambda: a - b,
        E.Mul: lambda: a * b,
        E.FloorDiv: lambda: a // b,
        E.FloorMod: lambda: a % b,
        E.Div: lambda: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
        E.Min: lambda: min(a, b),
        E.Max: lambda: max(a, b),
        E.LT: lambda: int(a < b),
        E.LE: lambda: int(a <= b),
        E.GT: lambda: int(a > b),
        E.GE: lambda: int(a >= b),
        E.EQ: lambda: int(a == b),
        E.NE: lambda: int(a != b),
        E.And: lambda: int(bool(a) and bool(b)),
        E.Or: lambda: int(bool(a) or bool(b)),
    }
    return ops[type(e)]()


VARS = [Var("x"), Var("y"), Var("z")]


@st.composite
def var_ranges(draw: st.DrawFn) -> dict[Var, Range]:
    out = {}
    for v in VARS:
        low = draw(st.integers(-6, 6))
        extent = draw(st.integers(1, 6))
        out[v] = Range(const(low), const(extent))
    return out


def leaves() -> st.SearchStrategy[PrimExpr]:
    return st.one_of(st.sampled_from(VARS), st.integers(-9, 9).map(const))


def affine_exprs() -> st.SearchStrategy[PrimExpr]:
    def extend(inner: st.SearchStrategy[PrimExpr]) -> st.SearchStrategy[PrimExpr]:
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] - p[1]),
            st.tuples(inner, st.integers(-4, 4)).map(lambda p: p[0] * p[1]),
            st.tuples(st.integers(-4, 4), inner).map(lambda p: p[0] * p[1]),
        )

    return st.recursive(leaves(), extend, max_leaves=10)


def general_exprs() -> st.SearchStrategy[PrimExpr]:
    def extend(inner: st.SearchStrategy[PrimExpr]) -> st.SearchStrategy[PrimExpr]:
        divisor = st.integers(1, 5).map(const)
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] - p[1]),
            st.tuples(inner, st.integers(-3, 3)).map(lambda p: p[0] * p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] * p[1]),
            st.tuples(inner, divisor).map(lambda p: E.FloorDiv(p[0], p[1])),
            st.tuples(inner, divisor).map(lambda p: E.FloorMod(p[0], p[1])),
            st.tuples(inner, inner).map(lambda p: E.Min(p[0], p[1])),
            st.tuples(inner, inner).map(lambda p: E.Max(p[0], p[1])),
            st.tuples(inner, inner, inner, inner).map(lambda p: E.Select(p[0] < p[1], p[2], p[3])),
        )

    return st.recursive(leaves(), extend, max_leaves=8)


def condition_exprs() -> st.SearchStrategy[PrimExpr]:
    """Integer expressions with truncating division, comparisons and logic mixed in."""
    ints = general_exprs()
    compare = st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE])
    conditions = st.tuples(compare, ints, ints).map(lambda p: p[0](p[1], p[2]))
    logic = st.tuples(st.sampled_from([E.And, E.Or]), conditions, conditions).map(
        lambda p: p[0](p[1], p[2])
    )
    divisor = st.integers(1, 5).map(const)
    return st.one_of(
        conditions,
        logic,
        logic.map(E.Not),
        st.tuples(ints, divisor).map(lambda p: E.Div(p[0], p[1])),
        st.tuples(conditions, ints, ints).map(lambda p: E.Select(p[0], p[1], p[2])),
    )


def all_points(ranges: Mapping[Var, Range]) -> list[dict[Var, int]]:
    spans = [
        range(r.min.value, r.min.value + r.extent.value)  # type: ignore[attr-defined]
        for r in ranges.values()
    ]
    return [dict(zip(ranges, point, strict=True)) for point in itertools.product(*spans)]


def constant_bounds(e: PrimExpr, ranges: Mapping[Var, Range]) -> tuple[int, int]:
    result = bound(e, ranges)
    assert isinstance(result.min, IntImm) and isinstance(result.max, IntImm), result
    return result.min.value, result.max.value


@settings(max_examples=300, deadline=None)
@given(affine_exprs(), var_ranges())
def test_affine_bounds_are_exact(e: PrimExpr, ranges: dict[Var, Range]) -> None:
    values = [evaluate(e, p) for p in all_points(ranges)]
    assert constant_bounds(e, ranges) == (min(values), max(values))


@settings(max_examples=300, deadline=None)
@given(general_exprs(), var_ranges())
def test_bounds_enclose_every_value(e: PrimExpr, ranges: dict[Var, Range]) -> None:
    low, high = constant_bounds(e, ranges)
    for point in all_points(ranges):
        assert low <= evaluate(e, point) <= high


@settings(max_examples=300, deadline=None)
@given(general_exprs(), var_ranges())
def test_simplify_keeps_every_value_in_range(e: PrimExpr, ranges: dict[Var, Range]) -> None:
    simple = simplify(e, ranges)
    for point in all_points(ranges):
        assert evaluate(simple, point) == evaluate(e, point)


@settings(max_examples=300, deadline=None)
@given(condition_exprs(), var_ranges())
def test_simplify_keeps_conditions_and_truncating_division_in_range(
    e: PrimExpr, ranges: dict[Var, Range]
) -> None:
    simple = simplify(e, ranges)
    assert simple.dtype == e.dtype
    for point in all_points(ranges):
        assert evaluate(simple, point) == evaluate(e, point)


@settings(max_examples=200, deadline=None)
@given(general_exprs())
def test_normalize_keeps_every_value(e: PrimExpr) -> None:
    simple = normalize(e)
    for point in itertools.product(range(-7, 8, 3), repeat=3):
        env = dict(zip(VARS, point, strict=True))
        assert evaluate(simple, env) == evaluate(e, env)


@settings(max_examples=200, deadline=None)
@given(general_exprs(), var_ranges(), st.integers(1, 9))
def test_bounds_with_a_symbolic_extent_enclose_every_value(
    e: PrimExpr, ranges: dict[Var, Range], n_value: int
) -> None:
    """``x`` ranges over ``[lo, lo + n)`` for a symbol ``n``: the bounds are
    expressions in ``n`` that enclose the values for each concrete ``n``."""
    n = Var("n")
    x, _y, _z = VARS
    symbolic = {**ranges, x: Range(ranges[x].min, n)}
    result = bound(e, symbolic)
    concrete = {**ranges, x: Range(ranges[x].min, const(n_value))}
    for point in all_points(concrete):
        value = evaluate(e, point)
        if result.min is not None:
            assert evaluate(result.min, {n: n_value}) <= value
        if result.max is not None:
            assert value <= evaluate(result.max, {n: n_value})


def test_affine_tile_bound_is_tight() -> None:
    i, j = Var("i"), Var("j")
    ranges = {i: Range(const(0), const(8)), j: Range(const(0), const(4))}
    assert constant_bounds(i * 4 + j, ranges) == (0, 31)


def test_bound_keeps_unranged_variables_as_symbols() -> None:
    i0, i1 = Var("i_0"), Var("i_1")
    result = bound(i0 * 4 + i1, {i1: Range(const(0), const(4))})
    assert str(result.min) == "i_0 * 4"
    assert str(result.max) == "i_0 * 4 + 3"
    assert str(result.extent()) == "4"


def test_bound_over_a_symbolic_range() -> None:
    i, n = Var("i"), Var("n")
    result = bound(i * 2 + 1, {i: Range(const(0), n)})
    assert str(result.min) == "1"
    assert str(result.max) == "n * 2 - 1"


def test_bounds_of_division_and_modulo() -> None:
    i, j = Var("i"), Var("j")
    ranges = {i: Range(const(0), const(8)), j: Range(const(0), const(4))}
    assert constant_bounds((i * 4 + j) // 4, ranges) == (0, 7)
    assert constant_bounds((i * 4 + j) % 4, ranges) == (0, 3)
    assert constant_bounds((i * 4 + j) % 64, ranges) == (0, 31)


def test_min_max_bounds() -> None:
    i, n = Var("i"), Var("n")
    result = bound(E.Min(i + 4, const(10)), {i: Range(const(0), const(8))})
    assert (result.min.value, result.max.value) == (4, 10)  # type: ignore[union-attr]
    assert const_bound(E.Min(const(4), n - i), {i: Range(const(0), const(8))}) == (None, 4)


def test_simplify_makes_compute_at_extents_readable() -> None:
    i0, ax = Var("i_0"), Var("ax0")
    assert str(normalize((i0 * 4 + 3) - i0 * 4 + 1)) == "4"
    assert str(normalize(i0 * 4 + ax - i0 * 4)) == "ax0"
    ranges = {ax: Range(const(0), const(4))}
    assert str(simplify((i0 * 4 + ax) // 4, ranges)) == "i_0"
    assert str(simplify((i0 * 4 + ax) % 4, ranges)) == "ax0"


def test_simplify_decides_comparisons_from_ranges() -> None:
    i0, ax, n = Var("i_0"), Var("ax0"), Var("n")
    ranges = {i0: Range(const(0), const(8)), ax: Range(const(0), const(4))}
    assert can_prove(i0 * 4 + ax < 32, ranges)
    assert not can_prove(i0 * 4 + ax < 31, ranges)
    assert str(simplify(i0 * 4 + ax < n, ranges)) == "i_0 * 4 + ax0 < n"
    assert str(simplify(E.Min(i0 * 4 + 4, const(32)), ranges)) == "i_0 * 4 + 4"


def test_union_of_intervals() -> None:
    i = Var("i")
    a = Interval(i, i + 2)
    b = Interval(i - 1, i + 1)
    union = a.union(b)
    assert str(union.min) == "i - 1"
    assert str(union.max) == "i + 2"


@settings(max_examples=300, deadline=None)
@given(affine_exprs(), var_ranges())
def test_dense_image_is_exactly_the_values_taken(e: PrimExpr, ranges: dict[Var, Range]) -> None:
    image = dense_image(e, ranges)
    if image is None:
        return
    values = {evaluate(e, p) for p in all_points(ranges)}
    low, high = image.min.value, image.max.value  # type: ignore[union-attr]
    assert values == set(range(low, high + 1))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(-5, 5))
def test_dense_image_recognises_mixed_radix_tilings(extents: list[int], offset: int) -> None:
    """``((x * e1 + y) * e2 + z) + offset``: what split makes of one loop."""
    ranges = {v: Range(const(0), const(e)) for v, e in zip(VARS, extents, strict=False)}
    fused: PrimExpr = const(offset)
    for v, e in zip(VARS, extents, strict=False):
        fused = fused * e + v
    image = dense_image(fused, ranges)
    assert image is not None
    values = {evaluate(fused, p) for p in all_points(ranges)}
    assert values == set(range(image.min.value, image.max.value + 1))  # type: ignore[union-attr]


def test_dense_image_keeps_fixed_variables_symbolic() -> None:
    i0, i1, n = Var("i_0"), Var("i_1"), Var("n")
    image = dense_image(i0 * 4 + i1, {i1: Range(const(0), const(4))})
    assert image is not None and str(image.min) == "i_0 * 4" and str(image.max) == "i_0 * 4 + 3"
    image = dense_image(i1, {i1: Range(const(0), n)})
    assert image is not None and str(image.max) == "n - 1"
    assert dense_image(i1 * 2 + i0, {i1: Range(const(0), const(4))}) is None
    assert dense_image(i1 // 2, {i1: Range(const(0), const(4))}) is None


def test_constants_fold_in_the_ir_semantics() -> None:
    x = VARS[0]
    assert str(normalize(E.FloorDiv(const(-7), const(2)))) == "-4"
    assert str(normalize(E.FloorMod(const(7), const(-2)))) == "-1"
    assert str(normalize(E.Div(const(-7), const(2)))) == "-3"
    assert str(normalize(E.FloorDiv(x, const(0)))) == "x // 0"
    assert str(normalize(E.Cast("bool", const(5)))) == "True"
    assert str(normalize(E.Div(x, const(1)))) == "x"
    assert str(normalize(E.Not(const(3) < 4))) == "False"


def test_folding_never_overflows_the_dtype() -> None:
    x = VARS[0]
    assert isinstance(normalize(const(2**31 - 1) + const(1)), E.Add)
    assert str(normalize((x + (2**31 - 1)) + 1)) == "x + 2147483647 + 1"
    assert str(normalize(x * 65536 * 65536)) == "x * 65536 * 65536"
    assert isinstance(normalize(E.Cast("int8", const(300))), E.Cast)
    assert str(normalize(const(2**40, "int64") + 1)) == "T.int64(1099511627777)"


def test_float_arithmetic_is_never_folded() -> None:
    f = Var("f", "float32")
    assert str(normalize(f + 0.0)) == str(f + 0.0)  # -0.0 + 0.0 is 0.0, not -0.0
    assert normalize(f * 1.0) is f
    assert normalize(1.0 * f) is f
    assert normalize(f / 1.0) is f
    assert isinstance(normalize(const(0.1) + const(0.2)), E.Add)
    assert isinstance(normalize(E.Min(f, f + 1.0)), E.Min)


def test_truncating_division_becomes_floor_division_only_when_it_simplifies() -> None:
    x = VARS[0]
    natural = {x: Range(const(0), const(8))}
    assert str(simplify(E.Div(x + 4, const(4)), natural)) == "x // 4 + 1"
    assert str(simplify(E.Div(x, const(8)), natural)) == "0"
    assert isinstance(simplify(E.Div(x, const(3)), natural), E.Div)
    assert isinstance(simplify(E.Div(x - 4, const(4)), natural), E.Div)


def test_simplifier_binds_ranges_for_a_with_block_only() -> None:
    j0, j1 = Var("j_0"), Var("j_1")
    packed = ((j0 * 16 + j1) // 16 * 256 + 5) * 16 + (j0 * 16 + j1) % 16
    simplifier = Simplifier()
    with simplifier.bind(j1, Range(const(0), const(16))):
        assert str(simplifier(packed)) == "j_0 * 4096 + j_1 + 80"
        with simplifier.bind(j1, Range(const(16), const(16))):
            assert str(simplifier((j0 * 16 + j1) // 16)) == "j_0 + 1"
        assert str(simplifier((j0 * 16 + j1) // 16)) == "j_0"
    assert "//" in str(simplifier(packed))
