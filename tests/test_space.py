"""Knob spaces: policies, config numbering, traces and back, and definition errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from replay_measurements import SMALL_TEMPLATE, small_matmul, small_space

import compiler
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.workload import workload_from_spec
from tuner import space as spaces
from tuner.space import SpaceError, Template, TemplateSpace
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


def test_config_numbering_round_trips() -> None:
    space = small_space()
    assert space.size == math.prod(space.dims) == 384
    for index in (0, 1, 77, space.size - 1):
        config = space.config(index)
        assert space.config_of(config.choices) == config
    assert space.config(1).choices[0] == 1  # the first knob varies fastest
    with pytest.raises(IndexError):
        space.config(space.size)


def test_trace_records_one_sampling_instruction_per_knob() -> None:
    space = small_space()
    config = space.config(123)
    trace = space.trace(config)
    kinds = [trace.instructions[i].kind for i in sorted(trace.decisions)]
    assert kinds == ["sample_perfect_tile"] * 2 + ["sample_categorical"] * 3
    again = Trace.from_json(trace.to_json_string())
    assert space.config_from_trace(again) == config
    replayed = Schedule(space.func)
    again.apply_to_schedule(replayed)
    assert replayed.mod["main"].script() == space.schedule(config).mod["main"].script()


def test_every_config_reads_back_from_its_trace() -> None:
    space = small_space()
    for index in range(0, space.size, 7):
        config = space.config(index)
        assert space.config_from_trace(space.trace(config)) == config


def test_a_foreign_trace_is_no_config() -> None:
    space = small_space()
    other = small_space(24, 32, 8)
    assert other.config_from_trace(space.trace(space.config(5))) == space.config(5)
    sch = Schedule(space.func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    assert space.config_from_trace(sch.trace) is None
    different_shape = small_space(16, 32, 8)
    assert different_shape.config_from_trace(space.trace(space.config(3))) is None


def test_describe_names_the_entities() -> None:
    space = small_space()
    described = space.describe(space.config(0))
    assert list(described) == ["tile_i", "tile_j", "inner_order", "vectorize", "unroll"]
    assert described["tile_i"] == (1, 24)


def test_knobs_must_be_defined_before_use() -> None:
    def late(cfg, sch):  # type: ignore[no-untyped-def]
        i, j, k = sch.get_loops(sch.get_block("C"))
        cfg.define_split("tile_i", i)
        cfg["tile_i"].apply(sch, i)
        cfg.define_split("tile_j", j)

    space = TemplateSpace(small_matmul(8, 8, 4), Template("late", late, ("C",)))
    assert [k.name for k in space.knobs] == ["tile_i"]
    with pytest.raises(SpaceError, match="knobs must depend on the workload only"):
        space.schedule(space.config(0))


def test_a_knob_defined_twice_is_an_error() -> None:
    def twice(cfg, sch):  # type: ignore[no-untyped-def]
        cfg.define_knob("x", [1, 2])
        cfg.define_knob("x", [3])

    with pytest.raises(SpaceError, match="defined twice"):
        TemplateSpace(small_matmul(8, 8, 4), Template("twice", twice, ("C",)))


def test_illegal_configs_raise_schedule_error_and_are_remembered() -> None:
    def bad(cfg, sch):  # type: ignore[no-untyped-def]
        cfg.define_knob("parallel_k", [False, True])
        if cfg["parallel_k"].val:
            sch.parallel(sch.get_loops(sch.get_block("C"))[2])

    space = TemplateSpace(small_matmul(8, 8, 4), Template("bad", bad, ("C",)))
    space.trace(space.config(0))
    for _ in range(2):
        with pytest.raises(ScheduleError, match="reduce variable"):
            space.trace(space.config(1))


def test_create_and_registry_name_the_choices() -> None:
    with pytest.raises(SpaceError, match=r"the kinds are \['template'\]"):
        spaces.create("sketch")
    with pytest.raises(SpaceError, match="registered: batch_matmul.x86, conv2d_nchw.x86"):
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


def test_a_workload_finds_its_template() -> None:
    space = TemplateSpace(workload_from_spec({"op": "matmul", "args": {"m": 16, "n": 16, "k": 16}}))
    assert space.template.name == "matmul.x86"
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
    assert space.dims == (2, 6)
    a = np.random.default_rng(0).standard_normal((6, 5)).astype("float32")
    b = np.random.default_rng(1).standard_normal((5, 8)).astype("float32")
    for index in range(space.size):
        config = space.config(index)
        entities = space.describe(config)
        script = space.schedule(config).mod["main"].script()
        if entities["ann"][-1] == "vec":
            assert "T.vectorized(" in script
        out = np.zeros((6, 8), "float32")
        compiler.build(space.schedule(config).mod)(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
