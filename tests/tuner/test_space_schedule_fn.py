"""Schedule-function spaces: a user's ``f(sch)`` with sampling instructions becomes a
design trace whose decisions are searched; candidates replay it with other
decisions and read back from their traces."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from replay_measurements import small_matmul, small_schedule, small_trace_space

import compiler
from compiler import te
from compiler.schedule import Schedule
from tuner import space as spaces
from tuner.space import Decisions, ScheduleFnSpace, SpaceError


def test_the_design_trace_gives_each_sampling_instruction_a_domain() -> None:
    space = small_trace_space()
    tiles_i, tiles_j, flag = space.decision_domains(0)
    assert tiles_i.kind == tiles_j.kind == "sample_perfect_tile"
    assert set(tiles_i.values) == {(24, 1), (12, 2), (8, 3), (6, 4), (4, 6), (3, 8)}
    assert all(f[-1] <= 16 and f[0] * f[1] == 32 for f in tiles_j.values)
    assert flag.kind == "sample_categorical" and flag.values == (0, 1)
    assert len(space.design_traces()) == 1 and space.design_count == 1


def test_a_candidate_is_the_design_replayed_with_its_decisions() -> None:
    space = small_trace_space()
    point = Decisions(0, ((6, 4), (4, 8), 1))
    candidate = space.candidate(point)
    decided = [candidate.trace.instructions[i].decision for i in sorted(candidate.trace.decisions)]
    assert decided == [[6, 4], [4, 8], 1]
    assert "T.grid(6, 4, 8, 4, 8)" in space.program(candidate).func.script()
    back = space.candidate_from_trace(candidate.trace_json)
    assert back == candidate and back is not None and back.decisions == point


def test_foreign_and_out_of_domain_traces_are_no_candidates() -> None:
    space = small_trace_space()
    sch = Schedule(space.func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    assert space.candidate_from_trace(sch.trace) is None
    other_shape = small_trace_space(16, 32, 8)
    candidate = space.candidate(Decisions(0, ((3, 8), (2, 16), 0)))
    assert other_shape.candidate_from_trace(candidate.trace) is None
    assert space.candidate_from_trace("{") is None


def test_compute_location_has_the_legal_locations_as_its_domain() -> None:
    def cached(sch: Schedule) -> None:
        block = sch.get_block("C")
        i, j, k = sch.get_loops(block)
        i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=4))
        sch.reorder(i0, j, k, i1)
        read = sch.cache_read(block, 1, "global")
        sch.compute_at(read, sch.sample_compute_location(read))

    func = small_matmul(8, 8, 4)
    space = spaces.create("schedule_fn", func=func, schedule_fn=cached)
    tiles, locations = space.decision_domains(0)
    assert locations.kind == "sample_compute_location"
    assert locations.values == (-2, -1, 0, 1, 2, 3)  # inline, root, the four loops
    a = np.random.default_rng(0).standard_normal((8, 4)).astype("float32")
    b = np.random.default_rng(1).standard_normal((4, 8)).astype("float32")
    for location in locations.values:
        candidate = space.candidate(Decisions(0, (tiles.values[0], location)))
        out = np.zeros((8, 8), "float32")
        compiler.build(space.program(candidate).func)(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_a_function_without_sampling_or_that_fails_is_a_space_error() -> None:
    def fixed(sch: Schedule) -> None:
        sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])

    def broken(sch: Schedule) -> None:
        sch.parallel(sch.get_loops(sch.get_block("C"))[2])

    func = small_matmul(8, 8, 4)
    with pytest.raises(SpaceError, match="calls no sampling instruction"):
        ScheduleFnSpace(func, fixed)
    with pytest.raises(SpaceError, match="does not schedule this workload"):
        ScheduleFnSpace(func, broken)
    with pytest.raises(SpaceError, match="must be a function"):
        ScheduleFnSpace(func, "f(sch)")  # type: ignore[arg-type]


def test_for_workload_is_the_same_function_on_another_shape() -> None:
    space = small_trace_space()
    other = space.for_workload(small_matmul(48, 32, 8))
    assert isinstance(other, ScheduleFnSpace) and other.schedule_fn is small_schedule
    assert [d.kind for d in other.decision_domains(0)] == [
        d.kind for d in space.decision_domains(0)
    ]


SPACE = small_trace_space(12, 16, 4)
A = np.random.default_rng(0).standard_normal((12, 4)).astype("float32")
B = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_sampled_and_mutated_candidates_build_to_numpys_result(seed: int) -> None:
    rng = random.Random(seed)
    sampled = SPACE.sample(rng)
    for candidate in (sampled, SPACE.mutate(sampled, rng)):
        back = SPACE.candidate_from_trace(candidate.trace_json)
        assert back is not None and back.decisions == candidate.decisions
        out = np.zeros((12, 16), "float32")
        compiler.build(SPACE.program(candidate).func)(A, B, out)
        np.testing.assert_allclose(out, A @ B, rtol=1e-5, atol=1e-5)


def _place_producer(sch: Schedule) -> None:
    producer = sch.get_block("B")
    sch.compute_at(producer, sch.sample_compute_location(producer))


def test_every_compute_location_reads_back() -> None:
    """The location's variable is named by what it is (root, a loop, inline): another
    decision must not make the trace look like another design's."""
    a = te.placeholder((4, 8), name="A")
    b = te.compute((4, 8), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((4, 8), lambda i, j: b[i, j] * 2.0, name="C")
    space = ScheduleFnSpace(te.create_prim_func([a, c]), _place_producer)
    (locations,) = space.decision_domains(0)
    assert set(locations.values) == {-2, -1, 0, 1}
    for location in locations.values:
        candidate = space.candidate(Decisions(0, (location,)))
        assert space.candidate_from_trace(candidate.trace_json) == candidate
