"""compute_at of a block whose output is a function parameter.

The TE tutorial computes ``B = A + 1`` at a loop of ``C = B * 2`` and still passes
``B`` as an argument: the move is legal because, over every iteration of the loop,
the consumer's reads cover all of ``B``. Where they would not, the function would
leave part of a parameter unwritten, so the move must be refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func

import compiler
from compiler import te
from compiler.ir.function import PrimFunc
from compiler.schedule.errors import ScheduleError
from compiler.schedule.schedule import Schedule


def chain(rows: int, cols: int, read_col: int | None = None) -> list[te.Tensor]:
    """``B = A + 1`` and ``C = B * 2``; with ``read_col`` C reads one column of B."""
    a = te.placeholder((rows, cols), name="A")
    b = te.compute((rows, cols), lambda i, j: a[i, j] + 1.0, name="B")
    if read_col is None:
        c = te.compute((rows, cols), lambda i, j: b[i, j] * 2.0, name="C")
    else:
        c = te.compute((rows, cols), lambda i, j: b[i, read_col] * 2.0, name="C")
    return [a, b, c]


def assert_writes_b_and_c(call: Callable[..., object], a: np.ndarray) -> None:
    """``call(a, b, c)`` must write B and C, started as NaN, in full."""
    b = np.full_like(a, np.nan)
    c = np.full_like(a, np.nan)
    call(a, b, c)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def check_both_outputs(func: PrimFunc, a: np.ndarray) -> None:
    """In the interpreter and compiled."""
    assert_writes_b_and_c(lambda *args: run_func(func, *args), a)
    assert_writes_b_and_c(compiler.build(func)["main"], a)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.sampled_from([0, 1]))
def test_the_tutorial_compute_at_with_b_as_a_parameter(rows: int, cols: int, axis: int) -> None:
    a, b, c = chain(rows, cols)
    s = te.create_schedule(c.op)
    s[b].compute_at(s[c], c.op.axis[axis])
    assert_writes_b_and_c(
        compiler.build(s, [a, b, c])["main"],
        np.random.default_rng(rows * 10 + cols).normal(size=(rows, cols)).astype("float32"),
    )


@pytest.mark.parametrize("factor", [1, 3, 4])
@pytest.mark.parametrize("at", [0, 1, 2])
def test_compute_at_under_split_loops_writes_the_whole_parameter(factor: int, at: int) -> None:
    func = te.create_prim_func(chain(10, 7))
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, [None, factor])
    sch.compute_at(sch.get_block("B"), [outer, inner, j][at])
    a = random_args(func, seed=factor + at)[0]
    check_both_outputs(sch.mod["main"], a)


def test_reverse_compute_at_writes_the_whole_parameter() -> None:
    func = te.create_prim_func(chain(6, 5))
    sch = Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    check_both_outputs(sch.mod["main"], random_args(func, seed=3)[0])


def test_compute_at_reading_part_of_a_parameter_is_refused() -> None:
    a, b, c = chain(6, 5, read_col=2)
    sch = Schedule(te.create_prim_func([a, b, c]))
    i, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"function parameter.*do not provably cover"):
        sch.compute_at(sch.get_block("B"), i)
    s = te.create_schedule(c.op)
    with pytest.raises(ScheduleError, match="function parameter"):
        s[b].compute_at(s[c], c.op.axis[0])
        compiler.build(s, [a, b, c])


def test_compute_at_of_a_parameter_under_a_fused_loop_is_refused() -> None:
    sch = Schedule(te.create_prim_func(chain(4, 3)))
    fused = sch.fuse(*sch.get_loops(sch.get_block("C")))
    with pytest.raises(ScheduleError, match="function parameter"):
        sch.compute_at(sch.get_block("B"), fused)


def test_compute_at_of_an_intermediate_still_reads_only_what_is_needed() -> None:
    a, _, c = chain(6, 5, read_col=2)
    sch = Schedule(te.create_prim_func([a, c]))
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    args = random_args(sch.mod["main"], seed=5)
    run_func(sch.mod["main"], *args)
    np.testing.assert_allclose(args[1], np.repeat((args[0][:, 2:3] + 1) * 2, 5, axis=1), rtol=1e-6)
