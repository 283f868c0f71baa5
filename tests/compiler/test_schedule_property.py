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
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func

import compiler
from compiler import te
from compiler.ir.function import PrimFunc
from compiler.ir.structural import structural_equal
from compiler.schedule import LoopRV, Schedule, ScheduleError, Trace
from compiler.schedule.primitives import block_names
from compiler.topi.reference import conv2d_nchw_im2col

T = TypeVar("T")


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


# the move generator ----------------------------------------------------------------


class Chooser(Protocol):
    """Where a move gets its random choices: hypothesis (which shrinks failures) or
    a plain ``random.Random`` (for the coverage check)."""

    def integer(self, low: int, high: int) -> int: ...

    def choice(self, items: Sequence[T]) -> T: ...


class HypothesisChooser:
    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))

    def choice(self, items: Sequence[T]) -> T:
        return self.data.draw(st.sampled_from(items))


class RandomChooser:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, items: Sequence[T]) -> T:
        return self.rng.choice(items)


class Skip(Exception):
    """The move has nothing to act on here (no loops, a single loop to fuse)."""


def pick_block(sch: Schedule, ch: Chooser) -> Any:
    names = block_names(sch.mod["main"])
    return sch.get_block(ch.choice(names))


def pick_loop(sch: Schedule, ch: Chooser, block: Any = None) -> LoopRV:
    loops = sch.get_loops(block if block is not None else pick_block(sch, ch))
    if not loops:
        raise Skip
    return ch.choice(loops)


def move_split(sch: Schedule, ch: Chooser) -> None:
    loop = pick_loop(sch, ch)
    factors: list[int | None] = [ch.integer(1, 5) for _ in range(ch.integer(2, 3))]
    if ch.integer(0, 2) > 0:
        factors[ch.integer(0, len(factors) - 1)] = None
    sch.split(loop, factors)


def move_tile(sch: Schedule, ch: Chooser) -> None:
    loop = pick_loop(sch, ch)
    factors = sch.sample_perfect_tile(loop, n=ch.integer(2, 3), max_innermost_factor=4)
    sch.split(loop, factors)


def move_categorical_split(sch: Schedule, ch: Chooser) -> None:
    loop = pick_loop(sch, ch)
    probs = [float(ch.integer(0, 3)) for _ in range(3)]
    probs[ch.integer(0, 2)] += 1.0
    inner = sch.sample_categorical(candidates=[2, 3, 4], probs=probs)
    sch.split(loop, [None, inner])


def move_fuse(sch: Schedule, ch: Chooser) -> None:
    loops = sch.get_loops(pick_block(sch, ch))
    if len(loops) < 2:
        raise Skip
    start = ch.integer(0, len(loops) - 2)
    stop = ch.integer(start + 2, len(loops))
    sch.fuse(*loops[start:stop])


def move_reorder(sch: Schedule, ch: Chooser) -> None:
    loops = list(sch.get_loops(pick_block(sch, ch)))
    if len(loops) < 2:
        raise Skip
    chosen = []
    for _ in range(ch.integer(2, len(loops))):
        chosen.append(loops.pop(ch.integer(0, len(loops) - 1)))
    sch.reorder(*chosen)


def move_kind(kind: str) -> Callable[[Schedule, Chooser], None]:
    def move(sch: Schedule, ch: Chooser) -> None:
        getattr(sch, kind)(pick_loop(sch, ch))

    move.__name__ = f"move_{kind}"
    return move


def move_annotate(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    target = block if ch.integer(0, 1) else pick_loop(sch, ch, block)
    sch.annotate(target, ch.choice(["note", "pragma"]), ch.choice([1, "x", [2, 3], True, 0.5]))


def pick_other_loop(sch: Schedule, ch: Chooser, block: Any) -> LoopRV:
    """A loop of another block than ``block``: where compute_at can move it."""
    others = [name for name in block_names(sch.mod["main"]) if name != block.name]
    if not others:
        raise Skip
    return pick_loop(sch, ch, sch.get_block(ch.choice(others)))


def move_compute_at(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    loop = pick_other_loop(sch, ch, block)
    sch.compute_at(block, loop, preserve_unit_loops=bool(ch.integer(0, 1)))


def move_reverse_compute_at(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    loop = pick_other_loop(sch, ch, block)
    sch.reverse_compute_at(block, loop, preserve_unit_loops=bool(ch.integer(0, 1)))


def move_sampled_location(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    sch.compute_at(block, sch.sample_compute_location(block))


def move_compute_inline(sch: Schedule, ch: Chooser) -> None:
    sch.compute_inline(pick_block(sch, ch))


def move_reverse_compute_inline(sch: Schedule, ch: Chooser) -> None:
    sch.reverse_compute_inline(pick_block(sch, ch))


def move_cache_read(sch: Schedule, ch: Chooser) -> None:
    sch.cache_read(pick_block(sch, ch), ch.integer(0, 2), ch.choice(["global", "local"]))


def move_cache_write(sch: Schedule, ch: Chooser) -> None:
    sch.cache_write(pick_block(sch, ch), 0, ch.choice(["global", "local"]))


def move_decompose_reduction(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    sch.decompose_reduction(block, pick_loop(sch, ch, block))


MOVES: dict[str, Callable[[Schedule, Chooser], None]] = {
    "split": move_split,
    "sample_perfect_tile": move_tile,
    "sample_categorical": move_categorical_split,
    "fuse": move_fuse,
    "reorder": move_reorder,
    "parallel": move_kind("parallel"),
    "vectorize": move_kind("vectorize"),
    "unroll": move_kind("unroll"),
    "annotate": move_annotate,
    "compute_at": move_compute_at,
    "reverse_compute_at": move_reverse_compute_at,
    "sample_compute_location": move_sampled_location,
    "compute_inline": move_compute_inline,
    "reverse_compute_inline": move_reverse_compute_inline,
    "cache_read": move_cache_read,
    "cache_write": move_cache_write,
    "decompose_reduction": move_decompose_reduction,
}


def apply_moves(sch: Schedule, ch: Chooser, count: int) -> list[str]:
    """Apply ``count`` random moves; the names of those that took effect, in order."""
    applied = []
    for _ in range(count):
        name = ch.choice(sorted(MOVES))
        try:
            MOVES[name](sch, ch)
        except Skip:
            continue
        except ScheduleError:
            continue
        applied.append(name)
    return applied


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
    for seed in range(40):
        workload = cases[seed % len(cases)]
        sch = Schedule(workload.func, seed=seed)
        applied.update(apply_moves(sch, RandomChooser(seed), 10))
        check_schedule(sch, workload)
    assert applied == set(MOVES), f"never applied: {sorted(set(MOVES) - applied)}"
