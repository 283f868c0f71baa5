"""The evolutionary search: it finds the known best of replayed spaces in fewer trials
than the space has and than random search needs, keeps the protocol (exact batches,
no trace twice, nothing restored proposed), learns from another workload, and
tunes through ``tensortune tune --tuner evolutionary`` with the real workers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from replay_measurements import (
    Replay,
    counting_replays,
    run,
    small_space,
    small_trace_space,
    synthetic_seconds,
    trace_seconds,
    trials_to,
)

from compiler.schedule import ScheduleError
from compiler.workload.spec import workload_from_spec
from tuner import search
from tuner.cli.main import main
from tuner.search import EvolutionarySearch, SearchError, evolutionary
from tuner.search import base as search_base
from tuner.space import Decisions, Space, TraceCandidate
from tuner.space import create as create_space

# Decision features: the model scores a point in microseconds, so the tests time the
# search, not the feature extraction.
FAST = {"features": "decision"}


@pytest.fixture(scope="module")
def replay() -> Replay:
    space = small_space()
    return Replay(space, lambda candidate: synthetic_seconds(space, candidate))


@pytest.fixture(scope="module")
def best(replay: Replay) -> TraceCandidate:
    return replay.exhaustive_best()


# A fixed CPU, so that the space (whose vector knobs follow the vector width) is the same
# on every host.
AVX512_TARGET = "llvm -mcpu=znver4 -num-cores=2"


def hidden_best_space() -> tuple[Space, Replay, Decisions]:
    """A matmul template of 8640 points priced by the distance of its decisions to a
    hidden best point: log2 distance of each tile, and 1 per other decision off."""
    space = create_space(
        "template",
        func=workload_from_spec({"op": "matmul", "args": {"m": 32, "n": 32, "k": 16}}),
        target=AVX512_TARGET,
    )
    hidden = Decisions(0, ((2, 4, 4), (2, 16), (4, 4), 1, 1, 3))

    def seconds(candidate: TraceCandidate) -> float:
        distance = 0.0
        for value, target in zip(candidate.decisions.values, hidden.values, strict=True):
            if isinstance(value, tuple):
                distance += sum(abs(math.log2(a / b)) for a, b in zip(value, target, strict=True))
            else:
                distance += value != target
        return 1e-4 * (1.0 + distance)

    return space, Replay(space, seconds), hidden


def test_it_comes_within_one_decision_of_a_hidden_best_in_a_large_space() -> None:
    """160 trials of 8640 points (a small population: each point is a replay of the
    template, the slow part here)."""
    space, replay, hidden = hidden_best_space()
    assert space.size == 8640  # type: ignore[attr-defined]
    strategy = search.create(
        "evolutionary", space=space, max_trials=160, batch_size=16, population_size=24, **FAST
    )
    run(strategy, replay.fresh(), stop_at=space.candidate(hidden).trace_hash)
    assert strategy.best is not None and strategy.best.seconds is not None
    assert strategy.best.seconds <= replay.seconds_of(space.candidate(hidden)) * 2


def test_it_finds_the_known_best_for_several_seeds_and_beats_random(
    replay: Replay, best: TraceCandidate
) -> None:
    size = replay.space.size  # type: ignore[attr-defined]

    def trials(kind: str, seed: int, budget: int, **options: object) -> int | None:
        strategy = search.create(
            kind, space=replay.space, max_trials=budget, batch_size=8, seed=seed, **options
        )
        run(strategy, replay.fresh(), stop_at=best.trace_hash)
        return trials_to(strategy, best.trace_hash)

    evolved = [trials("evolutionary", seed, 96, **FAST) for seed in range(4)]
    assert all(t is not None for t in evolved), evolved
    randomly = [trials("random", seed, size) for seed in range(4)]
    assert np.mean(evolved) < 0.5 * np.mean(randomly), (evolved, randomly)


def test_after_its_warmup_an_ask_replays_only_the_points_it_shortlists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generations are scored on the decisions alone; only the shortlist that the
    program's model ranks (and the batch's random share) is replayed, not the hundred
    and more points the generations meet."""
    space, replay, _ = hidden_best_space()
    strategy = search.create("evolutionary", space=space, max_trials=64, batch_size=8, seed=2)
    warmup = strategy.generate_measure_candidates()
    assert warmup is not None
    strategy.notify_runner_results(warmup, replay.measure(warmup))
    replayed = counting_replays(space, monkeypatch)
    batch = strategy.generate_measure_candidates()
    assert batch is not None and len(batch) == 8
    new = replayed - {o.decisions for o in strategy.history}
    assert len(new) <= (evolutionary.SHORTLIST_PER_CANDIDATE + 1) * 8, len(new)


