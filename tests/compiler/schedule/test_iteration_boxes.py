"""The array form of a parallel loop's legality check (``iteration_boxes``): it must
find exactly the overlaps a comparison of every pair of boxes finds, and evaluate
index expressions as the scalar evaluator does, floor division of negatives
included."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ir import expr as E
from compiler.ir.expr import IntImm, Var
from compiler.schedule.primitives.dataflow import evaluate
from compiler.schedule.primitives.iteration_boxes import evaluate_all, owners_overlap

BOX = st.tuples(st.integers(-20, 20), st.integers(0, 6))  # a low end and a width


def overlap_by_pairs(lows: np.ndarray, highs: np.ndarray, owners: np.ndarray) -> bool:
    for a, b in itertools.combinations(range(len(owners)), 2):
        if owners[a] != owners[b] and np.all((lows[a] <= highs[b]) & (lows[b] <= highs[a])):
            return True
    return False


@settings(max_examples=200, deadline=None)
@given(
    dims=st.integers(1, 3),
    data=st.data(),
)
def test_overlaps_between_owners_are_those_every_pair_shows(dims: int, data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 24))
    rows = [data.draw(st.lists(BOX, min_size=dims, max_size=dims)) for _ in range(count)]
    owners = np.array(data.draw(st.lists(st.integers(0, 4), min_size=count, max_size=count)))
    lows = np.array([[low for low, _ in row] for row in rows], dtype=np.int64)
    highs = np.array([[low + width for low, width in row] for row in rows], dtype=np.int64)
    assert owners_overlap(lows, highs, owners) == overlap_by_pairs(lows, highs, owners)


def test_boxes_of_one_owner_may_overlap() -> None:
    lows = np.array([[0, 0], [1, 1], [10, 10]])
    highs = np.array([[4, 4], [5, 5], [12, 12]])
    assert not owners_overlap(lows, highs, np.array([0, 0, 1]))
    assert owners_overlap(lows, highs, np.array([0, 1, 1]))


@settings(max_examples=100, deadline=None)
@given(
    a=st.integers(-50, 50),
    b=st.integers(-7, 7).filter(lambda v: v != 0),
    c=st.integers(-9, 9),
)
def test_expressions_evaluate_as_the_scalar_evaluator_does(a: int, b: int, c: int) -> None:
    x, y = Var("x", "int64"), Var("y", "int64")
    expr = E.Max(E.FloorMod(x * c + y, IntImm(b, "int64")), E.FloorDiv(x - y, IntImm(b, "int64")))
    xs = np.arange(a, a + 5)
    got = evaluate_all(expr, {id(x): xs, id(y): 3})
    want = [evaluate(expr, {x: int(v), y: 3}) for v in xs]
    assert list(np.broadcast_to(got, xs.shape)) == want


def test_a_division_by_zero_somewhere_gives_none() -> None:
    x, y = Var("x", "int64"), Var("y", "int64")
    assert evaluate_all(E.FloorDiv(x, y), {id(x): 4, id(y): np.array([1, 0, 2])}) is None
    assert evaluate_all(E.FloorDiv(x, y), {id(x): 4}) is None  # y unknown
