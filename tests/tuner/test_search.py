"""Search strategies: the ask/tell protocol with canned results, end-to-end searches on
replayed spaces (a knob template and a hand-written trace space, driven by the same
strategies), resume, and the model-based search against random."""

from __future__ import annotations

import math

import numpy as np
import pytest
from replay_measurements import (
    Replay,
    run,
    small_matmul,
    small_space,
    small_trace_space,
    synthetic_seconds,
    trace_seconds,
    trials_to,
)

from compiler.schedule import Schedule
from tuner import search
from tuner import space as spaces
from tuner.cost_model import features
from tuner.search import MeasureResult, SearchError
from tuner.space import EnumerableSpace, Space, Template, TraceCandidate

KINDS = sorted(search.KINDS)
SPACES = ("template", "trace")


@pytest.fixture(scope="module")
def space() -> Space:
    return small_space()


@pytest.fixture(scope="module")
def replay(space: Space) -> Replay:
    return Replay(space, lambda candidate: synthetic_seconds(space, candidate))


@pytest.fixture(scope="module")
def best(replay: Replay) -> TraceCandidate:
    return replay.exhaustive_best()


@pytest.fixture(scope="module", params=SPACES)
def replayed_space(request: pytest.FixtureRequest) -> Replay:
    """Each kind of space with its canned costs: the knob template and the trace space."""
    if request.param == "template":
        template = small_space()
        return Replay(template, lambda candidate: synthetic_seconds(template, candidate))
    traced = small_trace_space()
    return Replay(traced, lambda candidate: trace_seconds(traced, candidate))


def fresh(replay: Replay) -> Replay:
    return replay.fresh()


def applies(kind: str, space: Space) -> bool:
    """Grid search needs an enumerable space; every other strategy takes any."""
    return kind != "grid" or isinstance(space, EnumerableSpace)


# ---- protocol ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_batches_are_cut_to_the_trial_budget(kind: str, space: Space) -> None:
    strategy = search.create(kind, space=space, max_trials=10, batch_size=4, seed=1)
    sizes = []
    seconds = 1.0
    while (batch := strategy.generate_measure_candidates()) is not None:
        sizes.append(len(batch))
        results = []
        for _ in batch:
            seconds += 0.1
            results.append(MeasureResult(seconds))
        strategy.notify_runner_results(batch, results)
    assert sizes == [4, 4, 2]
    assert strategy.trials == 10
    assert strategy.generate_measure_candidates() is None


@pytest.mark.parametrize("kind", KINDS)
def test_pending_candidates_count_against_the_budget(kind: str, space: Space) -> None:
    strategy = search.create(kind, space=space, max_trials=6, batch_size=4, seed=2)
    first = strategy.generate_measure_candidates()
    second = strategy.generate_measure_candidates()
    assert first is not None and second is not None
    assert (len(first), len(second)) == (4, 2)
    assert strategy.generate_measure_candidates() is None
    assert not {c.trace_hash for c in first} & {c.trace_hash for c in second}
    strategy.notify_runner_results(second, [MeasureResult(1.0), MeasureResult(None, "crash")])
    strategy.notify_runner_results(first, [MeasureResult(2.0)] * 4)
    assert strategy.trials == 6
    assert strategy.best is not None and strategy.best.seconds == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_early_stopping_after_trials_without_improvement(kind: str, space: Space) -> None:
    strategy = search.create(
        kind, space=space, max_trials=100, batch_size=3, early_stopping=5, seed=3
    )
    sizes = []
    while (batch := strategy.generate_measure_candidates()) is not None:
        sizes.append(len(batch))
        first = not strategy.history
        seconds = [1.0] + [2.0] * (len(batch) - 1) if first else [2.0] * len(batch)
        strategy.notify_runner_results(batch, [MeasureResult(s) for s in seconds])
    # one improvement in the first batch, then 2 + 3 trials without one
    assert sizes == [3, 3]
    assert strategy.trials == 6


def test_results_must_match_the_candidates(space: Space) -> None:
    strategy = search.create("random", space=space, max_trials=8, batch_size=2)
    batch = strategy.generate_measure_candidates()
    assert batch is not None
    with pytest.raises(SearchError, match="got 1 results for 2 candidates"):
        strategy.notify_runner_results(batch, [MeasureResult(1.0)])
    strategy.notify_runner_results(batch, [MeasureResult(1.0)] * 2)
    with pytest.raises(SearchError, match="already reported"):
        strategy.notify_runner_results(batch[:1], [MeasureResult(1.0)])


def test_create_lists_the_kinds(space: Space) -> None:
    with pytest.raises(SearchError, match="kinds are auto and evolutionary, ga, grid, random, xgb"):
        search.create("bayesian", space=space, max_trials=4)


