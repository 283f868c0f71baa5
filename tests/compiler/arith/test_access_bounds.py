"""Accesses that provably leave their buffer are refused when the function is made
or lowered, naming the buffer, the index, its range and the extent; guarded ones,
and ones no analysis can decide, still run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.arith.access_bounds import IndexBoundsError, check_accesses
from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.analysis import replace_buffer
from compiler.ir.buffer import Buffer
from compiler.schedule import Schedule


def refused(make) -> str:
    with pytest.raises(IndexBoundsError) as info:
        make()
    assert isinstance(info.value, CompilerError)
    return str(info.value)


def test_a_far_offset_is_refused_when_the_function_is_made() -> None:
    A = te.placeholder((10,), name="A")
    C = te.compute((4,), lambda i: A[i + 100000000], name="C")
    message = refused(lambda: te.create_prim_func([A, C]))
    assert "buffer 'A'" in message and "+ 100000000" in message
    assert "[100000000, 100000003]" in message and "extent there is 10" in message


def test_an_output_larger_than_its_input_is_refused() -> None:
    A = te.placeholder((10,), name="A")
    C = te.compute((20,), lambda i: A[i], name="C")
    assert "runs over [0, 19]" in refused(lambda: te.create_prim_func([A, C]))


def test_a_reduce_axis_longer_than_the_row_is_refused() -> None:
    A = te.placeholder((16, 8), name="A")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="C")
    message = refused(lambda: te.create_prim_func([A, C]))
    assert "index 1 of buffer 'A'" in message and "[0, 31]" in message


def test_a_negative_index_is_refused() -> None:
    A = te.placeholder((10,), name="A")
    C = te.compute((10,), lambda i: A[i - 1], name="C")
    assert "[-1, 8]" in refused(lambda: te.create_prim_func([A, C]))


def test_an_out_of_bounds_store_is_refused_after_lowering() -> None:
    """A program made out of bounds after it was made (here by swapping in a shorter
    buffer) is caught by the lowering pass, before any code runs."""
    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i], name="C")
    func = te.create_prim_func([A, C])
    short = Buffer("C", (E.const(6),))
    broken = replace_buffer(func, func.params[1], short)
    broken = dataclasses.replace(broken, params=(broken.params[0], short))
    assert "buffer 'C'" in refused(lambda: compiler.build(broken))


def test_split_and_fuse_tails_are_guarded_not_refused() -> None:
    A = te.placeholder((10, 6), name="A")
    C = te.compute((10, 6), lambda i, j: A[i, j] + 1.0, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    i, j = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j)
    sch.split(fused, [None, 7])
    a = np.random.default_rng(0).random((10, 6), dtype="float32")
    c = np.zeros((10, 6), "float32")
    compiler.build(sch.mod)["main"](a, c)
    np.testing.assert_allclose(c, a + 1.0)


def test_loads_under_a_condition_are_left_to_the_condition() -> None:
    A = te.placeholder((10,), name="A")
    C = te.compute((12,), lambda i: te.if_then_else(i < 10, A[i], 0.0), name="C")
    a = np.arange(10, dtype="float32")
    c = np.zeros(12, "float32")
    compiler.build(te.create_prim_func([A, C]))["main"](a, c)
    np.testing.assert_array_equal(c, np.concatenate([a, [0.0, 0.0]]))


def test_symbolic_sizes_and_data_dependent_indices_still_build() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i], name="C")
    te.create_prim_func([A, C])
    idx = te.placeholder((4,), dtype="int32", name="idx")
    B = te.placeholder((10,), name="B")
    D = te.compute((4,), lambda i: B[idx[i]], name="D")
    check_accesses(te.create_prim_func([idx, B, D]))


def test_strided_indices_are_judged_exactly() -> None:
    A = te.placeholder((20,), name="A")
    in_bounds = te.compute((10,), lambda i: A[i * 2 + 1], name="C")
    te.create_prim_func([A, in_bounds])
    past_end = te.compute((11,), lambda i: A[i * 2], name="D")
    assert "[0, 20]" in refused(lambda: te.create_prim_func([A, past_end]))
