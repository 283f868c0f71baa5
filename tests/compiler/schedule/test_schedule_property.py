"""The schedule's central promise, tested at random: any sequence of primitives either
raises ScheduleError for a move (which is then skipped) or yields a program that
computes what numpy computes.

A move generator draws primitives and their arguments (blocks by name, loops from
``get_loops``, factors, sampled tiles and compute locations) and applies them to
three workloads: matmul + relu, a small NCHW conv2d whose padding is an
intermediate ``te.if_then_else``, and a softmax (max-reduce, exp, sum-reduce,
divide). The scheduled program runs in the reference interpreter, whose strict
checks (bounds, block domains, NaN-filled intermediates) turn a wrong schedule
into a visible failure, and for fewer examples also compiled by LLVM (which runs
parallel loops on real threads); its trace must replay from JSON to the same module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func
from schedule_moves import MOVES, HypothesisChooser, RandomChooser, apply_moves

import compiler
from compiler import te
from compiler.ir.function import PrimFunc
from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule, Trace
from compiler.topi.reference import conv2d_nchw_im2col

# workloads -------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    func: PrimFunc
    reference: Callable[..., np.ndarray]


def matmul_relu(m: int, n: int, k: int) -> Workload:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    Y = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = te.compute((m, n), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return Workload(
        te.create_prim_func([A, B, C]),
        lambda a, b: np.maximum(a.astype("float64") @ b, 0),
    )


def conv2d_nchw(channels: int, size: int, filters: int, kernel: int, pad: int) -> Workload:
    data = te.placeholder((1, channels, size, size), name="data")
    weight = te.placeholder((filters, channels, kernel, kernel), name="weight")
    padded_size = size + 2 * pad
    padded = te.compute(
        (1, channels, padded_size, padded_size),
        lambda n, c, y, x: te.if_then_else(
            te.all_of(y >= pad, y < size + pad, x >= pad, x < size + pad),
            data[n, c, y - pad, x - pad],
            0.0,
        ),
        name="pad",
    )
    out_size = padded_size - kernel + 1
    rc = te.reduce_axis((0, channels), "rc")
    ry = te.reduce_axis((0, kernel), "ry")
    rx = te.reduce_axis((0, kernel), "rx")
    conv = te.compute(
        (1, filters, out_size, out_size),
        lambda n, f, y, x: te.sum(
            padded[n, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv",
    )

    def reference(d: np.ndarray, w: np.ndarray) -> np.ndarray:
        return conv2d_nchw_im2col(d.astype("float64"), w.astype("float64"), padding=pad)

    return Workload(te.create_prim_func([data, weight, conv]), reference)


def softmax(m: int, n: int) -> Workload:
    X = te.placeholder((m, n), name="X")
    j = te.reduce_axis((0, n), "j")
    M = te.compute((m,), lambda i: te.max(X[i, j], axis=j), name="M")
    E = te.compute((m, n), lambda i, c: te.exp(X[i, c] - M[i]), name="E")
    k = te.reduce_axis((0, n), "k")
    S = te.compute((m,), lambda i: te.sum(E[i, k], axis=k), name="S")
    Out = te.compute((m, n), lambda i, c: E[i, c] / S[i], name="Out")

    def reference(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return Workload(te.create_prim_func([X, Out]), reference)


def workloads() -> st.SearchStrategy[Workload]:
    dims = st.integers(1, 6)
    return st.one_of(
        st.builds(matmul_relu, dims, dims, dims),
        st.builds(
            conv2d_nchw,
            st.integers(1, 2),
            st.integers(3, 5),
            st.integers(1, 2),
            st.integers(1, 3),
            st.integers(0, 1),
        ),
        st.builds(softmax, dims, st.integers(1, 7)),
    )


def check_schedule(sch: Schedule, workload: Workload, llvm: bool = False) -> None:
    """The scheduled module computes the reference (in the interpreter, and compiled
    by LLVM when asked), and its trace replays from JSON to the same module."""
    args = random_args(workload.func, seed=7)
    expected = workload.reference(*args[:-1])
    run_func(sch.mod, *args)
    np.testing.assert_allclose(args[-1], expected, rtol=1e-4, atol=1e-4, err_msg="interpreter")
    if llvm:
        args = random_args(workload.func, seed=8)
        compiler.build(sch.mod)["main"](*args)
        expected = workload.reference(*args[:-1])
        np.testing.assert_allclose(args[-1], expected, rtol=1e-4, atol=1e-4, err_msg="LLVM")
    replayed = Schedule(workload.func)
    Trace.from_json(json.loads(json.dumps(sch.trace.as_json()))).apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, sch.mod)


# the properties --------------------------------------------------------------------


HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=300, deadline=None, suppress_health_check=HEALTH)
@given(workload=workloads(), count=st.integers(1, 10), seed=st.integers(0, 2**16), data=st.data())
def test_random_schedules_compute_what_numpy_computes(
    workload: Workload, count: int, seed: int, data: st.DataObject
) -> None:
    sch = Schedule(workload.func, seed=seed)
    apply_moves(sch, HypothesisChooser(data), count)
    check_schedule(sch, workload)


@settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(workload=workloads(), count=st.integers(1, 10), seed=st.integers(0, 2**16), data=st.data())
def test_random_schedules_compiled_by_llvm_compute_what_numpy_computes(
    workload: Workload, count: int, seed: int, data: st.DataObject
) -> None:
    sch = Schedule(workload.func, seed=seed)
    apply_moves(sch, HypothesisChooser(data), count)
    check_schedule(sch, workload, llvm=True)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=HEALTH)
@given(workload=workloads(), count=st.integers(1, 20), seed=st.integers(0, 2**16), data=st.data())
def test_random_schedules_compute_what_numpy_computes_at_length(
    workload: Workload, count: int, seed: int, data: st.DataObject
) -> None:
    sch = Schedule(workload.func, seed=seed)
    apply_moves(sch, HypothesisChooser(data), count)
    check_schedule(sch, workload, llvm=True)


def test_the_move_generator_reaches_every_primitive() -> None:
    """Random sequences apply every primitive somewhere; a generator that only ever
    makes illegal moves would make the property above vacuous."""
    cases = [matmul_relu(4, 6, 5), conv2d_nchw(2, 4, 2, 3, 1), softmax(3, 5)]
    applied: set[str] = set()
    for seed in range(120):
        workload = cases[seed % len(cases)]
        sch = Schedule(workload.func, seed=seed)
        applied.update(apply_moves(sch, RandomChooser(seed), 10))
        check_schedule(sch, workload)
    assert applied == set(MOVES), f"never applied: {sorted(set(MOVES) - applied)}"