def test_auto_picks_the_annealing_for_a_template_and_evolution_for_other_spaces(space) -> None:
    assert isinstance(search.create("auto", space=space, max_trials=4), search.ModelBasedSearch)
    generated = spaces.create("generated", func=space.func)
    chosen = search.create("auto", space=generated, max_trials=4)
    assert isinstance(chosen, search.EvolutionarySearch)
    with pytest.raises(SearchError, match="max_trials must be a positive int"):
        search.create("random", space=space, max_trials=0)


def test_grid_refuses_a_space_without_an_index() -> None:
    with pytest.raises(SearchError, match="grid search needs a space that numbers its points"):
        search.create("grid", space=small_trace_space(), max_trials=4)


def test_illegal_decisions_are_skipped_not_measured() -> None:
    def sometimes_illegal(cfg, sch):  # type: ignore[no-untyped-def]
        _i, j, k = sch.get_loops(sch.get_block("C"))
        cfg.define_split("tile_j", j, num_outputs=2)
        cfg.define_knob("parallel_k", [False, True])
        cfg["tile_j"].apply(sch, j)
        if cfg["parallel_k"].val:
            sch.parallel(k)

    space = spaces.create(
        "template", func=small_matmul(8, 12, 4), template=Template("t", sometimes_illegal, ("C",))
    )
    assert isinstance(space, EnumerableSpace)
    strategy = search.create("grid", space=space, max_trials=100, batch_size=5)
    replay = Replay(space, lambda candidate: 1.0)
    run(strategy, replay)
    assert strategy.trials == space.size // 2
    assert sum(o.invalid for o in strategy.history) == space.size // 2
    measured = [o.candidate for o in strategy.history if o.candidate is not None]
    assert all(space.describe(c)["parallel_k"] is False for c in measured)


def test_a_space_without_a_legal_point_ends_the_search() -> None:
    """A template that refuses every point (a matmul template on a workload whose
    epilogue it cannot fold) of a space too large to enumerate: the search gives up
    after ILLEGAL_TURNS turns without a legal draw instead of drawing forever."""

    def always_illegal(cfg, sch):  # type: ignore[no-untyped-def]
        loops = sch.get_loops(sch.get_block("C"))
        for name, loop in zip(("tile_i", "tile_j", "tile_k"), loops, strict=True):
            cfg.define_split(name, loop, num_outputs=4)
        k_pieces = cfg["tile_k"].apply(sch, loops[-1])
        sch.parallel(k_pieces[-1])  # a piece of the reduction: refused

    space = spaces.create(
        "template", func=small_matmul(64, 64, 64), template=Template("t", always_illegal, ("C",))
    )
    assert isinstance(space, EnumerableSpace) and space.size > 100_000
    strategy = search.create("random", space=space, max_trials=16)
    assert strategy.generate_measure_candidates() is None
    assert strategy.exhausted and strategy.trials == 0
    # the random strategy's proposals and the batch's random fill each give up
    assert 0 < sum(o.invalid for o in strategy.history) <= 2 * search.base.ILLEGAL_TURNS


