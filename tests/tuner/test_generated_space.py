"""``GeneratedSpace``: for every registered operator, sampled candidates whose traces,
replayed alone, build with LLVM and compute what numpy computes; traces that
round-trip through JSON and back into the space; and a quick tune whose best
schedule replays when the workload is built with the database."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from generated_cases import SHAPES, expected, inputs, run_trace, workload

import compiler
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.workload.spec import (
    OPS,
    normalize_spec,
    workload_from_normalized_spec,
    workload_from_spec,
)
from db import Database
from tuner import space as spaces
from tuner.space.base import trace_decision
from tuner.space.generated import MAX_DESIGNS, GeneratedSpace
from tuner.space.postprocess import postprocess
from tuner.task import TuneTask
from tuner.tune import TuneOptions, tune
from workers import Workers

# Candidates drawn per operator in CI (one for the tiled ones, whose builds take
# seconds); the slow variant draws SLOW_SAMPLES.
CI_SAMPLES = 2
TILED = {
    "matmul",
    "batch_matmul",
    "dense",
    "conv2d_nchw",
    "conv2d_nhwc",
    "conv2d_nchw_bias_relu",
    "conv2d_winograd_nchw",
}
SLOW_SAMPLES = 100
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def test_every_registered_operator_has_a_shape() -> None:
    assert set(SHAPES) == set(OPS)


def check_samples(op: str, samples: int) -> tuple[int, int]:
    """Draw ``samples`` candidates; build and run each distinct trace; return (drawn,
    distinct). Every one must match numpy."""
    func, spec = workload(op)
    space = GeneratedSpace(func)
    assert 1 <= space.design_count <= MAX_DESIGNS
    arrays = inputs(func, op)
    want = expected(spec, arrays)
    rng = random.Random(11)
    built: set[str] = set()
    for _ in range(samples):
        candidate = space.sample(rng)
        if candidate.trace_hash in built:
            continue
        built.add(candidate.trace_hash)
        got = run_trace(func, candidate.trace_json, arrays)
        np.testing.assert_allclose(got, want, **TOLERANCE, err_msg=str(candidate.trace))
    return samples, len(built)


@pytest.mark.parametrize("op", sorted(SHAPES))
def test_sampled_candidates_compute_what_numpy_computes(op: str) -> None:
    check_samples(op, 1 if op in TILED else CI_SAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(SHAPES))
def test_a_hundred_sampled_candidates_compute_what_numpy_computes(op: str) -> None:
    drawn, distinct = check_samples(op, SLOW_SAMPLES)
    assert drawn == SLOW_SAMPLES and distinct >= 1


@pytest.mark.parametrize("op", ["dense", "softmax", "conv2d_nchw"])
def test_a_stored_trace_replays_the_same_program_and_reads_back(op: str) -> None:
    func, _ = workload(op)
    space = GeneratedSpace(func)
    candidate = space.sample(random.Random(3))
    replayed = Schedule(func)
    Trace.from_json(candidate.trace_json).apply_to_schedule(replayed)
    assert replayed.trace.structural_hash == candidate.trace_hash
    program = space.program(candidate).func
    assert replayed.mod["main"].script() == program.script()

    read = space.candidate_from_trace(candidate.trace_json)
    assert read is not None
    assert (read.trace_hash, read.decisions) == (candidate.trace_hash, candidate.decisions)
    fresh = GeneratedSpace(func)
    assert fresh.candidate_from_trace(candidate.trace) == candidate


@pytest.mark.parametrize("op", ["dense", "conv2d_nchw", "softmax"])
def test_points_that_make_one_program_make_one_trace(op: str) -> None:
    """A sampled size beyond what its loops take (64 lanes where the widest loop to
    vectorize has 6) makes the same program as the least size that takes those
    loops: the space hands out that point's trace, so a search measures it once."""
    func, _ = workload(op)
    space = GeneratedSpace(func)
    rng = random.Random(5)
    lowered = 0
    for _ in range(40):
        point = space.random_decisions(rng)
        try:
            candidate = space.candidate(point)
        except ScheduleError:
            continue
        design = space.design_traces()[point.design]
        own = Schedule(func)
        sampled = sorted(design.decisions)
        design.apply_to_schedule(
            own, dict(zip(sampled, map(trace_decision, point.values), strict=True))
        )
        replayed = Schedule(func)
        candidate.trace.apply_to_schedule(replayed)
        assert replayed.mod["main"].script() == postprocess(own).schedule.mod["main"].script()
        assert space.candidate(candidate.decisions) == candidate
        least = candidate.decisions
        for domain, asked, made in zip(
            space.decision_domains(point.design), point.values, least.values, strict=True
        ):
            if domain.role:
                assert domain.candidates[made] <= domain.candidates[asked]
            else:
                assert made == asked
        lowered += least != point
    assert lowered > 0


def test_a_trace_the_space_did_not_make_is_not_read_back() -> None:
    func, _ = workload("matmul")
    space = GeneratedSpace(func)
    foreign = Schedule(func)
    foreign.parallel(foreign.get_loops(foreign.get_block("T_matmul"))[0])
    assert space.candidate_from_trace(foreign.trace) is None
    assert space.candidate_from_trace("{not json") is None
    other, _ = workload("dense")
    assert space.candidate_from_trace(GeneratedSpace(other).sample(random.Random(0)).trace) is None


def test_the_sampled_sizes_carry_their_roles() -> None:
    space = GeneratedSpace(workload("softmax")[0])
    roles = [d.role for d in space.decision_domains(0) if d.role]
    assert roles == ["parallel", "vectorize", "unroll"]


def test_the_space_is_a_kind_and_moves_to_another_shape() -> None:
    func, _ = workload("matmul")
    space = spaces.create("generated", func=func)
    assert isinstance(space, GeneratedSpace)
    square = workload_from_spec({"op": "matmul", "args": {"m": 64, "n": 64, "k": 64}})
    bigger = space.for_workload(square)
    assert bigger is not None and bigger.workload_key != space.workload_key
    # Made once: the next ask (transfer asks every round of a model) gets the same space,
    # and so do asks for the first workload, whose space was made by create().
    assert space.for_workload(square) is bigger
    assert bigger.for_workload(func) is space
    assert GeneratedSpace(func, seed=1).for_workload(square) is not bigger


DENSE_RELU = {"batch": 4, "in_features": 32, "out_features": 48, "activation": "relu"}


@pytest.mark.parametrize(
    "spec",
    [{"op": "softmax", "args": {"shape": [16, 40]}}, {"op": "dense", "args": DENSE_RELU}],
    ids=["softmax", "dense_bias_relu"],
)
def test_a_quick_tune_finishes_and_its_best_replays_at_build_time(
    spec: dict[str, Any], database: Database, backend: Workers
) -> None:
    normalized = normalize_spec(spec)
    func = workload_from_normalized_spec(normalized)
    task = TuneTask.from_func(func, "llvm")
    options = TuneOptions(trials=4, tuner="random", batch_size=2, seed=2, baseline=False)
    space = GeneratedSpace(func)
    result = tune(task, database=database, workers=backend, options=options, space=space)
    assert (result.measured, result.errors) == (4, 0)
    best = database.best_trace(task.workload_key, task.target)
    assert best is not None and best == result.best[0].trace
    assert space.candidate_from_trace(best) is not None

    arrays = inputs(func, spec["op"])
    out = np.full(tuple(int(d) for d in func.params[-1].shape), np.nan, dtype="float32")
    compiler.build(func, database=database)(*arrays, out)
    np.testing.assert_allclose(out, expected(normalized, arrays), **TOLERANCE)
