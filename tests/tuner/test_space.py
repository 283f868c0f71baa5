"""Knob template spaces: policies, point numbering, candidates and their traces and
back, sampling and mutation, and definition errors."""

from __future__ import annotations

import math
import random
import traceback

import numpy as np
import pytest
from replay_measurements import SMALL_TEMPLATE, small_matmul, small_space, sometimes_illegal_space

import compiler
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.workload.spec import workload_from_spec
from tuner import space as spaces
from tuner.space import SpaceError, Template, TemplateSpace
from tuner.space.generated import GeneratedSpace
from tuner.space.knobs import annotate_knob, reorder_knob, split_knob


def test_split_factors_are_every_exact_factorization() -> None:
    knob = split_knob("t", 12, 3, "factors", None, None)
    assert all(math.prod(e) == 12 for e in knob.entities)
    assert len(knob) == 18  # ordered factorizations of 2*2*3 into three factors
    assert knob.perfect


def test_split_max_factor_bounds_the_inner_factors() -> None:
    knob = split_knob("t", 64, 3, "factors", 4, None)
    assert all(e[1] <= 4 and e[2] <= 4 for e in knob.entities)
    assert (16, 2, 2) in knob.entities and (1, 8, 8) not in knob.entities


def test_split_power2_rounds_the_outer_factor_up() -> None:
    knob = split_knob("t", 20, 2, "power2", None, None)
    assert knob.entities == ((2, 16), (3, 8), (5, 4), (10, 2), (20, 1))
    assert not knob.perfect


def test_split_candidates_are_checked() -> None:
    knob = split_knob("t", 10, 2, "candidate", None, [[None, 4], [5, 2]])
    assert knob.entities == ((3, 4), (5, 2))
    with pytest.raises(SpaceError, match="covers 8 of 10"):
        split_knob("t", 10, 2, "candidate", None, [[2, 4]])
    with pytest.raises(SpaceError, match="unknown policy 'halves'"):
        split_knob("t", 10, 2, "halves", None, None)


def test_reorder_and_annotate_policies() -> None:
    assert len(reorder_knob("r", 3, "all", None)) == 6
    assert reorder_knob("r", 3, "identity", None).entities == ((0, 1, 2),)
    with pytest.raises(SpaceError, match="not a permutation"):
        reorder_knob("r", 3, "candidate", [[0, 0, 1]])
    assert len(annotate_knob("a", 2, "try_unroll", None)) == 4
    assert annotate_knob("a", 2, "try_vec", None).entities == (("none", "none"), ("none", "vec"))
    assert len(annotate_knob("a", 2, "try_unroll_vec", None)) == 6


def test_points_are_numbered_the_first_decision_fastest() -> None:
    space = small_space()
    domains = space.decision_domains(0)
    assert space.size == math.prod(len(d) for d in domains) == 384
    assert space.decisions_at(1).values[0] == domains[0].values[1]
    assert space.decisions_at(1).values[1:] == space.decisions_at(0).values[1:]
    assert len(set(space.enumerate())) == space.size
    with pytest.raises(IndexError):
        space.decisions_at(space.size)


def test_trace_records_one_sampling_instruction_per_knob() -> None:
    space = small_space()
    candidate = space.candidate(space.decisions_at(123))
    trace = candidate.trace
    kinds = [trace.instructions[i].kind for i in sorted(trace.decisions)]
    assert kinds == ["sample_perfect_tile"] * 2 + ["sample_categorical"] * 3
    assert [d.kind for d in space.decision_domains(0)] == kinds
    again = Trace.from_json(candidate.trace_json)
    assert space.candidate_from_trace(again) == candidate
    replayed = Schedule(space.func)
    again.apply_to_schedule(replayed)
    assert replayed.mod["main"].script() == space.program(candidate).func.script()


def test_stored_trace_text_is_read_once_per_space() -> None:
    """A model's tuning hands the same stored records to a new search every round; the
    space reads each text once and answers again from what it read, None included."""
    space = small_space()
    text = space.candidate(space.decisions_at(7)).trace_json
    first = space.candidate_from_trace(text)
    assert first is not None and first.decisions == space.decisions_at(7)
    assert space.candidate_from_trace("".join(text)) is first  # equal text, another object
    assert space.candidate_from_trace("{") is None
    assert space.candidate_from_trace("{") is None
    assert small_space().candidate_from_trace(text) == first


def test_every_candidate_reads_back_from_its_trace() -> None:
    space = small_space()
    for point in list(space.enumerate())[::7]:
        candidate = space.candidate(point)
        back = space.candidate_from_trace(candidate.trace_json)
        assert back == candidate and back is not None and back.decisions == point