# ---- end to end on the replayed space ------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "budget", "options"),
    [
        ("grid", 384, {}),
        ("random", 384, {}),
        ("ga", 160, {"population": 16}),
        ("xgb", 80, {}),
        ("evolutionary", 80, {"features": "decision"}),
    ],
)
def test_each_strategy_finds_the_known_best_in_either_kind_of_space(
    kind: str, budget: int, options: dict, replayed_space: Replay
) -> None:
    """The same strategy drives a knob template and a hand-written trace space: exact
    batch sizes, no trace twice, the budget kept, and the best the canned costs say."""
    space = replayed_space.space
    if not applies(kind, space):
        pytest.skip(f"{kind} needs an enumerable space")
    best = replayed_space.exhaustive_best()
    strategy = search.create(kind, space=space, max_trials=budget, batch_size=8, seed=11, **options)
    measured = fresh(replayed_space)
    sizes = run(strategy, measured)
    trials = strategy.trials
    assert sizes == [8] * (trials // 8) + ([trials % 8] if trials % 8 else [])
    assert strategy.best is not None and strategy.best.candidate == best
    assert max(measured.measured.values()) == 1, "a trace was measured twice"
    assert sum(measured.measured.values()) == trials <= budget


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_choices(kind: str, replay: Replay) -> None:
    def order(seed: int) -> list[object]:
        strategy = search.create(kind, space=replay.space, max_trials=40, batch_size=8, seed=seed)
        run(strategy, fresh(replay))
        return [o.decisions for o in strategy.history]

    assert order(5) == order(5)
    if kind != "grid":
        assert order(5) != order(6)


@pytest.mark.parametrize("kind", KINDS)
def test_resume_measures_nothing_twice(kind: str, replayed_space: Replay) -> None:
    space = replayed_space.space
    if not applies(kind, space):
        pytest.skip(f"{kind} needs an enumerable space")
    first = search.create(kind, space=space, max_trials=24, batch_size=8, seed=4)
    first_replay = fresh(replayed_space)
    run(first, first_replay)
    # what a database hands back: trace JSON and times (None for a failure), and a
    # record of some other schedule, which is left out
    stored = [(o.candidate.trace_json, o.seconds) for o in first.history if o.candidate is not None]
    foreign = Schedule(space.func)
    foreign.parallel(foreign.get_loops(foreign.get_block("C"))[0])
    stored.append((foreign.trace.to_json_string(), 1e-9))
    second = search.create(kind, space=space, max_trials=30, batch_size=8, seed=4)
    assert second.restore_traces(stored) == first.trials
    assert first.best is not None
    assert second.best is not None and second.best.seconds == first.best.seconds
    second_replay = fresh(replayed_space)
    run(second, second_replay)
    assert not set(first_replay.measured) & set(second_replay.measured)
    assert second.trials == 30


def test_model_based_beats_random_by_trials_to_best(replay: Replay, best: TraceCandidate) -> None:
    size = replay.space.size  # type: ignore[attr-defined]

    def mean_trials(kind: str) -> float:
        counts = []
        for seed in range(5):
            strategy = search.create(
                kind, space=replay.space, max_trials=size, batch_size=8, seed=seed
            )
            run(strategy, fresh(replay), stop_at=best.trace_hash)
            counts.append(trials_to(strategy, best.trace_hash))
        return float(np.mean(counts))

    model_based = mean_trials("xgb")
    random = mean_trials("random")
    assert model_based < 0.5 * random, (model_based, random)


def other_shape_records(seconds_scale: float = 1.0) -> tuple[Space, list[tuple[str, float | None]]]:
    """Every third legal candidate of the template on another shape, as stored records."""
    other = small_space(48, 32, 8)
    records = []
    for point in list(other.enumerate())[::3]:
        candidate = other.candidate(point)
        seconds = synthetic_seconds(other, candidate)
        records.append((candidate.trace_json, seconds and seconds_scale * seconds))
    return other, records


def test_model_based_warm_starts_from_a_similar_workload(
    replay: Replay, best: TraceCandidate
) -> None:
    """Records of the same template on another shape train the model before anything
    here is measured: the very first batch is already model-picked and near the best."""
    other, records = other_shape_records()
    strategy = search.create("xgb", space=replay.space, max_trials=16, batch_size=8, seed=0)
    assert isinstance(strategy, search.ModelBasedSearch)
    rows, throughputs = search.transfer_records(strategy.extractor, other, records)
    point = other.candidate_from_trace(records[0][0])
    assert point is not None
    width = features.create("decision").transform(other, [point.decisions]).shape[1]
    assert rows.shape == (len(records), width)
    strategy.warm_start(rows, throughputs)
    batch = strategy.generate_measure_candidates()
    assert batch is not None
    cold = search.create("random", space=replay.space, max_trials=16, batch_size=8, seed=0)
    cold_batch = cold.generate_measure_candidates()
    assert cold_batch is not None

    def best_of(candidates: list) -> float:
        return min(replay.seconds_of(c) or float("inf") for c in candidates)

    assert best_of(batch) <= 1.1 * replay.seconds_of(best)
    assert best_of(batch) < best_of(cold_batch)


def test_learn_from_trains_a_model_on_another_workload_and_random_ignores_it(
    replay: Replay, best: TraceCandidate
) -> None:
    """Another workload's records, 1000 times slower across the board, teach the same
    thing: targets are relative to each workload's fastest."""
    other, records = other_shape_records(1000.0)
    strategy = search.create("xgb", space=replay.space, max_trials=16, batch_size=8, seed=0)
    assert strategy.learn_from(other, [*records, ("not a trace", 1.0)]) == len(records)
    batch = strategy.generate_measure_candidates()
    assert batch is not None
    assert min(replay.seconds_of(c) or math.inf for c in batch) <= 1.1 * replay.seconds_of(best)
    random = search.create("random", space=replay.space, max_trials=16, batch_size=8)
    assert random.learn_from(other, records) == 0


def test_warm_start_rows_must_match_the_space(replay: Replay) -> None:
    strategy = search.create("xgb", space=replay.space, max_trials=16, batch_size=8)
    with pytest.raises(SearchError, match="transfer records have 3 features"):
        strategy.warm_start(np.zeros((4, 3)), np.ones(4))
