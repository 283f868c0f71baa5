"""Mutators on real spaces (knob templates of matmul, conv2d and depthwise conv2d, and
a schedule function with tiles, a compute location and a categorical): every
mutation stays in its domain and replays to a legal trace or is a ScheduleError;
a tile mutation keeps the extent; the mix draws only mutators that apply."""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.schedule import Schedule, ScheduleError
from compiler.workload.spec import workload_from_spec
from tuner.search import SearchError, mutators
from tuner.space import Decisions, Domain, Space, TemplateSpace
from tuner.space import create as create_space


class RoledTemplateSpace(TemplateSpace):
    """A knob template whose ``parallel`` and ``unroll*`` knobs carry those roles, as
    spaces that know them give them."""

    def decision_domains(self, design: int) -> tuple[Domain, ...]:
        domains = super().decision_domains(design)
        return tuple(
            dataclasses.replace(domain, role=_role(knob.name))
            for knob, domain in zip(self.knobs, domains, strict=True)
        )


def _role(knob: str) -> str:
    if knob == "parallel":
        return "parallel"
    return "unroll" if knob.startswith("unroll") else ""


def located_tiles(sch: Schedule) -> None:
    """Tiles of i and j, B read into a cache at a sampled location, a sampled flag."""
    block = sch.get_block("T_matmul")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=8))
    sch.reorder(i0, j0, j1, k, i1, j2)
    read = sch.cache_read(block, 1, "global")
    sch.compute_at(read, sch.sample_compute_location(read))
    sch.sample_categorical(candidates=[0, 1, 2], probs=[1.0, 1.0, 1.0])


def matmul_spec(m: int, n: int, k: int) -> dict:
    return {"op": "matmul", "args": {"m": m, "n": n, "k": k}}


CONV = {"batch": 1, "in_channels": 8, "height": 8, "width": 8, "out_channels": 16, "kernel": 3}
DEPTHWISE = {"batch": 1, "channels": 8, "height": 8, "width": 8, "kernel": 3}


def make_space(name: str) -> Space:
    if name == "matmul":
        return RoledTemplateSpace(workload_from_spec(matmul_spec(32, 48, 24)))
    if name == "conv2d":
        return RoledTemplateSpace(
            workload_from_spec({"op": "conv2d_nchw", "args": {**CONV, "padding": 1}})
        )
    if name == "depthwise":
        return RoledTemplateSpace(
            workload_from_spec({"op": "depthwise_conv2d_nchw", "args": DEPTHWISE})
        )
    return create_space(
        "schedule_fn", func=workload_from_spec(matmul_spec(24, 32, 16)), schedule_fn=located_tiles
    )


SPACE_NAMES = ("matmul", "conv2d", "depthwise", "schedule_fn")
SPACES = {name: make_space(name) for name in SPACE_NAMES}


def test_each_mutator_applies_to_some_decision_of_the_spaces() -> None:
    applied = {
        kind
        for kind in mutators.KINDS
        for space in SPACES.values()
        if any(mutators.create(kind).applies_to(d) for d in space.decision_domains(0))
    }
    assert applied == set(mutators.KINDS)


@pytest.mark.parametrize("name", SPACE_NAMES)
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_every_mutation_stays_in_its_domain_and_replays_or_is_a_schedule_error(
    name: str, seed: int
) -> None:
    space = SPACES[name]
    rng = random.Random(seed)
    point = space.random_decisions(rng)
    domains = space.decision_domains(point.design)
    for kind in mutators.KINDS:
        mutator = mutators.create(kind)
        for k, domain in enumerate(domains):
            if not mutator.applies_to(domain):
                continue
            value = mutator.mutate(domain, point.values[k], rng)
            if value is None:
                continue
            assert value != point.values[k] and domain.position(value) is not None
            if kind == "tile_size":
                assert_one_prime_moved(point.values[k], value)
            mutated = Decisions(point.design, (*point.values[:k], value, *point.values[k + 1 :]))
            try:
                candidate = space.candidate(mutated)
            except ScheduleError:
                continue
            assert candidate.decisions == mutated


def assert_one_prime_moved(before: tuple[int, ...], after: tuple[int, ...]) -> None:
    """The product (the loop's extent) is kept, and one tile gave a prime to another."""
    assert math.prod(after) == math.prod(before)
    changed = [k for k, (b, a) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(changed) == 2
    smaller, larger = sorted(changed, key=lambda k: after[k] / before[k])
    prime = before[smaller] // after[smaller]
    assert before[smaller] % after[smaller] == 0 and after[larger] == before[larger] * prime
    assert all(prime % p for p in range(2, prime))


def test_a_tile_move_outside_the_domain_is_refused() -> None:
    # from (1, 4) the only moves are to (2, 2), which the domain leaves out
    domain = Domain("sample_perfect_tile", ((1, 4), (4, 1)))
    assert mutators.create("tile_size").mutate(domain, (1, 4), random.Random(0)) is None
    wider = Domain("sample_perfect_tile", ((1, 4), (2, 2), (4, 1)))
    assert mutators.create("tile_size").mutate(wider, (1, 4), random.Random(0)) == (2, 2)


def test_the_parallel_mutator_steps_to_a_neighbouring_candidate() -> None:
    domain = Domain("sample_categorical", (0, 1, 2, 3), (0, 1, 4, 16), role="parallel")
    parallel = mutators.create("parallel")
    rng = random.Random(3)
    assert {parallel.mutate(domain, 0, rng) for _ in range(20)} == {1}
    assert {parallel.mutate(domain, 2, rng) for _ in range(40)} == {1, 3}
    assert not mutators.create("categorical").applies_to(domain)


def test_the_mix_draws_mutators_by_probability_among_those_that_apply() -> None:
    space = SPACES["matmul"]
    rng = random.Random(0)
    point = space.random_decisions(rng)
    domains = space.decision_domains(0)
    tiles = {k for k, d in enumerate(domains) if d.kind == "sample_perfect_tile"}

    def changed_kinds(probabilities: dict[str, float]) -> Counter[str]:
        mix = mutators.mix(probabilities)
        kinds: Counter[str] = Counter()
        for _ in range(400):
            child = mix.mutated(space, point, rng)
            assert child is not None
            (k,) = [
                k for k, (a, b) in enumerate(zip(point.values, child.values, strict=True)) if a != b
            ]
            kinds["tile" if k in tiles else "other"] += 1
        return kinds

    # compute_location applies to no decision of a template: tile_size takes its share
    assert changed_kinds({"tile_size": 1.0, "compute_location": 5.0}) == {"tile": 400}
    drawn = changed_kinds({"tile_size": 0.9, "categorical": 0.1, "parallel": 0.0})
    assert 320 <= drawn["tile"] <= 390


def test_the_mix_refuses_unknown_kinds_and_no_positive_probability() -> None:
    with pytest.raises(SearchError, match=r"unknown mutator kind 'swap'; the kinds are \["):
        mutators.mix({"swap": 1.0})
    with pytest.raises(SearchError, match="give at least one a positive one"):
        mutators.mix({"tile_size": 0.0})
    with pytest.raises(SearchError, match="mutator 'unroll' has probability -1"):
        mutators.mix({"unroll": -1.0})