def test_an_ask_with_only_transfer_records_replays_one_population_and_a_shortlist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before its own measurements (a model's task in its first round), the search
    scores one population of random points with the program model, which other
    workloads' records taught, and evolves them on the decisions: it replays that
    population and the shortlist, not every child of every generation (about 160
    points for a batch of 8 before)."""
    space, _, _ = hidden_best_space()
    other = space.for_workload(
        workload_from_spec({"op": "matmul", "args": {"m": 64, "n": 32, "k": 16}})
    )
    assert other is not None
    rng = random.Random(0)
    records = []
    while len(records) < 48:
        try:
            candidate = other.candidate(other.random_decisions(rng))
        except ScheduleError:
            continue
        records.append((candidate.trace_json, rng.uniform(1e-5, 1e-3)))
    strategy = search.create("evolutionary", space=space, max_trials=64, batch_size=8, seed=2)
    assert strategy.learn_from(other, records) > 0
    replayed = counting_replays(space, monkeypatch)
    batch = strategy.generate_measure_candidates()
    assert batch is not None and len(batch) == 8
    shortlist = (evolutionary.SHORTLIST_PER_CANDIDATE + 1) * 8
    assert len(replayed) <= evolutionary.MIN_POPULATION + shortlist, len(replayed)


@pytest.mark.parametrize("kind", ["template", "trace"])
def test_exact_batches_no_trace_twice_and_nothing_restored_proposed(kind: str) -> None:
    if kind == "template":
        space: Space = small_space()
        replay = Replay(space, lambda candidate: synthetic_seconds(space, candidate))
    else:
        space = small_trace_space()
        replay = Replay(space, lambda candidate: trace_seconds(space, candidate))
    first = search.create("evolutionary", space=space, max_trials=16, batch_size=8, **FAST)
    run(first, replay.fresh())
    restored = {o.candidate.trace_hash for o in first.history if o.candidate is not None}
    second = search.create("evolutionary", space=space, max_trials=32, batch_size=8, seed=1, **FAST)
    second.restore_traces(
        (o.candidate.trace_json, o.seconds) for o in first.history if o.candidate is not None
    )
    measured = replay.fresh()
    sizes = run(second, measured)
    assert sizes == [8, 8, 8, 8]
    assert max(measured.measured.values()) == 1
    assert not restored & set(measured.measured)


def test_before_warmup_it_proposes_what_random_search_does(replay: Replay) -> None:
    def first_batch(kind: str, **options: object) -> list[str]:
        strategy = search.create(
            kind, space=replay.space, max_trials=32, batch_size=8, seed=3, **options
        )
        batch = strategy.generate_measure_candidates()
        assert batch is not None
        return [c.trace_hash for c in batch]

    assert first_batch("evolutionary", **FAST) == first_batch("random")


def test_it_learns_from_another_workload_before_measuring(
    replay: Replay, best: TraceCandidate
) -> None:
    other = small_space(48, 32, 8)
    records = []
    for point in list(other.enumerate())[::3]:
        candidate = other.candidate(point)
        seconds = synthetic_seconds(other, candidate)
        records.append((candidate.trace_json, seconds and 1000.0 * seconds))
    strategy = search.create(
        "evolutionary", space=replay.space, max_trials=16, batch_size=8, **FAST
    )
    assert strategy.learn_from(other, records) == len(records)
    batch = strategy.generate_measure_candidates()
    assert batch is not None
    assert min(replay.seconds_of(c) or math.inf for c in batch) <= 1.1 * replay.seconds_of(best)


def test_options_are_checked_and_the_features_default_is_one_constant() -> None:
    space = small_space()
    strategy = search.create("evolutionary", space=space, max_trials=4)
    assert isinstance(strategy, EvolutionarySearch)
    assert type(strategy.extractor).__name__ == "ProgramFeatures"
    assert evolutionary.DEFAULT_FEATURES == "program"
    with pytest.raises(SearchError, match="population_size must be an int >= 1, got 0"):
        search.create("evolutionary", space=space, max_trials=4, population_size=0)
    with pytest.raises(SearchError, match="generations must be an int >= 0"):
        search.create("evolutionary", space=space, max_trials=4, generations=-1)
    with pytest.raises(SearchError, match="unknown mutator kind 'swap'"):
        search.create("evolutionary", space=space, max_trials=4, mutation_probabilities={"swap": 1})


def test_tensortune_tune_runs_the_evolutionary_search(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'evo.db'}"
    argv = ["tune", "matmul", "--shape", "24", "40", "32", "--db", url]
    options = ["--trials", "8", "--batch-size", "4", "--tuner", "evolutionary", "--seed", "2"]
    assert main([*argv, *options]) == 0
    out = capsys.readouterr().out
    assert "8 measured this run (0 errors)" in out and "GFLOP/s" in out


class TickingClock:
    """A monotonic clock that moves ``tick`` seconds at each reading, and as far as a
    test says at other times (a batch's measuring)."""

    def __init__(self, tick: float) -> None:
        self.now = 0.0
        self.tick = tick

    def read(self) -> float:
        self.now += self.tick
        return self.now


@pytest.mark.parametrize(
    ("measuring_seconds", "populations"),
    # Breeding takes one tick (10 ms). A batch measured in 100 s buys 5 s of breeding:
    # the population grows fourfold an ask to its cap. One measured in a tick allows
    # half a millisecond: the population stays at its floor.
    [(100.0, [32, 128, 512, 512]), (0.0, [32, 32, 32, 32])],
)
def test_the_population_is_sized_by_the_measuring_time(
    replay: Replay,
    monkeypatch: pytest.MonkeyPatch,
    measuring_seconds: float,
    populations: list[int],
) -> None:
    clock = TickingClock(0.01)
    monkeypatch.setattr(evolutionary, "monotonic", clock.read)
    monkeypatch.setattr(search_base, "monotonic", clock.read)
    strategy = search.create(
        "evolutionary", space=replay.space, max_trials=96, batch_size=16, seed=0, **FAST
    )
    sizes = []
    while (batch := strategy.generate_measure_candidates()) is not None:
        sizes.append(strategy.population)
        clock.now += measuring_seconds
        strategy.notify_runner_results(batch, replay.measure(batch))
    # At random until a batch's worth of points ran: some first points are illegal.
    assert sizes == [None, None, *populations]
    assert strategy.measuring_seconds == pytest.approx(measuring_seconds + 0.01)
