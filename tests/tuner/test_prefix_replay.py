"""Incremental replay: a candidate resumed from a kept prefix is the candidate a full
replay makes, whatever decisions came before it."""

from __future__ import annotations

import random

import pytest
from generated_cases import workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule, ScheduleError
from tuner.space.base import Decisions, trace_decision
from tuner.space.generated import GeneratedSpace
from tuner.space.prefix_replay import PrefixReplay

SPACES = {op: GeneratedSpace(workload(op)[0]) for op in ("conv2d_nchw_bias_relu", "softmax")}


def _full_replay(space: GeneratedSpace, decisions: Decisions) -> Schedule:
    design = space.design_traces()[decisions.design]
    sampled = sorted(design.decisions)
    sch = Schedule(space.func)
    chosen = {i: trace_decision(v) for i, v in zip(sampled, decisions.values, strict=True)}
    design.apply_to_schedule(sch, chosen)
    return sch


def _neighbour(space: GeneratedSpace, point: Decisions, rng: random.Random) -> Decisions:
    """``point`` with one decision drawn again, as an evolutionary mutation does."""
    domains = space.decision_domains(point.design)
    k = rng.randrange(len(point.values))
    values = list(point.values)
    values[k] = rng.choice(domains[k].values)
    return Decisions(point.design, tuple(values))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(sorted(SPACES)), seed=st.integers(0, 2**16), kept=st.sampled_from([3, 64])
)
def test_a_resumed_replay_makes_the_program_a_full_replay_makes(
    op: str, seed: int, kept: int
) -> None:
    space = SPACES[op]
    replay = PrefixReplay(space.func, space.design_traces(), kept=kept)
    rng = random.Random(seed)
    points = [space.sample(rng).decisions for _ in range(3)]
    for _ in range(12):
        point = _neighbour(space, rng.choice(points), rng)
        try:
            expected = _full_replay(space, point)
        except ScheduleError:
            with pytest.raises(ScheduleError):
                replay.replay(point.design, point.values)
            continue
        resumed = replay.replay(point.design, point.values)
        assert resumed.trace.structural_hash == expected.trace.structural_hash
        assert structural_equal(resumed.mod["main"], expected.mod["main"])
        points.append(point)