def test_a_foreign_trace_is_no_candidate() -> None:
    space = small_space()
    same_shape = small_space(24, 32, 8)
    candidate = space.candidate(space.decisions_at(5))
    assert same_shape.candidate_from_trace(candidate.trace) == candidate
    sch = Schedule(space.func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    assert space.candidate_from_trace(sch.trace) is None
    assert space.candidate_from_trace("not a trace") is None
    different_shape = small_space(16, 32, 8)
    assert different_shape.candidate_from_trace(candidate.trace) is None


def test_candidates_are_equal_by_trace_hash() -> None:
    space = small_space()
    a = space.candidate(space.decisions_at(9))
    b = space.candidate_from_trace(a.trace_json)
    assert b is not None and a == b and hash(a) == hash(b)
    assert a.trace_hash == Trace.from_json(a.trace_json).structural_hash
    assert a != space.candidate(space.decisions_at(10))


def test_sample_and_mutate_change_decisions() -> None:
    space = small_space()
    rng = random.Random(3)
    sampled = space.sample(rng)
    mutated = space.mutate(sampled, rng)
    changed = [
        k
        for k, (x, y) in enumerate(
            zip(sampled.decisions.values, mutated.decisions.values, strict=True)
        )
        if x != y
    ]
    assert len(changed) == 1 and mutated != sampled
    neighbours = list(space.neighbours(sampled.decisions))
    assert mutated.decisions in neighbours
    assert len(neighbours) == sum(len(d) - 1 for d in space.decision_domains(0))


def test_describe_names_the_entities() -> None:
    space = small_space()
    described = space.describe(space.candidate(space.decisions_at(0)))
    assert list(described) == ["tile_i", "tile_j", "inner_order", "vectorize", "unroll"]
    assert described["tile_i"] == (1, 24)


def test_knobs_must_be_defined_before_use() -> None:
    def late(cfg, sch):  # type: ignore[no-untyped-def]
        i, j, _k = sch.get_loops(sch.get_block("C"))
        cfg.define_split("tile_i", i)
        cfg["tile_i"].apply(sch, i)
        cfg.define_split("tile_j", j)

    space = TemplateSpace(small_matmul(8, 8, 4), Template("late", late, ("C",)))
    assert [k.name for k in space.knobs] == ["tile_i"]
    with pytest.raises(SpaceError, match="knobs must depend on the workload only"):
        space.candidate(space.decisions_at(0))


def test_a_knob_defined_twice_is_an_error() -> None:
    def twice(cfg, sch):  # type: ignore[no-untyped-def]
        cfg.define_knob("x", [1, 2])
        cfg.define_knob("x", [3])

    with pytest.raises(SpaceError, match="defined twice"):
        TemplateSpace(small_matmul(8, 8, 4), Template("twice", twice, ("C",)))


def test_illegal_decisions_raise_schedule_error_and_are_remembered() -> None:
    space = sometimes_illegal_space()
    space.candidate(space.decisions_at(0))
    depths = []
    for _ in range(3):
        with pytest.raises(ScheduleError, match="reduce variable") as raised:
            space.candidate(space.decisions_at(1))
        depths.append(len(traceback.extract_tb(raised.value.__traceback__)))
    # Each raise carries only its own frames: a remembered error does not pile up the
    # tracebacks (and the frames they hold) of every earlier raise.
    assert depths[0] == depths[1] == depths[2]


def test_create_and_registry_name_the_choices() -> None:
    kinds = r"the kinds are \['generated', 'schedule_fn', 'template'\]"
    with pytest.raises(SpaceError, match=kinds):
        spaces.create("sketch")
    with pytest.raises(SpaceError, match=r"registered: .*batch_matmul\.x86, .*conv2d_nchw\.x86"):
        spaces.get_template("gemm.cuda")
    made = spaces.create("template", func=small_matmul(8, 8, 4), template=SMALL_TEMPLATE)
    assert isinstance(made, TemplateSpace)
    assert set(spaces.template_names()) >= {
        "matmul.x86",
        "dense.x86",
        "batch_matmul.x86",
        "conv2d_nchw.x86",
        "depthwise_conv2d_nchw.x86",
    }


def test_a_workload_finds_its_space() -> None:
    space = spaces.space_for(
        workload_from_spec({"op": "matmul", "args": {"m": 16, "n": 16, "k": 16}})
    )
    assert isinstance(space, TemplateSpace) and space.template.name == "matmul.x86"
    assert space.name == "template matmul.x86"
    assert isinstance(spaces.space_for(small_matmul(8, 8, 4)), GeneratedSpace)
    with pytest.raises(SpaceError, match="0 registered templates fit"):
        TemplateSpace(small_matmul(8, 8, 4))


def test_annotate_and_reorder_entities_apply_to_the_schedule() -> None:
    def annotated(cfg, sch):  # type: ignore[no-untyped-def]
        i, j, k = sch.get_loops(sch.get_block("C"))
        cfg.define_reorder("order", [i, j], policy="all")
        cfg.define_annotate("ann", [i, j], policy="try_unroll_vec")
        inner = cfg["order"].apply(sch, [i, j])
        sch.reorder(k, *inner)
        cfg["ann"].apply(sch, inner)

    func = small_matmul(6, 8, 5)
    space = TemplateSpace(func, Template("annotated", annotated, ("C",)))
    assert [len(d) for d in space.decision_domains(0)] == [2, 6]
    a = np.random.default_rng(0).standard_normal((6, 5)).astype("float32")
    b = np.random.default_rng(1).standard_normal((5, 8)).astype("float32")
    for point in space.enumerate():
        candidate = space.candidate(point)
        entities = space.describe(candidate)
        scheduled = space.program(candidate).func
        if entities["ann"][-1] == "vec":
            assert "T.vectorized(" in scheduled.script()
        out = np.zeros((6, 8), "float32")
        compiler.build(scheduled)(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
